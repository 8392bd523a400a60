"""simgym worlds as environments of Prime Intellect's ``verifiers`` (0.4, ``verifiers.v1``).

Three plugins, found the way verifiers finds every plugin: by an *id* that names an
installed module exporting them through ``__all__``. That module is ``simgym_verifiers``
(a re-export of this one, installed with simgym; the id ``simgym-verifiers`` works too):

- :class:`SimgymTaskset` (config :class:`SimgymTasksetConfig`, ``--env.taskset.*``): simgym
  tasks (instructions or task dicts, or simgym task files) in one domain and scenario, with
  the world model that simulates them, the grounding mode, the turn limit and the reward.
- :class:`SimgymEnv` (config :class:`SimgymEnvConfig`, one role: ``agent``): its ``run``
  plays one simgym episode per verifiers episode, the world playing the user. The first
  user turn is simgym's first observation (the task instruction and what the world shows,
  under a system prompt that lists the tools and the call format); each assistant reply is
  read with simgym's own parser (:func:`simgym.agents.local.parse_tool_call`: a
  ``<tool_call>{"name", "arguments"}</tool_call>`` block, or a bare JSON call) and stepped;
  a reply without a call is the agent's final answer. A malformed call is no crash: the
  agent reads simgym's error observation and the episode goes on. The episode ends when
  the world says done, at ``max_turns`` (truncated), on an answer, or when the agent's run
  stops (a verifiers limit). simgym's reward goes on the trace as ``simgym_reward``, with
  the metrics ``turns``, ``truncated``, ``done`` and ``parse_errors`` and, in
  ``trace.info["simgym"]``, the episode id, task id and how it ended.
- :class:`SimgymChatHarness`, the taskset's default harness: a chat loop run in-process,
  one model call per user turn through the rollout's interception endpoint (so verifiers
  records every call on the trace). The agent gets text only, never the scenario, the
  hidden state or the task's metadata. Any other harness that can host a user (``null``,
  ``bash``) can play the role instead (``--env.agent.harness.id null``).

Python::

    import verifiers.v1 as vf
    from simgym.integrations.verifiers import SimgymEnv, SimgymEnvConfig

    config = SimgymEnvConfig.model_validate({
        "taskset": {"id": "simgym_verifiers", "domain": "mcp",
                    "scenario": "examples/mcp/bank_customers.yaml",
                    "tasks": [{"id": "ben", "instruction": "What is Ben's email?",
                               "metadata": {"answer": "ben@example.org"}}],
                    "world_model": "openai",
                    "world_model_options": {"base_url": "http://127.0.0.1:8000/v1",
                                            "model": "qwen-agentworld"},
                    "grounding": "strict", "max_turns": 8, "reward": "contains"},
    })
    env = SimgymEnv(config)                       # or vf.load_environment(config)
    ctx = vf.ModelContext(model="my-policy",
                          client=vf.EvalClientConfig(base_url="http://127.0.0.1:9000/v1",
                                                     api_key_var="POLICY_KEY"))
    async with env.serving():
        episode = await env.run_slot(env.slots(next(iter(env.taskset)))[0], ctx)
    print(episode.traces[0].rewards["simgym_reward"].score)

The ``vf-eval`` command line (``-m``/``--client.*`` name the policy's endpoint)::

    vf-eval simgym_verifiers --env.taskset.domain mcp \\
        --env.taskset.scenario examples/mcp/bank_customers.yaml \\
        --env.taskset.tasks '["What is the email address of customer C-1002?"]' \\
        --env.taskset.world-model openai \\
        --env.taskset.world-model-options '{"base_url": "http://127.0.0.1:8000/v1"}' \\
        -m my-policy --client.base-url http://127.0.0.1:9000/v1 --no-push \\
        --output-dir /tmp/simgym-vf

``vf-eval`` writes each run (its resolved config, ``traces.jsonl``) under
``--output-dir`` (``-o``), which defaults to ``outputs/`` in the directory it runs in: run
from a checkout of simgym, that is the repository itself, so name a directory outside it.

Episodes are also written as simgym trajectories when ``trajectories`` names a JSONL file.

Needs verifiers (``pip install 'simgym[verifiers]'``). verifiers 0.4 pins ``mcp==2.0.0``
and simgym's ``mcp`` extra needs ``mcp>=2.3``, so the two live in different environments
(``bash scripts/setup.sh --dev`` makes ``.venv-verifiers``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import Field

from simgym.agents.local import Conversation, parse_tool_call
from simgym.core.env import SimEnv
from simgym.core.errors import SimgymError
from simgym.core.safeload import read_scenario
from simgym.core.types import StepResult, Task, Trajectory
from simgym.core.worldmodel import WorldModel, create_world_model, require_shareable
from simgym.integrations.common import agent_safe, as_tasks
from simgym.rewards import build_reward
from simgym.rollout.episode import conclude_episode, episode_seed
from simgym.rollout.executors import agent_view

try:
    import httpx
    import verifiers.v1 as vf
    from verifiers.v1.dialects.chat import message_to_wire
    from verifiers.v1.errors import MODEL_TRANSPORT_ERROR_EXIT_CODE
    from verifiers.v1.runtimes import ProgramResult, SubprocessConfig
except ImportError as exc:  # pragma: no cover (the test runs it in .venv-verifiers)
    raise SimgymError(
        "the verifiers adapter needs verifiers 0.4: pip install 'simgym[verifiers]' "
        f"(in its own environment; `bash scripts/setup.sh --dev` makes .venv-verifiers) ({exc})"
    ) from None

__all__ = [
    "REWARD_NAME",
    "SimgymChatHarness",
    "SimgymEnv",
    "SimgymEnvConfig",
    "SimgymHarnessConfig",
    "SimgymTask",
    "SimgymTaskData",
    "SimgymTaskset",
    "SimgymTasksetConfig",
]

REWARD_NAME = "simgym_reward"
"""The name simgym's episode reward has on a verifiers trace."""

