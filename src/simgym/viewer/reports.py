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
from simgym.viewer.blocks import Html, bar_chart, e, fmt, json_block, table

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
    render = {
        "safety": lambda: _safety(report, episode_link),
        "score": lambda: _score(report),
        "consistency": lambda: _consistency(report),
    }.get(kind)
    if render is None:
        return json_block(report)
    try:
        return render()
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        # a file of that kind in another shape (hand-edited, another version): shown as
        # the JSON it is, with what did not fit, never a server error
        return (
            f'<p class="err">not a {e(kind)} report simgym can lay out '
            f"({e(type(exc).__name__)}: {e(str(exc)[:200])}); shown as JSON:</p>"
            + json_block(report)
        )


def _get(value: Any, key: str) -> Any:
    """``value[key]`` when ``value`` is a mapping, else None (reports are user files)."""
    return value.get(key) if isinstance(value, dict) else None


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
            c.get("domain"),
            c.get("gap"),
            c.get("mode"),
            c.get("grounding"),
            c.get("passed"),
            c.get("total"),
            fmt(c.get("pass_rate")),
            c.get("corrected"),
        ]
        for c in cells
    ]
    return '<div class="charts">' + "".join(charts) + "</div>" + table(header, rows)


def _safety(report: dict[str, Any], episode_link: Callable[[dict], str | None]) -> str:
    out = [f"<p>k = {e(report.get('k'))}; summary over every case:</p>"]
    header = ["", *(label for _, label in _SAFETY_COLUMNS)]

    def rows(groups: dict[str, Any]) -> list[list[Any]]:
        return [
            [name, *(fmt(_get(g, k)) for k, _ in _SAFETY_COLUMNS)] for name, g in groups.items()
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
        cell = Html(f'<a href="{e(url)}">{e(ref)}</a>') if url else ref
        checks = failure.get("checks")
        lines.append(
            [
                failure.get("case"),
                failure.get("domain"),
                failure.get("category"),
                failure.get("kind"),
                failure.get("severity"),
                ", ".join(map(str, checks)) if isinstance(checks, list) else checks,
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
                name,
                _get(group, "rows"),
                _get(group, "graded"),
                _get(group, "failed"),
                *(fmt(_get(scores, d)) for d in _DIMENSIONS),
                fmt(_get(group, "total_strict")),
            ]
        )
    macro = (report.get("overall") or {}).get("macro") or {}
    if macro:
        scores = macro.get("scores") or {}
        lines.append(
            [
                Html("<b>macro</b>"),
                "",
                "",
                "",
                *(fmt(_get(scores, d)) for d in _DIMENSIONS),
                fmt(_get(macro, "total_strict")),
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
                    [d, *(fmt(_get(_get(_get(g, "metrics"), m), "mean")) for m in metric_names)]
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
