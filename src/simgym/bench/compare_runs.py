"""``bench compare A B``: two runs side by side, per domain, with B - A deltas.

Each side is a score report (the JSON of ``bench score``) or a results file (judged or
predicted JSONL), which is scored here. With ``paired``, only rows graded in both runs
count, so a run is not flattered by skipping the rows the other one failed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from simgym.bench.report import COLUMNS
from simgym.bench.score import SCHEMA, classify, score_rows
from simgym.bench.store import load_results
from simgym.core.errors import SimgymError

FIELDS = (*COLUMNS, "total_strict")


def load_side(path: str | os.PathLike[str]) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """``(score report, result rows or None)`` for a report JSON or a results JSONL."""
    path = Path(path)
    if not path.is_file():
        raise SimgymError(f"not found: {path}")
    if path.suffix == ".json":
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise SimgymError(f"{path}: not JSON ({exc.msg})") from None
        if not isinstance(report, dict) or report.get("schema") != SCHEMA:
            raise SimgymError(f"{path}: not a `bench score` report")
        return report, None
    rows = load_results(path)
    return score_rows(rows, sources=[str(path)]), rows


def _value(group: dict[str, Any] | None, field: str) -> float | None:
    if group is None:
        return None
    if field == "total_strict":
        return group.get("total_strict")
    return group["scores"].get(field)


def compare_reports(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Per domain and overall (macro): each field for A and B and the delta B - A."""

    def side(group: dict[str, Any] | None) -> dict[str, Any]:
        if group is None:
            return {"rows": 0, "graded": 0, "failed": 0}
        return {k: group.get(k, 0) for k in ("rows", "graded", "failed")}

    domains = {}
    for name in sorted(set(a["domains"]) | set(b["domains"])):
        ga, gb = a["domains"].get(name), b["domains"].get(name)
        domains[name] = {
            "a": side(ga),
            "b": side(gb),
            **{f: _delta(_value(ga, f), _value(gb, f)) for f in FIELDS},
        }
    ma, mb = a["overall"]["macro"], b["overall"]["macro"]
    overall = {f: _delta(_value(ma, f), _value(mb, f)) for f in FIELDS}
    return {"domains": domains, "overall": overall}


def _delta(x: float | None, y: float | None) -> dict[str, float | None]:
    diff = None if x is None or y is None else round(y - x, 2)
    return {"a": x, "b": y, "delta": diff}


def paired_reports(
    rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both runs scored on the rows graded in both."""
    graded_a = {r["key"] for r in rows_a if classify(r) == "graded"}
    graded_b = {r["key"] for r in rows_b if classify(r) == "graded"}
    both = graded_a & graded_b
    return (
        score_rows([r for r in rows_a if r["key"] in both]),
        score_rows([r for r in rows_b if r["key"] in both]),
    )


def compare_table(comparison: dict[str, Any], field: str = "total") -> list[list[str]]:
    """Header plus a line per domain and the overall line, for one field."""

    def fmt(value: float | None, sign: bool = False) -> str:
        if value is None:
            return "n/a"
        return f"{value:+.2f}" if sign else f"{value:.2f}"

    header = ["domain", "A", "B", "B - A", "A graded/rows (failed)", "B graded/rows (failed)"]
    lines = [header]
    for name, entry in comparison["domains"].items():
        cell = entry[field]
        lines.append(
            [
                name,
                fmt(cell["a"]),
                fmt(cell["b"]),
                fmt(cell["delta"], sign=True),
                f"{entry['a']['graded']}/{entry['a']['rows']} ({entry['a']['failed']})",
                f"{entry['b']['graded']}/{entry['b']['rows']} ({entry['b']['failed']})",
            ]
        )
    cell = comparison["overall"][field]
    lines.append(
        ["overall (macro)", fmt(cell["a"]), fmt(cell["b"]), fmt(cell["delta"], True), "", ""]
    )
    return lines
