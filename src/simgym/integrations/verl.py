"""verl adapter: simgym's simulated environments as verl tools and a verl agent loop.

verl's multi-turn rollout offers a policy the tools listed in a *tool config* (YAML: one
entry per tool, ``class_name`` + ``config`` + ``tool_schema``) and plays each tool call
against a :class:`~verl.tools.base_tool.BaseTool`. :func:`verl_tool_config` writes such a
config for a domain: every tool the domain offers becomes an entry of class
:class:`SimgymTool`, and one call is one ``SimEnv.step({"name", "arguments"})``; the
observation is the tool's response (error observations included, so a policy that sends
bad arguments reads why and may correct itself).

One world per trajectory. verl 0.9 builds each tool once per worker and, in its
``tool_agent`` loop, brackets *every call* with ``create`` / ``release`` under a fresh
instance id, passing the trajectory's ``AgentData`` to ``execute``. That object is the one
thing that identifies a trajectory (a GRPO group repeats the same dataset row, so nothing
in the row can), so the world is keyed by it: the first call of a trajectory builds a
:class:`SimEnv`, stores a key on the ``AgentData`` (attribute ``_simgym_world``), and every
later call of that trajectory, whichever tool it names, steps the same world, one call at a
time in the order verl made them. A caller that follows ``BaseTool``'s own contract instead
(``create(instance_id, task=...)`` once per trajectory, several ``execute``, then
``calc_reward`` and ``release``, with no ``agent_data``) gets one world per instance id;
tools that are given the same instance id share it.

The task comes from the dataset row: ``extra_info.tools_kwargs[tool].create_kwargs.task``
(a :class:`Task` as JSON; :func:`verl_rows` writes it for every tool). A row without one
gets a task whose instruction is the conversation's first user message.

Ending, rewards and records. Use the agent loop :class:`SimgymAgentLoop`, registered as
``simgym_agent`` when verl loads the tools (the rows of :func:`verl_rows` name it in
``agent_name``): it is verl's ``tool_agent`` loop plus the episode's lifecycle. When
verl's loop ends, the policy's last reply (an assistant message without tool calls) is the
agent's answer (``env.finish``), the episode is scored with simgym's reward (the tool
config's ``reward`` spec; ``None``: each task's own, e.g. an exact match on
``metadata["answer"]``), the score becomes verl's ``reward_score`` (unless ``score:
false``), and the trajectory, with verl's conversation as ``agent_messages``, is appended to
``trajectories`` (JSONL; ``{pid}`` in the path gives each worker process its own file).
If the loop stopped on a turn or length limit before a final reply, the episode is recorded
as truncated, with no answer. With verl's plain ``tool_agent`` loop the tools still share a
world, but nobody tells them the trajectory ended: the world is ended when verl drops the
trajectory's ``AgentData`` (scored and written the same way, the answer read from the
conversation), and verl scores the response with its own reward manager.

The tool config's ``config`` block (:class:`VerlToolSettings`): ``domain``, ``scenario``
(the world tools are built from; a task's own scenario replaces it for its episode, but
the tool set stays the config's), ``world_model`` (a backend name such as ``local`` or
``openai``, or ``package.module:attribute`` naming a world-model instance or a factory),
``world_model_options``, ``env_options`` (:class:`SimEnv` options), ``reward``, ``score``,
``trajectories``. One backend per process serves every trajectory with the same settings.

Limits of verl's schema model: verl parses each ``tool_schema`` into
``OpenAIFunctionToolSchema``, which keeps only a property's ``type``, ``description`` and
``enum``. :func:`verl_tool_schema` writes what survives that (``anyOf`` becomes a type
list) and folds what would be lost (array item types, nested shapes, defaults) into the
description, so the policy still reads it; simgym checks the arguments against the full
schema either way.

Needs verl (``pip install 'simgym[verl]'``); nothing here needs a GPU.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import inspect
import json
import logging
import os
import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from simgym.core.domain import get_domain
from simgym.core.env import SimEnv
from simgym.core.errors import EpisodeStateError, SimgymError
from simgym.core.types import StepResult, Task, ToolSpec, Trajectory, new_id
from simgym.core.worldmodel import WorldModel, create_world_model, require_shareable
from simgym.rollout.episode import episode_seed, score_trajectory

try:
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
    from verl.experimental.agent_loop.tool_agent_loop import AgentData, ToolAgentLoop
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
    from verl.utils.rollout_trace import rollout_trace_op
except ImportError as exc:  # pragma: no cover (the verl extra is installed in development)
    raise SimgymError(
        f"the verl adapter needs verl 0.9: pip install 'simgym[verl]' ({exc})"
    ) from None

logger = logging.getLogger(__name__)

TOOL_CLASS = "simgym.integrations.verl.SimgymTool"
AGENT_LOOP = "simgym_agent"
AGENT_LOOP_CLASS = "simgym.integrations.verl.SimgymAgentLoop"
WORLD_ATTR = "_simgym_world"  # where a trajectory's world key lives on verl's AgentData

NO_ANSWER = "verl's loop ended before the policy gave a final reply (a turn or length limit)"
PLAIN_LOOP = "verl's tool_agent loop dropped the trajectory without a final reply"

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
# End-of-turn markers that verl leaves in a decoded reply (its parsers decode the
# generated ids with special tokens, and servers return the stop token): ChatML and
# Llama 3 style <|...|>, Mistral's </s>, Gemma's <end_of_turn>.
_TURN_MARKERS = re.compile(r"<\|[A-Za-z0-9_]+\|>|</s>|<end_of_turn>")
# SimEnv options a YAML config can carry (objects such as writers and fault plans cannot;
# the adapter writes trajectories itself, after scoring).
_ENV_OPTIONS = frozenset(inspect.signature(SimEnv.__init__).parameters) - {
    "self",
    "domain",
    "world_model",
    "scenario",
    "writer",
    "reward_fn",
    "perturbations",
}


class VerlToolSettings(BaseModel):
    """The ``config`` block of a :class:`SimgymTool` entry (all tools of one config share
    it; ``tool`` names the tool when the entry gives no ``tool_schema``)."""

    model_config = ConfigDict(extra="forbid")

    type: str = "native"  # verl's tool type; only native tools exist in verl 0.9
    domain: str
    scenario: dict[str, Any] | None = None
    world_model: str = "local"
    world_model_options: dict[str, Any] = Field(default_factory=dict)
    env_options: dict[str, Any] = Field(default_factory=dict)
    reward: Any = None
    score: bool = True
    trajectories: str | None = None
    tool: str | None = None

    def world_key(self) -> str:
        """What must agree for tools to share one world (everything but the tool name)."""
        return self.model_dump_json(exclude={"tool", "type"})


# -- the tool ----------------------------------------------------------------------------


class SimgymTool(BaseTool):
    """One of a simulated environment's agent tools, as a verl tool (see the module
    docstring for how calls of one trajectory share a world)."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None) -> None:
        try:
            self.settings = VerlToolSettings.model_validate(config or {})
        except ValidationError as exc:
            raise SimgymError(f"invalid simgym tool config: {exc}") from None
        self.domain = get_domain(self.settings.domain)
        self.scenario = self.domain.scenario(self.settings.scenario)
        unknown = sorted(set(self.settings.env_options) - _ENV_OPTIONS)
        if unknown:
            raise SimgymError(
                f"unknown env_options {unknown}; known: {', '.join(sorted(_ENV_OPTIONS))}"
            )
        self._specs = {spec.name: spec for spec in self.domain.agent_tools(self.scenario)}
        _reward(self.settings)  # a bad reward spec fails here, when verl loads the tools
        super().__init__(config, tool_schema)
        if self.name not in self._specs:
            raise SimgymError(
                f"the {self.domain.name} world offers no tool {self.name!r}; "
                f"it offers: {', '.join(self._specs) or 'none'}"
            )
        self._instances: dict[str, _Instance] = {}

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        """The tool's schema: the config entry's ``tool_schema`` when it gives one (verl
        keeps it as ``self.tool_schema``; agent loops ask for it again later), else built
        from ``config.tool``."""
        given = getattr(self, "tool_schema", None)  # unset while BaseTool.__init__ runs
        if given is not None:
            return given
        name = self.settings.tool
        if name is None or name not in self._specs:
            raise SimgymError(
                "a simgym tool entry without tool_schema needs config.tool, one of: "
                + ", ".join(self._specs)
            )
        return OpenAIFunctionToolSchema.model_validate(verl_tool_schema(self._specs[name]))

    async def create(
        self, instance_id: str | None = None, **kwargs: Any
    ) -> tuple[str, ToolResponse]:
        """Note the instance's ``create_kwargs`` (verl 0.9 passes them as one keyword,
        ``BaseTool``'s contract as keywords); the world starts at the first call."""
        options = kwargs.pop("create_kwargs", None)
        options = dict(options if options is not None else kwargs)
        instance_id = instance_id or uuid4().hex
        self._instances[instance_id] = _Instance(options)
        return instance_id, ToolResponse()

    @rollout_trace_op  # traced like verl's own tools when rollout tracing is on
    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        """One call: a step of the trajectory's world. Returns the observation text, the
        step's reward and a few facts about the step."""
        instance = self._instances.get(instance_id)
        if instance is None:
            text = f"[simgym error] tool instance {instance_id!r} was not created"
            return ToolResponse(text=text), 0.0, {"error": text}
        world = _world_for(self, instance_id, instance, kwargs.get("agent_data"))
        result = world if isinstance(world, str) else await world.step(self.name, parameters)
        if isinstance(result, str):
            return ToolResponse(text=result), 0.0, {"error": result}
        info = {"turn": result.info.get("turn"), "done": result.done, "truncated": result.truncated}
        if result.info.get("error"):
            info["error"] = result.info["error"]
        return ToolResponse(text=result.observation.text), float(result.reward), info

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The reward of the instance's world so far (``BaseTool``'s contract). With
        ``answer=``, the episode first ends with that answer (and is scored and written)."""
        instance = self._instances.get(instance_id)
        key = (instance.key if instance is not None else None) or instance_id
        world = _WORLDS.get(key)
        if world is None:
            raise SimgymError(f"no open world for tool instance {instance_id!r}")
        answer = kwargs.get("answer")
        if answer is None:
            return await world.peek_reward()
        _WORLDS.pop(key, None)
        return (await world.end(str(answer), NO_ANSWER)).total_reward

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Forget the instance. A world of this instance id (``BaseTool``'s contract) ends
        here (``answer=`` finishes it with that answer); a world that belongs to a verl
        trajectory lives on until the trajectory ends."""
        instance = self._instances.pop(instance_id, None)
        if instance is None or instance.key is not None:
            return
        world = _WORLDS.pop(instance_id, None)
        if world is not None:
            answer = kwargs.get("answer")
            await world.end(
                None if answer is None else str(answer), "the tool instance was released"
            )


