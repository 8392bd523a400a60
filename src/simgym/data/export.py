"""Turn trajectories into benchmark rows and training data.

Two formats, both rebuilt with :mod:`simgym.core.contract` so every message is exactly
what the environment sent the world model at run time:

* **awb** - AgentWorldBench rows, one per turn: ``task`` (the domain), ``id`` (a stable
  integer), ``prompt`` (the user messages of every turn up to *and including* this one),
  ``response`` (the observation messages of the same turns: its last entry is the turn's
  recorded observation, the ground truth a prediction is scored against),
  ``current_prompt`` (this turn's user message, equal to ``prompt[turn_idx - 1]``),
  ``system_str``, ``turn_idx`` (1-based) and ``total_turns``. This is the layout
  AgentWorldBench's own evaluator reads: history ``prompt[i]``/``response[i]`` for
  ``i < turn_idx - 1``, the action ``current_prompt`` (or ``prompt[turn_idx - 1]`` when
  that is empty), truth ``response[turn_idx - 1]``. Later turns are left out: the
  evaluator never reads them, and a row then holds nothing a model should not see.
* **sft** - chat data for training a world model, ``{"messages": [...]}`` per line:
  ``episode`` mode gives one conversation per episode (system, then user/assistant pairs
  with the observations in history form); ``turn`` mode gives one example per turn whose
  last assistant message is the answer in the form the system prompt asks for
  (``<predicted_observation>...</predicted_observation>``); ``transition`` mode gives one
  row per turn with ``messages`` cut to the embedded backend's context budget and the
  ``completion`` it should produce (see :mod:`simgym.data.sft`).

Only turns the world saw are exported (``in_history``): rejected actions, final answers
and failed predictions never reached the model. The system prompt is rebuilt from the
domain and the recorded scenario (pass ``system_prompt`` when the episode used another).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from simgym.core import contract
from simgym.core.errors import SimgymError
from simgym.core.trajectories import read_trajectories
from simgym.core.types import Trajectory
from simgym.data.exchanges import exchanges, system_prompt_of
from simgym.data.sft import embedded_token_counter, transition_rows

AWB_FIELDS = (
    "task",
    "id",
    "prompt",
    "response",
    "current_prompt",
    "system_str",
    "turn_idx",
    "total_turns",
)
ExportFormat = Literal["awb", "sft"]
SftMode = Literal["episode", "turn", "transition"]
SFT_MODES = ("episode", "turn", "transition")


def _mode_names() -> str:
    return ", ".join(f"'{m}'" for m in SFT_MODES)


def awb_rows(trajectory: Trajectory, *, system_prompt: str | None = None) -> list[dict[str, Any]]:
    """AgentWorldBench rows for one episode, one per turn (see the module docstring)."""
    turns = exchanges(trajectory)
    if not turns:
        return []
    system = system_prompt if system_prompt is not None else system_prompt_of(trajectory)
    rows = []
    for index, turn in enumerate(turns, 1):
        rows.append(
            {
                "task": trajectory.domain,
                "id": row_id(trajectory.episode_id, index),
                # This turn's action is prompt[turn_idx - 1]: the reference evaluator
                # reads it from there (rows without it failed with an IndexError).
                "prompt": [t.user["content"] for t in turns[:index]],
                "response": [t.assistant["content"] for t in turns[:index]],
                "current_prompt": turn.user["content"],
                "system_str": system,
                "turn_idx": index,
                "total_turns": len(turns),
            }
        )
    return rows


def row_id(episode_id: str, turn: int) -> int:
    """A stable integer id for a turn of an episode (fits a JSON number exactly)."""
    digest = hashlib.sha1(f"{episode_id}:{turn}".encode()).hexdigest()
    return int(digest[:13], 16)


def sft_examples(
    trajectory: Trajectory, *, mode: SftMode = "episode", system_prompt: str | None = None
) -> list[dict[str, Any]]:
    """Chat training examples for one episode (see the module docstring for the modes).
    ``transition`` rows count tokens with the embedded model's vocabulary and its default
    budget; call :func:`simgym.data.sft.transition_rows` for other settings."""
    if mode not in SFT_MODES:
        raise SimgymError(f"unknown SFT mode {mode!r}: use {_mode_names()}")
    if mode == "transition":
        return list(
            transition_rows(trajectory, count=embedded_token_counter(), system_prompt=system_prompt)
        )
    turns = exchanges(trajectory)
    if not turns:
        return []
    system = {
        "role": "system",
        "content": system_prompt if system_prompt is not None else system_prompt_of(trajectory),
    }
    if mode == "episode":
        messages = [system]
        for turn in turns:
            messages += [turn.user, turn.assistant]
        return [{"messages": messages}]
    examples = []
    for index, turn in enumerate(turns):
        history = [system]
        for earlier in turns[:index]:
            history += [earlier.user, earlier.assistant]
        answer = f"{contract.OPEN_TAG}\n{turn.observation}\n{contract.CLOSE_TAG}"
        history += [turn.user, {"role": "assistant", "content": answer}]
        examples.append({"messages": history})
    return examples


def export_rows(
    trajectories: Iterable[Trajectory],
    fmt: ExportFormat = "awb",
    *,
    mode: SftMode = "episode",
    system_prompt: str | None = None,
    template: str | None = None,
    instructions: str | None = None,
    domain: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Rows of ``fmt`` for every trajectory (optionally only those of one ``domain``).
    ``system_prompt`` is a ready prompt for all episodes; otherwise each episode's is
    rebuilt, from ``template`` and ``instructions`` when the episodes ran with them."""
    if fmt not in ("awb", "sft"):
        raise SimgymError(f"unknown export format {fmt!r}: use 'awb' or 'sft'")
    if mode not in SFT_MODES:
        raise SimgymError(f"unknown SFT mode {mode!r}: use {_mode_names()}")
    for trajectory in trajectories:
        if domain is not None and trajectory.domain != domain:
            continue
        system = system_prompt
        if system is None and any(turn.in_history for turn in trajectory.turns):
            system = system_prompt_of(trajectory, template=template, instructions=instructions)
        if fmt == "awb":
            yield from awb_rows(trajectory, system_prompt=system)
        else:
            yield from sft_examples(trajectory, mode=mode, system_prompt=system)


def export_files(
    paths: Iterable[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    fmt: ExportFormat = "awb",
    *,
    mode: SftMode = "episode",
    system_prompt: str | None = None,
    template: str | None = None,
    instructions: str | None = None,
    domain: str | None = None,
) -> int:
    """Convert trajectory JSONL files into ``out``: JSONL, or Parquet when ``out`` ends in
    ``.parquet`` (needs ``pyarrow``). Returns the number of rows written. The options
    are those of :func:`export_rows`."""
    trajectories = (t for path in paths for t in read_trajectories(path))
    rows = export_rows(
        trajectories,
        fmt,
        mode=mode,
        system_prompt=system_prompt,
        template=template,
        instructions=instructions,
        domain=domain,
    )
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.suffix == ".parquet":
        return write_parquet(list(rows), target)
    count = 0
    with open(target, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def write_parquet(rows: list[dict[str, Any]], path: str | os.PathLike[str]) -> int:
    """Write rows as a Parquet file (loadable with ``datasets.load_dataset("parquet")``)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise SimgymError("Parquet export needs pyarrow (pip install pyarrow)") from None
    pq.write_table(pa.Table.from_pylist(rows), str(path))
    return len(rows)


def read_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows from an exported JSONL file."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
