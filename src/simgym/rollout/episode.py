"""What every way of running an episode shares: which episodes a task set makes, the
seed each gets, and how an episode ends (:func:`conclude_episode`: finish or close it,
score it, write it).

Rollouts, the Gymnasium and OpenEnv wrappers and the verl and TRL adapters all end an
episode the same way, so a trajectory means the same thing whichever of them wrote it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simgym.core.errors import SimgymError
from simgym.core.types import Task, Trajectory

if TYPE_CHECKING:
    from simgym.core.env import SimEnv
    from simgym.rewards import Reward, RewardResult


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to run: the task, its sample index in the group, and the seed."""

    task: Task
    sample: int | None
    seed: int

    @property
    def key(self) -> str:
        return self.task.id if self.sample is None else f"{self.task.id}#{self.sample}"


def episode_seed(task: Task, base: int | None = None) -> int:
    """A task's scenario seed: from its id (stable across reruns and machines) plus
    ``base``, so every episode of a task, whoever runs it, sees the same world."""
    return (base or 0) + int(hashlib.sha1(task.id.encode()).hexdigest()[:7], 16)


def plan_episodes(
    tasks: Iterable[Task], group_size: int = 1, seed: int | None = None
) -> list[EpisodeJob]:
    """Expand tasks into episodes; a group's episodes share its task's seed."""
    jobs = []
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise SimgymError(f"task id {task.id!r} appears twice; ids must be unique")
        seen.add(task.id)
        task_seed = episode_seed(task, seed)
        if group_size == 1:
            jobs.append(EpisodeJob(task, None, task_seed))
        else:
            jobs.extend(EpisodeJob(task, i, task_seed) for i in range(group_size))
    return jobs


async def score_trajectory(
    trajectory: Trajectory,
    reward: Reward,
    *,
    main: bool = True,
    errors_by_name: bool = False,
) -> RewardResult | None:
    """Score a finished episode and record it on the trajectory; ``None`` if the reward
    raised, which is recorded in ``metrics`` instead (a broken judge must not lose the
    episode or stop training).

    The ``main`` reward adds to ``total_reward`` and its parts (or its value, under its
    name) to ``reward_parts``; another reward only records its value as its own part.
    ``errors_by_name`` keeps failures per reward (``metrics["reward_errors"][name]``),
    for callers that score several rewards, rather than as ``metrics["reward_error"]``.
    """
    try:
        result = await reward.score(trajectory)
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        if errors_by_name:
            trajectory.metrics.setdefault("reward_errors", {})[reward.name] = message
        else:
            trajectory.metrics["reward_error"] = message
        return None
    if not main:
        trajectory.reward_parts[reward.name] = result.value
        return result
    trajectory.total_reward += result.value
    trajectory.reward_parts.update(dict(result.parts) or {reward.name: result.value})
    if result.details:
        trajectory.metrics["reward_details"] = result.details
    return result


async def conclude_episode(
    env: SimEnv,
    *,
    reward: Reward | None = None,
    writer: Any = None,
    reason: str | None = None,
    answer: str | None = None,
    annotate: Callable[[Trajectory], None] | None = None,
) -> RewardResult | None:
    """End ``env``'s episode the one way every runner and adapter does: finish it with
    ``answer`` when it is still running and there is one, else close it (as truncated with
    ``reason`` if it was still running; an answer given after the end is kept on the
    trajectory); let ``annotate`` add who played it; score it with ``reward``; write it
    with ``writer`` (anything with ``write(trajectory)``). Returns the reward's result, or
    ``None`` without a reward or when scoring failed (recorded in ``metrics``)."""
    trajectory = env.trajectory
    if trajectory is None:
        raise SimgymError("no episode to conclude: call reset() first")
    over = trajectory.done or trajectory.truncated
    if answer is not None and not over:
        await env.finish(answer)
    else:
        await env.close(None if over else reason)
        if answer is not None and trajectory.answer is None:
            trajectory.answer = answer  # a reply after a final action or the turn limit
    if annotate is not None:
        annotate(trajectory)
    result = None if reward is None else await score_trajectory(trajectory, reward)
    if writer is not None:
        writer.write(trajectory)
    return result
