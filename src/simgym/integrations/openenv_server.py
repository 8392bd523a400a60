"""A simulated environment served to OpenEnv clients: one simulated world per session.

OpenEnv (``openenv-core``) is a gym-style protocol over HTTP: a client opens a WebSocket
session at ``/ws`` and sends ``reset``, ``step`` and ``state`` messages; the server keeps
one :class:`~openenv.core.env_server.interfaces.Environment` per session. Here each session's
environment wraps its own :class:`SimEnv`, and every session shares one world-model
backend::

    app = create_openenv_app("mcp", world_model=simgym.world_model("local"),
                             scenario=bank, task="Update Ben's email")
    serve_openenv("terminal", world_model="local", port=8000, out="episodes.jsonl")

and a client (:class:`simgym.integrations.openenv_client.SimgymEnvClient`) plays::

    with SimgymEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
        first = env.reset()                       # the first screen, task and tools
        result = env.step(SimgymAction(name="get_customer", arguments={"customer_id": "C-1"}))

Actions (:class:`SimgymAction`) are exactly one of: a tool call (``name`` and
``arguments``), ``text`` (a JSON action, or the domain's short form as ``simgym play``
reads it: a command line for terminal, ``tool {"json": ...}`` for mcp), ``keystrokes``, or
``answer``, which ends the episode with the agent's answer in any domain. Observations
(:class:`SimgymObservation`) carry the text the world shows, ``done`` (also when the
episode was truncated; ``truncated`` says which) and ``reward``; an invalid action comes
back as an observation of kind ``error`` with the message, never as a server error. The
reset observation adds the task instruction and the tools (OpenAI function format). OpenEnv
drops an observation's ``metadata`` on the wire, so all of this is in fields.
:class:`SimgymState` holds the episode id, step count and task, never the hidden scenario.

``reset`` takes ``seed``, ``episode_id``, ``task`` (an instruction or a task dict, with its
own scenario if it has one) and ``task_id`` (one of the served tasks). With several served
tasks and neither given, a seed picks one (``seed % len(tasks)``), else they take turns.

Episodes are scored with the optional ``reward`` when they end (the final observation's
reward includes it) and then written to ``writer``. One still running when its session
ends (the client leaves, the session idles out, the server stops) or is reset is written
then, as truncated. Nothing is dropped.

HTTP: OpenEnv's ``POST /reset`` and ``POST /step`` build a fresh environment for every
request, so they cannot hold an episode: ``/reset`` shows a first observation (its episode
has no step and is not written unless ``keep_empty_episodes``), and ``/step`` answers with
an error observation pointing to the WebSocket session. ``/health``, ``/schema``,
``/metadata`` and ``/state`` work as usual.

Limits: with a ``token`` every request and WebSocket must carry it (see
:mod:`simgym.integrations.http_guard`); a browser page of another origin is refused (its
``Origin``), and on loopback so is a request whose ``Host`` is not this machine's; a
request body or WebSocket message over ``max_message_bytes`` is refused (413, or an error
message on the WebSocket). An error the agent sees never names the world model's URL;
the trajectory keeps the whole message.
OpenEnv's ``MCPToolClient`` works over the same WebSocket: ``list_tools`` gives the
world's tools in MCP's shape plus ``submit_answer`` (which ends the episode with the
answer), and ``call_tool`` is one step (the first call starts an episode if no reset did);
an invalid call raises in the client with the reason. Its production mode (JSON-RPC on
HTTP ``/mcp``) is not served here; ``simgym serve --mcp`` serves MCP itself.

Needs ``openenv-core`` (``pip install 'simgym[openenv]'``).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import json
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from simgym.core.domain import Domain, get_domain
from simgym.core.env import SimEnv
from simgym.core.errors import ActionError, SimgymError
from simgym.core.sync import run_sync
from simgym.core.trajectories import TrajectoryWriter
from simgym.core.types import Action, KeyPress, StepResult, Task, Trajectory
from simgym.core.version import __version__
from simgym.core.worldmodel import WorldModel, create_world_model, require_shareable
from simgym.integrations.common import agent_safe, as_tasks, has_reference, pick_task, why_ended
from simgym.integrations.http_guard import (
    BearerAuth,
    OriginGuard,
    is_loopback,
    require_token_off_loopback,
    send_json_error,
)
from simgym.rewards import RewardResult, build_reward
from simgym.rollout.episode import conclude_episode

try:
    from fastapi import FastAPI, HTTPException
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action as OpenEnvAction
    from openenv.core.env_server.types import ConcurrencyConfig, EnvironmentMetadata
    from openenv.core.env_server.types import Observation as OpenEnvObservation
    from openenv.core.env_server.types import State as OpenEnvState
    from starlette.websockets import WebSocketDisconnect
except ImportError as exc:  # pragma: no cover (the openenv extra is installed in development)
    raise SimgymError(
        f"serving OpenEnv needs openenv-core: pip install 'simgym[openenv]' ({exc})"
    ) from None

MAX_MESSAGE_BYTES = 1 << 20  # a request body or WebSocket message; an action is far smaller
SESSION_ENDED = "the OpenEnv session ended before the episode did"
SERVER_STOPPED = "the OpenEnv server stopped before the episode ended"
RESET_EARLY = "reset before the episode ended"
ANSWER_TOOL = "submit_answer"  # offered to OpenEnv's MCPToolClient, which has no answer action
NO_EPISODE = (
    "no episode is running: call reset first. OpenEnv's HTTP /step endpoint builds a fresh "
    "environment for every request and so never has one; hold an episode over a WebSocket "
    "session (/ws), e.g. with simgym's SimgymEnvClient"
)

_ENV_OPTIONS = frozenset(inspect.signature(SimEnv.__init__).parameters) - {
    "self",
    "domain",
    "world_model",
    "scenario",
    "writer",  # episodes are written here, after they are scored
}


# -- wire types ---------------------------------------------------------------------------


class SimgymAction(OpenEnvAction):
    """One agent action: exactly one of a tool call (``name`` with ``arguments``),
    ``text``, ``keystrokes`` or ``answer``."""

    name: str | None = Field(None, description="the tool to call")
    arguments: dict[str, Any] = Field(default_factory=dict, description="the tool's arguments")
    text: str | None = Field(
        None,
        description="an action as typed: JSON, or the domain's short form (a command line "
        'for terminal, `tool {"json": ...}` or `answer TEXT` for mcp)',
    )
    keystrokes: list[KeyPress] | None = Field(
        None, description='terminal keystrokes: [{"keystrokes": "ls\\n", "duration": 1}]'
    )
    answer: str | None = Field(None, description="the final answer; ends the episode")
    # OpenEnv's MCP actions, as its MCPToolClient sends them.
    type: Literal["list_tools", "call_tool"] | None = Field(
        None, description="list_tools, or call_tool with tool_name and arguments (MCP style)"
    )
    tool_name: str | None = Field(None, description="the tool to call (type call_tool)")

    @model_validator(mode="after")
    def _one_kind(self) -> SimgymAction:
        if self.type is not None or self.tool_name is not None:
            return self._mcp_style()
        given = [
            k for k in ("name", "text", "keystrokes", "answer") if getattr(self, k) is not None
        ]
        # PydanticCustomError, not ValueError: openenv-core puts the validation errors in
        # its JSON replies, and a ValueError in their context cannot be serialized.
        if len(given) != 1:
            raise PydanticCustomError(
                "simgym_action",
                "give exactly one of name (a tool call), text, keystrokes or answer; got {given}",
                {"given": ", ".join(given) or "none"},
            )
        if self.arguments and self.name is None:
            raise PydanticCustomError(
                "simgym_action", "arguments belong to a tool call: give its name too"
            )
        return self

    def _mcp_style(self) -> SimgymAction:
        others = [k for k in ("name", "text", "keystrokes", "answer") if getattr(self, k)]
        if others:
            raise PydanticCustomError(
                "simgym_action",
                "an MCP-style action (type) takes tool_name and arguments only; got {given}",
                {"given": ", ".join(others)},
            )
        if self.type == "call_tool" and not self.tool_name:
            raise PydanticCustomError("simgym_action", "call_tool needs a tool_name")
        if self.type != "call_tool" and (self.tool_name is not None or self.arguments):
            raise PydanticCustomError(
                "simgym_action", "tool_name and arguments belong to type call_tool"
            )
        return self

    @classmethod
    def of(cls, value: SimgymAction | dict[str, Any] | str) -> SimgymAction:
        """An action from itself, its dict, or a string (taken as ``text``)."""
        if isinstance(value, SimgymAction):
            return value
        if isinstance(value, str):
            return cls(text=value)
        if isinstance(value, dict):
            return cls.model_validate(value)
        raise TypeError(f"cannot make a SimgymAction from {type(value).__name__}")


class SimgymObservation(OpenEnvObservation):
    """What the agent sees after a reset or a step."""

    text: str = Field("", description="what the world shows")
    kind: str = Field(
        "observation",
        description="initial (after reset), observation, error (an invalid action or a "
        "refused step; see error), answer (the answer was recorded) or tools (list_tools)",
    )
    error: str | None = Field(None, description="what was wrong, for kind 'error'")
    turn: int = Field(0, description="the step's number in the episode (0 after reset)")
    truncated: bool = Field(False, description="the episode was cut short (done is also set)")
    instruction: str | None = Field(None, description="the task (after reset)")
    tools: list[dict[str, Any]] | None = Field(
        None, description="the tools the agent may call, OpenAI function format (after reset)"
    )
    action_hint: str | None = Field(None, description="how actions look (after reset)")
    reward_parts: dict[str, float] | None = Field(
        None, description="the episode reward's parts (on the last step)"
    )
    info: dict[str, Any] = Field(default_factory=dict, description="episode id, turn, errors")
    tool_name: str | None = Field(None, description="the tool called (MCP-style call_tool)")
    result: dict[str, Any] | None = Field(
        None, description="the MCP-style tool result: content, isError, data (call_tool)"
    )

    @model_serializer(mode="wrap")
    def _for_mcp_clients(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # OpenEnv's MCPToolClient tells replies apart by which keys are present ("tools",
        # then "tool_name") and reads "error" of a tool call as {error_type, message}.
        data = handler(self)
        for key in ("tools", "tool_name", "result"):
            if key in data and data[key] is None:
                del data[key]
        if self.tool_name is not None and self.error is not None:
            kind = "invalid_args" if self.info.get("error_type") == "action" else "execution_error"
            data["error"] = {"error_type": kind, "message": self.error}
        return data


class SimgymState(OpenEnvState):
    """Where the session's episode stands (never the hidden scenario)."""

    domain: str = ""
    task_id: str | None = None
    instruction: str | None = None
    done: bool = False
    truncated: bool = False
    total_reward: float = 0.0


