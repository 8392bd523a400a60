"""The `simgym` command, run as a real subprocess the way a user runs it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import simgym
from conftest import free_port

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def simgym_cli(*args, stdin="", timeout=300):
    proc = subprocess.run(
        [sys.executable, "-m", "simgym", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_domains_lists_registered_domains():
    proc = simgym_cli("domains")
    assert proc.returncode == 0
    assert "terminal" in proc.stdout and "mcp" in proc.stdout


def test_play_terminal_with_piped_input_records_the_session(tmp_path):
    out = tmp_path / "play.jsonl"
    proc = simgym_cli("play", "terminal", "--max-tokens", "48", "--out", out, stdin="ls\npwd\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("dev@devbox:~$")
    [traj] = list(simgym.read_trajectories(out))
    assert [t.action_text for t in traj.turns] == [
        '[{"keystrokes": "ls\\n", "duration": 1}]',
        '[{"keystrokes": "pwd\\n", "duration": 1}]',
    ]
    assert all(t.observation.text for t in traj.turns)


def test_play_unknown_domain_is_a_clean_error():
    proc = simgym_cli("play", "spaceship")
    assert proc.returncode == 2 and "unknown domain 'spaceship'" in proc.stderr


def test_play_with_server_down_reports_and_keeps_the_trajectory(tmp_path):
    out = tmp_path / "down.jsonl"
    proc = simgym_cli(
        "play",
        "terminal",
        "-w",
        "openai",
        "--base-url",
        f"http://127.0.0.1:{free_port()}/v1",
        "--model",
        "m",
        "--out",
        out,
        stdin="ls\n",
    )
    assert proc.returncode == 0
    assert "cannot reach world model" in proc.stderr
    [traj] = list(simgym.read_trajectories(out))
    assert traj.truncated and "cannot reach" in traj.error


def test_play_mcp_rejects_undeclared_tool_and_goes_on(tmp_path):
    out = tmp_path / "mcp.jsonl"
    proc = simgym_cli(
        "play",
        "mcp",
        "--max-tokens",
        "48",
        "--out",
        out,
        stdin='drop_everything {}\nget_customer {"customer_id": "C-1001"}\nanswer done\n',
    )
    assert proc.returncode == 0, proc.stderr
    assert "unknown tool 'drop_everything'" in proc.stderr
    [traj] = list(simgym.read_trajectories(out))
    assert traj.done and len(traj.turns) == 3 and traj.turns[0].error


@pytest.mark.timeout(900)  # three CLI runs on the embedded model: slow on a loaded machine
def test_run_action_files_and_resume(tmp_path):
    out = tmp_path / "runs.jsonl"
    files = [EXAMPLES / "terminal" / "disk_cleanup.yaml", EXAMPLES / "tasks.jsonl"]
    proc = simgym_cli("run", *files, "--out", out, "--max-tokens", "32", "--concurrency", "2")
    assert proc.returncode == 0, proc.stderr
    trajs = list(simgym.read_trajectories(out))
    assert sorted(t.task.id for t in trajs) == [
        "jsonl-mcp-1",
        "jsonl-term-1",
        "terminal-disk-cleanup",
    ]
    mcp = next(t for t in trajs if t.task.id == "jsonl-mcp-1")
    assert mcp.done and mcp.turns[-1].action.text == "Ana Lima, gold tier."
    again = simgym_cli("run", *files, "--out", out)
    assert again.returncode == 0 and "3 of 3 episodes already" in again.stderr
    assert len(list(simgym.read_trajectories(out))) == 3

    # the recorded episodes replay exactly
    replayed = tmp_path / "replayed.jsonl"
    proc = simgym_cli(
        "run",
        EXAMPLES / "terminal" / "disk_cleanup.yaml",
        "--out",
        replayed,
        "-w",
        "replay",
        "--replay",
        out,
    )
    assert proc.returncode == 0, proc.stderr
    [a] = [t for t in trajs if t.task.id == "terminal-disk-cleanup"]
    [b] = list(simgym.read_trajectories(replayed))
    assert [t.observation.text for t in a.turns] == [t.observation.text for t in b.turns]


def test_run_bad_inputs_are_clean_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "domain": "terminal", "actions": ["ls"]}\n{"id": broken\n')
    proc = simgym_cli("run", bad, "--out", tmp_path / "o.jsonl")
    assert proc.returncode == 2 and "bad.jsonl:2: not valid JSON" in proc.stderr
    nodomain = tmp_path / "nodomain.jsonl"
    nodomain.write_text(json.dumps({"id": "x", "actions": ["ls"]}) + "\n")
    proc = simgym_cli("run", nodomain, "--out", tmp_path / "o.jsonl")
    assert proc.returncode == 2 and "no domain" in proc.stderr
    proc = simgym_cli(
        "run", EXAMPLES / "tasks.jsonl", "--out", tmp_path / "o.jsonl", "-w", "replay"
    )
    assert proc.returncode == 2 and "needs --replay" in proc.stderr
    proc = simgym_cli("run", tmp_path / "missing.yaml", "--out", tmp_path / "o.jsonl")
    assert proc.returncode == 2 and "file not found" in proc.stderr


def test_doctor_reports_backend_health():
    ok = simgym_cli("doctor")
    assert ok.returncode == 0 and "embedded model" in ok.stdout and "answered" in ok.stdout
    down = simgym_cli("doctor", "-w", "openai", "--base-url", f"http://127.0.0.1:{free_port()}/v1")
    assert down.returncode == 1 and "failed" in down.stdout


def test_play_in_a_real_terminal(tmp_path):
    """A person at a terminal: the screen ends at the prompt and the typed line is not
    echoed twice."""
    import os
    import pty
    import select
    import time

    out = tmp_path / "tty.jsonl"
    pid, fd = pty.fork()
    if pid == 0:  # the child becomes simgym, attached to the pseudo-terminal
        os.execv(
            sys.executable,
            [
                sys.executable,
                "-m",
                "simgym",
                "play",
                "terminal",
                "--max-tokens",
                "32",
                "--out",
                str(out),
            ],
        )
    screen = b""

    def read_until(pattern: bytes, timeout: float, start: int = 0) -> None:
        nonlocal screen
        deadline = time.time() + timeout
        while pattern not in screen[start:] and time.time() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    screen += os.read(fd, 4096)
                except OSError:
                    break

    read_until(b"dev@devbox:~$", 60)
    assert b"dev@devbox:~$" in screen
    os.write(fd, b"ls\n")
    before = len(screen)
    read_until(b"$", 120, start=before + 3)  # past the echo of what was typed
    os.write(fd, b":quit\n")
    read_until(b"trajectory appended", 60)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    assert b"$" in screen[before + 3 :]
    [traj] = list(simgym.read_trajectories(out))
    assert len(traj.turns) == 1 and traj.turns[0].observation.text


def test_mcp_import_from_a_real_server_then_play(tmp_path):
    scenario = tmp_path / "records.yaml"
    server = f"{sys.executable} -m simgym.real.mcp_servers.records --db {tmp_path / 'r.db'}"
    proc = simgym_cli("mcp", "import", "--command", server, "--out", scenario)
    assert proc.returncode == 0, proc.stderr
    assert "get_customer" in scenario.read_text()
    out = tmp_path / "play.jsonl"
    # a call that breaks the imported schema is rejected before any world model runs
    proc = simgym_cli(
        "play",
        "mcp",
        "--scenario",
        scenario,
        "--max-tokens",
        "16",
        "--out",
        out,
        stdin="get_customer customer_id=1001\n:quit\n",
    )
    assert proc.returncode == 0, proc.stderr
    assert "1001 is not of type 'string'" in proc.stderr
    none = simgym_cli("mcp", "import", "--out", scenario)
    assert none.returncode == 2 and "exactly one of" in none.stderr


def test_grounding_and_experience_options(tmp_path):
    proc = simgym_cli("play", "terminal", "--grounding", "always", stdin="pwd\n")
    assert proc.returncode == 2 and "--grounding takes off, facts, strict" in proc.stderr
    proc = simgym_cli("play", "terminal", "--experience", tmp_path / "nope.db", stdin="pwd\n")
    assert proc.returncode == 2 and "experience store not found" in proc.stderr
    store = tmp_path / "exp.db"
    built = simgym_cli("experience", "build", store, ROOT / "devset" / "trajectories.jsonl")
    assert built.returncode == 0, built.stderr
    stats = simgym_cli("experience", "stats", store)
    assert "terminal" in stats.stdout
    found = simgym_cli("experience", "query", store, "terminal", "cat report.txt", "-k", "1")
    assert found.returncode == 0 and "cat" in found.stdout
    # a replayed run with grounding and retrieved experience records both on its turns
    runs = tmp_path / "runs.jsonl"
    (tmp_path / "ep.yaml").write_text(
        "domain: terminal\ntask: {id: t1}\nactions: [pwd, 'cat notes.txt']\n"
    )
    proc = simgym_cli(
        "run",
        tmp_path / "ep.yaml",
        "--out",
        runs,
        "--grounding",
        "strict",
        "--experience",
        store,
        "--max-tokens",
        "32",
    )
    assert proc.returncode == 0, proc.stderr
    [traj] = list(simgym.read_trajectories(runs))
    assert traj.turns[0].observation.text.splitlines()[1] == "/home/dev"
    assert all(t.grounding and t.grounding.get("experience") for t in traj.turns)