@dataclass
class _Instance:
    """A created tool instance: its create kwargs, and the verl trajectory's world key
    once a call has tied it to one (None: the instance id is the world's key)."""

    options: dict[str, Any] = field(default_factory=dict)
    key: str | None = None


# -- worlds ------------------------------------------------------------------------------


class _World:
    """One trajectory's simulated environment and how it ends."""

    def __init__(self, key: str, settings: VerlToolSettings, task: Task, loop_name: str) -> None:
        self.key = key
        self.settings = settings
        self.task = task
        self.loop_name = loop_name
        self.env = SimEnv(
            settings.domain,
            _backend(settings),
            settings.scenario,
            **settings.env_options,
        )
        self.seed = episode_seed(task, settings.env_options.get("seed"))
        self.lock = asyncio.Lock()  # verl runs a turn's calls concurrently; steps are serial
        self.conversation: list[dict[str, Any]] | None = None  # verl's live message list
        self.group_id: str | None = None
        self.special_tokens: Sequence[str] = ()  # the policy tokenizer's, when known
        self.ended: Trajectory | None = None

    async def _start(self) -> None:
        if self.env.trajectory is None:
            await self.env.reset(self.task, seed=self.seed)

    async def step(self, name: str, arguments: dict[str, Any]) -> StepResult | str:
        async with self.lock:
            if self.ended is not None:
                return "[simgym error] this trajectory's episode has already been closed"
            await self._start()
            try:
                return await self.env.step({"name": name, "arguments": arguments})
            except EpisodeStateError:
                trajectory = self.env.trajectory
                why = trajectory.error if trajectory is not None and trajectory.error else None
                how = "truncated" if trajectory is not None and trajectory.truncated else "done"
                return (
                    f"[simgym error] the episode has ended ({how}"
                    + (f": {why}" if why else "")
                    + "); no further tool calls are taken"
                )

    async def peek_reward(self) -> float:
        async with self.lock:
            await self._start()
            trajectory = self.env.trajectory
            assert trajectory is not None
            result = await _reward(self.settings).score(trajectory)
            return float(result.value)

    async def end(self, answer: str | None, reason: str, *, read_reply: bool = True) -> Trajectory:
        """Finish the episode with ``answer`` (default: the conversation's final reply) or,
        without one, close it as truncated with ``reason``; score it; write it."""
        async with self.lock:
            if self.ended is not None:
                return self.ended
            await self._start()
            trajectory = self.env.trajectory
            assert trajectory is not None
            if answer is None and read_reply and self.conversation is not None:
                answer = final_reply(self.conversation, self.special_tokens)
            over = trajectory.done or trajectory.truncated
            if answer is not None and not over:
                await self.env.finish(answer)
            else:
                await self.env.close(None if over else reason)
                if answer is not None and trajectory.answer is None:
                    trajectory.answer = answer  # the reply after a final action or limit
            trajectory.agent = {"name": "verl", "agent_loop": self.loop_name}
            trajectory.group_id = self.group_id
            if self.conversation is not None:
                trajectory.agent_messages = _plain(self.conversation)
            if await score_trajectory(trajectory, _reward(self.settings)) is None:
                logger.warning(
                    "simgym: scoring episode %s failed: %s",
                    trajectory.episode_id,
                    trajectory.metrics.get("reward_error"),
                )
            writer = _writer(self.settings.trajectories)
            if writer is not None:
                writer.write(trajectory)
            self.ended = trajectory
            return trajectory


