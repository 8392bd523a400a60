"""Score an evaluation's stored episodes again, with their tasks' current rewards.

A check found wrong after the run (a lookup that glued ``KEY=value`` into one word, a count
taken from inside a timestamp) is fixed in the task generator; :func:`rescore` then applies
the fixed checks to the episodes already played instead of playing them again. Both sides
score from what the episode stored (the answer, the final observation, the final files or
database), so the new numbers are the ones a fresh run of the same draws would give. Each
changed episode keeps its old reward in ``metrics["rescored_from"]``; the report is rebuilt
from the rescored episodes and says what changed under ``"rescored"``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simgym.bench.sim2real.evaluate import REPORT, episodes_of, gap, summarize
from simgym.core.errors import SimgymError
from simgym.core.files import write_atomic
from simgym.core.sync import run_sync
from simgym.core.types import Task, Trajectory
from simgym.rewards import build_reward
from simgym.rollout.episode import score_trajectory


async def arescore(out_dir: str | Path, tasks: Iterable[Task]) -> dict[str, Any]:
    """Score every episode in ``out_dir/{backend}.jsonl`` of a task in ``tasks`` with that
    task's reward as it is now; rewrite the files (unreadable lines kept as they were) and
    ``report.json``; return the new report."""
    out = Path(out_dir)
    report_path = out / REPORT
    if not report_path.is_file():
        raise SimgymError(f"{report_path} not found: no evaluation was stored in {out}")
    report = json.loads(report_path.read_text(encoding="utf-8"))
    current = {task.id: task for task in tasks}
    missing = [i for i in report.get("tasks", []) if i not in current]
    if missing:
        raise SimgymError(
            f"{out} evaluated {len(report['tasks'])} tasks and {len(missing)} of them "
            f"(first {missing[0]!r}) are not among the {len(current)} given: give them all"
        )
    evaluated = [current[i] for i in report["tasks"]]
    reward = build_reward(None)  # each task's own reward spec
    changed: dict[str, int] = {}
    for backend, cell in report["backends"].items():
        path = out / f"{backend}.jsonl"
        lines = path.read_bytes().splitlines(keepends=True)
        kept: list[bytes] = []
        changed[backend] = 0
        for raw in lines:
            episode = _episode(raw)
            task = current.get(episode.task.id) if episode is not None else None
            if episode is None or task is None:
                kept.append(raw if raw.endswith(b"\n") else raw + b"\n")
                continue
            if await _score_again(episode, task, reward):
                changed[backend] += 1
            kept.append(episode.model_dump_json().encode("utf-8") + b"\n")
        write_atomic(path, b"".join(kept))
        episodes = episodes_of(path, evaluated, report["k"], report.get("policy", {}))
        report["backends"][backend] = summarize(episodes, cell.get("seconds"))
    if "real" in report["backends"] and "sim" in report["backends"]:
        report["gap"] = gap(report["backends"]["sim"], report["backends"]["real"])
    report["rescored"] = {"at": time.time(), "changed": changed}
    write_atomic(report_path, (json.dumps(report, indent=2) + "\n").encode("utf-8"))
    return report


def rescore(out_dir: str | Path, tasks: Iterable[Task]) -> dict[str, Any]:
    """Blocking :func:`arescore`."""
    return run_sync(arescore(out_dir, list(tasks)))


def _episode(raw: bytes) -> Trajectory | None:
    if not raw.strip():
        return None
    try:
        return Trajectory.model_validate_json(raw)
    except ValidationError:
        return None


async def _score_again(episode: Trajectory, task: Task, reward: Any) -> bool:
    """Put ``task`` on the episode and score it afresh; True when its reward changed."""
    before = episode.total_reward
    episode.task = task
    # the turns' own rewards stay; only the end-of-episode score is replaced
    episode.total_reward = sum(turn.reward for turn in episode.turns)
    episode.reward_parts = {}
    for stale in ("reward_error", "reward_details"):
        episode.metrics.pop(stale, None)
    await score_trajectory(episode, reward)
    if episode.total_reward == before:
        return False
    episode.metrics.setdefault("rescored_from", before)
    return True