AGENT_STOPPED = "the agent's verifiers run stopped before the episode ended"


class SimgymTasksetConfig(vf.TasksetConfig):
    """What the simulated episodes are: ``--env.taskset.*`` on the command line."""

    domain: str = "mcp"
    """A registered simgym domain (terminal, mcp, search, swe, web, os, android)."""
    scenario: dict[str, Any] | str | None = None
    """The initial world: a scenario mapping, or a YAML/JSON file (a file with a
    ``scenario`` key, such as an episode file, gives that key). None: the domain's default.
    A task with a scenario of its own plays in that one."""
    tasks: list[str | dict[str, Any]] = Field(default_factory=list)
    """Tasks: instructions, or task dicts (``id``, ``instruction``, ``scenario``,
    ``metadata``: a reference answer, a reward spec...)."""
    tasks_file: list[str] = Field(default_factory=list)
    """simgym task files (``.jsonl`` task lines, ``.yaml``/``.json`` episode files), read
    as ``simgym run --tasks`` reads them; their scripted actions are dropped."""
    world_model: str = "local"
    """A simgym world-model backend by name (``local``, ``openai``, ``replay``...)."""
    world_model_options: dict[str, Any] = Field(default_factory=dict)
    """The backend's options (``base_url``, ``model``, ``api_key``, ``model_path``...)."""
    grounding: Literal["off", "facts", "strict"] | None = None
    """simgym's grounding mode (None: the backend's default)."""
    max_turns: int = Field(10, ge=1)
    """World steps per episode; the episode is truncated at the limit."""
    reward: Any = None
    """A simgym reward spec (``exact``, ``contains``, a dict...); None: each task's own
    (its ``metadata.reward``, else an exact match on ``metadata.answer``)."""
    seed: int | None = None
    """Added to each task's scenario seed (which comes from its id)."""
    env_options: dict[str, Any] = Field(default_factory=dict)
    """Further :class:`simgym.SimEnv` options (``render_known``, ``context``...)."""
    trajectories: str | None = None
    """A JSONL file every episode is appended to as a simgym trajectory."""


class SimgymTaskData(vf.TaskData):
    """A verifiers task's data: the simgym task, as JSON."""

    task: dict[str, Any]


class SimgymTask(vf.Task[SimgymTaskData]):
    """One simgym task; :class:`SimgymEnv` plays it and scores it with simgym's reward."""

    @property
    def key(self) -> str:
        """The simgym task id (stable across runs and task order)."""
        return str(self.data.task.get("id") or self.hash)


