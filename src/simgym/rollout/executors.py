"""Where episodes run: the pieces built once per process (:class:`EpisodeRunner`), the
:class:`Executor` protocol, and the local executor.

Kept apart from :mod:`simgym.rollout.runner` so that executors elsewhere (the Ray one)
build on these without importing the runner that chooses between them.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from simgym.agents import create_agent
from simgym.agents.base import Agent, AgentError, AgentSession, EpisodeView
from simgym.core.env import SimEnv
from simgym.core.errors import SimgymError
from simgym.core.types import Task, Trajectory
from simgym.core.worldmodel import WorldModel, create_world_model
from simgym.rewards import Reward, build_reward
from simgym.rollout.episode import BUDGET_SPENT, EpisodeJob, conclude_episode

OnDone = Callable[[Trajectory], None]


class RolloutConfig(BaseModel):
    """How to run episodes, by name and options, so it can travel to other machines."""

    model_config = ConfigDict(extra="forbid")

    world_model: str = "local"
    world_model_options: dict[str, Any] = Field(default_factory=dict)
    agent: str = "scripted"
    agent_options: dict[str, Any] = Field(default_factory=dict)
    reward: Any = None  # a reward spec for build_reward; None: each task's own reward
    group_size: int = Field(1, ge=1)
    concurrency: int = Field(8, ge=1)
    # at most this many samples of one GRPO group in flight (None: no bound of its own);
    # a sample held back waits without taking one of the ``concurrency`` slots
    group_concurrency: int | None = Field(None, ge=1)
    max_turns: int = Field(30, ge=1)
    max_agent_tokens: int | None = Field(None, ge=1)
    seed: int | None = None
    env_options: dict[str, Any] = Field(default_factory=dict)
    # for the executor (ray: num_workers, address, num_cpus, ...); the local one takes none
    executor_options: dict[str, Any] = Field(default_factory=dict)


class EpisodeRunner:
    """Runs one episode at a time (many concurrently) with built pieces: a shared world
    model, an agent and a reward. Executors hold one per process."""

    def __init__(
        self,
        *,
        world_model: WorldModel,
        agent: Agent,
        reward: Reward,
        max_turns: int = 30,
        max_agent_tokens: int | None = None,
        env_options: dict[str, Any] | None = None,
    ) -> None:
        self.world_model = world_model
        self.agent = agent
        self.reward = reward
        self.max_turns = max_turns
        self.max_agent_tokens = max_agent_tokens
        self.env_options = env_options or {}

    @classmethod
    def from_config(cls, config: RolloutConfig) -> EpisodeRunner:
        return cls(
            world_model=create_world_model(config.world_model, **config.world_model_options),
            agent=create_agent(config.agent, **config.agent_options),
            reward=build_reward(config.reward),
            max_turns=config.max_turns,
            max_agent_tokens=config.max_agent_tokens,
            env_options=config.env_options,
        )

    async def run(self, job: EpisodeJob) -> Trajectory:
        """Play one episode to its end, score it, and return its trajectory."""
        domain = job.task.domain
        if not domain:
            raise SimgymError(f"task {job.task.id!r} names no domain")
        env = SimEnv(domain, self.world_model, max_turns=self.max_turns, **self.env_options)
        session: AgentSession | None = None
        try:
            observation = await env.reset(job.task, seed=job.seed)
            session = await self.agent.start(agent_view(env, job.task, job.sample))
            await self._play(env, session, observation.text)
        except AgentError as exc:
            await env.close(reason=f"agent failed: {exc}")
        finally:
            await env.close(reason="the rollout stopped before the episode ended")

        def annotate(trajectory: Trajectory) -> None:
            trajectory.agent = self.agent.describe()
            trajectory.group_id = job.task.id if job.sample is not None else None
            trajectory.sample = job.sample
            if session is not None:
                trajectory.agent_messages = list(session.messages)

        await conclude_episode(env, reward=self.reward, annotate=annotate)
        assert env.trajectory is not None
        return env.trajectory

    async def _play(self, env: SimEnv, session: AgentSession, observation: str) -> None:
        tokens = 0
        while True:
            decision = await session.act(observation)
            if decision is None:  # the policy has nothing more to do (a script ran out)
                await env.close(reason=None)
                return
            tokens += decision.usage.total_tokens
            if decision.answer is not None:
                await env.finish(decision.answer)
                return
            result = await env.step(decision.action)
            if result.done or result.truncated:
                return
            if self.max_agent_tokens is not None and tokens >= self.max_agent_tokens:
                await env.close(reason=f"{BUDGET_SPENT} ({tokens} tokens)")
                return
            observation = result.observation.text


def agent_view(env: SimEnv, task: Task, sample: int | None = None) -> EpisodeView:
    """What the agent may see: never the scenario itself."""
    domain, scenario = env.domain, env.scenario
    return EpisodeView(
        domain=domain.name,
        instruction=task.instruction,
        tools=domain.agent_tools(scenario),
        action_hint=domain.action_hint_for(scenario),
        task_id=task.id,
        sample=sample,
        parse_input=partial(domain.parse_input, scenario=scenario),
    )


class Executor(Protocol):
    """Runs episode jobs somewhere and reports each finished trajectory to ``on_done``
    (called on the caller's event loop, in completion order)."""

    async def run(self, jobs: list[EpisodeJob], on_done: OnDone) -> None: ...


_quiet_depth = 0  # rollouts inside quiet_gc now (they may overlap on one loop)


@contextlib.contextmanager
def quiet_gc(young: int = 50_000) -> Iterator[None]:
    """Fewer and shorter garbage-collection pauses while many episodes run.

    With a thousand episodes in flight, CPython's default thresholds ran a collection
    every 700 allocations and a full one whenever the heap grew by a quarter; the full
    ones stalled the event loop for up to a second each and took about a quarter of the
    driver's CPU. So: what exists before the run (imports, models, a trainer's heap) is
    frozen out of later collections, and the young generation is allowed ``young``
    objects before it is scanned. Both are restored afterwards. Nothing is collected
    first (a full collection of a trainer's heap can take longer than a short rollout):
    garbage that was already there waits until the run ends and is unfrozen.
    """
    global _quiet_depth
    before = gc.get_threshold()
    if _quiet_depth == 0:
        gc.freeze()
        gc.set_threshold(max(young, before[0]), *before[1:])
    _quiet_depth += 1
    try:
        yield
    finally:
        _quiet_depth -= 1
        if _quiet_depth == 0:
            gc.set_threshold(*before)
            gc.unfreeze()


class LocalExecutor:
    """Episodes as tasks on the running event loop, at most ``concurrency`` at a time and
    at most ``group_concurrency`` of one group (under :func:`quiet_gc`). Slots are handed
    out first come, first served (asyncio's semaphores wake waiters in order), so no
    episode starves however many wait."""

    def __init__(
        self, runner: EpisodeRunner, concurrency: int = 8, group_concurrency: int | None = None
    ) -> None:
        self.runner = runner
        self.concurrency = concurrency
        self.group_concurrency = group_concurrency

    async def run(self, jobs: list[EpisodeJob], on_done: OnDone) -> None:
        gate = asyncio.Semaphore(self.concurrency)
        groups: dict[str, asyncio.Semaphore] = {}

        def group_gate(job: EpisodeJob) -> contextlib.AbstractAsyncContextManager[Any]:
            if self.group_concurrency is None or job.sample is None:
                return contextlib.nullcontext()
            return groups.setdefault(job.task.id, asyncio.Semaphore(self.group_concurrency))

        async def one(job: EpisodeJob) -> None:
            async with group_gate(job), gate:
                trajectory = await self.runner.run(job)
            on_done(trajectory)

        # A task group cancels the other episodes if one raises, so none keeps running
        # after the caller has closed its writer; the caller sees that first error itself.
        try:
            with quiet_gc():
                async with asyncio.TaskGroup() as group:
                    for job in jobs:
                        group.create_task(one(job))
        except ExceptionGroup as failed:
            raise failed.exceptions[0]  # noqa: B904 (its own traceback is the useful one)
