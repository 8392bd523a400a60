"""sim-vs-real: `simgym run --compare real` and the turn comparison."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import simgym
from simgym import Action, Observation, Task, Trajectory, Turn
from simgym.bench.sim_vs_real import compare_turns, summarize
from simgym.real.sandbox import bwrap_problem

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "terminal" / "ci_server_logs.yaml"


def episode(texts, *, rejected_at=None):
    turns = []
    for i, text in enumerate(texts, 1):
        if i == rejected_at:
            turns.append(
                Turn(
                    index=i,
                    observation=Observation(text="bad", kind="error"),
                    error_type="action",
                    in_history=False,
                )
            )
        else:
            turns.append(
                Turn(index=i, action=Action.keys("ls\n"), observation=Observation(text=text))
            )
    return Trajectory(task=Task(id="t"), domain="terminal", turns=turns)


def test_turns_pair_by_index_and_skip_rejected_actions():
    sim = episode(["a\nuser@devbox:~$", "x", "same\nuser@devbox:~$"], rejected_at=2)
    real = episode(["b\nuser@devbox:~$", "x", "same\nuser@devbox:~$"], rejected_at=2)
    rows = compare_turns([sim], [real])
    assert [r["turn"] for r in rows] == [1, 3]
    assert rows[1]["edit_similarity"] == 1.0 and rows[1]["line_f1"] == 1.0
    assert rows[0]["line_f1"] == 0.5  # the prompt line matches, the output line does not
    summary = summarize(rows)["terminal"]
    assert summary["turns"] == 2 and summary["simulated_format_ok"] == 1.0


@pytest.mark.skipif(bool(bwrap_problem()), reason=str(bwrap_problem()))
def test_replaying_a_real_recording_matches_reality(tmp_path):
    """Record for real, replay that recording as the 'world model', compare with a fresh
    real run: a faithful world gets similarity 1 on every turn."""
    recorded = tmp_path / "recorded.jsonl"
    cli = [sys.executable, "-m", "simgym"]
    proc = subprocess.run(
        [*cli, "record", str(EXAMPLE), "--out", str(recorded)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "sim.jsonl"
    proc = subprocess.run(
        [
            *cli,
            "run",
            str(EXAMPLE),
            "--out",
            str(out),
            "-w",
            "replay",
            "--replay",
            str(recorded),
            "--compare",
            "real",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "simulated vs real" in proc.stderr
    rows = [json.loads(line) for line in (tmp_path / "sim.compare.jsonl").read_text().splitlines()]
    assert len(rows) == 4  # four actions, all answered on both sides
    assert all(r["edit_similarity"] == 1.0 for r in rows), rows
    assert len(list(simgym.read_trajectories(tmp_path / "sim.real.jsonl"))) == 1
