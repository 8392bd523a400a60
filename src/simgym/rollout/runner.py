"""Rollouts: an agent acting in simulated environments over a task set, many at once.

``rollout(tasks, agent=..., world_model=...)`` expands each task into ``group_size``
episodes (a GRPO group: same task, same scenario seed, so the world answers the same
action the same way), runs them with at most ``concurrency`` in flight, scores each
finished episode with a reward, and appends it to a JSONL file as it ends. A rerun with
the same output skips the episodes already written (by task id and sample), so a crash
costs only what was in flight, and nothing is written twice.

Where the episodes run is an :class:`Executor`'s business: ``local`` runs them on this
event loop, ``ray`` spreads them over a Ray cluster (:mod:`simgym.rollout.ray_executor`).
Every piece can be given by name and options (:class:`RolloutConfig`), which is what lets
an executor rebuild them on another machine.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from simgym.agents import create_agent
from simgym.agents.base import Agent, AgentError, AgentSession, EpisodeView
from simgym.core.domain import get_domain
from simgym.core.env import SimEnv
from simgym.core.errors import SimgymError
from simgym.core.sync import run_sync
from simgym.core.types import Task, Trajectory
from simgym.core.worldmodel import WorldModel, create_world_model
from simgym.rewards import Reward, build_reward

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
    max_turns: int = Field(30, ge=1)
    max_agent_tokens: int | None = Field(None, ge=1)
    seed: int | None = None
    env_options: dict[str, Any] = Field(default_factory=dict)
    # for the executor (ray: num_workers, address, num_cpus, ...); the local one takes none
    executor_options: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to run: the task, its sample index in the group, and the seed."""

    task: Task
    sample: int | None
    seed: int

    @property
    def key(self) -> str:
        return self.task.id if self.sample is None else f"{self.task.id}#{self.sample}"


def plan_episodes(
    tasks: Iterable[Task], group_size: int = 1, seed: int | None = None
) -> list[EpisodeJob]:
    """Expand tasks into episodes. A group's episodes share one seed, derived from the
    task id (stable across reruns and machines) plus the base ``seed``."""
    jobs = []
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise SimgymError(f"task id {task.id!r} appears twice; ids must be unique")
        seen.add(task.id)
        task_seed = (seed or 0) + int(hashlib.sha1(task.id.encode()).hexdigest()[:7], 16)
        if group_size == 1:
            jobs.append(EpisodeJob(task, None, task_seed))
        else:
            jobs.extend(EpisodeJob(task, i, task_seed) for i in range(group_size))
    return jobs


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
            session = await self.agent.start(_view(env, job.task))
            await self._play(env, session, observation.text)
        except AgentError as exc:
            await env.close(reason=f"agent failed: {exc}")
        finally:
            await env.close(reason="the rollout stopped before the episode ended")
        trajectory = env.trajectory
        assert trajectory is not None
        trajectory.agent = self.agent.describe()
        trajectory.group_id = job.task.id if job.sample is not None else None
        trajectory.sample = job.sample
        if session is not None:
            trajectory.agent_messages = list(session.messages)
        await self._score(trajectory)
        return trajectory

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
                await env.close(reason=f"agent token budget spent ({tokens} tokens)")
                return
            observation = result.observation.text

    async def _score(self, trajectory: Trajectory) -> None:
        try:
            result = await self.reward.score(trajectory)
        except Exception as exc:  # a broken judge must not lose the episode
            trajectory.metrics["reward_error"] = f"{type(exc).__name__}: {exc}"
            return
        trajectory.total_reward += result.value
        trajectory.reward_parts = dict(result.parts) or {self.reward.name: result.value}
        if result.details:
            trajectory.metrics["reward_details"] = result.details


def _view(env: SimEnv, task: Task) -> EpisodeView:
    """What the agent may see: never the scenario itself."""
    domain, scenario = env.domain, env.scenario
    return EpisodeView(
        domain=domain.name,
        instruction=task.instruction,
        tools=domain.agent_tools(scenario),
        action_hint=domain.action_hint_for(scenario),
        task_id=task.id,
        parse_input=partial(domain.parse_input, scenario=scenario),
    )


class Executor(Protocol):
    """Runs episode jobs somewhere and reports each finished trajectory to ``on_done``
    (called on the caller's event loop, in completion order)."""

    async def run(self, jobs: list[EpisodeJob], on_done: OnDone) -> None: ...


class LocalExecutor:
    """Episodes as tasks on the running event loop, at most ``concurrency`` at a time."""

    def __init__(self, runner: EpisodeRunner, concurrency: int = 8) -> None:
        self.runner = runner
        self.concurrency = concurrency

    async def run(self, jobs: list[EpisodeJob], on_done: OnDone) -> None:
        gate = asyncio.Semaphore(self.concurrency)

        async def one(job: EpisodeJob) -> None:
            async with gate:
                trajectory = await self.runner.run(job)
            on_done(trajectory)

        # A task group cancels the other episodes if one raises, so none keeps running
        # after the caller has closed its writer; the caller sees that first error itself.
        try:
            async with asyncio.TaskGroup() as group:
                for job in jobs:
                    group.create_task(one(job))
        except ExceptionGroup as failed:
            raise failed.exceptions[0]  # noqa: B904 (its own traceback is the useful one)


