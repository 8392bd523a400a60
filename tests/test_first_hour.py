"""Rough edges a newcomer meets in the first hour (issue 45, part 4), each through the real
``simgym`` command in a subprocess: piped play echoes the typed action in every domain; a
scenario written for another domain is one clear error (play and run, both directions);
``doctor`` shows install hints only on rows that are missing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import simgym
from simgym.worldmodels.function import FunctionWorldModel

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
MCP_SCENARIO = EXAMPLES / "mcp" / "ticket_tracker.yaml"
TERMINAL_SCENARIO = EXAMPLES / "terminal" / "disk_cleanup.yaml"


def simgym_cli(*args, stdin: str = "", env: dict | None = None, timeout: int = 180):
    proc = subprocess.run(
        [sys.executable, "-m", "simgym", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


# -- play in a pipe echoes what was typed -------------------------------------------------

# A line a person would type in each domain, and what the world shows after it.
TYPED = {
    "mcp": "search_customers query=zed",
    "search": "search llama.cpp server flags",
    "swe": "read_file README.md",
    "web": "click 12",
    "os": "hotkey ctrl s",
    "android": "swipe up",
}


def _recording(tmp_path: Path, domain: str, line: str) -> Path:
    """One episode of ``domain`` with ``line`` acted, recorded with a function world model
    that answers a marker: the replay backend plays it back to ``simgym play``."""
    out = tmp_path / f"{domain}.jsonl"
    answer = f"WORLD-ANSWER-{domain}"
    with simgym.TrajectoryWriter(out) as writer:
        env = simgym.SimEnv(domain, FunctionWorldModel(lambda messages: answer), writer=writer)
        env = env.sync()
        env.reset(simgym.Task(id="rec", domain=domain))
        env.step(simgym.get_domain(domain).parse_input(line, env.env.scenario))
        env.close()
    return out


@pytest.mark.parametrize("domain", sorted(TYPED))
def test_piped_play_echoes_the_typed_action(tmp_path: Path, domain: str) -> None:
    line = TYPED[domain]
    recording = _recording(tmp_path, domain, line)
    proc = simgym_cli(
        "play", domain, "-w", "replay", "--replay", recording, "--max-turns", "1",
        stdin=line + "\n",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert f"> {line}" in lines, proc.stdout
    echoed = lines.index(f"> {line}")
    # the echo comes after the first screen and before what the world answered to it
    assert echoed > 0
    assert any(f"WORLD-ANSWER-{domain}" in later for later in lines[echoed + 1 :]), proc.stdout


def test_piped_play_terminal_is_still_one_transcript(tmp_path: Path) -> None:
    """The terminal's screen echoes the command itself: no second ``>`` line there."""
    recording = _recording(tmp_path, "terminal", "ls")
    proc = simgym_cli("play", "terminal", "-w", "replay", "--replay", recording, stdin="ls\n")
    assert proc.returncode == 0, proc.stderr
    assert "> ls" not in proc.stdout.splitlines()
    assert "WORLD-ANSWER-terminal" in proc.stdout


# -- a scenario for another domain --------------------------------------------------------


def _bare(tmp_path: Path, source: Path) -> Path:
    """The scenario mapping of an example alone: no ``domain:`` key names it."""
    bare = tmp_path / f"bare-{source.name}"
    bare.write_text(yaml.safe_dump(yaml.safe_load(source.read_text())["scenario"]))
    return bare


@pytest.mark.parametrize(
    ("asked", "source", "belongs"),
    [("terminal", MCP_SCENARIO, "mcp"), ("mcp", TERMINAL_SCENARIO, "terminal")],
)
@pytest.mark.parametrize("bare", [False, True], ids=["episode-file", "bare-scenario"])
def test_play_refuses_a_scenario_for_another_domain(
    tmp_path: Path, asked: str, source: Path, belongs: str, bare: bool
) -> None:
    path = _bare(tmp_path, source) if bare else source
    proc = simgym_cli("play", asked, "--scenario", path, stdin="ls\n")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    message = " ".join(proc.stderr.split())
    assert f"this scenario is for the {belongs} domain, not {asked}" in message
    assert str(path) in message
    assert "validation error" not in message and "pydantic" not in message
    assert len(proc.stderr.strip().splitlines()) == 1  # one line, not a field-by-field dump
    assert proc.stdout == ""  # refused before any world was shown


