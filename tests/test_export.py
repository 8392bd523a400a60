"""Export of trajectories: AgentWorldBench rows and chat SFT data must hold exactly the
messages the environment sent the world model at run time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import simgym
from simgym.core import contract
from simgym.data.export import (
    AWB_FIELDS,
    awb_rows,
    export_files,
    read_rows,
    row_id,
    sft_examples,
    system_prompt_of,
    write_parquet,
)

SCENARIO = {"user": "dev", "hostname": "devbox", "files": {"/home/dev/a.txt": "alpha\n"}}


async def _episode(
    tmp_path: Path,
) -> tuple[simgym.Trajectory, list[list[dict]], Path, list[dict]]:
    """A terminal episode with a rejected action and a control instruction in the middle;
    also every message list the world model received, and the final history."""
    seen: list[list[dict]] = []

    def world(messages: list[dict]) -> str:
        seen.append([dict(m) for m in messages])
        command = json.loads(contract.action_text_of(messages[-1]["content"]))[0]["keystrokes"]
        return f"<predicted_observation>\ndev@devbox:~$ {command.strip()}\ndev@devbox:~$\n</predicted_observation>"

    out = tmp_path / "episode.jsonl"
    with simgym.TrajectoryWriter(out) as writer:
        env = simgym.make(
            "terminal",
            world_model=simgym.FunctionWorldModel(world),
            scenario=SCENARIO,
            writer=writer,
        )
        await env.reset({"id": "t-1", "instruction": "Read a.txt"})
        await env.step("cat a.txt")
        rejected = await env.step([{"keystrokes": "", "duration": 1}])
        assert rejected.observation.kind == "error"
        await env.step("ls", control="Pretend the disk is full.")
        await env.step([{"keystrokes": "pwd\n", "duration": 2}])
        final_messages = env.messages
        await env.close(reason=None)
    (trajectory,) = simgym.read_trajectories(out)
    assert len(trajectory.turns) == 4 and len(seen) == 3
    return trajectory, seen, out, final_messages


async def test_awb_rows_rebuild_what_the_model_saw(tmp_path: Path) -> None:
    trajectory, seen, _, _ = await _episode(tmp_path)
    rows = awb_rows(trajectory)
    assert len(rows) == 3  # the rejected action never reached the world model
    for k, (row, messages) in enumerate(zip(rows, seen, strict=True), 1):
        assert tuple(row) == AWB_FIELDS
        assert row["task"] == "terminal" and row["turn_idx"] == k and row["total_turns"] == 3
        assert row["id"] == row_id(trajectory.episode_id, k)
        # The reference evaluator's reconstruction: system, earlier pairs, current prompt.
        rebuilt = [{"role": "system", "content": row["system_str"]}]
        for j in range(row["turn_idx"] - 1):
            rebuilt += [
                {"role": "user", "content": row["prompt"][j]},
                {"role": "assistant", "content": row["response"][j]},
            ]
        rebuilt.append({"role": "user", "content": row["current_prompt"]})
        assert rebuilt == messages
        truth = row["response"][row["turn_idx"] - 1]
        assert (
            truth
            == contract.assistant_message(trajectory.turns[[0, 2, 3][k - 1]].observation.text)[
                "content"
            ]
        )
    assert "**Task:** Read a.txt" in rows[0]["current_prompt"]
    assert "**Control instruction:** Pretend the disk is full." in rows[1]["current_prompt"]
    assert rows[1]["current_prompt"].startswith("### Turn 2")


async def test_sft_examples_match_the_runtime_messages(tmp_path: Path) -> None:
    trajectory, seen, _, final_messages = await _episode(tmp_path)
    (episode,) = sft_examples(trajectory, mode="episode")
    assert episode["messages"] == final_messages

    per_turn = sft_examples(trajectory, mode="turn")
    assert len(per_turn) == 3
    for example, messages, turn in zip(
        per_turn, seen, [trajectory.turns[i] for i in (0, 2, 3)], strict=True
    ):
        assert example["messages"][:-1] == messages
        answer = example["messages"][-1]
        assert answer["role"] == "assistant"
        parsed = contract.parse_output(answer["content"])
        assert parsed.tagged and parsed.observation == turn.observation.text
    with pytest.raises(simgym.SimgymError):
        sft_examples(trajectory, mode="bogus")  # type: ignore[arg-type]


async def test_export_files_round_trip_through_plain_json(tmp_path: Path) -> None:
    _, _, path, _ = await _episode(tmp_path)
    awb = tmp_path / "rows" / "awb.jsonl"
    assert export_files([path], awb, "awb") == 3
    rows = [json.loads(line) for line in awb.read_text(encoding="utf-8").splitlines()]
    assert [sorted(r) for r in rows] == [sorted(AWB_FIELDS)] * 3
    assert all(isinstance(r["id"], int) and isinstance(r["prompt"], list) for r in rows)
    assert read_rows(awb) == rows

    sft = tmp_path / "rows" / "sft.jsonl"
    assert export_files([path], sft, "sft", mode="turn") == 3
    assert all(set(r) == {"messages"} for r in read_rows(sft))

    assert export_files([path], tmp_path / "none.jsonl", "awb", domain="mcp") == 0
    custom = tmp_path / "custom.jsonl"
    assert (
        export_files(
            [path], custom, "awb", template="World of $domain. $control", instructions="Be terse."
        )
        == 3
    )
    assert {r["system_str"] for r in read_rows(custom)} == {"World of terminal. Be terse."}
    with pytest.raises(simgym.SimgymError):
        export_files([path], tmp_path / "x.jsonl", "csv")  # type: ignore[arg-type]


async def test_given_system_prompt_and_empty_episodes(tmp_path: Path) -> None:
    trajectory, _, _, _ = await _episode(tmp_path)
    rows = awb_rows(trajectory, system_prompt="custom prompt")
    assert {r["system_str"] for r in rows} == {"custom prompt"}
    assert system_prompt_of(trajectory).startswith("You are the world model of a Linux terminal")
    empty = trajectory.model_copy(update={"turns": []})
    assert awb_rows(empty) == [] and sft_examples(empty) == []


async def test_parquet_export(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    trajectory, _, _, _ = await _episode(tmp_path)
    rows = awb_rows(trajectory)
    path = tmp_path / "awb.parquet"
    assert write_parquet(rows, path) == 3
    assert pq.read_table(path).to_pylist() == rows
