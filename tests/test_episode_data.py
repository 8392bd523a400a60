"""Whole-episode SFT sequences: every observation learned once, the prefill never."""

from __future__ import annotations

import json

import pytest

from simgym.train.base import load_tokenizer
from simgym.train.episode_data import IGNORE, build_episode_dataset
from simgym.train.errors import TrainError

SYSTEM = "You simulate a Linux terminal. Answer with the screen after the command."
HEADER = "**Environment Observation:**\n"
PROMPT = "dev@box:~$"


@pytest.fixture(scope="module")
def tokenizer(model_path):
    return load_tokenizer(model_path)


def screen(turn: int) -> str:
    return f"{PROMPT} cmd{turn}\nresult number {turn} " + "word " * 6 + f"\n{PROMPT}"


def episode(name: str, turns: int, *, domain: str = "terminal") -> list[dict]:
    """The factory's per-turn rows of one episode: history observations untagged, the
    answer tagged, with the backend's prefill (header, tag and echoed command)."""
    rows, history = [], [{"role": "system", "content": f"{SYSTEM} Episode {name}."}]
    for turn in range(1, turns + 1):
        history.append({"role": "user", "content": f"### Turn {turn}\n**Action:**\ncmd{turn}"})
        prefill = f"{HEADER}<predicted_observation>\n{PROMPT} cmd{turn}\n"
        body = screen(turn)
        completion = f"{HEADER}<predicted_observation>\n{body}\n</predicted_observation>"
        rows.append(
            {
                "messages": list(history),
                "completion": completion,
                "prefill": prefill,
                "domain": domain,
                "episode_id": name,
                "turn": turn,
            }
        )
        history.append({"role": "assistant", "content": HEADER + body})
    return rows


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def learned(tokenizer, example) -> list[str]:
    """The labelled stretches of a sequence, decoded."""
    spans, current = [], []
    for token, label in zip(example["input_ids"], example["labels"], strict=True):
        if label != IGNORE:
            assert label == token
            current.append(token)
        elif current:
            spans.append(tokenizer.decode(current))
            current = []
    if current:
        spans.append(tokenizer.decode(current))
    return spans


def test_one_sequence_teaches_every_observation_of_an_episode(tmp_path, tokenizer):
    rows = episode("e1", 4)
    data, stats = build_episode_dataset(write(tmp_path / "t.jsonl", rows), tokenizer, 2048)
    assert len(data) == 1 and stats.kept == 1 and stats.observations == 4 and stats.rows == 4
    spans = learned(tokenizer, data[0])
    # history: the text after the header, through the end of the turn
    assert spans[:3] == [f"\n{screen(t)}<|im_end|>\n" for t in (1, 2, 3)]
    # the answer: what follows the prefill (tag and echoed command are never learned)
    assert (
        spans[3]
        == "result number 4 " + "word " * 6 + f"\n{PROMPT}\n</predicted_observation><|im_end|>\n"
    )


def test_the_answer_is_tokenized_as_the_local_backend_generates_it(tmp_path, tokenizer):
    rows = episode("e1", 2)
    data, _ = build_episode_dataset(write(tmp_path / "t.jsonl", rows), tokenizer, 2048)
    last = rows[-1]
    head = tokenizer.apply_chat_template(
        last["messages"], tokenize=False, add_generation_prompt=True
    )
    prompt_ids = tokenizer(head + last["prefill"], add_special_tokens=False)["input_ids"]
    ids = data[0]["input_ids"]
    assert ids[: len(prompt_ids)] == prompt_ids  # prompt and prefill as one string
    assert all(
        label == IGNORE for label in data[0]["labels"][len(prompt_ids) - 3 : len(prompt_ids)]
    )
    assert data[0]["labels"][len(prompt_ids)] != IGNORE


def test_a_long_episode_is_split_and_no_observation_is_lost_or_repeated(tmp_path, tokenizer):
    rows = episode("long", 12)
    path = write(tmp_path / "t.jsonl", rows)
    whole, _ = build_episode_dataset(path, tokenizer, 4096)
    assert len(whole) == 1
    data, stats = build_episode_dataset(path, tokenizer, len(whole[0]["input_ids"]) // 2)
    assert len(data) >= 2 and stats.trimmed >= 1 and stats.dropped == 0
    assert all(len(example["input_ids"]) <= len(whole[0]["input_ids"]) // 2 for example in data)
    taught = [span for example in data for span in learned(tokenizer, example)]
    numbers = sorted(int(s.split("result number ")[1].split()[0]) for s in taught)
    assert numbers == list(range(1, 13))  # each turn once
    assert stats.observations == 12


def test_rows_without_episode_ids_are_sequences_of_their_own(tmp_path, tokenizer):
    rows = episode("e1", 3)
    for row in rows:
        del row["episode_id"], row["turn"]
    data, stats = build_episode_dataset(write(tmp_path / "t.jsonl", rows), tokenizer, 2048)
    assert len(data) == 3 and stats.observations == 1 + 2 + 3


def test_the_same_episode_id_in_two_domains_is_two_episodes(tmp_path, tokenizer):
    rows = episode("7", 2) + episode("7", 2, domain="swe")
    data, stats = build_episode_dataset(write(tmp_path / "t.jsonl", rows), tokenizer, 2048)
    assert len(data) == 2 and stats.observations == 4


def test_a_budget_takes_whole_episodes_in_a_seeded_order(tmp_path, tokenizer):
    rows = [row for i in range(10) for row in episode(f"e{i}", 2)]
    path = write(tmp_path / "t.jsonl", rows)
    few, stats = build_episode_dataset(path, tokenizer, 2048, max_rows=3, seed=1)
    again, _ = build_episode_dataset(path, tokenizer, 2048, max_rows=3, seed=1)
    other, _ = build_episode_dataset(path, tokenizer, 2048, max_rows=3, seed=2)
    assert len(few) == 3 and stats.rows == 6 and stats.unread == 14
    assert list(few["input_ids"]) == list(again["input_ids"]) != list(other["input_ids"])
    per = stats.tokens / stats.kept
    capped, stats = build_episode_dataset(path, tokenizer, 2048, max_tokens=int(per * 5), seed=1)
    assert 5 <= stats.kept <= 6


def test_a_row_too_long_even_alone_is_dropped_and_counted(tmp_path, tokenizer):
    rows = episode("e1", 2)
    rows[1]["completion"] = rows[1]["completion"].replace("word", "word " * 400)
    data, stats = build_episode_dataset(write(tmp_path / "t.jsonl", rows), tokenizer, 300)
    assert stats.dropped == 1 and stats.dropped_lines == [2]
    assert len(data) == 1 and stats.observations == 1  # the earlier row still teaches turn 1
    with pytest.raises(TrainError, match="raise --max-length"):
        build_episode_dataset(write(tmp_path / "t.jsonl", rows[1:]), tokenizer, 300)
