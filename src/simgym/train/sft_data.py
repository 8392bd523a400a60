"""World-model SFT data: JSONL rows in, a prompt-completion dataset for TRL out.

A row is one turn to predict. Accepted forms (one JSON object a line):

* ``{"messages": [system, user, assistant, ..., user], "completion": "..."}``: the
  conversation up to the action to simulate, and the observation the model should answer
  (``**Environment Observation:**`` and a ``<predicted_observation>`` block);
* ``{"messages": [system, user, assistant, ..., user, assistant]}``: the same with the
  answer as the last message (``simgym export --format sft --mode turn``);
* ``{"prompt": [...], "completion": [{"role": "assistant", "content": "..."}]}``: TRL's
  own conversational prompt-completion form.

Each becomes ``{"prompt": messages, "completion": [assistant message]}``, which TRL's
``SFTTrainer`` renders with the model's chat template and trains on with the prompt masked
out of the loss (``completion_only_loss``), so only observation tokens are learned.

Rows longer than ``max_length`` tokens lose their oldest turns first, a user/assistant pair
at a time, keeping the system prompt and the action: the rule the ``local`` backend applies
to a prompt at run time, so training sees what inference sees. A row that does not fit even
with no history left is dropped and counted (:class:`FitStats`); cutting into the system
prompt or the observation would teach the model a prompt it never gets or an answer that
stops mid-way.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simgym.core.safeload import loads_json
from simgym.train.errors import TrainError

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedTokenizerBase

Message = dict[str, str]
ROLES = ("system", "user", "assistant")
# how many dropped rows are named by line in the stats (the count is always exact)
_LISTED = 20


@dataclass
class FitStats:
    """What fitting rows to the length budget did to one file."""

    rows: int = 0
    kept: int = 0
    trimmed: int = 0  # rows that lost some history
    messages_dropped: int = 0  # history messages removed from trimmed rows
    dropped: int = 0  # rows that do not fit even without history
    dropped_lines: list[int] = field(default_factory=list)  # the first few, by line number
    tokens: int = 0  # prompt + completion tokens of the kept rows
    unread: int = 0  # rows left out because the budget was met first (sampled runs)
    observations: int = 0  # observations learned (more than kept rows with episode layout)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_rows(path: str | os.PathLike[str]) -> Iterator[tuple[int, list[Message], str]]:
    """Yield ``(line number, prompt messages, completion text)`` for each row, checked."""
    for number, prompt, completion, _ in read_records(path):
        yield number, prompt, completion


def read_records(
    path: str | os.PathLike[str],
) -> Iterator[tuple[int, list[Message], str, dict[str, Any]]]:
    """Like :func:`read_rows`, with the whole row last (for its episode id, turn, prefill)."""
    path = Path(path)
    if not path.is_file():
        raise TrainError(f"SFT data file not found: {path}")
    with path.open("rb") as fh:  # bytes: a line that is not UTF-8 is one line's error
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = loads_json(line)  # also deep nesting and huge ints: not a crash
            except json.JSONDecodeError as exc:
                raise TrainError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
            try:
                prompt, completion = parse_row(row)
            except ValueError as exc:
                raise TrainError(f"{path}:{number}: {exc}") from None
            yield number, prompt, completion, row


def parse_row(row: Any) -> tuple[list[Message], str]:
    """Split one row into its prompt messages and the completion text (ValueError if the
    row is none of the accepted forms)."""
    if not isinstance(row, dict):
        raise ValueError("a row must be a JSON object")
    if "messages" in row:
        messages = _messages(row["messages"], "messages")
        completion = row.get("completion")
        if completion is None:
            if messages[-1]["role"] != "assistant":
                raise ValueError(
                    "without 'completion', the last message must be the assistant's answer"
                )
            messages, completion = messages[:-1], messages[-1]["content"]
    elif "prompt" in row:
        messages = _messages(row["prompt"], "prompt")
        completion = row.get("completion")
    else:
        raise ValueError("a row needs 'messages' (or 'prompt') and a completion")
    completion = _completion_text(completion)
    if not messages or messages[-1]["role"] != "user":
        raise ValueError("the prompt must end with the user message holding the action")
    return messages, completion


def _messages(value: Any, key: str) -> list[Message]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"'{key}' must be a non-empty list of messages")
    messages = []
    for index, message in enumerate(value):
        if not isinstance(message, dict):
            raise ValueError(f"{key}[{index}] is not an object")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise ValueError(f"{key}[{index}] has role {role!r}; expected one of {ROLES}")
        if role == "system" and index != 0:
            raise ValueError(f"{key}[{index}]: a system message may only come first")
        if not isinstance(content, str):
            raise ValueError(f"{key}[{index}] has no text 'content'")
        messages.append({"role": role, "content": content})
    return messages


def _completion_text(value: Any) -> str:
    if isinstance(value, list):  # TRL's conversational form: one assistant message
        if len(value) != 1 or not isinstance(value[0], dict):
            raise ValueError("'completion' as a list must hold exactly one assistant message")
        if value[0].get("role") != "assistant":
            raise ValueError("the completion message must have role 'assistant'")
        value = value[0].get("content")
    if not isinstance(value, str) or not value.strip():
        raise ValueError("'completion' must be non-empty text")
    return value


def sequence_length(tokenizer: PreTrainedTokenizerBase, messages: list[Message]) -> int:
    """Tokens of ``messages`` laid out with the chat template (as TRL tokenizes them)."""
    encoded = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)
    return len(encoded["input_ids"])


def fit_history(
    tokenizer: PreTrainedTokenizerBase,
    prompt: list[Message],
    completion: str,
    max_length: int,
) -> tuple[list[Message] | None, int]:
    """Drop the oldest turns of ``prompt`` until prompt and completion fit ``max_length``
    tokens. Returns the kept messages (None if even the system prompt, the action and the
    completion alone are too long) and the sequence length."""
    answer = {"role": "assistant", "content": completion}
    length = sequence_length(tokenizer, [*prompt, answer])
    if length <= max_length:
        return prompt, length
    head = 1 if prompt[0]["role"] == "system" else 0
    # Guess how many messages to drop from each message's own token count (every chat
    # template seen so far adds a fixed few tokens per message), then check exactly.
    costs = [len(tokenizer(m["content"], add_special_tokens=False)["input_ids"]) for m in prompt]
    overhead = max(0, length - sum(costs)) / (len(prompt) + 1)
    start, excess = head, length - max_length
    while excess > 0 and len(prompt) - start > 1:
        step = 2 if len(prompt) - start > 2 else 1
        excess -= sum(costs[start : start + step]) + overhead * step
        start += step
    while True:
        kept = prompt[:head] + prompt[start:]
        length = sequence_length(tokenizer, [*kept, answer])
        if length <= max_length:
            return kept, length
        if len(prompt) - start <= 1:
            return None, length
        start += 2 if len(prompt) - start > 2 else 1


def build_dataset(
    path: str | os.PathLike[str],
    tokenizer: PreTrainedTokenizerBase,
    max_length: int,
    *,
    max_rows: int | None = None,
    max_tokens: int | None = None,
    seed: int = 0,
) -> tuple[Dataset, FitStats]:
    """Read an SFT JSONL file into a TRL prompt-completion dataset fitted to
    ``max_length`` tokens, and say what fitting did.

    With ``max_rows`` or ``max_tokens`` (a run that reads part of the file), the rows are
    taken in a seeded random order until either is met, so the tokenizer never touches
    rows the run would not reach."""
    from datasets import Dataset

    if max_length < 16:
        raise TrainError(f"max_length {max_length} is too small to hold a prompt and an answer")
    sampled = max_rows is not None or max_tokens is not None
    drawn: list[tuple[int, list[Message], str]] = []
    if sampled:  # a budget draws from the whole file; a full pass streams it
        drawn = list(read_rows(path))
        random.Random(seed).shuffle(drawn)
    rows: Iterable[tuple[int, list[Message], str]] = drawn if sampled else read_rows(path)
    stats = FitStats()
    examples = []
    for index, (number, prompt, completion) in enumerate(rows):
        if sampled and _budget_met(stats, max_rows, max_tokens):
            stats.unread = len(drawn) - index
            break
        stats.rows += 1
        kept, length = fit_history(tokenizer, prompt, completion, max_length)
        if kept is None:
            stats.dropped += 1
            if len(stats.dropped_lines) < _LISTED:
                stats.dropped_lines.append(number)
            continue
        if len(kept) < len(prompt):
            stats.trimmed += 1
            stats.messages_dropped += len(prompt) - len(kept)
        stats.kept += 1
        stats.observations += 1
        stats.tokens += length
        examples.append(
            {"prompt": kept, "completion": [{"role": "assistant", "content": completion}]}
        )
    if stats.rows == 0:
        raise TrainError(f"{path} holds no rows")
    if not examples:
        raise TrainError(
            f"no row of {path} fits max_length={max_length} tokens, even without history; "
            "raise --max-length"
        )
    return Dataset.from_list(examples), stats


def _budget_met(stats: FitStats, max_rows: int | None, max_tokens: int | None) -> bool:
    if max_rows is not None and stats.kept >= max_rows:
        return True
    return max_tokens is not None and stats.tokens >= max_tokens