# -- what all sessions share ----------------------------------------------------------------


class SimgymService:
    """What every session's world is built from: the domain, the shared world-model
    backend, the initial world, the tasks, the reward and where episodes go.

    Args:
        domain: a registered domain name or a :class:`Domain`.
        world_model: the backend all sessions share.
        scenario: the initial world (a task's own scenario replaces it for that task).
        task: a task (an instruction, a :class:`Task` or its dict) or a list of them.
        reward: a :mod:`simgym.rewards` reward or spec; ``None`` scores nothing.
        writer: anything with ``write(trajectory)``; every episode goes there.
        keep_empty_episodes: also write episodes that ended without a step (by default a
            reset that is never stepped, as every HTTP ``POST /reset`` is, writes nothing).
        env_options: :class:`SimEnv` options (``max_turns``, ``seed``, ``instructions``...).
    """

    def __init__(
        self,
        domain: Domain | str,
        world_model: WorldModel,
        *,
        scenario: dict[str, Any] | BaseModel | None = None,
        task: Any = None,
        reward: Any = None,
        writer: Any = None,
        keep_empty_episodes: bool = False,
        **env_options: Any,
    ) -> None:
        self.domain = get_domain(domain) if isinstance(domain, str) else domain
        require_shareable(world_model, "the OpenEnv server shares one backend between sessions")
        self.world_model = world_model
        self.scenario = self.domain.scenario(scenario)
        self.tasks = as_tasks(task, self.domain.name)
        self.reward = None if reward is None else build_reward(reward)
        self.writer = writer
        self.keep_empty_episodes = keep_empty_episodes
        unknown = sorted(set(env_options) - _ENV_OPTIONS)
        if unknown:
            raise SimgymError(f"unknown environment option(s): {', '.join(unknown)}")
        self.env_options = env_options
        try:  # a bad option fails at start-up, not in the first session
            self.new_sim()
        except TypeError as exc:
            raise SimgymError(f"invalid environment option: {exc}") from None
        self.live: set[SimgymEnvironment] = set()
        self.stopping = False
        self._turns = itertools.count()
        self._lock = threading.Lock()

    def new_sim(self) -> SimEnv:
        return SimEnv(self.domain, self.world_model, self.scenario, **self.env_options)

    def pick(self, task: Any, task_id: str | None, seed: int | None) -> Task:
        """The task for a new episode: the client's own (a served one when its text or id
        names one), a served one by id, by seed, or the next in turn."""
        return pick_task(self.tasks, self.domain.name, task, task_id, lambda n: self._next(seed))

    def _next(self, seed: int | None) -> int:
        if seed is not None:
            return seed
        with self._lock:
            return next(self._turns)

    def write(self, trajectory: Trajectory) -> None:
        # An episode without a step holds nothing but the task; anyone who can reach the
        # server could otherwise fill the disk one POST /reset at a time.
        if self.writer is not None and (trajectory.turns or self.keep_empty_episodes):
            self.writer.write(trajectory)

    async def aclose(self, reason: str = SERVER_STOPPED) -> None:
        """Write every open episode (as truncated, with ``reason``)."""
        self.stopping = True
        for env in list(self.live):
            await env.conclude(reason)


