"""The hidden state ledger: patches, validation, and the two context modes of SimEnv."""

from __future__ import annotations

import json

import pytest

import simgym
from simgym.core.state import (
    STATE_HEADER,
    PatchError,
    StateLedger,
    apply_patch,
    extract_update,
    merge_patch,
    parse_patch,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "files": {"type": "object", "additionalProperties": {"type": "string"}},
        "cwd": {"type": "string"},
    },
    "required": ["files", "cwd"],
}


def ledger() -> StateLedger:
    return StateLedger({"cwd": "/home/user", "files": {"a.txt": "one"}}, SCHEMA)


# -- parsing and applying ----------------------------------------------------------------


def test_merge_patch_adds_changes_and_deletes():
    state = {"files": {"a": "1", "b": "2"}, "cwd": "/"}
    new = merge_patch(state, {"files": {"a": "9", "b": None, "c": "3"}})
    assert new == {"files": {"a": "9", "c": "3"}, "cwd": "/"}
    assert state == {"files": {"a": "1", "b": "2"}, "cwd": "/"}  # input untouched


def test_json_patch_operations_apply():
    state = {"files": {"a.txt": "one"}, "cwd": "/"}
    new = apply_patch(
        state,
        [
            {"op": "add", "path": "/files/b.txt", "value": "two"},
            {"op": "remove", "path": "/files/a.txt"},
            {"op": "replace", "path": "/cwd", "value": "/tmp"},
        ],
    )
    assert new == {"files": {"b.txt": "two"}, "cwd": "/tmp"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("{not json", "not valid JSON"),
        ('"just a string"', "object or a list"),
        ('[{"path": "/x"}]', "needs 'op' and 'path'"),
    ],
)
def test_malformed_patches_are_rejected_with_reasons(text, message):
    with pytest.raises(PatchError, match=message):
        parse_patch(text)


def test_patch_in_code_fence_is_read():
    assert parse_patch('```json\n{"cwd": "/tmp"}\n```') == {"cwd": "/tmp"}


def test_json_patch_that_does_not_apply_is_an_error():
    with pytest.raises(PatchError, match="does not apply"):
        apply_patch({"files": {}}, [{"op": "remove", "path": "/files/missing"}])


def test_ledger_applies_good_update():
    book = ledger()
    update = book.update('{"files": {"b.txt": "two"}}')
    assert update.applied and update.error is None
    assert book.state["files"] == {"a.txt": "one", "b.txt": "two"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "no <state_update>"),
        ("{broken", "not valid JSON"),
        ('{"files": {"a.txt": 5}}', "breaks the state schema"),  # a file's content is a number
        ('{"cwd": null}', "breaks the state schema"),  # deletes a required key
        ('[{"op": "remove", "path": "/nope"}]', "does not apply"),
    ],
)
def test_ledger_keeps_state_on_bad_update(text, message):
    book = ledger()
    before = json.dumps(book.state)
    update = book.update(text)
    assert not update.applied and message in update.error
    assert json.dumps(book.state) == before


def test_initial_state_must_fit_schema():
    with pytest.raises(PatchError, match="initial state"):
        StateLedger({"files": {}}, SCHEMA)


def test_extract_update_takes_last_block_closed_or_not():
    raw = '<state_update>{}</state_update> text <state_update>{"a": 1}'
    assert extract_update(raw) == '{"a": 1}'
    assert extract_update("no block") is None


def test_parse_output_hides_update_from_observation():
    parsed = simgym.parse_output(
        "<predicted_observation>hi\n</predicted_observation>\n<state_update>{}</state_update>"
    )
    assert parsed.observation == "hi" and parsed.state_update == "{}"
    plain = simgym.parse_output('untagged screen\n<state_update>{"x": 1}</state_update>')
    assert plain.observation == "untagged screen" and plain.state_update == '{"x": 1}'


# -- the environment ------------------------------------------------------------------------


