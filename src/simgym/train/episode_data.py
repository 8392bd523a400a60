"""Whole-episode SFT sequences: one token sequence teaches every observation of an episode.

The per-turn rows of an episode repeat one another: turn ``t``'s prompt is turn ``t-1``'s
prompt plus one observation and one action. Trained row by row, the system prompt and the
history are read again for every turn, about eight times the tokens on the factory's
episodes. Here the last row of an episode is laid out once with the chat template and the
loss covers every observation in it: the history observations (as the environment shows
them to the model, after the ``**Environment Observation:**`` header) and the final answer.

The final answer is split where the ``local`` backend splits it at run time: the prefill
(header, opening tag and a terminal's echoed command line) is tokenized with the prompt and
never learned, and the rest is tokenized on its own, the way the model generates it. A row
whose history was cut to fit ``max_length`` only teaches what it still holds; the turns it
lost are taught by an earlier row of the same episode.

Rows without ``episode_id`` and ``turn`` (hand-made files) each make their own sequence.
"""

from __future__ import annotations

import os
import random
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from simgym.core.contract import OBSERVATION_HEADER
from simgym.train.errors import TrainError
from simgym.train.sft_data import (
    _LISTED,
    FitStats,
    Message,
    _budget_met,
    fit_history,
    read_records,
)

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedTokenizerBase

IGNORE = -100  # the label transformers' loss skips
# fit_history measures the conversational layout; the split answer may tokenize a few
# tokens longer at the seam, so leave room for that
_SEAM = 8

Record = tuple[int, list[Message], str, dict[str, Any]]


def build_episode_dataset(
    path: str | os.PathLike[str],
    tokenizer: PreTrainedTokenizerBase,
    max_length: int,
    *,
    max_rows: int | None = None,
    max_tokens: int | None = None,
    seed: int = 0,
) -> tuple[Dataset, FitStats]:
    """Read an SFT JSONL file into tokenized whole-episode sequences (``input_ids`` and
    ``labels``) of at most ``max_length`` tokens. With ``max_rows`` (sequences) or
    ``max_tokens``, episodes are taken in a seeded random order until either is met."""
    from datasets import Dataset

    if max_length < 16 + _SEAM:
        raise TrainError(f"max_length {max_length} is too small to hold a prompt and an answer")
    episodes = _episodes(read_records(path))
    if not episodes:
        raise TrainError(f"{path} holds no rows")
    order = list(episodes)
    sampled = max_rows is not None or max_tokens is not None
    if sampled:
        random.Random(seed).shuffle(order)
    stats = FitStats()
    examples: list[dict[str, list[int]]] = []
    for index, key in enumerate(order):
        if sampled and _budget_met(stats, max_rows, max_tokens):
            stats.unread = sum(len(episodes[k]) for k in order[index:])
            break
        rows = episodes[key]
        stats.rows += len(rows)
        for example, taught in _sequences(rows, tokenizer, max_length, stats):
            examples.append(example)
            stats.kept += 1
            stats.observations += taught
            stats.tokens += len(example["input_ids"])
    if not examples:
        raise TrainError(
            f"no row of {path} fits max_length={max_length} tokens, even without history; "
            "raise --max-length"
        )
    return Dataset.from_list(examples), stats


def _episodes(records: Any) -> dict[Any, list[Record]]:
    """Rows grouped by episode, each group in turn order; a row without an episode id or a
    turn number is an episode of its own."""
    groups: dict[Any, list[Record]] = defaultdict(list)
    for record in records:
        row = record[3]
        episode, turn = row.get("episode_id"), row.get("turn")
        known = episode is not None and isinstance(turn, int)
        groups[("episode", row.get("domain"), episode) if known else ("line", record[0])].append(
            record
        )
    for rows in groups.values():
        rows.sort(key=lambda r: r[3].get("turn") or 0)
    return groups


def _sequences(
    rows: list[Record], tokenizer: PreTrainedTokenizerBase, max_length: int, stats: FitStats
) -> list[tuple[dict[str, list[int]], int]]:
    """The sequences that teach an episode: its last row, then the last row whose own turn
    that one's history no longer held, and so on back to the first turn."""
    out = []
    index = len(rows) - 1
    while index >= 0:
        number, prompt, completion, row = rows[index]
        kept, _ = fit_history(tokenizer, prompt, completion, max_length - _SEAM)
        if kept is None:
            stats.dropped += 1
            if len(stats.dropped_lines) < _LISTED:
                stats.dropped_lines.append(number)
            index -= 1
            continue
        if len(kept) < len(prompt):
            stats.trimmed += 1
            stats.messages_dropped += len(prompt) - len(kept)
        example, taught = encode_episode(tokenizer, kept, completion, row.get("prefill") or "")
        out.append((example, taught))
        turn = row.get("turn")
        if isinstance(turn, int):  # the next sequence ends at the newest turn not taught yet
            first_taught = turn - (taught - 1)
            index -= 1
            while index >= 0 and (rows[index][3].get("turn") or 0) >= first_taught:
                index -= 1
        else:
            index -= 1
    return out


def encode_episode(
    tokenizer: PreTrainedTokenizerBase, messages: list[Message], completion: str, prefill: str
) -> tuple[dict[str, list[int]], int]:
    """Tokenize ``messages`` and the answer ``completion`` as one sequence with labels on
    every observation; returns the example and how many observations it teaches."""
    head = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    answer = {"role": "assistant", "content": completion}
    full = tokenizer.apply_chat_template([*messages, answer], tokenize=False)
    if not full.startswith(head):
        raise TrainError("the chat template does not extend a conversation by appending to it")
    prefill = prefill if completion.startswith(prefill) else ""
    spans = _history_spans(tokenizer, messages, head)
    encoded = tokenizer(head + prefill, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(encoded["input_ids"])
    labels = [
        token if any(start <= a and b <= end for start, end in spans) else IGNORE
        for token, (a, b) in zip(ids, encoded["offset_mapping"], strict=True)
    ]
    rest = tokenizer(full[len(head) + len(prefill) :], add_special_tokens=False)["input_ids"]
    return {"input_ids": ids + rest, "labels": labels + list(rest)}, len(spans) + 1


def _history_spans(
    tokenizer: PreTrainedTokenizerBase, messages: list[Message], head: str
) -> list[tuple[int, int]]:
    """Character spans of ``head`` to learn: each assistant message's text after the
    observation header, through the template's end-of-turn marker."""
    spans = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = tokenizer.apply_chat_template(
            messages[:index], tokenize=False, add_generation_prompt=True
        )
        through = tokenizer.apply_chat_template(messages[: index + 1], tokenize=False)
        content = message["content"]
        if not (head.startswith(through) and through[len(before) :].startswith(content)):
            raise TrainError("the chat template does not lay history messages out verbatim")
        start = len(before)
        if content.startswith(OBSERVATION_HEADER):  # the same header every turn: no lesson
            start += len(OBSERVATION_HEADER)
        spans.append((start, len(through)))
    return spans
