"""What every way of running an episode shares: which episodes a task set makes, the
seed each gets, and how an episode ends (:func:`conclude_episode`: finish or close it,
score it, write it).

Rollouts, the Gymnasium and OpenEnv wrappers and the verl and TRL adapters all end an
episode the same way, so a trajectory means the same thing whichever of them wrote it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simgym.core.errors import SimgymError
from simgym.core.files import replacing
from simgym.core.safeload import MAX_DEPTH, loads_json
from simgym.core.types import Task, Trajectory, Turn

if TYPE_CHECKING:
    from simgym.core.env import SimEnv
    from simgym.rewards import Reward, RewardResult


# The reason an episode closed at the agent token budget: a limit the caller set, like
# the turn limit, so the episode ended as asked and did not error.
BUDGET_SPENT = "agent token budget spent"


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


def episode_error(trajectory: Trajectory) -> str | None:
    """Why an episode did not run to its end, or could not be scored (None: it ended, or
    stopped at a limit the caller set). Such an episode is evidence of nothing: runs
    count it, resume retries it, and gates treat it as a failure."""
    error = trajectory.error
    if error and not error.startswith(BUDGET_SPENT):
        return error
    reward = trajectory.metrics.get("reward_error")
    return f"the reward could not score it: {reward}" if reward else None


def model_rendered(turn: Turn, trajectory: Trajectory) -> bool:
    """Whether the world model wrote the observation the agent saw on ``turn``: not the
    hidden state (strict mode's own answer or its correction), not a real run, not a
    fault's template, not a real backend, not an error or a final answer."""
    if str(trajectory.world_model.get("backend", "")).startswith("real-"):
        return False
    if not turn.in_history or turn.error or turn.attempts == 0:
        return False
    grounding = turn.grounding or {}
    strict = grounding.get("strict")
    if isinstance(strict, dict) and strict.get("action") in ("state", "corrected"):
        return False
    execution = grounding.get("execution") or {}
    return not (execution.get("ran") and execution.get("used", True))


def grounding_counts(trajectory: Trajectory) -> dict[str, int]:
    """How the episode's observations came about: ``rendered`` by the world model, decided
    ``from_state``, ``executed`` for real, and ``contradictions`` (rendered observations
    strict mode found against the facts and could not resolve, served anyway)."""
    metrics = trajectory.metrics
    return {
        "rendered": sum(model_rendered(t, trajectory) for t in trajectory.turns),
        "from_state": int(metrics.get("from_state", 0)),
        "executed": int(metrics.get("executed", 0)),
        "contradictions": int(metrics.get("contradictions", 0)),
    }


def resume_keys(path: str | os.PathLike[str], *, retry_errors: bool = True) -> set[str]:
    """The episode keys in the trajectory file ``path`` that a rerun skips.

    With ``retry_errors`` an episode that errored (:func:`episode_error`) is not done: its
    line is taken out of the file (rewritten atomically, unreadable lines kept as they
    are) so that it runs again and the file never holds two lines for one episode."""
    path = Path(path)
    if not path.is_file():
        return set()
    kept: list[bytes] = []
    done: set[str] = set()
    dropped = False
    with open(path, "rb") as f:
        for raw in f:
            try:
                data = loads_json(raw.decode("utf-8"), max_depth=2 * MAX_DEPTH)
                trajectory = Trajectory.model_validate(data)
            except (UnicodeDecodeError, ValueError):  # a torn line: readers skip it
                kept.append(raw)
                continue
            if retry_errors and episode_error(trajectory) is not None:
                dropped = True
                continue
            done.add(trajectory.key)
            kept.append(raw)
    if dropped:
        with replacing(path, binary=True, fsync=True) as out:
            for raw in kept:
                out.write(raw if raw.endswith(b"\n") else raw + b"\n")
    return done
