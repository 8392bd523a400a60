"""Rollouts: an agent acting in simulated environments over a task set, many at once.

``rollout(tasks, agent=..., world_model=...)`` expands each task into ``group_size``
episodes (a GRPO group: same task, same scenario seed, so the world answers the same
action the same way), runs them with at most ``concurrency`` in flight, scores each
finished episode with a reward, and appends it to a JSONL file as it ends. A rerun with
the same output skips the episodes already written (by task id and sample), so a crash
costs only what was in flight, and nothing is written twice; an episode that errored (the
world model unreachable, the agent failing) is run again.

Where the episodes run is an :class:`Executor`'s business: ``local`` runs them on this
event loop, ``ray`` spreads them over a Ray cluster (:mod:`simgym.rollout.ray_executor`).
Every piece can be given by name and options (:class:`RolloutConfig`), which is what lets
an executor rebuild them on another machine.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from simgym.agents import create_agent
from simgym.agents.base import Agent
from simgym.core.domain import get_domain
from simgym.core.errors import SimgymError
from simgym.core.sync import run_sync
from simgym.core.types import Task, Trajectory
from simgym.core.worldmodel import WorldModel, create_world_model
from simgym.rewards import build_reward
from simgym.rollout.episode import EpisodeJob, plan_episodes, resume_keys
from simgym.rollout.executors import (
    EpisodeRunner,
    Executor,
    LocalExecutor,
    OnDone,
    RolloutConfig,
    agent_view,
)

_view = agent_view  # the old private name, still imported by tests

__all__ = [
    "EpisodeJob",
    "EpisodeRunner",
    "Executor",
    "LocalExecutor",
    "OnDone",
    "RolloutConfig",
    "arollout",
    "load_tasks",
    "plan_episodes",
    "rollout",
]


async def arollout(
    tasks: Iterable[Task | dict[str, Any]],
    *,
    agent: str | Agent = "scripted",
    world_model: str | WorldModel = "local",
    reward: Any = None,
    out: str | os.PathLike[str] | None = None,
    resume: bool = True,
    retry_errors: bool = True,
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
    ``concurrency``, ``group_concurrency``, ``max_turns``, ``max_agent_tokens``, ``seed``,
    ``env_options``).
    With ``out``, each episode is appended as it finishes and, with ``resume``, episodes
    already there are skipped, except those that errored (unless ``retry_errors`` is
    off; see :func:`~simgym.rollout.episode.resume_keys`). ``on_start(n)`` hears how many
    episodes will run; ``on_done(trajectory)`` hears each as it ends.
    ``executor="ray"`` needs names, not instances.
    """
    from simgym.core.trajectories import TrajectoryWriter

    config = RolloutConfig(
        world_model=world_model if isinstance(world_model, str) else "instance",
        world_model_options=world_model_options or {},
        agent=agent if isinstance(agent, str) else "instance",
        agent_options=agent_options or {},
        reward=reward if _is_spec(reward) else None,
        **settings,
    )
    task_list = [Task.coerce(t) for t in tasks]
    for task in task_list:
        if not task.domain:
            raise SimgymError(f"task {task.id!r} names no domain")
        get_domain(task.domain)  # fail before any episode on an unknown domain
    jobs = plan_episodes(task_list, config.group_size, config.seed)
    if out is not None and resume:
        done = resume_keys(out, retry_errors=retry_errors)
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
            chosen: Executor = LocalExecutor(runner, config.concurrency, config.group_concurrency)
        elif isinstance(executor, str) and executor == "ray":
            if "instance" in (config.world_model, config.agent) or _is_reward(reward):
                raise SimgymError(
                    "the ray executor rebuilds the world model, agent and reward on its "
                    "workers: give them by name and options, not as instances"
                )
            if config.group_concurrency is not None:
                raise SimgymError(
                    "group_concurrency bounds a group on one event loop; the ray executor "
                    "spreads a group over workers and does not take it"
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


def rollout(
    tasks: Iterable[Task | dict[str, Any]], *, event_loop: str | None = None, **kwargs: Any
) -> list[Trajectory]:
    """Blocking :func:`arollout`. ``event_loop="uvloop"`` (or ``SIMGYM_EVENT_LOOP``) runs it
    on a uvloop loop of its own (see :mod:`simgym.rollout.loops`); by default it runs on
    simgym's shared background loop.

    Args:
        tasks: the tasks (`Task` objects or dicts), each played `group_size` times.
        event_loop: `"uvloop"`, `"asyncio"` or None (the environment's choice).
        **kwargs: what `arollout` takes: `agent`, `agent_options`, `world_model`,
            `world_model_options`, `group_size`, `concurrency`, `max_turns`, `reward`,
            `out`, `executor`, ...

    Returns:
        The trajectories, one per episode.
    """
    from simgym.rollout.loops import loop_factory, run_on_loop

    factory = loop_factory(event_loop)
    if factory is not None:
        return run_on_loop(arollout(list(tasks), **kwargs), factory)
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
