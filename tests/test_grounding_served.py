"""Grounding with real models: the embedded default through `simgym play` (the README's
main job), and a served model through the openai backend on a real llama.cpp server."""

from __future__ import annotations

import json
import subprocess
import sys

import simgym
from simgym.core.grounding import FACTS_HEADER


def test_play_terminal_on_the_embedded_default_gets_the_facts_right(tmp_path):
    """The issue's acceptance session, run as a user runs it: piped into `simgym play`."""
    out = tmp_path / "play.jsonl"
    lines = "ls -la\npwd\ncat notes.txt\necho hi > a.txt\ncat a.txt\nrm a.txt\nls\nexit\n"
    done = subprocess.run(
        [sys.executable, "-m", "simgym", "play", "terminal", "--out", str(out)],
        input=lines,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    screen = done.stdout.splitlines()
    after = {cmd: screen[screen.index(f"dev@devbox:~$ {cmd}") + 1] for cmd in ("pwd", "ls")}
    assert after["pwd"] == "/home/dev"
    at = screen.index("dev@devbox:~$ cat notes.txt")
    assert screen[at + 1 : at + 3] == ["buy milk", "call the bank"]
    assert screen[screen.index("dev@devbox:~$ cat a.txt") + 1] == "hi"
    assert "notes.txt" in after["ls"].split() and "a.txt" not in after["ls"].split()
    trajectory = json.loads(out.read_text().splitlines()[-1])
    assert trajectory["world_model"]["backend"] == "local"
    assert "a.txt" not in json.dumps(trajectory["final_state"]["files"])
    assert all(t["grounding"] for t in trajectory["turns"])
    # `ls -la` in GNU's long format, and one transcript: each prompt shown once
    at = screen.index("dev@devbox:~$ ls -la")
    assert screen[at + 1] == "total 16"
    assert screen[at + 4] == "-rw-r--r-- 1 dev  dev    23 Mar 14 09:26 notes.txt"
    assert "dev@devbox:~$" not in screen and screen[-2:] == ["dev@devbox:~$ exit", "exit"]


async def test_grounding_through_the_openai_backend_in_both_context_modes(llama_server):
    sent = []
    backend = simgym.world_model("openai", base_url=llama_server, temperature=0.0, max_tokens=64)
    original = backend.predict

    async def spy(messages, **kwargs):
        sent.append(messages)
        return await original(messages, **kwargs)

    backend.predict = spy
    for context in ("history", "state"):
        sent.clear()
        env = simgym.make("terminal", world_model=backend, grounding="strict", context=context)
        await env.reset()
        first = await env.step("cat notes.txt")
        await env.step("echo hi > a.txt")
        third = await env.step("cat a.txt")
        assert first.observation.text.splitlines()[1:3] == ["buy milk", "call the bank"]
        assert third.observation.text.splitlines()[1] == "hi"
        assert env.state["files"]["/home/dev/a.txt"] == "hi\n"
        last = sent[-1][-1]["content"]
        assert FACTS_HEADER in last and "`cat a.txt` prints exactly" in last
        if context == "state":
            assert "**Current State:**" in last
        await env.close()
    await backend.aclose()


def test_play_swe_on_the_embedded_default_keeps_an_edit(tmp_path):
    """A file edited, the edit visible in a later read and in the test run's facts, piped
    into `simgym play swe` on the embedded default."""
    out = tmp_path / "play.jsonl"
    fixed = "amount * (100 - percent) / 100"
    edit = {"path": "invoicing/totals.py", "old_str": "amount - percent", "new_str": fixed}
    lines = "\n".join(
        [
            "read_file invoicing/totals.py",
            f"edit_file {json.dumps(edit)}",
            "read_file invoicing/totals.py",
            "run_tests",
            "",
        ]
    )
    done = subprocess.run(
        [sys.executable, "-m", "simgym", "play", "swe", "--out", str(out), "--max-tokens", "96"],
        input=lines,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    turns = json.loads(out.read_text().splitlines()[-1])["turns"]
    observations = [t["observation"]["text"] for t in turns]
    assert "amount - percent" in observations[0] and fixed not in observations[0]
    assert observations[1].startswith("Edited invoicing/totals.py")
    assert fixed in observations[2] and "amount - percent" not in observations[2]
    assert fixed in "\n".join(turns[3]["grounding"]["facts"])  # the test run is told the edit
    assert fixed in done.stdout
