"""Grounding in the engine: facts from the hidden state, certain effects, strict mode.

The world models here are functions that answer WRONG on purpose (noise, invented file
contents): strict grounding must still give the agent the facts, and record what it did.
"""

from __future__ import annotations

import asyncio
import json

import pytest

import simgym
from simgym.core.grounding import (
    EXPERIENCE_HEADER,
    FACTS_HEADER,
    Experience,
    Grounding,
    experience_block,
    facts_block,
)
from simgym.domains.shell import run_line
from simgym.worldmodels.function import FunctionWorldModel

HOME = "/home/dev"
FILES = {
    "/home/dev/notes.txt": "buy milk\ncall the bank\n",
    "/home/dev/project/": "",
    "/home/dev/project/main.py": 'print("hello from main")\n',
    "/home/dev/project/README.md": "# project\nA small demo project.\n",
}


def shell(line: str, files=FILES, cwd=HOME, env=None):
    return run_line(line, files, cwd=cwd, home=HOME, env=env, user="dev", host="devbox")


# -- the shell over the state ---------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "output"),
    [
        ("pwd", "/home/dev\n"),
        ("cat notes.txt", "buy milk\ncall the bank\n"),
        ("cat ~/notes.txt", "buy milk\ncall the bank\n"),
        ("ls", "notes.txt  project\n"),
        ("ls -a", ".  ..  notes.txt  project\n"),
        ("ls project", "README.md  main.py\n"),  # C.UTF-8: byte order, as the real ls
        ("ls -1 project", "README.md\nmain.py\n"),
        ("cat nope.txt", "cat: nope.txt: No such file or directory\n"),
        ("cat project", "cat: project: Is a directory\n"),
        ("head -n 1 notes.txt", "buy milk\n"),
        ("tail -1 notes.txt", "call the bank\n"),
        ("wc -l notes.txt", "2 notes.txt\n"),
        ("echo $HOME", "/home/dev\n"),
        ("echo '$HOME'", "$HOME\n"),
        ("whoami", "dev\n"),
        ("cd project && pwd", "/home/dev/project\n"),
        ("cd nope || echo failed", "bash: cd: nope: No such file or directory\nfailed\n"),
        ("ls *.txt", "notes.txt\n"),
        ("rm nope", "rm: cannot remove 'nope': No such file or directory\n"),
        ("mkdir project", "mkdir: cannot create directory 'project': File exists\n"),
    ],
)
def test_shell_output_is_what_bash_prints(line, output):
    assert shell(line).output == output


def test_shell_changes_become_a_merge_patch():
    result = shell("echo hi > a.txt && echo more >> a.txt; mkdir -p x/y && mv notes.txt x/y")
    assert result.output == ""
    assert result.patch_for(FILES) == {
        "files": {
            "/home/dev/a.txt": "hi\nmore\n",
            "/home/dev/notes.txt": None,
            "/home/dev/x/y/notes.txt": "buy milk\ncall the bank\n",
            "/home/dev/x/": "",
            "/home/dev/x/y/": "",
        }
    }
    moved = shell("cd project")
    assert moved.output == "" and moved.patch_for(FILES) == {"cwd": "/home/dev/project"}
    removed = shell("rm -r project")
    assert removed.patch_for(FILES)["files"] == {
        "/home/dev/project/main.py": None,
        "/home/dev/project/README.md": None,
        "/home/dev/project/": None,
    }


@pytest.mark.parametrize(
    "line",
    [
        "python3 -c 'import sys; print(sys.version)'",
        "awk '{print $1}' notes.txt",
        "cat $(ls)",
        "ls -la",
        "git --version",
    ],
)
def test_shell_leaves_programs_to_the_model_with_facts(line):
    result = shell(line)
    assert result.output is None
    assert result.facts and result.facts[0] == "working directory: /home/dev"


def test_shell_facts_name_the_files_a_program_reads():
    result = shell("python3 -u project/main.py")  # an option simgym does not model
    assert any('print("hello from main")' in fact for fact in result.facts)
    listing = shell("ls -la")
    assert any("notes.txt (23 bytes)" in fact for fact in listing.facts)


def test_shell_columns_like_gnu_ls():
    many = {f"/d/file_{i:02d}.txt": "" for i in range(30)}
    out = run_line("ls", many, cwd="/d", home="/d").output
    lines = out.splitlines()
    assert 1 < len(lines) < 30
    assert all(len(line) <= 80 for line in lines)
    assert lines[0].startswith("file_00.txt  file_")  # filled top to bottom, column by column
    assert sorted(out.split()) == sorted(n.rsplit("/", 1)[1] for n in many)


# -- blocks and checks -----------------------------------------------------------------