_WORLDS: dict[str, _World] = {}  # open worlds of this process, by trajectory key
_PENDING: set[asyncio.Task] = set()  # worlds being ended after verl dropped their trajectory


def _world_for(
    tool: SimgymTool, instance_id: str, instance: _Instance, agent_data: Any
) -> _World | str:
    """The world this call belongs to, opened on the trajectory's first call; or an error
    text for the policy."""
    try:
        task = _task_from(instance.options, tool.settings.domain)
    except SimgymError as exc:
        return f"[simgym error] {exc}"
    if agent_data is not None:
        key = getattr(agent_data, WORLD_ATTR, None)
        if key is None:
            if task is None:
                task = _fallback_task(tool.settings.domain, getattr(agent_data, "messages", None))
            world = open_world(agent_data, tool.settings, task, loop_name="tool_agent")
            instance.key = world.key
            return world
        instance.key = key
    else:
        key = instance_id
    world = _WORLDS.get(key)
    if world is None and agent_data is not None:
        return "[simgym error] this trajectory's episode has already been closed"
    if world is None:
        task = task or _fallback_task(tool.settings.domain, None)
        world = _WORLDS[key] = _World(key, tool.settings, task, "direct")
        return world
    if world.settings.world_key() != tool.settings.world_key():
        return (
            f"[simgym error] tool {tool.name!r} has different world settings from the other "
            "tools of this trajectory; give all simgym tools of one config the same config"
        )
    if task is not None and task.id != world.task.id:
        return (
            f"[simgym error] tool {tool.name!r} was created for task {task.id!r}, but this "
            f"trajectory's world plays task {world.task.id!r}"
        )
    return world


