"""One verl trajectory's simulated world: opened on its first call, ended (answered, scored,
written) once, whoever ends it first."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from simgym.core.env import SimEnv
from simgym.core.errors import EpisodeStateError, SimgymError
from simgym.core.types import StepResult, Task, Trajectory, new_id
from simgym.core.worldmodel import WorldModel, create_world_model, require_shareable
from simgym.integrations.verl.settings import (
    AGENT_LOOP,
    NO_ANSWER,
    PLAIN_LOOP,
    WORLD_ATTR,
    VerlToolSettings,
)
from simgym.perturb import Perturbations, load_perturbations
from simgym.rollout.episode import conclude_episode, episode_seed

logger = logging.getLogger("simgym.integrations.verl")


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


_TURN_MARKERS = re.compile(r"<\|[A-Za-z0-9_]+\|>|</s>|<end_of_turn>")


def _plan(settings: VerlToolSettings) -> Perturbations | None:
    return None if settings.perturbations is None else load_perturbations(settings.perturbations)


class World:
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
            perturbations=_plan(settings),
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
            result = await episode_reward(self.settings).score(trajectory)
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

            def annotate(trajectory: Trajectory) -> None:
                trajectory.agent = {"name": "verl", "agent_loop": self.loop_name}
                trajectory.group_id = self.group_id
                if self.conversation is not None:
                    trajectory.agent_messages = _plain(self.conversation)

            await conclude_episode(
                self.env,
                reward=episode_reward(self.settings),
                writer=_writer(self.settings.trajectories),
                reason=reason,
                answer=answer,
                annotate=annotate,
            )
            if "reward_error" in trajectory.metrics:
                logger.warning(
                    "simgym: scoring episode %s failed: %s",
                    trajectory.episode_id,
                    trajectory.metrics["reward_error"],
                )
            self.ended = trajectory
            return trajectory


WORLDS: dict[str, World] = {}  # open worlds of this process, by trajectory key


_PENDING: set[asyncio.Task] = set()  # worlds being ended after verl dropped their trajectory


def open_world(
    agent_data: Any, settings: VerlToolSettings, task: Task, *, loop_name: str = AGENT_LOOP
) -> World:
    """Open a world for the trajectory that ``agent_data`` (verl's per-trajectory state)
    stands for, and tie its end to that object: when verl drops it, the world is ended
    (scored and written) unless :func:`finish_trajectory` ended it first."""
    if getattr(agent_data, WORLD_ATTR, None) in WORLDS:
        raise SimgymError("this trajectory already has a simulated world")
    world = World(new_id("verl-"), settings, task, loop_name)
    world.conversation = getattr(agent_data, "messages", None)
    WORLDS[world.key] = world
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
    world = WORLDS.pop(getattr(agent_data, WORLD_ATTR, None) or "", None)
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
    world = WORLDS.pop(key, None)
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


async def _end_quietly(world: World) -> None:
    try:
        await world.end(None, PLAIN_LOOP)
    except Exception:  # a finalizer's error has nowhere to go but the log
        logger.exception("simgym: ending the world of a dropped verl trajectory failed")


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


def episode_reward(settings: VerlToolSettings) -> Any:
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


def task_from(options: Mapping[str, Any] | None, domain: str) -> Task | None:
    """The task in a tool's create kwargs (a Task, its dict, or its JSON), if any."""
    raw = (options or {}).get("task")
    if raw is None:
        return None
    return Task.coerce(raw, domain, text="json", bind=True, invalid="invalid task in tools_kwargs")


def fallback_task(domain: str, messages: Sequence[Mapping[str, Any]] | None) -> Task:
    """A row without a task: the instruction is the conversation's first user message."""
    for message in messages or []:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return Task(instruction=message["content"], domain=domain)
    return Task(domain=domain)


def _plain(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """verl's conversation as plain JSON data (anything else becomes its text)."""
    return json.loads(json.dumps(list(messages), ensure_ascii=False, default=str))
