"""Benchmark rows: reading AgentWorldBench files, simgym's own rows, and trajectories.

An AgentWorldBench row is one turn of a recorded trajectory. Its fields, as published:
``task`` (the domain, possibly as a path such as ``agentworld/mcp``), ``id`` (an integer
or string, unique only within its domain), ``prompt`` (every turn's user message: the
action, and on some domains the task and current state), ``response`` (every turn's real
observation, starting ``**Environment Observation:**``), ``current_prompt`` (the user
message of the turn to predict), ``system_str`` (that sample's world-model prompt),
``turn_idx`` (1-based) and ``total_turns``. There is no separate field for the answer: the
real observation of the current turn is ``response[turn_idx - 1]``, as in the reference
evaluation script. Rows that simgym exported before ``prompt`` held the current turn
(``len(prompt) == turn_idx - 1``) are still read: their ``current_prompt`` is appended.

The published files hold stray Unicode line separators (U+2028, U+2029) inside lines, so
lines are split on ``\\n`` only, never with :meth:`str.splitlines`. A row that appears
twice (same domain, ``id`` and ``turn_idx``) is kept once, with a warning.
"""

from __future__ import annotations

import json
import os
import random
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from simgym.core import contract
from simgym.core.errors import SimgymError
from simgym.core.safeload import loads_json

# The official file names; a folder is read through these when it holds any.
OFFICIAL_GLOB = "*_test.jsonl"


class BenchRow(BaseModel):
    """One benchmark sample: the history, the action to simulate, the real observation."""

    task: str
    id: Any
    turn_idx: int = Field(ge=1)
    total_turns: int | None = None
    system_str: str = ""
    prompt: list[str] = Field(default_factory=list)
    response: list[str] = Field(default_factory=list)
    current_prompt: str = ""
    reference: str = Field(description="the real observation of the current turn, verbatim")
    source: str = ""

    @property
    def domain(self) -> str:
        return domain_of(self.task)

    @property
    def key(self) -> str:
        return row_key(self.domain, self.id, self.turn_idx)

    def sample(self) -> dict[str, Any]:
        """The row in the official layout (what results files embed)."""
        return {
            "task": self.task,
            "id": self.id,
            "prompt": self.prompt,
            "response": self.response,
            "current_prompt": self.current_prompt,
            "system_str": self.system_str,
            "turn_idx": self.turn_idx,
            "total_turns": self.total_turns,
        }


def domain_of(task: str) -> str:
    """``agentworld/terminal`` -> ``terminal`` (the reference script keeps the last part)."""
    return str(task).rsplit("/", 1)[-1].strip().lower()


def row_key(domain: str, row_id: Any, turn_idx: int) -> str:
    """The key results are stored under. Ids repeat across domains, so the domain is in it."""
    return f"{domain}/{row_id}/{int(turn_idx)}"


def clean_observation(text: str) -> str:
    """An observation without the ``**Environment Observation:**`` header the history uses."""
    stripped = (text or "").lstrip()
    if stripped.startswith(contract.OBSERVATION_HEADER):
        stripped = stripped[len(contract.OBSERVATION_HEADER) :].lstrip("\n")
    return stripped.strip("\n")


# -- reading ----------------------------------------------------------------------------


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed JSON)`` for each non-blank line, split on ``\\n`` only.

    Raises :class:`SimgymError` naming the line when one is not UTF-8 or not standard
    JSON (``NaN``/``Infinity``, deep nesting and huge integers included: an id of
    ``Infinity`` would otherwise be written back into results as invalid JSON).
    """
    path = Path(path)
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):  # binary iteration splits on b"\n" only
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8").strip(" \t\r\n")
            except UnicodeDecodeError as exc:
                raise SimgymError(
                    f"{path}:{number}: not UTF-8 text (byte 0x{raw[exc.start]:02x})"
                ) from None
            if not text:
                continue
            try:
                value = loads_json(text)
            except json.JSONDecodeError as exc:
                raise SimgymError(f"{path}:{number}: not a JSON line ({exc.msg})") from None
            yield number, value


def data_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Expand folders: the official ``*_test.jsonl`` files if present, else every ``*.jsonl``."""
    files: list[Path] = []
    for item in paths:
        path = Path(item)
        if path.is_dir():
            found = sorted(path.glob(OFFICIAL_GLOB)) or sorted(path.glob("*.jsonl"))
            if not found:
                raise SimgymError(f"no .jsonl files in {path}")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise SimgymError(f"benchmark data not found: {path}")
    return files