def open_world(
    agent_data: Any, settings: VerlToolSettings, task: Task, *, loop_name: str = AGENT_LOOP
) -> _World:
    """Open a world for the trajectory that ``agent_data`` (verl's per-trajectory state)
    stands for, and tie its end to that object: when verl drops it, the world is ended
    (scored and written) unless :func:`finish_trajectory` ended it first."""
    if getattr(agent_data, WORLD_ATTR, None) in _WORLDS:
        raise SimgymError("this trajectory already has a simulated world")
    world = _World(new_id("verl-"), settings, task, loop_name)
    world.conversation = getattr(agent_data, "messages", None)
    _WORLDS[world.key] = world
    setattr(agent_data, WORLD_ATTR, world.key)
    weakref.finalize(agent_data, _dropped, world.key)
    return world


async def finish_trajectory(
    agent_data: Any,
    answer: str | None = None,
    *,
    reason: str = NO_ANSWER,
    read_reply: bool = True,
) -> Trajectory | None:
    """End the world of a verl trajectory now: finish with ``answer`` (default, with
    ``read_reply``: the conversation's final reply; none: close as truncated with
    ``reason``), score, write. Returns the trajectory, or None if it opened no world."""
    world = _WORLDS.pop(getattr(agent_data, WORLD_ATTR, None) or "", None)
    if world is None:
        return None
    return await world.end(answer, reason, read_reply=read_reply)


