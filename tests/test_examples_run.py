"""`simgym run` on the shipped examples with the embedded default world model."""

import subprocess
import sys
from pathlib import Path

import pytest

import simgym

ROOT = Path(__file__).resolve().parents[1]
DOMAINS = ["mcp", "search", "terminal", "swe", "web", "os", "android"]


def run_examples(files, out):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "simgym",
            "run",
            *map(str, files),
            "--out",
            str(out),
            "--max-tokens",
            "40",
            "--concurrency",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=3000,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return list(simgym.read_trajectories(out))


def check(trajectories, files):
    from simgym.rollout.scripted import load_specs

    specs = {s.task.id: s for s in load_specs(files)}
    assert sorted(t.task.id for t in trajectories) == sorted(specs)
    for t in trajectories:
        assert t.error is None, (t.task.id, t.error)  # the world model never failed
        assert t.turns, t.task.id
        assert all(turn.observation.text or not turn.in_history for turn in t.turns)
        assert t.world_model["backend"] == "local"


@pytest.mark.timeout(900)
def test_one_example_per_domain_runs_on_the_embedded_model(tmp_path):
    files = [sorted((ROOT / "examples" / d).glob("*.yaml"))[0] for d in DOMAINS]
    check(run_examples(files, tmp_path / "runs.jsonl"), files)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_every_example_runs_on_the_embedded_model(tmp_path):
    files = sorted((ROOT / "examples").glob("*/*.yaml"))
    check(run_examples(files, tmp_path / "runs.jsonl"), files)