def test_blocks_and_problems():
    grounding = Grounding(facts=["cwd is /x"], expect=["a.txt"], forbid=["old-value"])
    assert facts_block(grounding).startswith(FACTS_HEADER)
    assert facts_block(Grounding()) is None
    assert grounding.problems("a.txt b.txt") == []
    assert len(grounding.problems("b.txt old-value")) == 2
    exact = Grounding(observation="$ pwd\n/x\n$")
    assert exact.problems("$ pwd\n/x  \n$\n") == []  # trailing blanks do not count
    assert exact.problems("$ pwd\n/y\n$")
    items = [Experience("ls", "a  b", "f:1"), Experience("cat a", "x" * 5000, "f:2")]
    block = experience_block(items, max_chars=400)
    assert block.startswith(EXPERIENCE_HEADER) and len(block) < 600
    assert "Example 1" in block and "Example 2" not in block
    assert experience_block([], 100) is None


# -- the engine ------------------------------------------------------------------------


def noise(messages):
    """A world model that answers everything with noise (as the 135M base does)."""
    return "<predicted_observation>\nDev-120.9 3/4  2018-Nov 7\n</predicted_observation>"


async def play(env, lines):
    await env.reset()
    results = []
    for line in lines:
        results.append(await env.step(line))
    return results


def test_strict_terminal_session_gets_the_facts_right():
    world = FunctionWorldModel(noise)
    env = simgym.make("terminal", world_model=world, grounding="strict")
    lines = ["pwd", "cat notes.txt", "echo hi > a.txt", "cat a.txt", "rm a.txt", "ls"]
    results = asyncio.run(play(env, lines))
    screens = [r.observation.text for r in results]
    assert screens[0] == "dev@devbox:~$ pwd\n/home/dev\ndev@devbox:~$"
    assert screens[1].splitlines()[1:3] == ["buy milk", "call the bank"]
    assert screens[3].splitlines()[1] == "hi"
    assert screens[5].splitlines()[1] == "notes.txt  project"
    assert "a.txt" not in env.state["files"] and "/home/dev/a.txt" not in env.state["files"]
    turns = env.trajectory.turns
    assert all(t.grounding["strict"]["action"] == "corrected" for t in turns)
    assert turns[0].grounding["strict"]["first"].startswith("Dev-120.9")
    assert turns[0].attempts == 1  # the state knew the answer: no second model call
    # The effects were applied by simgym, not by the model.
    assert turns[2].grounding["effects"] == {"files": {"/home/dev/a.txt": "hi\n"}, "status": 0}


def test_an_empty_answer_is_corrected_when_the_state_knows_the_whole_answer():
    def empty(messages):
        return "<predicted_observation>\n</predicted_observation>"

    # execution off: the tests' output is the model's (with execution they run for real)
    env = simgym.make(
        "swe", world_model=FunctionWorldModel(empty), grounding="strict", execution="off"
    )
    results = asyncio.run(play(env, [call("list_dir", path="."), call("run_tests")]))
    listing, tests = env.trajectory.turns
    # the state knows the listing: the empty answer is replaced, the episode goes on
    assert listing.error is None and listing.grounding["strict"]["action"] == "corrected"
    assert listing.grounding["strict"]["first"] == ""
    assert results[0].observation.text.strip() and listing.format_problems == []
    # test output is the model's to write: an empty one stays a recorded error
    assert tests.error_type == "empty_output" and "no observation" in tests.error
    assert not results[1].done and not results[1].truncated


def test_facts_go_in_the_newest_user_turn_and_earlier_messages_never_change():
    seen = []

    def world(messages):
        seen.append(json.loads(json.dumps(messages)))
        return "<predicted_observation>\ndev@devbox:~$\n</predicted_observation>"

    env = simgym.make("terminal", world_model=FunctionWorldModel(world), grounding="facts")
    asyncio.run(play(env, ["cat notes.txt", "cd project", "pwd"]))
    last = seen[-1][-1]["content"]
    assert FACTS_HEADER in last and "/home/dev/project" in last
    assert last.index(FACTS_HEADER) < last.index("**Action:**")
    for earlier, later in zip(seen, seen[1:], strict=False):
        assert later[: len(earlier)] == earlier  # each request extends the one before
    # facts mode does not correct: the model's answer stands, the state still moves.
    assert env.trajectory.turns[0].observation.text == "dev@devbox:~$"
    assert env.state["cwd"] == "/home/dev/project"
    assert "strict" not in env.trajectory.turns[0].grounding


