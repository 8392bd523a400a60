"""Report files the viewer shows next to the episodes: a safety report (``simgym safety
run`` writes ``OUT/report.json``), a fidelity score (``simgym bench score --json``) and a
world-state consistency table (``simgym bench consistency --json``).
Each becomes tables and bar charts; a safety failure links to its episode."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simgym.core.errors import SimgymError
from simgym.safety.render import COLUMNS
from simgym.viewer.blocks import bar_chart, e, fmt, json_block, table

_SAFETY_COLUMNS = COLUMNS  # the safety report's own columns, in its order
_DIMENSIONS = ("format", "factuality", "consistency", "realism", "quality", "total")


def load_report(path: str | Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SimgymError(f"{path}: not a readable JSON report: {exc}") from None
    if not isinstance(data, dict):
        raise SimgymError(f"{path}: a report is a JSON object")
    return data


def report_kind(report: dict[str, Any]) -> str:
    """``safety``, ``score``, ``consistency`` or ``json`` (shown as it is)."""
    if "summary" in report and "by_category" in report:
        return "safety"
    cells = report.get("cells")
    if isinstance(cells, list) and all(isinstance(c, dict) and "pass_rate" in c for c in cells):
        return "consistency"
    if str(report.get("schema", "")).startswith("simgym.bench.score") or (
        "domains" in report and "overall" in report
    ):
        return "score"
    return "json"


def render_report(report: dict[str, Any], episode_link: Callable[[dict], str | None]) -> str:
    """The report's body HTML. ``episode_link(failure)`` gives a failure's episode URL."""
    kind = report_kind(report)
    if kind == "safety":
        return _safety(report, episode_link)
    if kind == "score":
        return _score(report)
    if kind == "consistency":
        return _consistency(report)
    return json_block(report)


def _consistency(report: dict[str, Any]) -> str:
    """Pass rate per domain, gap, context mode and grounding, and a chart per grounding."""
    cells: list[dict[str, Any]] = report.get("cells") or []
    groundings = sorted({str(c.get("grounding")) for c in cells})
    charts = []
    for grounding in groundings:
        by_domain: dict[str, list[int]] = {}
        for cell in cells:
            if str(cell.get("grounding")) == grounding:
                counts = by_domain.setdefault(str(cell.get("domain")), [0, 0])
                counts[0] += int(cell.get("passed") or 0)
                counts[1] += int(cell.get("total") or 0)
        bars = [(d, p / t if t else None) for d, (p, t) in by_domain.items()]
        charts.append(bar_chart(f"probes passed, grounding {grounding}", bars, top=1))
    header = ["domain", "gap n", "mode", "grounding", "passed", "total", "pass rate", "fixed"]
    rows = [
        [
            e(c.get("domain")),
            e(c.get("gap")),
            e(c.get("mode")),
            e(c.get("grounding")),
            e(c.get("passed")),
            e(c.get("total")),
            e(fmt(c.get("pass_rate"))),
            e(c.get("corrected")),
        ]
        for c in cells
    ]
    return '<div class="charts">' + "".join(charts) + "</div>" + table(header, rows)


def _safety(report: dict[str, Any], episode_link: Callable[[dict], str | None]) -> str:
    out = [f"<p>k = {e(report.get('k'))}; summary over every case:</p>"]
    header = ["", *(label for _, label in _SAFETY_COLUMNS)]

    def rows(groups: dict[str, Any]) -> list[list[str]]:
        return [
            [e(name), *(e(fmt(g.get(k))) for k, _ in _SAFETY_COLUMNS)] for name, g in groups.items()
        ]

    out.append(table(header, rows({"all": report.get("summary", {})})))
    for axis in ("category", "domain", "kind"):
        groups = report.get(f"by_{axis}") or {}
        if not groups:
            continue
        out.append(f"<h2>By {axis}</h2>")
        out.append(
            '<div class="charts">'
            + bar_chart(
                f"violation rate by {axis}",
                [(n, g.get("violation_rate")) for n, g in groups.items()],
            )
            + bar_chart(
                f"helpfulness by {axis}", [(n, g.get("helpfulness")) for n, g in groups.items()]
            )
            + "</div>"
        )
        out.append(table([axis, *header[1:]], rows(groups)))
    failures = report.get("failures") or []
    out.append(f"<h2>Failures ({len(failures)})</h2>")
    lines = []
    for failure in sorted(failures, key=lambda f: -int(f.get("severity") or 0)):
        url = episode_link(failure)
        ref = f"{failure.get('file') or ''}#{failure.get('episode_id')}"
        cell = f'<a href="{e(url)}">{e(ref)}</a>' if url else e(ref)
        lines.append(
            [
                e(failure.get("case")),
                e(failure.get("domain")),
                e(failure.get("category")),
                e(failure.get("kind")),
                e(failure.get("severity")),
                e(", ".join(failure.get("checks") or [])),
                cell,
            ]
        )
    out.append(
        table(["case", "domain", "category", "kind", "severity", "checks", "episode"], lines)
    )
    return "".join(out)


def _score(report: dict[str, Any]) -> str:
    domains: dict[str, Any] = report.get("domains") or {}
    out = []
    models = report.get("world_models") or []
    if models:
        out.append("<p>world models: " + e(", ".join(json.dumps(m) for m in models)) + "</p>")
    out.append(
        '<div class="charts">'
        + bar_chart(
            "total score by domain (0-100)",
            [(d, (g.get("scores") or {}).get("total")) for d, g in domains.items()],
            top=100,
        )
        + bar_chart(
            "edit similarity by domain",
            [
                (d, ((g.get("metrics") or {}).get("edit_similarity") or {}).get("mean"))
                for d, g in domains.items()
            ],
        )
        + "</div>"
    )
    header = ["domain", "rows", "graded", "failed", *_DIMENSIONS, "total strict"]
    lines = []
    for name, group in domains.items():
        scores = group.get("scores") or {}
        lines.append(
            [
                e(name),
                e(group.get("rows")),
                e(group.get("graded")),
                e(group.get("failed")),
                *(e(fmt(scores.get(d))) for d in _DIMENSIONS),
                e(fmt(group.get("total_strict"))),
            ]
        )
    macro = (report.get("overall") or {}).get("macro") or {}
    if macro:
        scores = macro.get("scores") or {}
        lines.append(
            [
                "<b>macro</b>",
                "",
                "",
                "",
                *(e(fmt(scores.get(d))) for d in _DIMENSIONS),
                e(fmt(macro.get("total_strict"))),
            ]
        )
    out.append(table(header, lines))
    metric_names = sorted({m for g in domains.values() for m in (g.get("metrics") or {})})
    if metric_names:
        out.append("<h2>Rule metrics (mean)</h2>")
        out.append(
            table(
                ["domain", *metric_names],
                [
                    [
                        e(d),
                        *(
                            e(fmt(((g.get("metrics") or {}).get(m) or {}).get("mean")))
                            for m in metric_names
                        ),
                    ]
                    for d, g in domains.items()
                ],
            )
        )
    out.append(_worst_rows(report))
    return "".join(out)


WORST = 10


def _worst_rows(report: dict[str, Any]) -> str:
    """The lowest-scoring rows of the report's sources (the judged or predictions files,
    when they are still there), each with its conversation: the turn's action, the
    model's observation and the real one."""
    from simgym.bench.store import latest_by_key, load_results

    rows: list[dict[str, Any]] = []
    for source in report.get("sources") or []:
        if Path(source).is_file():
            rows.extend(load_results(source))
    if not rows:
        return ""

    def badness(row: dict[str, Any]) -> float:
        if isinstance(row.get("total_score"), int | float):
            return float(row["total_score"]) / 100
        metrics = row.get("metrics") or {}
        value = metrics.get("edit_similarity")
        return float(value) if isinstance(value, int | float) else -1.0

    worst = sorted(latest_by_key(rows).values(), key=badness)[:WORST]
    items = []
    for row in worst:
        judge = row.get("judge") or {}
        said = "; ".join(judge.get("weaknesses") or [])
        body = (
            f'<div class="label">action (turn {e(row.get("turn_idx"))})</div>'
            f'<pre class="text">{e(row.get("current_prompt"))}</pre>'
            f'<div class="label">model</div><pre class="text">{e(row.get("observation"))}</pre>'
            f'<div class="label">real</div><pre class="text">{e(row.get("reference"))}</pre>'
            + (f"<p>judge: {e(said)}</p>" if said else "")
        )
        title = f"{row.get('domain')} {row.get('key')}: score {fmt(badness(row))}"
        items.append(f"<details><summary>{e(title)}</summary>{body}</details>")
    return f"<h2>The {len(worst)} worst rows</h2>" + "".join(items)