def test_play_still_lists_a_typo_in_a_scenario_of_its_own_domain(tmp_path: Path) -> None:
    """A scenario that fits no domain (a misspelt key) keeps the schema's own complaint."""
    scenario = tmp_path / "typo.yaml"
    scenario.write_text("user: root\nhostnme: web01\n")
    proc = simgym_cli("play", "terminal", "--scenario", scenario, stdin="")
    assert proc.returncode == 2
    assert "hostnme" in proc.stderr and "this scenario is for" not in proc.stderr


@pytest.mark.parametrize(
    ("asked", "source", "belongs"),
    [("terminal", MCP_SCENARIO, "mcp"), ("mcp", TERMINAL_SCENARIO, "terminal")],
)
def test_run_refuses_a_task_whose_scenario_is_for_another_domain(
    tmp_path: Path, asked: str, source: Path, belongs: str
) -> None:
    """A task file that names no domain plays in --domain; its scenario must be that
    domain's, said in one line before any episode runs."""
    data = yaml.safe_load(source.read_text())
    task = tmp_path / "task.yaml"
    task.write_text(
        yaml.safe_dump({"task": {"id": "wrong", "instruction": "x"}, "scenario": data["scenario"]})
        + "actions: [ls]\n"
    )
    out = tmp_path / "out.jsonl"
    proc = simgym_cli("run", task, "--domain", asked, "--out", out)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    message = " ".join(proc.stderr.split())
    assert f"wrong: this scenario is for the {belongs} domain, not {asked}" in message
    assert "validation error" not in message
    assert not out.exists()


@pytest.mark.parametrize(
    ("asked", "source", "belongs"),
    [("terminal", MCP_SCENARIO, "mcp"), ("mcp", TERMINAL_SCENARIO, "terminal")],
)
@pytest.mark.parametrize("bare", [False, True], ids=["episode-file", "bare-scenario"])
def test_serve_refuses_a_scenario_for_another_domain(
    tmp_path: Path, asked: str, source: Path, belongs: str, bare: bool
) -> None:
    path = _bare(tmp_path, source) if bare else source
    out = tmp_path / "served.jsonl"
    proc = simgym_cli(
        "serve", "--openenv", "--domain", asked, "--scenario", path, "--out", out,
        "--port", "9", timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    message = " ".join(proc.stderr.split())
    assert f"{path}: this scenario is for the {belongs} domain, not {asked}" in message


# -- doctor -------------------------------------------------------------------------------

HINT = re.compile(r"apt-get|pip install|setup\.sh|install")


def _doctor_rows(stdout: str) -> dict[str, tuple[str, str]]:
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]
        if len(cells) == 3 and cells[0] and cells[0] != "check":
            rows[cells[0]] = (cells[1], cells[2])
    return rows


def test_doctor_shows_install_hints_only_on_missing_rows(tmp_path: Path) -> None:
    down = "http://127.0.0.1:9/v1"  # nothing listens: the world-model row fails, fast
    # wide enough that no detail wraps onto a second line (pytest-xdist sets COLUMNS=80)
    wide = {**os.environ, "COLUMNS": "250"}
    found = _doctor_rows(simgym_cli("doctor", "-w", "openai", "--base-url", down, env=wide).stdout)
    assert {"python", "simgym", "tmux", "bubblewrap", "embedded model"} <= set(found)
    ok = {name: detail for name, (status, detail) in found.items() if status == "ok"}
    assert "tmux" in ok and "bubblewrap" in ok  # both are installed on this machine
    for name, detail in ok.items():
        assert not HINT.search(detail), (name, detail)
    assert ok["tmux"].endswith("tmux")  # where it was found instead

    # Without them on PATH, the same rows are missing and say how to install them.
    bare_path = tmp_path / "bin"
    bare_path.mkdir()
    env = {"PATH": str(bare_path), "HOME": str(tmp_path), "COLUMNS": "250"}
    missing = _doctor_rows(simgym_cli("doctor", "-w", "openai", "--base-url", down, env=env).stdout)
    assert missing["tmux"][0] == "missing" and "apt-get install tmux" in missing["tmux"][1]
    assert missing["bubblewrap"][0] == "missing" and "bubblewrap" in missing["bubblewrap"][1]