async def arollout(
    tasks: Iterable[Task | dict[str, Any]],
    *,
    agent: str | Agent = "scripted",
    world_model: str | WorldModel = "local",
    reward: Any = None,
    out: str | os.PathLike[str] | None = None,
    resume: bool = True,
    executor: str | Executor = "local",
    on_done: OnDone | None = None,
    on_start: Callable[[int], None] | None = None,
    agent_options: dict[str, Any] | None = None,
    world_model_options: dict[str, Any] | None = None,
    **settings: Any,
) -> list[Trajectory]:
    """Run an agent over tasks in simulated environments; return the new trajectories.

    ``agent`` / ``world_model`` / ``reward`` are names (with ``*_options``) or built
    instances; ``settings`` are :class:`RolloutConfig` fields (``group_size``,
    ``concurrency``, ``max_turns``, ``max_agent_tokens``, ``seed``, ``env_options``).
    With ``out``, each episode is appended as it finishes and, with ``resume``, episodes
    already there are skipped. ``on_start(n)`` hears how many episodes will run;
    ``on_done(trajectory)`` hears each as it ends. ``executor="ray"`` needs names, not
    instances.
    """
    from simgym.core.trajectories import TrajectoryWriter, finished_keys

    config = RolloutConfig(
        world_model=world_model if isinstance(world_model, str) else "instance",
        world_model_options=world_model_options or {},
        agent=agent if isinstance(agent, str) else "instance",
        agent_options=agent_options or {},
        reward=reward if _is_spec(reward) else None,
        **settings,
    )
    task_list = [t if isinstance(t, Task) else Task.model_validate(t) for t in tasks]
    for task in task_list:
        if not task.domain:
            raise SimgymError(f"task {task.id!r} names no domain")
        get_domain(task.domain)  # fail before any episode on an unknown domain
    jobs = plan_episodes(task_list, config.group_size, config.seed)
    if out is not None and resume:
        done = finished_keys(out)
        jobs = [job for job in jobs if job.key not in done]

    if on_start is not None:
        on_start(len(jobs))
    results: list[Trajectory] = []
    writer = TrajectoryWriter(out) if out is not None else None

    def finished(trajectory: Trajectory) -> None:
        if writer is not None:
            writer.write(trajectory)
        results.append(trajectory)
        if on_done is not None:
            on_done(trajectory)

    runner: EpisodeRunner | None = None
    try:
        if isinstance(executor, str) and executor == "local":
            runner = EpisodeRunner(
                world_model=create_world_model(world_model, **config.world_model_options),
                agent=create_agent(agent, **config.agent_options),
                reward=reward if _is_reward(reward) else build_reward(config.reward),
                max_turns=config.max_turns,
                max_agent_tokens=config.max_agent_tokens,
                env_options=config.env_options,
            )
            chosen: Executor = LocalExecutor(runner, config.concurrency)
        elif isinstance(executor, str) and executor == "ray":
            if "instance" in (config.world_model, config.agent) or _is_reward(reward):
                raise SimgymError(
                    "the ray executor rebuilds the world model, agent and reward on its "
                    "workers: give them by name and options, not as instances"
                )
            from simgym.rollout.ray_executor import RayExecutor

            chosen = RayExecutor(config)
        elif isinstance(executor, str):
            raise SimgymError(f"unknown executor {executor!r}; use 'local' or 'ray'")
        else:
            chosen = executor
        await chosen.run(jobs, finished)
    finally:
        if runner is not None:  # close only what was built here, not the caller's instances
            for built, piece in ((world_model, runner.world_model), (agent, runner.agent)):
                if isinstance(built, str) and hasattr(piece, "aclose"):
                    await piece.aclose()
        if writer is not None:
            writer.close()
    return results


def rollout(tasks: Iterable[Task | dict[str, Any]], **kwargs: Any) -> list[Trajectory]:
    """Blocking :func:`arollout`."""
    return run_sync(arollout(list(tasks), **kwargs))


def _is_reward(value: Any) -> bool:
    return hasattr(value, "score") and hasattr(value, "name")


def _is_spec(value: Any) -> bool:
    return value is None or isinstance(value, str | dict | list)


def load_tasks(paths: Iterable[str | os.PathLike[str]], domain: str | None = None) -> list[Task]:
    """Tasks from JSONL task files and YAML/JSON episode files (see
    :func:`simgym.rollout.scripted.load_specs`); their scripted actions are dropped."""
    from simgym.rollout.scripted import load_specs

    return [spec.task for spec in load_specs([Path(p) for p in paths], domain)]
