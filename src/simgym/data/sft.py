"""World-model training rows, one per transition, cut the way the embedded backend cuts.

Each row is what the ``local`` backend would be asked for that turn and what it should
answer:

* ``messages``: the system prompt, the earlier turns and the action, built with
  :mod:`simgym.core.contract` exactly as :class:`~simgym.core.env.SimEnv` sends them, then
  fitted to the context window by the backend's own rule (:func:`fit_messages`): the
  oldest turns go, a user/assistant pair at a time, until the prompt leaves room for the
  answer; the system prompt and the action always stay. A prompt that does not fit even
  then is not a row (the backend would refuse the turn); it is counted as skipped.
* ``completion``: the answer in the contract's form, as the backend produces it: the
  prefill it writes itself (``**Environment Observation:**`` and the opening tag), the
  observation, then the closing tag at which generation stops.
* ``prefill``: the part of ``completion`` the backend writes before the model generates
  (the prefill plus the domain's observation prefix, a terminal's echoed command say),
  so a trainer may mask it; it is where the completion starts only when the real
  observation began with that prefix.

Token counts use the model's own vocabulary (:func:`embedded_token_counter`; any
``str -> int`` counter can be passed) with the backend's per-message overhead. Rows
that repeat an earlier row (same messages, same completion) are dropped when a ``seen``
set is shared, so a test split never holds a row that is also in the train split.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from simgym.core import contract
from simgym.core.domain import get_domain
from simgym.core.errors import ActionError, ScenarioError, SimgymError
from simgym.core.trajectories import read_trajectories
from simgym.core.types import Trajectory
from simgym.data.exchanges import exchanges, system_prompt_of

TokenCounter = Callable[[str], int]

# What LocalWorldModel uses: its defaults, the slack it adds to max_tokens when fitting,
# and the tokens it charges each message for the chat template's markers.
DEFAULT_N_CTX = 4096
DEFAULT_MAX_TOKENS = 256
FIT_SLACK = 16
MESSAGE_OVERHEAD = 8
PREFILL = f"{contract.OBSERVATION_HEADER}\n{contract.OPEN_TAG}\n"
SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class ContextBudget:
    """The context window a row must fit: ``n_ctx`` tokens, of which ``max_tokens`` (plus
    the backend's slack) are kept for the answer."""

    n_ctx: int = DEFAULT_N_CTX
    max_tokens: int = DEFAULT_MAX_TOKENS

    def __post_init__(self) -> None:
        if self.n_ctx <= 0 or self.max_tokens <= 0:
            raise SimgymError("n_ctx and max_tokens must be positive")
        if self.prompt_tokens <= 0:
            raise SimgymError(
                f"max_tokens {self.max_tokens} leaves no room for a prompt in n_ctx {self.n_ctx}"
            )

    @property
    def prompt_tokens(self) -> int:
        """The most a prompt may cost (as :func:`message_cost` counts)."""
        return self.n_ctx - (self.max_tokens + FIT_SLACK)


@dataclass
class SftStats:
    """What an export wrote and what it left out, and why."""

    rows: int = 0
    episodes: int = 0
    duplicates: int = 0
    prompt_too_long: int = 0
    completion_too_long: int = 0
    truncated_rows: int = 0  # rows that lost at least one earlier turn to the budget
    per_domain: Counter = field(default_factory=Counter)

    def add(self, other: SftStats) -> None:
        for name in (
            "rows",
            "episodes",
            "duplicates",
            "prompt_too_long",
            "completion_too_long",
            "truncated_rows",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.per_domain.update(other.per_domain)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["per_domain"] = dict(sorted(self.per_domain.items()))
        return data


# -- fitting --------------------------------------------------------------------------


def message_cost(content: str, count: TokenCounter) -> int:
    """A message's cost as the local backend counts it."""
    return count(content) + MESSAGE_OVERHEAD


def fit_start(costs: Sequence[int], budget: int, *, has_system: bool = True) -> int | None:
    """Where the kept history starts after the backend's rule (see :func:`fit_messages`),
    given each message's cost; None when even the system prompt and the last message
    alone are over ``budget``."""
    head = 1 if has_system and costs else 0
    head_cost = sum(costs[:head])
    start = head
    tail = sum(costs[start:])
    n = len(costs)
    while head_cost + tail > budget and n - start > 1:
        step = 2 if n - start > 2 else 1
        tail -= sum(costs[start : start + step])
        start += step
    if head_cost + tail > budget:
        return None
    return start


def fit_messages(
    messages: Sequence[dict[str, str]], budget: ContextBudget | int, count: TokenCounter
) -> list[dict[str, str]] | None:
    """The messages the local backend sends for this budget: the oldest turns dropped
    (a pair at a time, never the system prompt or the last message) until the prompt
    fits; None where it cannot fit (the backend raises there)."""
    limit = budget.prompt_tokens if isinstance(budget, ContextBudget) else budget
    costs = [message_cost(m["content"], count) for m in messages]
    has_system = bool(messages) and messages[0]["role"] == "system"
    start = fit_start(costs, limit, has_system=has_system)
    if start is None:
        return None
    head = 1 if has_system else 0
    return [*messages[:head], *messages[start:]]


# -- rows ---------------------------------------------------------------------------------


def completion_text(observation: str) -> str:
    """The answer as the backend's prefill, the model's text and the stop tag make it."""
    return f"{PREFILL}{observation}\n{contract.CLOSE_TAG}"


def transition_rows(
    trajectory: Trajectory,
    *,
    count: TokenCounter,
    budget: ContextBudget | None = None,
    system_prompt: str | None = None,
    max_completion_tokens: int | None = None,
    seen: set[str] | None = None,
    stats: SftStats | None = None,
) -> Iterator[dict[str, Any]]:
    """One training row per transition of ``trajectory`` (see the module docstring).
    ``seen`` collects row hashes across calls; a row already in it is skipped. Skips are
    counted in ``stats``."""
    budget = budget or ContextBudget()
    stats = stats if stats is not None else SftStats()
    turns = exchanges(trajectory)
    if not turns:
        return
    stats.episodes += 1
    system = system_prompt if system_prompt is not None else system_prompt_of(trajectory)
    prefixes = _prefixes(trajectory)
    # Each message is counted once per episode: later turns repeat the earlier ones.
    costs = [message_cost(system, count)]
    for turn in turns:
        costs += [
            message_cost(turn.user["content"], count),
            message_cost(turn.assistant["content"], count),
        ]
    history: list[dict[str, str]] = [{"role": "system", "content": system}]
    for index, turn in enumerate(turns):
        request = [*history, turn.user]
        history += [turn.user, turn.assistant]
        start = fit_start(costs[: 2 * index + 2], budget.prompt_tokens)
        if start is None:
            stats.prompt_too_long += 1
            continue
        completion = completion_text(turn.observation)
        completion_tokens = count(completion)
        if max_completion_tokens is not None and completion_tokens > max_completion_tokens:
            stats.completion_too_long += 1
            continue
        messages = [request[0], *request[start:]]
        key = row_hash(messages, completion)
        if seen is not None:
            if key in seen:
                stats.duplicates += 1
                continue
            seen.add(key)
        dropped = (start - 1) // 2
        stats.rows += 1
        stats.truncated_rows += int(dropped > 0)
        stats.per_domain[trajectory.domain] += 1
        yield {
            "messages": messages,
            "completion": completion,
            "prefill": PREFILL + prefixes[index],
            "domain": trajectory.domain,
            "episode_id": trajectory.episode_id,
            "task_id": trajectory.task.id,
            "turn": index + 1,
            "dropped_turns": dropped,
            "prompt_tokens": costs[0] + sum(costs[start : 2 * index + 2]),
            "completion_tokens": completion_tokens,
        }


def row_hash(messages: Sequence[dict[str, str]], completion: str) -> str:
    """A content hash of one row (what makes two rows the same training example)."""
    data = json.dumps([list(messages), completion], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def _prefixes(trajectory: Trajectory) -> list[str]:
    """The observation prefix the environment passed the backend at each transition."""

    domain = get_domain(trajectory.domain)
    try:
        scenario = domain.scenario(trajectory.scenario or None)
    except ScenarioError:
        scenario = None  # rows are still right; only the prefill note goes
    first = trajectory.initial_observation
    last = first.text if first is not None else ""
    found = []
    for turn in trajectory.turns:
        if not turn.in_history:
            continue
        prefix = ""
        if scenario is not None and turn.action is not None:
            try:
                prefix = domain.observation_prefix(turn.action, scenario, last)
            except (ActionError, KeyError, TypeError, ValueError):
                prefix = ""
        found.append(prefix)
        last = turn.observation.text
    return found


# -- files ----------------------------------------------------------------------------------


def export_sft_file(
    paths: Iterable[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    count: TokenCounter | None = None,
    budget: ContextBudget | None = None,
    max_completion_tokens: int | None = None,
    seen: set[str] | None = None,
    prompt_style: str | None = None,
) -> SftStats:
    """Write the transition rows of trajectory files to ``out`` (JSONL). ``prompt_style``
    rebuilds each system prompt from the domain's template of that style (the layout the
    trained model will be run with); None keeps the recorded prompts."""
    count = count or embedded_token_counter()
    stats = SftStats()
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding="utf-8") as f:
        for path in paths:
            for trajectory in read_trajectories(path, strict=True):
                system = None
                if prompt_style is not None:
                    system = system_prompt_of(trajectory, style=prompt_style)
                for row in transition_rows(
                    trajectory,
                    count=count,
                    budget=budget,
                    system_prompt=system,
                    max_completion_tokens=max_completion_tokens,
                    seen=seen,
                    stats=stats,
                ):
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return stats


def export_sft_splits(
    source: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    count: TokenCounter | None = None,
    budget: ContextBudget | None = None,
    max_completion_tokens: int | None = None,
    dedup: bool = True,
    tokenizer: str = "embedded",
    prompt_style: str | None = None,
) -> dict[str, SftStats]:
    """Export a factory's ``train``/``val``/``test`` trajectory files to rows of the same
    names in ``out``, plus ``manifest.json``. With ``dedup``, a row is written once: the
    train split is read first, so val and test keep only rows train does not hold."""
    source, target = Path(source), Path(out)
    missing = [s for s in SPLITS if not (source / f"{s}.jsonl").is_file()]
    if missing:
        raise SimgymError(f"{source}: no {', '.join(m + '.jsonl' for m in missing)} to export")
    count = count or embedded_token_counter()
    budget = budget or ContextBudget()
    seen: set[str] | None = set() if dedup else None
    results = {}
    for split in SPLITS:
        results[split] = export_sft_file(
            [source / f"{split}.jsonl"],
            target / f"{split}.jsonl",
            count=count,
            budget=budget,
            max_completion_tokens=max_completion_tokens,
            seen=seen,
            prompt_style=prompt_style,
        )
    manifest = {
        "format": "simgym-sft-transitions/1",
        "source": str(source),
        "budget": {
            "n_ctx": budget.n_ctx,
            "max_tokens": budget.max_tokens,
            "prompt_tokens": budget.prompt_tokens,
            "message_overhead": MESSAGE_OVERHEAD,
        },
        "tokenizer": tokenizer,
        "prompt_style": prompt_style or "as recorded",
        "max_completion_tokens": max_completion_tokens,
        "dedup": dedup,
        "splits": {split: stats.to_dict() for split, stats in results.items()},
    }
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return results


# -- the embedded model's vocabulary ------------------------------------------------------


@lru_cache(maxsize=4)
def _vocabulary(path: str) -> Any:
    try:
        from llama_cpp import Llama
    except ImportError:
        raise SimgymError(
            "counting tokens with the embedded vocabulary needs llama-cpp-python "
            "(pip install 'simgym[local]'), or pass count="
        ) from None
    try:
        from llama_cpp._utils import suppress_stdout_stderr
    except ImportError:  # a private helper: without it, llama.cpp's load notes show
        suppress_stdout_stderr = contextlib.nullcontext  # type: ignore[assignment]
    try:
        with suppress_stdout_stderr():
            llm = Llama(model_path=path, vocab_only=True, verbose=False)
    except Exception as exc:  # llama.cpp raises ValueError/RuntimeError variously
        raise SimgymError(f"cannot read the vocabulary of {path}: {exc}") from None
    # Free it before the interpreter tears llama_cpp down, or its __del__ fails noisily.
    atexit.register(llm.close)
    return llm


def embedded_token_counter(model_path: str | os.PathLike[str] | None = None) -> TokenCounter:
    """Counts tokens as the local backend does (``tokenize(text, add_bos=False)``), with
    the vocabulary of ``model_path`` (default: the embedded model; only the vocabulary is
    loaded, not the weights)."""
    from simgym.worldmodels.local import INSTALL_HINT, embedded_model_path

    path = model_path or os.environ.get("SIMGYM_MODEL_PATH") or embedded_model_path()
    if path is None:
        raise SimgymError(f"the embedded model is not installed; {INSTALL_HINT}")
    if not Path(path).is_file():
        raise SimgymError(f"GGUF model file not found: {path}")
    llm = _vocabulary(str(path))

    def count(text: str) -> int:
        return len(llm.tokenize(text.encode("utf-8"), add_bos=False))

    return count
