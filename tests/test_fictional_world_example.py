"""The fictional-world example: tasks with known answers, run with and without faults."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).parent.parent / "examples" / "fictional_world" / "run.py"


def test_example_reports_reward_distribution_with_and_without_faults():
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--tasks", "12", "--difficulty", "0.5"],
        capture_output=True,
        text=True,
        timeout=240,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "12 tasks" in out
    hist = {line.split(":")[0]: line for line in out.splitlines() if "reward histogram" in line}
    # Faithful world, no faults: the reference solution earns everything.
    assert hist["reward histogram (no faults)"].endswith("1.0: 12")
    # Faults cost the naive reader; the one that retries recovers most of it.
    naive = [v for k, v in hist.items() if "naive" in k][0]
    assert "0.0:" in naive
    assert "faults injected:" in out