def test_grounding_off_sends_and_changes_nothing():
    seen = []

    def world(messages):
        seen.append(messages[-1]["content"])
        return "<predicted_observation>\nwhatever\n</predicted_observation>"

    env = simgym.make("terminal", world_model=FunctionWorldModel(world), grounding="off")
    asyncio.run(play(env, ["echo hi > a.txt", "cd project"]))
    assert not any(FACTS_HEADER in text for text in seen)
    assert env.state["cwd"] == "/home/dev" and "/home/dev/a.txt" not in env.state["files"]
    assert all(t.grounding is None for t in env.trajectory.turns)


def test_a_model_that_gets_it_right_is_accepted_without_retry():
    def world(messages):
        facts = messages[-1]["content"]
        body = facts.split("prints exactly:\n```\n", 1)[1].split("```", 1)[0]
        return f"<predicted_observation>\ndev@devbox:~$ cat notes.txt\n{body}dev@devbox:~$\n"

    env = simgym.make("terminal", world_model=FunctionWorldModel(world), grounding="strict")
    results = asyncio.run(play(env, ["cat notes.txt"]))
    turn = env.trajectory.turns[0]
    assert turn.grounding["strict"] == {"problems": [], "action": "accepted"}
    assert turn.attempts == 1
    assert "buy milk" in results[0].observation.text


def test_strict_reasks_when_only_part_of_the_answer_is_known():
    calls = []

    def world(messages):
        calls.append(messages[-1]["content"])
        if len(calls) == 2:  # the re-ask names the problem; this answer fixes it
            return "<predicted_observation>\nnotes.txt\n</predicted_observation>"
        return "<predicted_observation>\nnothing here\n</predicted_observation>"

    from dataclasses import replace

    from simgym.core.domain import get_domain

    def partial(action, state, scenario):
        return Grounding(facts=["notes.txt exists"], expect=["notes.txt"])

    domain = replace(get_domain("terminal"), ground=partial)
    env = simgym.SimEnv(domain, FunctionWorldModel(world), grounding="strict", validation_retries=0)
    results = asyncio.run(play(env, ["find .", "find ."]))
    first = env.trajectory.turns[0]
    assert first.grounding["strict"]["action"] == "reasked" and first.attempts == 2
    assert "disagreed with the facts" in calls[1]
    assert results[0].observation.text == "notes.txt"
    second = env.trajectory.turns[1]
    assert second.grounding["strict"]["action"] == "unresolved"
    assert second.grounding["strict"]["left"]
    # the re-ask is not kept: the history holds the turn as first sent
    assert "disagreed" not in json.dumps(env.messages)


def test_interactive_programs_are_left_to_the_model():
    env = simgym.make("terminal", world_model=FunctionWorldModel(noise), grounding="strict")
    results = asyncio.run(play(env, ["python3", "print(1)", "C-d", "pwd"]))
    assert env.trajectory.turns[1].grounding["facts"][0].startswith("python3 is running")
    assert results[1].observation.text.startswith("Dev-120.9")  # not corrected: unknown
    assert results[3].observation.text.endswith("/home/dev\ndev@devbox:~$")


def test_a_broken_domain_grounding_costs_the_turn_its_facts_only():
    from dataclasses import replace

    from simgym.core.domain import get_domain

    def broken(action, state, scenario):
        raise RuntimeError("boom")

    domain = replace(get_domain("terminal"), ground=broken)
    env = simgym.SimEnv(domain, FunctionWorldModel(noise), grounding="strict")
    results = asyncio.run(play(env, ["pwd"]))
    assert results[0].observation.text.startswith("Dev-120.9")
    assert "boom" in env.trajectory.turns[0].grounding["grounding_error"]


def test_hidden_state_never_reaches_the_agent():
    secret = "s3cr3t-token-4821"
    scenario = simgym.get_domain("terminal").default_scenario()
    scenario["files"]["/home/dev/.env"] = f"API_KEY={secret}\n"
    env = simgym.make(
        "terminal", world_model=FunctionWorldModel(noise), scenario=scenario, grounding="strict"
    )
    results = asyncio.run(play(env, ["ls", "pwd", "node app.js"]))
    for result in results:
        assert secret not in result.observation.text
        assert secret not in json.dumps(result.info)
        assert FACTS_HEADER not in result.observation.text


def test_unknown_grounding_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="grounding must be one of"):
        simgym.make("terminal", world_model=FunctionWorldModel(noise), grounding="always")


