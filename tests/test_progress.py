"""Progress of the long commands (issue 45, part 4): the shared helper in both modes, and
``simgym run``, ``safety run`` and ``bench infer`` in a pipe writing progress lines that
end at the total."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

import simgym
from simgym.cli.progress import CommandProgress, clock, progress_mode
from simgym.worldmodels.function import FunctionWorldModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from fixed_latency_server import running  # noqa: E402  (a benchmark helper, not a package)

LINE = re.compile(r"^(?P<label>\S+) (?P<done>\d+)/(?P<total>\d+) \(\d+%\) (?P<rest>.*)$")


def progress_lines(text: str, label: str = "episodes") -> list[tuple[int, int, str]]:
    """(done, total, rest) of every progress line for ``label`` in ``text``."""
    found = []
    for line in text.splitlines():
        m = LINE.match(line.strip())
        if m and m["label"] == label:
            found.append((int(m["done"]), int(m["total"]), m["rest"]))
    return found


def assert_counts_up_to(found: list[tuple[int, int, str]], total: int) -> None:
    assert found, "no progress line"
    assert {t for _, t, _ in found} == {total}
    done = [d for d, _, _ in found]
    assert done == sorted(done) and done[0] == 0 and done[-1] == total
    assert "left" not in found[-1][2]  # finished: no estimate on the last line


# -- the helper ---------------------------------------------------------------------------


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=120), out


def test_lines_in_a_pipe_every_tenth_with_an_estimate(monkeypatch) -> None:
    monkeypatch.delenv("SIMGYM_PROGRESS", raising=False)
    console, out = _console(terminal=False)
    with CommandProgress(console, interval=3600) as progress:
        assert progress.mode == "lines"
        bar = progress.add("episodes", total=40)
        for k in range(40):
            progress.update(bar, advance=1, failed=int(k == 7), note=f"reward {k}")
    found = progress_lines(out.getvalue())
    assert_counts_up_to(found, 40)
    assert [d for d, _, _ in found] == [0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40]
    middle = found[5][2]
    assert "elapsed" in middle and "left" in middle and "/s" in middle
    assert "1 failed" in found[-1][2] and "reward 39" in found[-1][2]


def test_lines_also_come_every_few_seconds(monkeypatch) -> None:
    monkeypatch.delenv("SIMGYM_PROGRESS", raising=False)
    console, out = _console(terminal=False)
    with CommandProgress(console, interval=0.0) as progress:  # every update is "due"
        bar = progress.add("rows")
        progress.update(bar, total=100)
        for _ in range(3):
            progress.update(bar, advance=1)
    assert [d for d, _, _ in progress_lines(out.getvalue(), "rows")] == [0, 1, 2, 3]


def test_a_terminal_gets_a_rich_bar(monkeypatch) -> None:
    monkeypatch.delenv("SIMGYM_PROGRESS", raising=False)
    console, out = _console(terminal=True)
    with CommandProgress(console) as progress:
        assert progress.mode == "bar"
        bar = progress.add("episodes", total=5)
        for _ in range(5):
            progress.update(bar, advance=1)
    shown = out.getvalue()
    assert "episodes" in shown and "5/5" in shown and "\x1b[" in shown  # drawn, not logged
    assert not progress_lines(shown)


@pytest.mark.parametrize(("chosen", "mode"), [("off", "off"), ("lines", "lines"), ("bar", "bar")])
def test_simgym_progress_overrides_the_choice(monkeypatch, chosen: str, mode: str) -> None:
    monkeypatch.setenv("SIMGYM_PROGRESS", chosen)
    console, _ = _console(terminal=chosen != "bar")
    assert progress_mode(console) == mode
    assert progress_mode(console, disable=True) == "off"


def test_clock() -> None:
    assert clock(0) == "0:00:00" and clock(61.4) == "0:01:01" and clock(3725) == "1:02:05"


# -- the commands, in a pipe --------------------------------------------------------------


def simgym_cli(*args: object, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SIMGYM_PROGRESS"}
    proc = subprocess.run(
        [sys.executable, "-m", "simgym", *map(str, args)],
        capture_output=True,  # stdout and stderr are pipes: the line mode
        text=True,
        timeout=timeout,
        env=env,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_run_in_a_pipe_writes_progress_lines_to_the_total(tmp_path: Path) -> None:
    recording = tmp_path / "rec.jsonl"
    with simgym.TrajectoryWriter(recording) as writer:
        env = simgym.SimEnv(
            "terminal", FunctionWorldModel(lambda m: "notes.txt\n$ "), writer=writer
        ).sync()
        env.reset(simgym.Task(id="rec", domain="terminal"))
        env.step("ls")
        env.close()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            f'{{"id": "t{k}", "domain": "terminal", "instruction": "list", "actions": ["ls"]}}\n'
            for k in range(4)
        )
    )
    out = tmp_path / "out.jsonl"
    proc = simgym_cli(
        "run", tasks, "--group-size", "3", "-w", "replay", "--replay", recording, "--out", out
    )
    assert proc.returncode == 0, proc.stderr
    found = progress_lines(proc.stderr)
    assert_counts_up_to(found, 12)
    assert "reward" in found[-1][2] and "0 failed" in found[-1][2]
    assert len(list(simgym.read_trajectories(out))) == 12

    # A rerun resumes: nothing left to play, and the progress says so (0 of 0).
    again = simgym_cli(
        "run", tasks, "--group-size", "3", "-w", "replay", "--replay", recording, "--out", out
    )
    assert again.returncode == 0, again.stderr
    assert progress_lines(again.stderr)[-1][:2] == (0, 0)


def test_safety_run_in_a_pipe_counts_its_episodes(tmp_path: Path) -> None:
    """The world model is down, so every episode errors at once: the lines still count
    each one, say how many failed, and end at the total."""
    proc = simgym_cli(
        "safety", "run", "-o", tmp_path / "run", "--agent", "reckless",
        "--only", "bank-transfer-over-limit,bank-balance-lookup", "-k", "2",
        "-w", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
    )  # fmt: skip
    assert proc.returncode == 1  # errored episodes are not safe ones
    found = progress_lines(proc.stderr)
    assert_counts_up_to(found, 4)
    assert "4 failed" in found[-1][2]


def test_bench_infer_in_a_pipe_counts_rows(tmp_path: Path) -> None:
    fixture = ROOT / "tests" / "data" / "agentworldbench"
    with running(0.05) as base:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "simgym",
                "bench",
                "infer",
                "--data",
                fixture,
                "--out",
                tmp_path / "p.jsonl",
                "-w",
                "openai",
                "--base-url",
                base,
                "--model",
                "m",
                "--domains",
                "terminal",
                "--limit",
                "5",
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    found = progress_lines(proc.stderr, "infer")
    total = found[-1][1]
    assert total >= 2
    assert_counts_up_to(found, total)


@pytest.mark.skipif(not Path("/usr/bin/bwrap").exists(), reason="needs bubblewrap")
def test_record_in_a_pipe_counts_real_episodes(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            f'{{"id": "r{k}", "domain": "terminal", "instruction": "x", "actions": ["echo {k}"]}}\n'
            for k in range(3)
        )
    )
    proc = simgym_cli("record", tasks, "--out", tmp_path / "real.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert_counts_up_to(progress_lines(proc.stderr), 3)


def test_factory_in_a_pipe_counts_transitions_per_domain(tmp_path: Path) -> None:
    proc = simgym_cli(
        "factory", "--out", tmp_path / "fac", "--transitions", "20", "--domains", "search"
    )
    assert proc.returncode == 0, proc.stderr
    found = progress_lines(proc.stderr, "search")
    assert_counts_up_to(found, 20)
    assert "ep" in found[-1][2]
