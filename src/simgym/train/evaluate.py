"""Base vs trained world model on held-out real observations (``simgym train eval``).

Each candidate is a ``local`` backend setting (the base: ``adapter=None``; the trained
model: a GGUF adapter or a merged GGUF file). Every candidate predicts the same benchmark
rows (a factory's test split, the recorded dev set: trajectory or AgentWorldBench files)
through ``simgym bench``'s own inference and rule metrics, greedily, so the comparison is
the weights' alone. Results files are resumable; a rerun predicts only missing rows.

A row whose prediction failed (an error, not a bad answer) counts as 0 on every metric:
leaving it out would reward a model for failing on the hard rows.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simgym.train.errors import TrainError

# The metrics the report shows, in order: name in the results rows -> column title.
REPORT_METRICS = {
    "exact_match": "exact",
    "edit_similarity": "edit sim",
    "format_ok": "format ok",
    "line_f1": "line F1",
}
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


async def aevaluate(
    data: list[str | os.PathLike[str]],
    candidates: dict[str, dict[str, Any]],
    out: str | os.PathLike[str],
    *,
    limit: int | None = None,
    seed: int = 0,
    max_tokens: int = 256,
    n_ctx: int = 4096,
    on_row: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Predict the rows of ``data`` (at most ``limit`` per domain, sampled with ``seed``)
    with each candidate (name -> ``local`` backend options) and compare. Results go to
    ``out/<name>.jsonl``; the returned report is what :func:`report_table` shows."""
    from simgym.bench.data import load_rows, select_rows
    from simgym.bench.infer import run_infer
    from simgym.worldmodels.local import LocalWorldModel

    if not candidates:
        raise TrainError("nothing to evaluate: no candidate models")
    bad = [name for name in candidates if not _NAME.match(name)]
    if bad:
        raise TrainError(f"candidate names must be simple file names: {bad}")
    rows = select_rows(load_rows([Path(p) for p in data]), limit=limit, seed=seed)
    if not rows:
        raise TrainError(f"no benchmark rows in {', '.join(map(str, data))}")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[dict[str, Any]]] = {}
    described: dict[str, dict[str, Any]] = {}
    for name, options in candidates.items():
        backend = LocalWorldModel(**{"n_ctx": n_ctx, **options})
        described[name] = backend.describe()
        path = folder / f"{name}.jsonl"
        try:
            await run_infer(
                rows,
                backend,
                path,
                concurrency=1,  # one llama.cpp context; a queue would only add latency
                max_tokens=max_tokens,
                temperature=0.0,  # greedy: the comparison is the weights', not the dice's
                retries=0,
                on_result=(lambda row, name=name: on_row(name, row)) if on_row else None,
            )
        finally:
            await backend.aclose()
        results[name] = _load(path, {r.key for r in rows})
    return compare(results, described, data=[str(p) for p in data], limit=limit, seed=seed)


def _load(path: Path, keys: set[str]) -> list[dict[str, Any]]:
    from simgym.bench.store import load_results

    return [r for r in load_results(path) if r["key"] in keys]


def compare(
    results: dict[str, list[dict[str, Any]]],
    described: dict[str, dict[str, Any]] | None = None,
    **info: Any,
) -> dict[str, Any]:
    """Per-domain and overall means of the report metrics for each candidate's rows."""
    domains: dict[str, dict[str, Any]] = defaultdict(dict)
    overall: dict[str, Any] = {}
    for name, rows in results.items():
        by_domain: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            by_domain[row.get("domain") or "unknown"].append(row)
        for domain, group in sorted(by_domain.items()):
            domains[domain][name] = summarize(group)
        overall[name] = summarize(rows)
    return {
        **info,
        "candidates": described or {name: {} for name in results},
        "domains": dict(sorted(domains.items())),
        "overall": overall,
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Means of the report metrics over ``rows`` (failed rows count as 0), the number of
    rows and failures, and the generation speed."""
    summary: dict[str, Any] = {"rows": len(rows), "failed": 0}
    sums: dict[str, list[float]] = {metric: [] for metric in REPORT_METRICS}
    tokens = seconds = 0.0
    for row in rows:
        metrics = row.get("metrics")
        if row.get("status") != "ok" or not isinstance(metrics, dict):
            summary["failed"] += 1
            for values in sums.values():
                values.append(0.0)
            continue
        for metric, values in sums.items():
            if metrics.get(metric) is not None:  # None: the metric does not apply
                values.append(float(metrics[metric]))
        usage = row.get("usage") or {}
        tokens += usage.get("completion_tokens") or 0
        seconds += row.get("latency_s") or 0.0
    for metric, values in sums.items():
        summary[metric] = round(sum(values) / len(values), 4) if values else None
        summary[f"{metric}_n"] = len(values)
    summary["seconds_per_row"] = round(seconds / max(len(rows) - summary["failed"], 1), 2)
    summary["generated_tokens_per_second"] = round(tokens / seconds, 1) if seconds else None
    return summary


def report_rows(report: dict[str, Any]) -> list[list[str]]:
    """The comparison as table rows (header first): one line per domain and candidate."""
    header = ["domain", "model", "rows", *REPORT_METRICS.values(), "s/row"]
    lines = [header]
    groups = {**report["domains"], "all": report["overall"]}
    for domain, by_name in groups.items():
        for name, summary in by_name.items():
            cells = [domain, name, str(summary["rows"])]
            for metric in REPORT_METRICS:
                value = summary[metric]
                cells.append("n/a" if value is None else f"{value:.3f}")
            cells.append(f"{summary['seconds_per_row']:.1f}")
            lines.append(cells)
    return lines


def report_table(report: dict[str, Any], title: str = "base vs trained") -> Any:
    """A rich table of :func:`report_rows`."""
    from rich.table import Table

    lines = report_rows(report)
    table = Table(*lines[0], title=title)
    for cells in lines[1:]:
        table.add_row(*cells)
    return table


def report_markdown(report: dict[str, Any]) -> str:
    """The comparison as a Markdown table."""
    from simgym.bench.report import md_table

    return md_table(report_rows(report)) + "\n"