async def wait_closed() -> None:
    """Wait until the worlds of trajectories verl has dropped are ended and written."""
    while _PENDING:
        await asyncio.gather(*list(_PENDING), return_exceptions=True)


def _dropped(key: str) -> None:
    """verl let go of a trajectory whose world is still open: end it (a finalizer, so it
    must not raise and cannot await)."""
    world = _WORLDS.pop(key, None)
    if world is None:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None and not loop.is_closed():
        task = loop.create_task(_end_quietly(world))
        _PENDING.add(task)
        task.add_done_callback(_PENDING.discard)
    else:  # at interpreter exit, or collected on a thread without a loop
        asyncio.run(_end_quietly(world))


async def _end_quietly(world: _World) -> None:
    try:
        await world.end(None, PLAIN_LOOP)
    except Exception:  # a finalizer's error has nowhere to go but the log
        logger.exception("simgym: ending the world of a dropped verl trajectory failed")


# -- the agent loop ----------------------------------------------------------------------


@register(AGENT_LOOP)
class SimgymAgentLoop(ToolAgentLoop):
    """verl's tool agent loop with the episode's lifecycle: the world opens with the
    trajectory (so even a trajectory without tool calls is an episode), and when the loop
    ends the final reply is the answer, simgym's reward becomes verl's ``reward_score``
    and the trajectory is written (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        simgym_tools = [t for t in self.tools.values() if isinstance(t, SimgymTool)]
        if not simgym_tools:
            raise SimgymError(
                f"the {AGENT_LOOP} agent loop needs simgym tools in the rollout's tool config "
                "(actor_rollout_ref.rollout.multi_turn.tool_config_path)"
            )
        if len({t.settings.world_key() for t in simgym_tools}) > 1:
            raise SimgymError("all simgym tools of one tool config must share one config")
        self._simgym_tools = simgym_tools
        self._task: Task | None = None
        self._group: str | None = None
        self._agent_data: Any = None

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        self._task = _task_from_row(kwargs, self._simgym_tools)
        uid = kwargs.get("uid")
        self._group = str(uid) if uid is not None else None
        try:
            output = await super().run(sampling_params, **kwargs)
        except BaseException as exc:
            if self._agent_data is not None:
                await finish_trajectory(
                    self._agent_data, reason=f"verl's agent loop failed: {exc!r}", read_reply=False
                )
            raise
        trajectory = await finish_trajectory(self._agent_data)
        if trajectory is not None:
            if self._simgym_tools[0].settings.score:
                output.reward_score = trajectory.total_reward
            output.extra_fields["simgym_episode_id"] = trajectory.episode_id
        return output

    async def _handle_pending_state(self, agent_data: AgentData, sampling_params: dict[str, Any]):
        task = self._task or _fallback_task(
            self._simgym_tools[0].settings.domain, agent_data.messages
        )
        world = open_world(agent_data, self._simgym_tools[0].settings, task)
        world.group_id = self._group
        world.special_tokens = list(getattr(self.tokenizer, "all_special_tokens", []) or [])
        self._agent_data = agent_data
        return await super()._handle_pending_state(agent_data, sampling_params)


# -- configs and datasets ----------------------------------------------------------------


def verl_tool_schema(spec: ToolSpec) -> dict[str, Any]:
    """A simgym tool as an OpenAI function schema that verl's schema model keeps whole
    (see the module docstring)."""
    params = spec.parameters or {}
    properties = {
        name: _verl_property(prop if isinstance(prop, dict) else {})
        for name, prop in (params.get("properties") or {}).items()
    }
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description or spec.name,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(params.get("required") or []),
            },
        },
    }


def verl_tool_config(
    domain: str,
    scenario: dict[str, Any] | BaseModel | None = None,
    *,
    world_model: str = "local",
    world_model_options: dict[str, Any] | None = None,
    env_options: dict[str, Any] | None = None,
    reward: Any = None,
    score: bool = True,
    trajectories: str | os.PathLike[str] | None = None,
    tools: Sequence[str] | None = None,
    path: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """The tool config verl's ``multi_turn.tool_config_path`` points at: one
    :class:`SimgymTool` entry per tool the domain offers in ``scenario`` (``tools``: only
    these). With ``path`` it is also written there as YAML. Every value must travel as
    YAML to verl's workers, so ``world_model`` is a backend name or an import path
    (``package.module:attribute``), not an instance."""
    if not isinstance(world_model, str):
        raise SimgymError(
            "verl builds tools from YAML in its own processes: give world_model as a backend "
            "name or an import path 'package.module:attribute', not an instance"
        )
    resolved = get_domain(domain)
    validated = resolved.scenario(scenario)
    settings = VerlToolSettings(
        domain=resolved.name,
        scenario=None if scenario is None else validated.model_dump(mode="json"),
        world_model=world_model,
        world_model_options=dict(world_model_options or {}),
        env_options=dict(env_options or {}),
        reward=reward,
        score=score,
        trajectories=None if trajectories is None else str(trajectories),
    )
    try:
        json.dumps(settings.model_dump(mode="json"))
    except (TypeError, ValueError) as exc:
        raise SimgymError(f"the tool config must be plain data (YAML): {exc}") from None
    offered = resolved.agent_tools(validated)
    if tools is not None:
        names = {t.name for t in offered}
        missing = [name for name in tools if name not in names]
        if missing:
            raise SimgymError(f"the {domain} world offers no tool(s) {missing}")
        offered = [t for t in offered if t.name in set(tools)]
    if not offered:
        raise SimgymError(f"the {domain} world offers no tools in this scenario")
    config = settings.model_dump(mode="json", exclude={"tool"})
    result = {
        "tools": [
            {
                "class_name": TOOL_CLASS,
                "config": copy.deepcopy(config),  # separate copies: plain YAML, no anchors
                "tool_schema": verl_tool_schema(t),
            }
            for t in offered
        ]
    }
    if path is not None:
        _write_yaml(path, result)
    return result


def verl_agent_loop_config(path: str | os.PathLike[str] | None = None) -> list[dict[str, str]]:
    """The agent loop config (``rollout.agent.agent_loop_config_path``) naming
    :class:`SimgymAgentLoop`. Optional: loading the tools already registers it."""
    result = [{"name": AGENT_LOOP, "_target_": AGENT_LOOP_CLASS}]
    if path is not None:
        _write_yaml(path, result)
    return result


def verl_rows(
    tasks: Iterable[Task | Mapping[str, Any]],
    tool_config: Mapping[str, Any],
    *,
    agent_name: str | None = AGENT_LOOP,
    data_source: str | None = None,
    system_prompt: str | None = None,
) -> list[dict[str, Any]]:
    """Dataset rows in verl's RL format (``RLHFDataset``): ``prompt`` (what the policy
    sees: a system message and the instruction with the world's first screen),
    ``reward_model.ground_truth`` (``metadata["answer"]`` or ``["answers"]`` as text, for
    verl's own reward functions) and ``extra_info.tools_kwargs`` carrying the task to every tool of
    ``tool_config``. The scenario and answer stay out of the prompt."""
    from simgym.agents.openai_agent import SYSTEM_PROMPT

    entries = list(tool_config.get("tools") or [])
    if not entries:
        raise SimgymError("the tool config lists no tools")
    settings = VerlToolSettings.model_validate(entries[0]["config"])
    names = [entry["tool_schema"]["function"]["name"] for entry in entries]
    domain = get_domain(settings.domain)
    rows = []
    for index, raw in enumerate(tasks):
        task = Task.coerce(raw, domain.name, bind=True)
        scenario = domain.scenario(task.scenario or settings.scenario)
        first = domain.initial_observation(scenario)
        user = task.instruction.strip() or "Explore the environment."
        if first.strip():
            user += f"\n\nWhat the environment shows now:\n{first}"
        system = system_prompt or SYSTEM_PROMPT.format(domain=domain.name)
        answer = task.metadata.get("answer", task.metadata.get("answers"))
        payload = {"create_kwargs": {"task": task.model_dump_json()}}
        row: dict[str, Any] = {
            "data_source": data_source or f"simgym/{domain.name}",
            "prompt": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "ability": f"agent/{domain.name}",
            "reward_model": {
                "style": "rule",
                "ground_truth": _as_text(answer),
            },
            "extra_info": {
                "index": index,
                "task_id": task.id,
                "need_tools_kwargs": True,
                "tools_kwargs": {name: payload for name in names},
            },
        }
        if agent_name is not None:
            row["agent_name"] = agent_name
        rows.append(row)
    return rows


def write_verl_dataset(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Write :func:`verl_rows` output as Parquet (``.parquet``) or JSON lines (``.jsonl``),
    the two forms ``RLHFDataset`` reads."""
    path = Path(path)
    if not rows:
        raise SimgymError("no rows to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist([dict(r) for r in rows]), path)
    elif path.suffix == ".jsonl":
        with open(path, "w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        raise SimgymError(f"write a .parquet or .jsonl file, not {path.name!r}")
    return path


def final_reply(
    messages: Sequence[Mapping[str, Any]], special_tokens: Iterable[str] = ()
) -> str | None:
    """The policy's answer in a verl conversation: its last message, if that is an
    assistant reply without tool calls; reasoning in ``<think>``, end-of-turn markers and
    the given special tokens removed."""
    if not messages:
        return None
    last = messages[-1]
    if last.get("role") != "assistant" or last.get("tool_calls"):
        return None
    content = last.get("content")
    if isinstance(content, list):  # structured content: keep the text parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    text = _THINK.sub("", str(content or "")).split("</think>")[-1]
    for token in special_tokens:
        text = text.replace(token, "")
    return _TURN_MARKERS.sub("", text).strip()


# -- internals ---------------------------------------------------------------------------

_BACKENDS: dict[str, WorldModel] = {}
_REWARDS: dict[str, Any] = {}
_WRITERS: dict[str, Any] = {}


def _backend(settings: VerlToolSettings) -> WorldModel:
    """One world-model backend per process and settings, shared by every trajectory."""
    key = json.dumps([settings.world_model, settings.world_model_options], sort_keys=True)
    if key not in _BACKENDS:
        spec, options = settings.world_model, settings.world_model_options
        if ":" in spec:
            backend = _imported(spec, options)
        else:
            backend = create_world_model(spec, **options)
        require_shareable(backend, "verl trajectories share one backend per process", name=spec)
        _BACKENDS[key] = backend
    return _BACKENDS[key]


def _imported(spec: str, options: dict[str, Any]) -> WorldModel:
    module_name, _, attribute = spec.partition(":")
    try:
        target = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise SimgymError(f"cannot import world model {spec!r}: {exc}") from None
    if hasattr(target, "predict"):
        if options:
            raise SimgymError(f"{spec} is a ready world model; it takes no world_model_options")
        return target
    if callable(target):
        backend = target(**options)
        if hasattr(backend, "predict"):
            return backend
    raise SimgymError(f"{spec} is neither a world model nor a factory that returns one")


def _reward(settings: VerlToolSettings) -> Any:
    from simgym.rewards import build_reward

    key = json.dumps(settings.reward, sort_keys=True)
    if key not in _REWARDS:
        _REWARDS[key] = build_reward(settings.reward)
    return _REWARDS[key]


def _writer(path: str | None) -> Any:
    if path is None:
        return None
    resolved = path.replace("{pid}", str(os.getpid()))
    if resolved not in _WRITERS:
        from simgym.core.trajectories import TrajectoryWriter

        _WRITERS[resolved] = TrajectoryWriter(resolved)
    return _WRITERS[resolved]


def _task_from(options: Mapping[str, Any] | None, domain: str) -> Task | None:
    """The task in a tool's create kwargs (a Task, its dict, or its JSON), if any."""
    raw = (options or {}).get("task")
    if raw is None:
        return None
    return Task.coerce(raw, domain, text="json", bind=True, invalid="invalid task in tools_kwargs")


def _task_from_row(kwargs: Mapping[str, Any], tools: Sequence[SimgymTool]) -> Task | None:
    """The task a dataset row carries for its simgym tools (the first one that has one)."""
    tools_kwargs = kwargs.get("tools_kwargs") or {}
    for tool in tools:
        entry = tools_kwargs.get(tool.name) or {}
        task = _task_from(entry.get("create_kwargs"), tool.settings.domain)
        if task is not None:
            return task
    return None


def _fallback_task(domain: str, messages: Sequence[Mapping[str, Any]] | None) -> Task:
    """A row without a task: the instruction is the conversation's first user message."""
    for message in messages or []:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return Task(instruction=message["content"], domain=domain)
    return Task(domain=domain)


def _verl_property(prop: dict[str, Any]) -> dict[str, Any]:
    """One property in the shape verl keeps (type, description, enum); what verl would
    drop is said in the description."""
    kind = prop.get("type")
    if kind is None:
        alternatives = prop.get("anyOf") or prop.get("oneOf") or []
        kinds = [a.get("type") for a in alternatives if isinstance(a, dict) and a.get("type")]
        kind = list(dict.fromkeys(kinds)) or ["string", "number", "boolean", "array", "object"]
        if len(kind) == 1:
            kind = kind[0]
    notes = []
    items = prop.get("items")
    if isinstance(items, dict):
        notes.append(f"a list of {_shape(items)}")
    elif prop.get("anyOf") or prop.get("oneOf"):
        shapes = [_shape(a) for a in prop.get("anyOf") or prop.get("oneOf") if isinstance(a, dict)]
        notes.append("one of: " + "; ".join(shapes))
    elif kind == "object" and prop.get("properties"):
        notes.append(f"shaped {_shape(prop)}")
    if "default" in prop:
        notes.append(f"default {json.dumps(prop['default'])}")
    description = prop.get("description") or ""
    if notes:
        description = f"{description} ({'; '.join(notes)})".strip()
    out: dict[str, Any] = {"type": kind}
    if description:
        out["description"] = description
    if isinstance(prop.get("enum"), list):
        out["enum"] = prop["enum"]
    return out


def _shape(schema: dict[str, Any]) -> str:
    """A short reading of a sub-schema for a description."""
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        return f"list of {_shape(schema['items'])}"
    if schema.get("properties") or schema.get("enum") or schema.get("anyOf"):
        keep = {
            k: schema[k] for k in ("type", "properties", "required", "enum", "anyOf") if k in schema
        }
        return json.dumps(keep, separators=(",", ":"))
    return str(schema.get("type", "any value"))


def _as_text(value: Any) -> str:
    """A reference answer as verl's string ``ground_truth`` ("" when there is none)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _plain(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """verl's conversation as plain JSON data (anything else becomes its text)."""
    return json.loads(json.dumps(list(messages), ensure_ascii=False, default=str))


def _write_yaml(path: str | os.PathLike[str], data: Any) -> None:
    import yaml

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