def load_rows(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
) -> list[BenchRow]:
    """Read benchmark rows from files or folders, in file order, duplicates dropped.

    Each line may be an AgentWorldBench row, a row in the same layout written by simgym
    (it may carry ``reference``), or a simgym trajectory (one row per simulated turn).
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    rows: list[BenchRow] = []
    for path in data_files(paths):
        for number, record in iter_jsonl(path):
            where = f"{path}:{number}"
            if not isinstance(record, dict):
                raise SimgymError(f"{where}: a row must be a JSON object")
            if _is_trajectory(record):
                rows.extend(rows_from_trajectory(record, where))
            else:
                rows.append(row_from_record(record, where))
    return deduplicate(rows)


def row_from_record(record: dict[str, Any], where: str = "") -> BenchRow:
    """Validate one official (or simgym-written) row."""
    missing = [k for k in ("task", "id", "turn_idx") if k not in record]
    if missing:
        raise SimgymError(f"{where}: row lacks {', '.join(missing)}")
    prompts = _as_list(record.get("prompt"), where)
    responses = _as_list(record.get("response"), where)
    try:
        turn = int(record["turn_idx"])
    except (TypeError, ValueError):
        raise SimgymError(f"{where}: turn_idx must be an integer") from None
    if turn < 1:
        raise SimgymError(f"{where}: turn_idx is 1-based, got {turn}")
    reference = record.get("reference")
    if not isinstance(reference, str):
        if len(responses) < turn:
            raise SimgymError(
                f"{where}: no real observation for turn {turn} "
                f"(response has {len(responses)} entries)"
            )
        reference = responses[turn - 1]
    current = record.get("current_prompt") or ""
    if not current and turn <= len(prompts):
        current = prompts[turn - 1]  # the reference script falls back the same way
    if current and len(prompts) == turn - 1:
        # A row written by simgym before its exporter was fixed: ``prompt`` stops short of
        # this turn's action. Complete it, so the row embedded in results files is one the
        # reference evaluation (which reads ``prompt[turn_idx - 1]``) can read too; the
        # request is unchanged, as it takes only ``prompt[:turn_idx - 1]`` as history.
        prompts = [*prompts, str(current)]
    total = record.get("total_turns")
    return BenchRow(
        task=str(record["task"]),
        id=record["id"],
        turn_idx=turn,
        total_turns=int(total) if isinstance(total, int | float) else None,
        system_str=str(record.get("system_str") or ""),
        prompt=prompts,
        response=responses,
        current_prompt=str(current),
        reference=reference,
        source=where,
    )


def _as_list(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]  # the reference script accepts a bare string for one turn
    if isinstance(value, list):
        return [str(v) for v in value]
    raise SimgymError(
        f"{where}: prompt/response must be a list of strings, not {type(value).__name__}"
    )


def _is_trajectory(record: dict[str, Any]) -> bool:
    return "turns" in record and isinstance(record.get("task"), dict) and "domain" in record


def rows_from_trajectory(record: dict[str, Any], where: str = "") -> list[BenchRow]:
    """One row per simulated turn of a simgym trajectory, as ``simgym export`` writes them
    (:func:`simgym.data.export.awb_rows`), so a trajectory file can be benchmarked
    without exporting it first."""
    from simgym.core.types import Trajectory
    from simgym.data.export import awb_rows

    try:
        trajectory = Trajectory.model_validate(record)
        samples = awb_rows(trajectory)
    except (ValueError, SimgymError) as exc:
        warnings.warn(f"{where}: skipping trajectory: {exc}", stacklevel=2)
        return []
    return [row_from_record(sample, where) for sample in samples]


def deduplicate(rows: list[BenchRow]) -> list[BenchRow]:
    """Keep the first row of each key; warn once, saying how many were dropped and
    whether any duplicate differed from the row kept."""
    first: dict[str, BenchRow] = {}
    dropped = Counter()
    differing = 0
    for row in rows:
        kept = first.get(row.key)
        if kept is None:
            first[row.key] = row
            continue
        dropped[row.domain] += 1
        if kept.sample() != row.sample():
            differing += 1
    if dropped:
        detail = ", ".join(f"{d}: {n}" for d, n in sorted(dropped.items()))
        note = f"; {differing} differed from the row kept (the first)" if differing else ""
        warnings.warn(
            f"dropped {sum(dropped.values())} duplicate (id, turn_idx) rows ({detail}){note}",
            stacklevel=2,
        )
    return list(first.values())


# -- choosing rows ----------------------------------------------------------------------


def parse_domains(values: Iterable[str] | None) -> list[str] | None:
    """``["mcp,web", "os"]`` -> ``["mcp", "web", "os"]``; None or empty means all."""
    if not values:
        return None
    names = [v.strip().lower() for item in values for v in str(item).split(",") if v.strip()]
    return names or None


def select_rows(
    rows: list[BenchRow],
    *,
    domains: Iterable[str] | None = None,
    limit: int | None = None,
    seed: int | None = None,
) -> list[BenchRow]:
    """Filter by domain and keep at most ``limit`` rows per domain: the first ones, or a
    random sample when ``seed`` is given (the same seed picks the same rows). The result
    keeps file order."""
    wanted = parse_domains(domains)
    if wanted is not None:
        known = {r.domain for r in rows}
        unknown = [d for d in wanted if d not in known]
        if unknown:
            raise SimgymError(
                f"no rows for domain(s) {', '.join(unknown)}; the data has "
                f"{', '.join(sorted(known)) or 'none'}"
            )
        rows = [r for r in rows if r.domain in wanted]
    if limit is None:
        return list(rows)
    if limit < 0:
        raise SimgymError("--limit must be zero or more")
    by_domain: dict[str, list[BenchRow]] = defaultdict(list)
    for row in rows:
        by_domain[row.domain].append(row)
    chosen: set[str] = set()
    for domain in sorted(by_domain):
        group = by_domain[domain]
        if seed is None:
            picked = group[:limit]
        else:
            # Sort before sampling so the pick depends on the seed, not on file order.
            ordered = sorted(group, key=lambda r: r.key)
            picked = random.Random(f"{seed}:{domain}").sample(ordered, min(limit, len(ordered)))
        chosen.update(r.key for r in picked)
    return [r for r in rows if r.key in chosen]