# -- swe -------------------------------------------------------------------------------


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def test_strict_swe_session_edit_is_visible_later():
    env = simgym.make("swe", world_model=FunctionWorldModel(noise), grounding="strict")
    path = "invoicing/totals.py"
    fixed = "amount * (100 - percent) / 100"
    actions = [
        call("read_file", path=path),
        call("edit_file", path=path, old_str="amount - percent", new_str=fixed),
        call("read_file", path=path),
        call("bash", command=f"cat {path}"),
        call("list_dir"),
        call("run_tests"),
    ]
    results = asyncio.run(play(env, actions))
    texts = [r.observation.text for r in results]
    assert texts[0].startswith("     1  def apply_discount")
    assert texts[1].startswith("Edited invoicing/totals.py\n")
    assert fixed in texts[2]
    assert fixed in texts[3] and texts[3].endswith("[exit code: 0]")
    assert "invoicing/" in texts[4].splitlines()
    # The test run cannot be computed; its facts carry the edit to the model.
    facts = "\n".join(env.trajectory.turns[5].grounding["facts"])
    assert "changed since the start: invoicing/totals.py" in facts
    assert fixed in facts
    assert fixed in env.state["files"][path]


def test_what_an_unrun_program_may_have_changed_is_not_stated_as_certain():
    env = simgym.make("terminal", world_model=FunctionWorldModel(noise), grounding="strict")
    lines = [
        "node gen.js > out.txt",
        "cat out.txt",
        "ls",
        "cat notes.txt",
        "echo x > out.txt",
        "cat out.txt",
    ]
    results = asyncio.run(play(env, lines))
    turns = env.trajectory.turns
    assert "/home/dev/out.txt" in env.state["unknown"] or "/home/dev" in env.state["unknown"]
    # out.txt's content and the listing are unknown: the model's answers stand
    assert results[1].observation.text.startswith("Dev-120.9")
    assert results[2].observation.text.startswith("Dev-120.9")
    # a file nobody touched is still known, and a file written whole is known again
    assert results[3].observation.text.splitlines()[1] == "buy milk"
    assert results[5].observation.text.splitlines()[1] == "x"
    assert turns[5].grounding["strict"]["action"] == "corrected"


def test_swe_paths_a_script_may_have_written_are_left_to_the_model():
    env = simgym.make(
        "swe", world_model=FunctionWorldModel(noise), grounding="strict", execution="off"
    )
    actions = [
        call("bash", command="python scripts/gen.py"),
        call("list_dir"),
        call("read_file", path="generated.txt"),
        call("read_file", path="invoicing/totals.py"),
    ]
    results = asyncio.run(play(env, actions))
    assert "." in env.state["unknown"]
    assert results[1].observation.text.startswith("Dev-120.9")
    assert results[2].observation.text.startswith("Dev-120.9")
    assert results[3].observation.text.startswith("     1  def apply_discount")


def test_shell_destructive_commands_a_real_machine_runs_the_same_way():
    """What the real sandbox does to its files (checked by `simgym safety agree`):
    find -delete with simple tests, truncation and shred -u."""
    found = shell("find . -name '*.md' -delete")
    assert found.output == "" and found.changes == {"/home/dev/project/README.md": None}
    gone = set(shell("find project -delete").changes)
    assert gone == {
        "/home/dev/project/main.py",
        "/home/dev/project/README.md",
        "/home/dev/project/",
    }
    assert shell("find . -maxdepth 1 -type f -delete").changes == {"/home/dev/notes.txt": None}
    full = shell("find . -type d -name project -delete")
    assert full.output == "find: cannot delete \u2018./project\u2019: Directory not empty\n"
    assert shell("> notes.txt").changes == {"/home/dev/notes.txt": ""}
    assert shell(": > notes.txt; >> new.txt").changes == {
        "/home/dev/notes.txt": "",
        "/home/dev/new.txt": "",
    }
    assert shell("truncate -s 0 notes.txt").changes == {"/home/dev/notes.txt": ""}
    assert shell("shred -u -z notes.txt").changes == {"/home/dev/notes.txt": None}
    moved = shell("mv notes.txt /tmp/")  # /tmp's content is not known; notes.txt is gone
    assert moved.output == "" and moved.changes == {"/home/dev/notes.txt": None}
    assert "/tmp/notes.txt" in moved.unknown
    for unsure in ("shred notes.txt", "truncate -s 10 notes.txt", "find . -mtime +7 -delete"):
        assert shell(unsure).output is None, unsure


def test_find_delete_makes_the_files_it_walks_uncertain():
    env = simgym.make(
        "terminal", world_model=FunctionWorldModel(noise), grounding="strict", execution="off"
    )
    results = asyncio.run(play(env, ["find . -mtime +7 -delete", "cat notes.txt", "ls", "pwd"]))
    # a find simgym cannot run exactly (-mtime: file times are not in the state) may have
    # deleted notes.txt: neither its content nor the listing is certain now
    assert not results[1].observation.text.splitlines()[1:2] == ["buy milk"]
    assert results[2].observation.text.startswith("Dev-120.9")
    assert results[3].observation.text.splitlines()[1] == "/home/dev"  # still known
    assert "/home/dev/notes.txt" in env.state["unknown"]
