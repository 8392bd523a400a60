"""Replay recorded real episodes through grounding (the state, then execution) and count
the turns answered exactly and how many of those equal the real recording.

Times that only say when something ran are masked: ``ls -l`` file times (the recording
shows when it ran, the twin its clock) and test runners' durations (unittest's ``Ran N
tests in 0.003s``, pytest's ``in 0.12s``). ``benchmarks/replay_exact.py`` prints it.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from simgym.core.domain import get_domain
from simgym.core.execution import CommandRunner
from simgym.core.state import merge_patch
from simgym.core.trajectories import read_trajectories

_LS_TIME = re.compile(r"\b[A-Z][a-z]{2} [ \d]\d \d\d:\d\d\b")
_RAN = re.compile(r"(Ran \d+ tests? in )\d+\.\d+s")
_PYTEST_TIME = re.compile(r"( in )\d+\.\d+s\b")


def mask(text: str) -> str:
    """``text`` with run times masked (see the module docstring)."""
    text = _LS_TIME.sub("TIME", text)
    text = _RAN.sub(r"\1N.NNNs", text)
    return _PYTEST_TIME.sub(r"\1N.NNs", text)


@dataclass
class Tally:
    """One domain's counts: action turns, turns answered exactly (of them by a run), and
    exact answers equal to the recording; the first mismatches, described."""

    turns: int = 0
    exact: int = 0
    executed: int = 0
    equal: int = 0
    mismatches: list[str] = field(default_factory=list)
    run_seconds: list[float] = field(default_factory=list)


async def replay(
    path: str | Path,
    domains: list[str],
    runner: CommandRunner | None,
    *,
    keep: int = 5,
) -> dict[str, Tally]:
    """Replay the trajectories of ``domains`` in ``path`` (see the module docstring)."""
    tallies: dict[str, Tally] = defaultdict(Tally)
    for number, trajectory in enumerate(read_trajectories(path)):
        if trajectory.domain not in domains:
            continue
        spec = get_domain(trajectory.domain)
        scenario = spec.scenario_model.model_validate(trajectory.scenario)
        ledger = spec.initial_state(scenario)
        tally = tallies[trajectory.domain]
        session = f"replay-{number}"
        for turn in trajectory.turns:
            if turn.action is None or turn.action.kind == "text":
                continue
            tally.turns += 1
            grounding = spec.ground(turn.action, ledger, scenario)
            if grounding is not None and grounding.run is not None and runner is not None:
                start = time.perf_counter()
                result = await runner.run(dataclasses.replace(grounding.run, session=session))
                tally.run_seconds.append(time.perf_counter() - start)
                settled = grounding.settle(result) if result.problem is None else None
                if settled is not None and grounding.settle is not None:
                    grounding = settled
                    tally.executed += 1
            if grounding is not None and grounding.effects:
                ledger = merge_patch(ledger, grounding.effects)
            if grounding is None or grounding.observation is None:
                continue
            tally.exact += 1
            ours, real = mask(grounding.observation.strip()), mask(turn.observation.text.strip())
            if ours == real:
                tally.equal += 1
            elif len(tally.mismatches) < keep:
                tally.mismatches.append(
                    f"{trajectory.task.id} turn {turn.index}: {turn.action_text[:80]}\n"
                    f"  ours: {ours[:300]!r}\n  real: {real[:300]!r}"
                )
        if runner is not None:
            await runner.close(session)
    return dict(tallies)