class SimgymTaskset(vf.Taskset[SimgymTask, SimgymTasksetConfig]):
    """The configured simgym tasks, each a verifiers task whose user is the world."""

    def load(self) -> Iterator[SimgymTask]:
        for task in self.simgym_tasks():
            yield SimgymTask(
                SimgymTaskData(
                    id=task.id,
                    name=task.id,
                    description=task.instruction or None,
                    prompt=None,  # the world opens the conversation (SimgymEnv.run)
                    task=task.model_dump(mode="json"),
                ),
                self.config.task,
            )

    def simgym_tasks(self) -> list[Task]:
        """The simgym tasks, in order; ids are stable (given, or from the content)."""
        config = self.config
        entries: list[Any] = [_with_id(entry) for entry in config.tasks]
        if config.tasks_file:
            from simgym.rollout.runner import load_tasks

            entries += load_tasks(config.tasks_file, config.domain)
        if not entries:
            entries = [{"id": f"{config.domain}-world", "domain": config.domain}]
        return as_tasks(entries, config.domain)


class SimgymHarnessConfig(vf.HarnessConfig):
    """Settings of :class:`SimgymChatHarness`."""

    request_timeout: float | None = 600.0
    """Seconds one model call may take (None: no limit)."""


class SimgymChatHarness(vf.Harness[SimgymHarnessConfig]):
    """A chat loop run in-process: each segment is one model call on the conversation so
    far, made through the rollout's interception endpoint; the reply ends the segment.
    No tools of its own and nothing to install: the simulated world is the tool."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
        tool_interception_url: str | None = None,
    ) -> ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = []
        if system:
            messages.append({"role": "system", "content": system})
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt:
            messages.extend(message_to_wire(message) for message in prompt)
        try:
            async with httpx.AsyncClient(timeout=self.config.request_timeout) as http:
                response = await http.post(
                    f"{endpoint.rstrip('/')}/chat/completions",
                    json={"model": ctx.model, "messages": messages},
                    headers={"Authorization": f"Bearer {secret}"},
                )
        except httpx.HTTPError as exc:
            return ProgramResult(
                MODEL_TRANSPORT_ERROR_EXIT_CODE, "", f"{type(exc).__name__}: {exc}"
            )
        if response.status_code != 200:
            return ProgramResult(
                1, "", f"model call failed ({response.status_code}): {response.text}"
            )
        try:
            reply = response.json()["choices"][0]["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return ProgramResult(1, "", f"not a chat completion: {response.text[:500]}")
        return ProgramResult(0, reply, "")


class SimgymEnvConfig(vf.EnvConfig):
    """The env: a :class:`SimgymTaskset` and one role, ``agent`` (``--env.agent.*``),
    which by default runs on the host (a subprocess runtime; the chat harness runs no
    program)."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=SubprocessConfig())


