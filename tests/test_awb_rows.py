"""AgentWorldBench rows that the reference evaluation can read.

AgentWorldBench documents its rows this way: ``prompt`` and ``response`` list the turns of
the trajectory (action prompts and the real observations), ``current_prompt`` is the
action prompt of the turn being evaluated and ``turn_idx`` its 1-based position. Its
evaluation script builds the world-model request as: the sample's ``system_str`` (when
not empty) as the system message, then for each earlier turn ``prompt[i]`` as a user
message and ``response[i]`` as an assistant message, then the action to simulate as the
last user message, which is ``prompt[turn_idx - 1]`` (``current_prompt`` holds the same
text). The truth a prediction is judged against is ``response[turn_idx - 1]``.

``reference_request`` below is that construction written out from the documentation; the
tests check that simgym's exporter writes rows it can read and that simgym's reader
(:func:`simgym.bench.messages.build_messages`) sends byte-identical requests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import simgym
from simgym.bench.data import load_rows, row_from_record
from simgym.bench.messages import build_messages
from simgym.core import contract
from simgym.data.export import awb_rows, export_files

DEVSET_ROWS = Path(__file__).resolve().parents[1] / "devset" / "rows.jsonl"
Messages = list[dict[str, str]]


def reference_request(record: dict[str, Any]) -> Messages:
    """The request the reference evaluation builds for one row (see the module docstring).

    Deliberately strict: the action is read as ``prompt[turn_idx - 1]``, so a row whose
    ``prompt`` stops short of its own turn fails here with an IndexError, as it does there.
    """
    prompts, responses = record["prompt"], record["response"]
    position = record["turn_idx"] - 1  # 0-based index of the turn to simulate
    action = prompts[position]
    assert record["current_prompt"] == action, "current_prompt must equal prompt[turn_idx - 1]"
    messages: Messages = []
    if record["system_str"]:
        messages.append({"role": "system", "content": record["system_str"]})
    for i in range(min(position, len(prompts), len(responses))):
        messages.append({"role": "user", "content": prompts[i]})
        messages.append({"role": "assistant", "content": responses[i]})
    messages.append({"role": "user", "content": action})
    return messages


def reference_truth(record: dict[str, Any]) -> str:
    return record["response"][record["turn_idx"] - 1]


def as_bytes(messages: Messages) -> bytes:
    """A canonical byte form: equal bytes mean the same request on the wire."""
    return json.dumps(messages, ensure_ascii=False).encode("utf-8")


def simgym_request(record: dict[str, Any]) -> bytes:
    return as_bytes(build_messages(row_from_record(record, "test")))


def _terminal_episode(tmp_path: Path) -> tuple[simgym.Trajectory, list[Messages], Path]:
    """Three turns of a terminal episode and every request the world model received."""
    seen: list[Messages] = []

    def world(messages: Messages) -> str:
        seen.append([dict(m) for m in messages])
        keys = json.loads(contract.action_text_of(messages[-1]["content"]))[0]["keystrokes"]
        return f"dev@devbox:~$ {keys.strip()}\nok {len(seen)}\ndev@devbox:~$"

    out = tmp_path / "episode.jsonl"
    with simgym.TrajectoryWriter(out) as writer:
        env = simgym.make("terminal", world_model=simgym.FunctionWorldModel(world), writer=writer)
        sync = env.sync()
        sync.reset({"id": "awb-1", "instruction": "Look around"})
        for command in ("ls", "cat notes.txt", "pwd"):
            sync.step(command)
        sync.close()
    (trajectory,) = simgym.read_trajectories(out)
    return trajectory, seen, out


def test_exported_rows_hold_every_turn_up_to_the_current_one(tmp_path: Path) -> None:
    trajectory, seen, _ = _terminal_episode(tmp_path)
    rows = awb_rows(trajectory)
    assert [r["turn_idx"] for r in rows] == [1, 2, 3]
    for row in rows:
        k = row["turn_idx"]
        assert len(row["prompt"]) == k and len(row["response"]) == k
        assert row["current_prompt"] == row["prompt"][k - 1]
    for earlier, later in zip(rows, rows[1:], strict=False):
        # Each row's lists extend the previous row's: history is never rewritten.
        assert later["prompt"][:-1] == earlier["prompt"]
        assert later["response"][:-1] == earlier["response"]
    assert "**Task:** Look around" in rows[0]["prompt"][0]


def test_reference_and_simgym_build_byte_identical_requests(tmp_path: Path) -> None:
    trajectory, seen, out = _terminal_episode(tmp_path)
    exported = tmp_path / "rows.jsonl"
    assert export_files([out], exported, "awb") == 3
    records = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    for record, runtime in zip(records, seen, strict=True):
        reference = as_bytes(reference_request(record))
        assert simgym_request(record) == reference
        # ...and both are exactly what the environment sent the world model at run time.
        assert as_bytes(runtime) == reference
    # The truth the judge reads is the turn's recorded observation.
    loaded = load_rows(exported)
    assert [r.reference for r in loaded] == [reference_truth(r) for r in records]
    assert loaded[1].reference.endswith("ok 2\ndev@devbox:~$")


@pytest.mark.skipif(not DEVSET_ROWS.exists(), reason="devset/rows.jsonl is not there")
def test_every_devset_row_is_readable_by_the_reference_construction() -> None:
    records = [
        json.loads(line) for line in DEVSET_ROWS.read_text(encoding="utf-8").split("\n") if line
    ]
    assert len(records) >= 400
    for record in records:
        where = f"{record['task']}/{record['id']}/{record['turn_idx']}"
        assert simgym_request(record) == as_bytes(reference_request(record)), where
        assert row_from_record(record).reference == reference_truth(record), where


def test_rows_in_the_old_layout_are_still_read_and_completed(tmp_path: Path) -> None:
    trajectory, _, _ = _terminal_episode(tmp_path)
    new = awb_rows(trajectory)
    # simgym's exporter used to leave this turn's action out of ``prompt``.
    old = [{**row, "prompt": row["prompt"][:-1]} for row in new]
    with pytest.raises(IndexError):
        reference_request(old[0])
    for before, after in zip(old, new, strict=True):
        row = row_from_record(before, "old")
        assert row.prompt == after["prompt"]  # completed with current_prompt
        assert simgym_request(before) == as_bytes(reference_request(after))
        # What results files embed is now a row the reference evaluation reads.
        assert as_bytes(reference_request(row.sample())) == as_bytes(reference_request(after))


def test_rows_read_from_a_trajectory_are_the_exported_rows(tmp_path: Path) -> None:
    trajectory, _, out = _terminal_episode(tmp_path)
    loaded = load_rows(out)
    assert [r.sample() for r in loaded] == awb_rows(trajectory)
    for row in loaded:
        assert len(row.prompt) == row.turn_idx
        assert as_bytes(reference_request(row.sample())) == as_bytes(build_messages(row))
