"""Running a suite: cases become tasks (temptations written in), simgym's rollout runner
plays them ``k`` times each, and every episode gets its verdict."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simgym.agents import create_agent
from simgym.core.errors import SimgymError
from simgym.core.trajectories import read_trajectories
from simgym.core.types import Task, Trajectory
from simgym.rollout.runner import arollout
from simgym.safety import adversarial
from simgym.safety.cases import SafetyCase
from simgym.safety.evaluate import CASE_KEY, SafetyReward, carried, episode_verdict
from simgym.safety.judge import JUDGE_FILE, SafetyJudge, judge_run, read_verdicts
from simgym.safety.metrics import build_report, write_report
from simgym.safety.real import FreshWorlds, split_real

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
        tasks.append(
            Task(
                id=case.id,
                domain=case.domain,
                instruction=instruction,
                scenario=scenario,
                metadata={CASE_KEY: carried(case), "planted": planted},
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


SUITE_EXECUTORS = ("sim", "real")


async def arun_suite(
    cases: list[SafetyCase],
    out_dir: str | Path,
    *,
    executor: str = "sim",
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
    on_start: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Play every case ``k`` times and report on it.

    Writes ``out_dir/trajectories.jsonl`` (appended; a rerun resumes, and runs again the
    episodes that errored unless ``retry_errors`` is off) and ``out_dir/report.json``.

    Args:
        cases: the safety cases.
        out_dir: where the episodes and the report go.
        executor: ``"sim"``, the world model plays every world; ``"real"``, the cases
            that can run for real here (:mod:`simgym.safety.real`) each play in a fresh
            real world (``world_model`` and ``env_options`` do not apply; the skipped
            cases and why are under ``report["real"]["skipped"]``).
        agent: the agent's name; a reference agent gets the cases' own plays.
        agent_options: the agent's options.
        world_model: the world model's name (``"sim"``).
        world_model_options: its options.
        k: plays per case.
        seed: one seed for the temptations, the faults and the plays.
        concurrency: episodes at once.
        max_turns: the turn limit of an episode.
        env_options: :class:`simgym.SimEnv` options (``"sim"``).
        on_done: called with each finished episode.
        judge: also grade every episode with the LLM safety judge
            (``out_dir/judge.jsonl``).
        retry_errors: rerun the episodes of an earlier run that errored.
        on_start: called with how many episodes will play (a rerun skips those done).

    Returns:
        The report (:func:`simgym.safety.metrics.build_report`) with ``run`` added.
    """
    if executor not in SUITE_EXECUTORS:
        raise SimgymError(f"executor is one of {', '.join(SUITE_EXECUTORS)}, not {executor!r}")
    skipped: dict[str, str] = {}
    if executor == "real":
        if env_options:
            raise SimgymError("env_options simulate; they do not apply to real worlds")
        cases, skipped = split_real(cases)
        if not cases:
            reasons = "; ".join(sorted(set(skipped.values()))) or "no cases"
            raise SimgymError(f"none of the cases can run on a real backend here: {reasons}")
    if not cases:
        raise SimgymError("no safety cases to run")
    if k < 1:
        raise SimgymError(f"k must be at least 1, not {k}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trajectories = out / TRAJECTORIES
    started = time.perf_counter()
    options = agent_options_for(agent, cases, agent_options)
    if executor == "real":
        await _play_real(
            cases,
            trajectories,
            agent,
            options,
            k,
            seed,
            concurrency,
            max_turns,
            on_done,
            retry_errors,
        )
    else:
        await arollout(
            build_tasks(cases, seed),
            agent=agent,
            agent_options=options,
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
            on_start=on_start,
            retry_errors=retry_errors,
        )
    if judge is not None:
        await judge_run(judge, cases, trajectories, out / JUDGE_FILE)
    report = report_from(cases, trajectories, k)
    report["run"] = {
        "agent": agent,
        "world_model": "real" if executor == "real" else world_model,
        "k": k,
        "seed": seed,
        **(
            {}
            if executor == "real"
            else {"env_options": {key: str(v) for key, v in (env_options or {}).items()}}
        ),
        "seconds": round(time.perf_counter() - started, 1),
    }
    if judge is not None:
        report["run"]["judge"] = judge.describe()
    if executor == "real":
        report["real"] = {"skipped": skipped}
    write_report(report, out / REPORT)
    return report


async def _play_real(
    cases: list[SafetyCase],
    trajectories: Path,
    agent: str,
    agent_options: dict[str, Any],
    k: int,
    seed: int | None,
    concurrency: int,
    max_turns: int,
    on_done: Callable[[Trajectory], None] | None,
    retry_errors: bool,
) -> None:
    """The plays of ``arun_suite(executor="real")``: one agent, a fresh world per episode."""
    built = create_agent(agent, **agent_options)
    try:
        await arollout(
            build_tasks(cases, seed),
            agent=built,
            world_model="real",  # a name only: FreshWorlds builds a world per episode
            out=trajectories,
            executor=FreshWorlds(
                built, SafetyReward(), max_turns=max_turns, concurrency=concurrency
            ),
            group_size=k,
            seed=seed,
            on_done=on_done,
            retry_errors=retry_errors,
        )
    finally:
        close = getattr(built, "aclose", None)
        if close is not None:
            await close()


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
        found = episode_verdict(case, trajectory)  # the reward's, not a second one
        found["file"] = trajectories.name
        if trajectory.episode_id in judged:
            found["judge"] = judged[trajectory.episode_id]
        outcomes.append(found)
    return build_report(cases, outcomes, k)


def run_suite(cases: list[SafetyCase], out_dir: str | Path, **kwargs: Any) -> dict[str, Any]:
    """Blocking :func:`arun_suite`."""
    from simgym.core.sync import run_sync

    return run_sync(arun_suite(cases, out_dir, **kwargs))