class SimgymEnv(vf.Env[SimgymEnvConfig]):
    """One verifiers episode is one simgym episode: the world plays the user."""

    def __init__(self, config: SimgymEnvConfig) -> None:
        super().__init__(config)
        if not isinstance(self.taskset, SimgymTaskset):
            raise SimgymError(
                f"SimgymEnv plays simgym tasksets (id simgym_verifiers), not "
                f"{type(self.taskset).__name__}"
            )
        self.settings: SimgymTasksetConfig = self.taskset.config
        self.scenario = _scenario(self.settings.scenario)
        self.reward = build_reward(self.settings.reward)
        self._backend: WorldModel | None = None
        self._backend_lock = asyncio.Lock()
        self._writer: Any = None

    async def stop(self) -> None:
        """Close the world-model backend and the trajectory file."""
        backend, self._backend = self._backend, None
        if backend is not None:
            await backend.aclose()
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    async def world_model(self) -> WorldModel:
        """The backend every episode of this env shares (built on first use)."""
        async with self._backend_lock:
            if self._backend is None:
                settings = self.settings
                backend = create_world_model(settings.world_model, **settings.world_model_options)
                require_shareable(backend, "verifiers episodes share one backend")
                self._backend = backend
            return self._backend

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        settings = self.settings
        if not isinstance(task.data, SimgymTaskData):
            raise SimgymError(f"SimgymEnv plays simgym tasks, not {type(task).__name__}")
        simgym_task = Task.coerce(task.data.task, settings.domain, bind=True)
        env = SimEnv(
            settings.domain,
            await self.world_model(),
            self.scenario,
            max_turns=settings.max_turns,
            grounding=settings.grounding,
            **settings.env_options,
        )
        observation = await env.reset(simgym_task, seed=episode_seed(simgym_task, settings.seed))
        # What the agent may know: the instruction and the tools, never the scenario.
        conversation = Conversation(agent_view(env, simgym_task), history_messages=1 << 30)
        if task.data.system_prompt is None:  # a taskset-level override is kept
            task = task.with_system_prompt(conversation.messages[0]["content"])
        parse_errors = 0
        reason: str | None = AGENT_STOPPED
        try:
            async with agents.agent.interaction(task) as interaction:
                conversation.observe(observation.text)
                segment = await interaction.turn(conversation.messages[-1]["content"])
                while not segment.terminated:
                    reply = segment.last_reply
                    conversation.reply(reply)
                    call = parse_tool_call(reply)
                    if call is None:  # no tool call: the final answer
                        await env.finish(reply)
                        reason = None
                        break
                    result = await env.step(call)
                    if result.info.get("error_type") == "action":
                        parse_errors += 1
                    if result.done or result.truncated:
                        reason = None
                        break
                    conversation.observe(_shown(result))
                    segment = await interaction.turn(conversation.messages[-1]["content"])
                if segment.terminated:
                    stopped = interaction.trace.stop_condition
                    reason = f"{AGENT_STOPPED} ({stopped})" if stopped else AGENT_STOPPED
        finally:
            trajectory = await self._conclude(env, conversation, reason)
        trace = interaction.trace
        trace.record_reward(REWARD_NAME, trajectory.total_reward)
        trace.record_metrics(
            {
                "turns": float(len(trajectory.turns)),
                "truncated": float(trajectory.truncated),
                "done": float(trajectory.done),
                "parse_errors": float(parse_errors),
            }
        )
        trace.info["simgym"] = {
            "episode_id": trajectory.episode_id,
            "task_id": simgym_task.id,
            "domain": trajectory.domain,
            "turns": len(trajectory.turns),
            "done": trajectory.done,
            "truncated": trajectory.truncated,
            "parse_errors": parse_errors,
            "error": trajectory.error,
            "reward_parts": dict(trajectory.reward_parts),
            "reward_error": trajectory.metrics.get("reward_error"),
        }

    async def _conclude(
        self, env: SimEnv, conversation: Conversation, reason: str | None
    ) -> Trajectory:
        """End the episode (truncated with ``reason`` if it is still running), score it
        with simgym's reward and write it."""

        def annotate(trajectory: Trajectory) -> None:
            trajectory.agent = {"name": "verifiers"}
            trajectory.agent_messages = list(conversation.messages)

        await conclude_episode(
            env,
            reward=self.reward,
            writer=self._trajectory_writer(),
            reason=reason,
            annotate=annotate,
        )
        assert env.trajectory is not None
        return env.trajectory

    def _trajectory_writer(self) -> Any:
        if self.settings.trajectories is None:
            return None
        if self._writer is None:
            from simgym.core.trajectories import TrajectoryWriter

            self._writer = TrajectoryWriter(self.settings.trajectories)
        return self._writer


def _shown(result: StepResult) -> str:
    """An observation as the agent sees it: a world-model failure without its URL."""
    text = result.observation.text
    return agent_safe(text) if result.info.get("error_type") == "world_model" else text


def _with_id(entry: str | dict[str, Any]) -> dict[str, Any]:
    """A task entry with a stable id (a task without one gets it from its content, so a
    resumed run and every worker agree on it)."""
    data = {"instruction": entry} if isinstance(entry, str) else dict(entry)
    if not data.get("id"):
        digest = hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]
        data["id"] = f"task-{digest}"
    return data


def _scenario(value: dict[str, Any] | str | None) -> dict[str, Any] | None:
    """The configured scenario: a mapping as it is, or read from a YAML/JSON file."""
    if value is None or isinstance(value, dict):
        return value
    return read_scenario(value)
