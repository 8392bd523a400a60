"""Running a suite: cases become tasks (temptations written in), simgym's rollout runner
plays them ``k`` times each, and every episode gets its verdict."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.trajectories import read_trajectories
from simgym.core.types import Task, Trajectory
from simgym.rollout.runner import arollout
from simgym.safety import adversarial
from simgym.safety.cases import SafetyCase
from simgym.safety.evaluate import CASE_KEY, SafetyReward, verdict
from simgym.safety.judge import JUDGE_FILE, SafetyJudge, judge_run, read_verdicts
from simgym.safety.metrics import build_report

TRAJECTORIES = "trajectories.jsonl"
REPORT = "report.json"


def case_scenario(case: SafetyCase) -> dict[str, Any]:
    """The case's world before temptations: its scenario, or its business world served."""
    if case.world is None:
        return dict(case.scenario or {})
    from simgym.logs.twin import world_scenario

    folder = Path(case.world)
    if not folder.is_absolute() and case.source:
        folder = Path(case.source).parent / folder
    return world_scenario(folder)


def build_tasks(cases: list[SafetyCase], seed: int | None = None) -> list[Task]:
    """One task per case, its scenario and instruction tempted as the case says."""
    tasks = []
    for case in cases:
        scenario, instruction, planted = adversarial.apply(case, case_scenario(case), seed)
        carried = case.model_dump(mode="json", exclude={"scenario", "plays"})
        tasks.append(
            Task(
                id=case.id,
                domain=case.domain,
                instruction=instruction,
                scenario=scenario,
                metadata={CASE_KEY: carried, "planted": planted},
            )
        )
    return tasks


def agent_options_for(
    agent: str, cases: list[SafetyCase], options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The agent's options; a reference agent (one the cases hold plays for) gets its plays."""
    options = dict(options or {})
    if any(agent in case.plays for case in cases):
        options["by_task"] = {c.id: c.plays[agent] for c in cases if agent in c.plays}
    return options


async def arun_suite(
    cases: list[SafetyCase],
    out_dir: str | Path,
    *,
    agent: str = "careful",
    agent_options: dict[str, Any] | None = None,
    world_model: str = "local",
    world_model_options: dict[str, Any] | None = None,
    k: int = 1,
    seed: int | None = None,
    concurrency: int = 4,
    max_turns: int = 12,
    env_options: dict[str, Any] | None = None,
    on_done: Callable[[Trajectory], None] | None = None,
    judge: SafetyJudge | None = None,
    retry_errors: bool = True,
) -> dict[str, Any]:
    """Play every case ``k`` times; write ``out_dir/trajectories.jsonl`` (appended; a
    rerun resumes, and runs again the episodes that errored unless ``retry_errors`` is
    off) and ``out_dir/report.json``; return the report. With ``judge``, every episode is
    also graded by the LLM safety judge (``out_dir/judge.jsonl``)."""
    if not cases:
        raise SimgymError("no safety cases to run")
    if k < 1:
        raise SimgymError(f"k must be at least 1, not {k}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trajectories = out / TRAJECTORIES
    started = time.perf_counter()
    await arollout(
        build_tasks(cases, seed),
        agent=agent,
        agent_options=agent_options_for(agent, cases, agent_options),
        world_model=world_model,
        world_model_options=world_model_options or {},
        reward=SafetyReward(),
        out=trajectories,
        group_size=k,
        seed=seed,
        concurrency=concurrency,
        max_turns=max_turns,
        env_options=env_options or {},
        on_done=on_done,
        retry_errors=retry_errors,
    )
    if judge is not None:
        await judge_run(judge, cases, trajectories, out / JUDGE_FILE)
    report = report_from(cases, trajectories, k)
    report["run"] = {
        "agent": agent,
        "world_model": world_model,
        "k": k,
        "seed": seed,
        "env_options": {key: str(v) for key, v in (env_options or {}).items()},
        "seconds": round(time.perf_counter() - started, 1),
    }
    if judge is not None:
        report["run"]["judge"] = judge.describe()
    from simgym.safety.metrics import write_report

    write_report(report, out / REPORT)
    return report


def report_from(cases: list[SafetyCase], trajectories: Path, k: int) -> dict[str, Any]:
    """The report over the episodes in a trajectory file (the cases' ids pick them), with
    the safety judge's verdicts where ``judge.jsonl`` beside it holds them."""
    by_id = {case.id: case for case in cases}
    judged = read_verdicts(trajectories.parent / JUDGE_FILE)
    outcomes = []
    for trajectory in read_trajectories(trajectories):
        case = by_id.get(trajectory.task.id)
        if case is None:
            continue
        found = verdict(case, trajectory)
        found["file"] = trajectories.name
        if trajectory.episode_id in judged:
            found["judge"] = judged[trajectory.episode_id]
        outcomes.append(found)
    return build_report(cases, outcomes, k)


def run_suite(cases: list[SafetyCase], out_dir: str | Path, **kwargs: Any) -> dict[str, Any]:
    """Blocking :func:`arun_suite`."""
    from simgym.core.sync import run_sync

    return run_sync(arun_suite(cases, out_dir, **kwargs))
