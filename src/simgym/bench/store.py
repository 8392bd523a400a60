"""Results files: JSONL, one row a line, appended and flushed as each row finishes.

A crash loses only the rows in flight; at worst the last line is cut short. Readers skip
such a line with a warning. Before a run resumes, :func:`prepare_resume` keeps one
finished row per key and rewrites the file (atomically) when it held anything else:
a cut line, a failed row that will be retried, or an outdated row. Then the new rows are
appended, so the finished file never holds two rows for one key.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.files import replacing
from simgym.core.jsonl import JsonlAppender
from simgym.core.safeload import loads_json


def dumps(row: dict[str, Any]) -> str:
    """One JSON line. U+2028/U+2029 are escaped so that tools splitting on them (the way
    the official files trip readers up) still see one row per line. NaN and infinities,
    which JSON cannot hold, are written as null."""
    try:
        text = json.dumps(row, ensure_ascii=False, allow_nan=False)
    except ValueError:  # rare (a score of NaN): pay for the walk only then
        text = json.dumps(_finite(row), ensure_ascii=False, allow_nan=False)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None``."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


class RowWriter(JsonlAppender):
    """Appends result rows to a JSONL file, flushing each; safe to share between tasks."""

    def write(self, row: dict[str, Any]) -> None:
        self.append(dumps(row))


def read_rows(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], int]:
    """``(rows, unreadable lines)``; a missing file has none. Lines are split on ``\\n``
    only; unreadable ones (a line cut by a crash) are skipped with a warning."""
    path = Path(path)
    if not path.exists():
        return [], 0
    rows: list[dict[str, Any]] = []
    bad = 0
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            text = raw.decode("utf-8", errors="replace").strip()
            if not text:
                continue
            try:
                row = loads_json(text)  # deep nesting and huge ints: unreadable, not a crash
            except json.JSONDecodeError:
                row = None
            if not isinstance(row, dict) or "key" not in row:
                bad += 1
                warnings.warn(f"{path}:{number}: skipping an unreadable row", stacklevel=2)
                continue
            rows.append(row)
    return rows, bad


def latest_by_key(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The last row written for each key (a later run's row replaces an earlier one)."""
    latest: dict[str, dict[str, Any]] = {}
    for row in rows:
        latest.pop(row["key"], None)  # keep the order in which keys were last written
        latest[row["key"]] = row
    return latest


def load_results(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a results file, one per key (the last written)."""
    if not Path(path).is_file():
        raise SimgymError(f"results file not found: {path}")
    rows, _ = read_rows(path)
    return list(latest_by_key(rows).values())


def prepare_resume(
    path: str | os.PathLike[str], keep: Callable[[dict[str, Any]], bool]
) -> dict[str, dict[str, Any]]:
    """The rows of ``path`` that ``keep`` accepts (one per key): a rerun skips these.

    When the file holds anything else, it is rewritten with just these rows first, via a
    temporary file and an atomic rename, so an interruption cannot lose finished rows.
    """
    path = Path(path)
    rows, bad = read_rows(path)
    latest = latest_by_key(rows)
    kept = {k: r for k, r in latest.items() if keep(r)}
    if bad or len(kept) != len(rows):
        _rewrite(path, list(kept.values()))
    return kept


def _rewrite(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path, fsync=True) as f:
        for row in rows:
            f.write(dumps(row) + "\n")
