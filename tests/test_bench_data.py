"""Benchmark rows: the official file format, its quirks, and the request built from a row."""

import json
import warnings
from pathlib import Path

import pytest

import simgym
from simgym.bench.data import clean_observation, load_rows, row_key, select_rows
from simgym.bench.messages import build_messages
from simgym.core.errors import SimgymError

FIXTURE = Path(__file__).parent / "data" / "agentworldbench"


def fixture_rows():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fixture itself must load without warnings
        return load_rows(FIXTURE)


def test_fixture_loads_every_domain_file_with_official_fields():
    rows = fixture_rows()
    assert sorted({r.domain for r in rows}) == ["android", "mcp", "search", "terminal"]
    assert len(rows) == 11
    mcp = next(r for r in rows if r.domain == "mcp" and r.turn_idx == 2)
    assert mcp.id == 145256090131919  # ids stay as published (an integer here)
    assert mcp.key == "mcp/145256090131919/2"
    # The real observation of the current turn is response[turn_idx - 1].
    assert mcp.reference == mcp.response[1]
    assert json.loads(clean_observation(mcp.reference))["id"] == 412


def test_unicode_line_separators_stay_inside_their_row():
    raw = (FIXTURE / "search_test.jsonl").read_text(encoding="utf-8")
    assert "\u2028" in raw and "\u2029" in raw
    assert len(raw.splitlines()) > raw.count("\n")  # a naive reader would split rows apart
    rows = [r for r in fixture_rows() if r.domain == "search"]
    assert [r.turn_idx for r in rows] == [1, 2]
    assert "\u2028" in rows[0].reference and "\u2029" in rows[1].reference


def test_duplicate_rows_are_dropped_with_a_warning(tmp_path):
    lines = (FIXTURE / "terminal_test.jsonl").read_text(encoding="utf-8").splitlines(True)
    changed = json.loads(lines[1])
    changed["total_turns"] = 99  # same (id, turn_idx), different content
    (tmp_path / "terminal_test.jsonl").write_text(
        "".join(lines) + lines[0] + json.dumps(changed) + "\n", encoding="utf-8"
    )
    with pytest.warns(UserWarning, match=r"dropped 2 duplicate.*terminal: 2.*1 differed"):
        rows = load_rows(tmp_path)
    assert len(rows) == 4
    assert next(r for r in rows if r.turn_idx == 2 and r.id == 1002).total_turns == 3


def test_same_id_in_two_domains_is_not_a_duplicate():
    rows = fixture_rows()
    # search and android both have id 2 in the fixture, as small ids repeat across files.
    assert {r.key for r in rows if r.id == 2} == {
        "search/2/1",
        "search/2/2",
        "android/2/1",
        "android/2/2",
    }


def test_bad_lines_are_reported_with_file_and_line(tmp_path):
    bad = tmp_path / "x_test.jsonl"
    bad.write_text('{"task": "mcp", "id": 1, "turn_idx": 1, "response": ["a"]}\n{oops\n')
    with pytest.raises(SimgymError, match=r"x_test.jsonl:2: not a JSON line"):
        load_rows(bad)
    bad.write_text('{"task": "mcp", "id": 1, "turn_idx": 3, "response": ["a"]}\n')
    with pytest.raises(SimgymError, match="no real observation for turn 3"):
        load_rows(bad)
    with pytest.raises(SimgymError, match="not found"):
        load_rows(tmp_path / "missing")


def test_task_path_names_the_domain_and_current_prompt_falls_back(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(
        json.dumps(
            {
                "task": "agentworld/Terminal",
                "id": "a",
                "turn_idx": 2,
                "prompt": ["p1", "p2"],
                "response": ["r1", "r2"],
            }
        )
        + "\n"
    )
    [row] = load_rows(path)
    assert row.domain == "terminal" and row.current_prompt == "p2" and row.reference == "r2"


def test_messages_are_the_sample_verbatim():
    rows = fixture_rows()
    row = next(r for r in rows if r.key == "terminal/1002/3")
    messages = build_messages(row)
    assert messages[0] == {"role": "system", "content": row.system_str}
    assert messages[1:5] == [
        {"role": "user", "content": row.prompt[0]},
        {"role": "assistant", "content": row.response[0]},
        {"role": "user", "content": row.prompt[1]},
        {"role": "assistant", "content": row.response[1]},
    ]
    assert messages[-1] == {"role": "user", "content": row.current_prompt}
    assert len(messages) == 6
    # The answer itself never leaks into the request.
    assert all(m["content"] != row.response[2] for m in messages)
    first = build_messages(next(r for r in rows if r.key == "terminal/1002/1"))
    assert [m["role"] for m in first] == ["system", "user"]


def test_select_rows_filters_and_samples_per_domain():
    rows = fixture_rows()
    assert [r.key for r in select_rows(rows, domains=["mcp,terminal"], limit=1)] == [
        "mcp/145256090131919/1",
        "terminal/1002/1",
    ]
    sampled = select_rows(rows, limit=2, seed=7)
    assert len(sampled) == 8 and sampled == select_rows(rows, limit=2, seed=7)
    assert {r.domain for r in sampled} == {"android", "mcp", "search", "terminal"}
    # File order is kept whatever was sampled.
    order = [r.key for r in rows]
    assert [order.index(r.key) for r in sampled] == sorted(order.index(r.key) for r in sampled)
    with pytest.raises(SimgymError, match="no rows for domain"):
        select_rows(rows, domains=["web"])


def test_simgym_trajectories_become_rows(tmp_path):
    def screen(messages):
        command = "ls" if "ls" in messages[-1]["content"] else "pwd"
        output = "notes.txt" if command == "ls" else "/home/dev"
        return f"dev@devbox:~$ {command}\n{output}\ndev@devbox:~$"

    with simgym.TrajectoryWriter(tmp_path / "t.jsonl") as writer:
        env = simgym.make("terminal", world_model=simgym.FunctionWorldModel(screen), writer=writer)
        sync = env.sync()
        sync.reset("look around")
        sync.step("ls")
        sync.step("pwd")
        sync.close()
    rows = load_rows(tmp_path / "t.jsonl")
    assert [r.turn_idx for r in rows] == [1, 2]
    assert rows[1].reference.endswith("/home/dev\ndev@devbox:~$")
    assert rows[0].current_prompt.startswith("### Turn 1")
    assert "look around" in rows[0].current_prompt
    assert rows[1].prompt[0] == rows[0].current_prompt  # turn 2's history is turn 1
    assert rows[0].key == row_key("terminal", rows[0].id, 1)
    assert "terminal" in rows[0].system_str.lower()
    # The request for turn 2 is exactly what the environment sent the world model.
    messages = build_messages(rows[1])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"].startswith("**Environment Observation:**")