def file_world(messages):
    """A terminal that keeps files straight from the state it is shown (state mode) and
    reports each write as a merge patch."""
    action = json.loads(messages[-1]["content"].split("**Action:**")[-1])
    typed = action[0]["keystrokes"].strip()
    if typed.startswith("write "):
        _, name, value = typed.split(" ", 2)
        return (
            "<predicted_observation>user@devbox:~$</predicted_observation>"
            f'<state_update>{{"files": {{"/home/user/{name}": "{value}"}}}}</state_update>'
        )
    if typed == "bad":
        return "<predicted_observation>user@devbox:~$</predicted_observation><state_update>{oops"
    if typed == "typo":
        return '<predicted_observation>ok\nuser@devbox:~$</predicted_observation><state_update>{"files": 3}</state_update>'
    return "<predicted_observation>user@devbox:~$</predicted_observation>"


async def test_state_updates_are_applied_recorded_and_final():
    env = simgym.make(
        "terminal", world_model=simgym.FunctionWorldModel(file_world), state_updates=True
    )
    await env.reset("keep notes")
    assert "## Hidden state" in env.messages[0]["content"]
    await env.step("write notes.txt hello")
    await env.step("bad")
    await env.step("typo")
    await env.step("ls")
    turns = env.trajectory.turns
    assert turns[0].state_patch == {"files": {"/home/user/notes.txt": "hello"}}
    assert turns[0].state_error is None
    assert "not valid JSON" in turns[1].state_error
    assert "breaks the state schema" in turns[2].state_error
    assert "no <state_update>" in turns[3].state_error
    assert env.state["files"]["/home/user/notes.txt"] == "hello"
    # observations never carry the patch
    assert all("state_update" not in t.observation.text for t in turns)
    await env.close()
    assert env.trajectory.final_state == env.state


async def test_history_mode_keeps_ledger_without_asking_for_updates():
    env = simgym.make("terminal", world_model=simgym.FunctionWorldModel(file_world))
    await env.reset("x")
    assert "## Hidden state" not in env.messages[0]["content"]
    await env.step("write a.txt 1")
    assert env.trajectory.turns[0].state_patch is None
    await env.close()
    # the ledger is the scenario's own world, untouched
    assert env.trajectory.final_state["cwd"] == env.scenario.working_dir
    assert "/home/user/a.txt" not in env.trajectory.final_state["files"]


async def test_state_mode_prompt_stays_bounded_over_a_long_episode():
    sizes: list[int] = []
    counts: list[int] = []

    def world(messages):
        sizes.append(sum(len(m["content"]) for m in messages))
        counts.append(len(messages))
        return file_world(messages)

    env = simgym.make(
        "terminal",
        world_model=simgym.FunctionWorldModel(world),
        context="state",
        context_turns=3,
        max_turns=200,
    )
    await env.reset("a long session")
    for i in range(120):
        await env.step(f"write f{i % 5}.txt v{i}" if i % 3 == 0 else "pwd")
    # system + 3 to 5 earlier turns (a window moving 3 turns at a time) + the action
    assert max(counts) == 1 + 2 * 5 + 1
    assert counts[9:15] == [8, 10, 12, 8, 10, 12]
    assert max(sizes[20:]) - min(sizes[20:]) < 400  # bounded: 5 files at most in the state
    last = env.messages  # the full history is still kept for the record
    assert len(last) == 1 + 2 * 120
    assert len(env.trajectory.turns) == 120
    assert env.state["files"]["/home/user/f3.txt"] == "v108"  # its last write (i = 108)


async def test_state_mode_shows_current_state_in_newest_turn_only():
    seen: list[list[dict]] = []

    def world(messages):
        seen.append(messages)
        return file_world(messages)

    env = simgym.make("terminal", world_model=simgym.FunctionWorldModel(world), context="state")
    await env.reset("x")
    await env.step("write a.txt 1")
    await env.step("pwd")
    newest = seen[-1][-1]["content"]
    assert STATE_HEADER in newest and '"/home/user/a.txt": "1"' in newest
    assert all(STATE_HEADER not in m["content"] for m in seen[-1][1:-1])  # after the system


def test_bad_context_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="context"):
        simgym.make("terminal", world_model=simgym.FunctionWorldModel(file_world), context="x")