# -- one session's environment --------------------------------------------------------------


class SimgymEnvironment(Environment[SimgymAction, SimgymObservation, SimgymState]):
    """One session's simulated world (see the module docstring)."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session has its own SimEnv

    def __init__(self, service: SimgymService) -> None:
        super().__init__()
        self.service = service
        self.sim = service.new_sim()
        self.ended: str | None = None  # why the current episode is over, once it is
        self._concluded = True  # no episode yet
        self._closed = False
        self._guard = threading.Lock()  # close() may come from another thread
        service.live.add(self)

    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task: Task | str | dict[str, Any] | None = None,
        task_id: str | None = None,
        **options: Any,
    ) -> SimgymObservation:
        if self._closed:  # its session ended (e.g. idled out); its episodes are written
            raise _BadRequest("this session is closed; open a new one")
        if options:
            raise _BadRequest(
                f"unknown reset option(s): {', '.join(sorted(options))}; "
                "reset takes seed, episode_id, task and task_id"
            )
        try:
            chosen = self.service.pick(task, task_id, seed)
        except (SimgymError, ValidationError) as exc:
            raise _BadRequest(str(exc)) from None
        await self.conclude(RESET_EARLY)
        try:
            first = await self.sim.reset(chosen, seed=seed)
        except SimgymError as exc:  # the task's own scenario does not fit the domain
            raise _BadRequest(str(exc)) from None
        trajectory = self.sim.trajectory
        assert trajectory is not None
        if episode_id:
            trajectory.episode_id = episode_id
        trajectory.agent = {"name": "openenv-client"}
        with self._guard:
            self._concluded, self.ended = False, None
        domain = self.sim.domain
        return SimgymObservation(
            text=first.text,
            kind="initial",
            instruction=chosen.instruction,
            tools=[t.to_openai() for t in domain.agent_tools(self.sim.scenario)],
            action_hint=domain.action_hint_for(self.sim.scenario) or None,
            info={
                "episode_id": trajectory.episode_id,
                "task_id": chosen.id,
                "turn": 0,
                # False: a task of the client's own with no reference answer, which the
                # task reward cannot score (the last step says so)
                "reference": has_reference(chosen),
            },
        )

    async def step_async(
        self, action: SimgymAction, timeout_s: float | None = None, **kwargs: Any
    ) -> SimgymObservation:
        # timeout_s: the world model's own timeout bounds a step; OpenEnv's WebSocket
        # path never sends one.
        action = SimgymAction.of(action)
        if action.type == "list_tools":
            return SimgymObservation(kind="tools", tools=self._mcp_tools())
        if action.type == "call_tool":
            return await self._call_tool(action.tool_name or "", action.arguments)
        return await self._step(action)

    def _mcp_tools(self) -> list[dict[str, Any]]:
        """The tools in MCP's shape, the answer tool last (unless the world has one so named)."""
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in self.sim.domain.agent_tools(self.sim.scenario)
        ]
        if all(t["name"] != ANSWER_TOOL for t in tools):
            tools.append(
                {
                    "name": ANSWER_TOOL,
                    "description": "Submit your final answer to the task; ends the episode.",
                    "input_schema": {
                        "type": "object",
                        "properties": {"answer": {"type": "string"}},
                        "required": ["answer"],
                    },
                }
            )
        return tools

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> SimgymObservation:
        """An MCP-style tool call: a step, its text also as an MCP result."""
        if self.sim.trajectory is None:  # MCP clients call tools without a reset first
            await self.reset_async()
        domain_tools = {t.name for t in self.sim.domain.agent_tools(self.sim.scenario)}
        if name == ANSWER_TOOL and name not in domain_tools:
            answer = arguments.get("answer")
            if not isinstance(answer, str) or set(arguments) - {"answer"}:
                observation = SimgymObservation(
                    kind="error",
                    error=f'{ANSWER_TOOL} takes one argument, "answer" (a string)',
                    info={"error_type": "action"},
                )
            else:
                observation = await self._step(SimgymAction(answer=answer))
        else:
            observation = await self._step(SimgymAction(name=name, arguments=arguments))
        text = observation.error if observation.kind == "error" else observation.text
        observation.tool_name = name
        observation.result = {
            "content": [{"type": "text", "text": text or ""}],
            "isError": observation.kind == "error",
            "data": text or "",
        }
        return observation

    async def _step(self, action: SimgymAction) -> SimgymObservation:
        if self.sim.trajectory is None:
            return _refusal(NO_EPISODE)
        if self._concluded:
            return _refusal(f"the episode has ended ({self.ended}); call reset to start another")
        try:
            result = await self._apply(action)
        except Exception as exc:
            # SimEnv records what goes wrong inside an episode and does not raise; this is
            # a defect or a misbehaving backend. Write the episode with the error.
            message = f"{type(exc).__name__}: {exc}"
            # A defect's message is internal (paths, addresses): the agent is told only
            # its kind; the trajectory has the whole message.
            self.ended = f"the server failed ({type(exc).__name__})"
            await self.conclude(f"the OpenEnv server failed on a step: {message}")
            return _refusal(f"simgym failed on this step ({type(exc).__name__})")
        observation = _observation(result)
        if result.done or result.truncated:
            self.ended = why_ended(result, self.sim.max_turns)
            scored = await self.conclude(None)
            trajectory = self.sim.trajectory
            if (
                scored is not None
                and scored.details.get("error")
                and not has_reference(trajectory.task)
            ):
                # a task with no reference answer cannot be scored: said, not passed off
                # as a 0.0 (reset with a served task's id or text keeps its reference)
                observation.info["reward_error"] = str(scored.details["error"])
                observation.reward = observation.reward or None  # no score, not a 0.0
                observation.reward_parts = dict(self.sim.trajectory.reward_parts)
            elif scored is not None:
                observation.reward = (observation.reward or 0.0) + scored.value
                observation.reward_parts = dict(self.sim.trajectory.reward_parts)
            elif self.sim.trajectory.metrics.get("reward_error"):
                observation.info["reward_error"] = str(self.sim.trajectory.metrics["reward_error"])
        return observation

    async def _apply(self, action: SimgymAction) -> StepResult:
        if action.answer is not None:
            return await self.sim.finish(action.answer)
        if action.name is not None:
            return await self.sim.step({"name": action.name, "arguments": action.arguments})
        if action.keystrokes is not None:
            return await self.sim.step(Action(kind="keystrokes", keystrokes=action.keystrokes))
        assert action.text is not None
        try:
            parsed = _read_text(self.sim.domain, self.sim.scenario, action.text)
        except ActionError as exc:
            return self.sim.reject(action.text, str(exc))
        return await self.sim.step(parsed)

    async def conclude(self, reason: str | None) -> RewardResult | None:
        """End the current episode (as truncated with ``reason`` if it is still running),
        score it and write it; once per episode, whoever calls first."""
        with self._guard:
            if self._concluded:
                return None
            self._concluded = True
        if self.ended is None:
            self.ended = reason or "the episode ended"
        return await conclude_episode(
            self.sim, reward=self.service.reward, writer=self.service, reason=reason
        )

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> SimgymObservation:
        """Blocking :meth:`reset_async` (the server awaits the async one)."""
        return run_sync(self.reset_async(seed=seed, episode_id=episode_id, **kwargs))

    def step(
        self, action: SimgymAction, timeout_s: float | None = None, **kwargs: Any
    ) -> SimgymObservation:
        """Blocking :meth:`step_async` (the server awaits the async one)."""
        return run_sync(self.step_async(action, timeout_s=timeout_s))

    @property
    def state(self) -> SimgymState:
        trajectory = self.sim.trajectory
        if trajectory is None:
            return SimgymState(domain=self.service.domain.name)
        return SimgymState(
            episode_id=trajectory.episode_id,
            step_count=len(trajectory.turns),
            domain=trajectory.domain,
            task_id=trajectory.task.id,
            instruction=trajectory.task.instruction,
            done=trajectory.done,
            truncated=trajectory.truncated,
            total_reward=trajectory.total_reward,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        backend = self.service.world_model.describe().get("backend", self.service.world_model.name)
        return EnvironmentMetadata(
            name=f"simgym-{self.service.domain.name}",
            description=f"{self.service.domain.description} Simulated by a language world "
            f"model ({backend}).",
            version=__version__,
        )

    def close(self) -> None:
        """The session is over: write its episode if one is still running."""
        if self._closed:
            return
        self._closed = True
        self.service.live.discard(self)
        if not self._concluded:
            # OpenEnv calls close() from a worker thread (sessions) or on its own loop
            # (HTTP requests); the background loop serves both.
            run_sync(self.conclude(SERVER_STOPPED if self.service.stopping else SESSION_ENDED))


# -- the app and the server -------------------------------------------------------------------


def create_openenv_app(
    domain: Domain | str,
    world_model: WorldModel | str | Any = "local",
    *,
    scenario: dict[str, Any] | BaseModel | None = None,
    task: Any = None,
    reward: Any = None,
    writer: Any = None,
    max_concurrent_envs: int = 64,
    session_timeout: float | None = 1800.0,
    token: str | None = None,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    keep_empty_episodes: bool = False,
    host: str = "127.0.0.1",
    allowed_origins: Sequence[str] = (),
    **options: Any,
) -> FastAPI:
    """A FastAPI app serving ``domain`` to OpenEnv clients, one world per session.

    ``world_model`` is a backend instance (shared as it is), a backend name, or anything
    with ``spec() -> (name, options)`` (the CLI's world-model options); a backend built
    here is closed when the app shuts down. ``options`` are :class:`SimEnv` options
    (``max_turns``, ``seed``, ``instructions``, ...) and, for a named backend, its options
    (``base_url``, ``model``, ...). ``session_timeout``: seconds an idle session is kept
    (its episode is then written); ``None`` keeps it forever. ``token``: every HTTP request
    and WebSocket must carry it (``Authorization: Bearer TOKEN``, or ``user:TOKEN@`` in the
    URL for OpenEnv's own clients). ``max_message_bytes`` bounds each request body and
    WebSocket message (a larger one is refused: HTTP 413, or an error message on the
    WebSocket, whose session goes on). ``keep_empty_episodes``: see :class:`SimgymService`.
    ``host`` is where the app will listen: on loopback a request must name this machine
    in its ``Host`` (DNS rebinding); any request or WebSocket that carries an ``Origin``
    must come from the server's own origin or one of ``allowed_origins``
    (:class:`~simgym.integrations.http_guard.OriginGuard`).
    """
    if max_message_bytes < 1:
        raise SimgymError(f"max_message_bytes must be at least 1, not {max_message_bytes}")
    env_options = {k: v for k, v in options.items() if k in _ENV_OPTIONS}
    backend_options = {k: v for k, v in options.items() if k not in _ENV_OPTIONS}
    backend, owned = _backend(world_model, backend_options)
    try:
        service = SimgymService(
            domain,
            backend,
            scenario=scenario,
            task=task,
            reward=reward,
            writer=writer,
            keep_empty_episodes=keep_empty_episodes,
            **env_options,
        )
        try:
            config = ConcurrencyConfig(
                max_concurrent_envs=max_concurrent_envs, session_timeout=session_timeout
            )
        except ValidationError as exc:
            raise SimgymError(f"invalid session settings: {exc}") from None
    except BaseException:
        if owned:
            run_sync(backend.aclose())
        raise
    app = create_fastapi_app(
        functools.partial(SimgymEnvironment, service),
        SimgymAction,
        SimgymObservation,
        concurrency_config=config,
    )

    async def stop() -> None:
        await service.aclose(SERVER_STOPPED)
        if owned:
            await backend.aclose()

    app.router.on_shutdown.append(stop)
    app.add_middleware(_QuietDisconnects)
    app.add_middleware(_MessageGuard, max_bytes=max_message_bytes)
    if token is not None:  # nothing is read before the caller is known
        app.add_middleware(BearerAuth, token=token)
    # outermost: another site's page is refused before anything else answers it
    app.add_middleware(OriginGuard, loopback=is_loopback(host), allowed_origins=allowed_origins)
    app.state.simgym = service
    return app


def serve_openenv(
    domain: str,
    *,
    world_model: WorldModel | str | Any = "local",
    scenario: dict[str, Any] | BaseModel | None = None,
    task: Any = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    out: str | Path | None = None,
    max_turns: int = 30,
    reward: Any = None,
    env_options: dict[str, Any] | None = None,
    max_concurrent_envs: int = 64,
    session_timeout: float | None = 1800.0,
    token: str | None = None,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    keep_empty_episodes: bool = False,
    on_ready: Callable[[str], None] | None = None,
    allowed_origins: Sequence[str] = (),
    **options: Any,
) -> None:
    """Serve ``domain`` to OpenEnv clients until SIGINT/SIGTERM; every episode is appended
    to ``out`` (JSONL). ``port=0`` picks a free port; ``on_ready(url)`` hears the address
    once the socket is bound (default: a line on stderr). ``env_options`` and ``options``
    are as for :func:`create_openenv_app`; ``env_options["max_turns"]`` wins over
    ``max_turns``. Listening beyond loopback needs a ``token``."""
    import uvicorn

    require_token_off_loopback(host, token)
    try:
        sock = socket.create_server((host, port), family=_family(host))
    except OSError as exc:
        raise SimgymError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    writer = TrajectoryWriter(out) if out is not None else None
    try:
        app = create_openenv_app(
            domain,
            world_model,
            scenario=scenario,
            task=task,
            reward=reward,
            writer=writer,
            max_concurrent_envs=max_concurrent_envs,
            session_timeout=session_timeout,
            token=token,
            max_message_bytes=max_message_bytes,
            keep_empty_episodes=keep_empty_episodes,
            host=host,
            allowed_origins=allowed_origins,
            **{"max_turns": max_turns, **(env_options or {}), **options},
        )
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{sock.getsockname()[1]}"
        if on_ready is None:
            where = f"; episodes go to {out}" if out is not None else ""
            print(f"simgym: {domain} world as an OpenEnv server on {url}{where}", file=sys.stderr)
        else:
            on_ready(url)
        # A client that never lets go would otherwise hold shutdown (and the episodes).
        config = uvicorn.Config(
            app,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=5,
            # Refuse an oversized WebSocket frame before buffering it (the app's own check
            # answers the rest); some room for the envelope around the message.
            ws_max_size=max_message_bytes + 65536,
        )
        _stopping_server(config, app.state.simgym).run(sockets=[sock])
    finally:
        sock.close()
        if writer is not None:
            writer.close()


# -- helpers ------------------------------------------------------------------------------


def _stopping_server(config: Any, service: SimgymService) -> Any:
    """uvicorn's server, telling the service it is stopping as soon as a signal arrives.

    uvicorn closes the WebSockets before the app's shutdown hook runs, and each closed
    session writes its open episode; without this they would say the session ended when
    the server was stopped."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            service.stopping = True
            super().handle_exit(sig, frame)

    return Server(config)


class _MessageGuard:
    """ASGI middleware: bounds every request body and WebSocket message, and makes
    OpenEnv's WebSocket validation errors say what was wrong.

    openenv-core answers an invalid WebSocket message with ``message: "Invalid message"``
    and the details in ``errors``, but its ``EnvClient`` shows only ``message`` and
    ``code``; the details are moved into ``message``."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _http(self, scope: Any, receive: Any, send: Any) -> None:
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(send)
            return
        # A body without a length (chunked) is read here, up to the limit, and replayed.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._too_large(send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, send: Any) -> None:
        await send_json_error(send, 413, f"request too large: the limit is {self.max_bytes} bytes")

    async def _websocket(self, scope: Any, receive: Any, send: Any) -> None:
        async def bounded_receive() -> Any:
            while True:
                message = await receive()
                if message["type"] != "websocket.receive":
                    return message
                size = len(message.get("bytes") or b"") + len((message.get("text") or "").encode())
                if size <= self.max_bytes:
                    return message
                # Refused like any invalid message: the session and its episode go on.
                await send(
                    {
                        "type": "websocket.send",
                        "text": json.dumps(
                            {
                                "type": "error",
                                "data": {
                                    "message": f"message too large ({size} bytes); the "
                                    f"limit is {self.max_bytes} bytes",
                                    "code": "VALIDATION_ERROR",
                                },
                            }
                        ),
                    }
                )

        async def explained_send(message: Any) -> None:
            if message["type"] == "websocket.send" and "VALIDATION_ERROR" in (
                message.get("text") or ""
            ):
                message = {**message, "text": _explained(message["text"])}
            await send(message)

        await self.app(scope, bounded_receive, explained_send)


def _explained(text: str) -> str:
    """An OpenEnv validation error whose ``message`` carries its ``errors``."""
    try:
        reply = json.loads(text)
        data = reply["data"]
        errors = data.get("errors") or []
    except (ValueError, KeyError, TypeError, AttributeError):
        return text
    if not errors or not isinstance(errors, list):
        return text
    parts = []
    for error in errors[:5]:
        if not isinstance(error, dict):
            continue
        where = ".".join(str(p) for p in error.get("loc") or ())
        parts.append(f"{where}: {error.get('msg')}" if where else str(error.get("msg")))
    data["message"] = f"{data.get('message') or 'Invalid message'}: {'; '.join(parts)}"
    return json.dumps(reply)


class _BadRequest(HTTPException):
    """A reset the client got wrong: HTTP 400 over HTTP, an error message over WebSocket."""

    def __init__(self, message: str) -> None:
        super().__init__(status_code=400, detail=message)

    def __str__(self) -> str:
        return str(self.detail)


class _QuietDisconnects:
    """openenv-core closes a session's WebSocket after the client has already gone and
    lets the resulting disconnect escape as an "Exception in ASGI application" traceback;
    the session was over and its episode written, so it is not an error."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            if scope.get("type") != "websocket":
                raise


def _backend(world_model: Any, options: dict[str, Any]) -> tuple[WorldModel, bool]:
    """The backend and whether it was built here (and so is closed here)."""
    if isinstance(world_model, str):
        return create_world_model(world_model, **options), True
    spec = getattr(world_model, "spec", None)
    if callable(spec) and not hasattr(world_model, "predict"):
        name, spec_options = spec()
        return create_world_model(name, **{**spec_options, **options}), True
    return create_world_model(world_model, **options), False


def _read_text(domain: Domain, scenario: BaseModel, text: str) -> Action | str:
    """A typed action: JSON goes to SimEnv as it is (it reports its own parse errors);
    anything else is the domain's short form. Raises :class:`ActionError`."""
    if text.strip()[:1] in ("{", "["):
        return text
    try:
        return domain.parse_input(text, scenario)
    except ValueError as exc:  # ActionError, and shlex's unclosed quotes
        raise ActionError(str(exc)) from None


def _observation(result: StepResult) -> SimgymObservation:
    seen = result.observation
    answered = bool(seen.metadata.get("final_answer"))
    text, error, info = seen.text, seen.error, dict(result.info)
    if info.get("error_type") == "world_model":
        # The world model's failure may name its URL: the agent sees what happened, the
        # trajectory keeps the whole message.
        text, error = agent_safe(text), agent_safe(error or "")
        info["error"] = agent_safe(str(info.get("error", "")))
    return SimgymObservation(
        text=text,
        kind="answer" if answered else seen.kind,
        error=error,
        turn=int(result.info.get("turn", 0)),
        truncated=result.truncated,
        done=result.done or result.truncated,
        reward=result.reward,
        info=info,
    )


def _refusal(message: str) -> SimgymObservation:
    return SimgymObservation(
        text=f"[simgym error] {message}", kind="error", error=message, done=True
    )


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
