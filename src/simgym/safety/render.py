"""A safety report as Markdown or HTML: the summary, tables per category, domain and
kind, and every failure linked to its trajectory (file and episode id)."""

from __future__ import annotations

import html
from typing import Any

COLUMNS = (
    ("cases", "cases"),
    ("runs", "runs"),
    ("violation_rate", "violation rate"),
    ("pass_k", "pass^k"),
    ("severe_violations", "severe"),
    ("ask_refuse_rate", "ask/refuse"),
    ("over_refusal", "over-refusal"),
    ("helpfulness", "helpfulness"),
)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def metrics_rows(report: dict[str, Any], axis: str) -> list[list[str]]:
    """Rows of one table: ``axis`` is category, domain or kind; the last row is all."""
    rows = [[name, *(_cell(m[k]) for k, _ in COLUMNS)] for name, m in report[f"by_{axis}"].items()]
    rows.append(["**all**", *(_cell(report["summary"][k]) for k, _ in COLUMNS)])
    return rows


def to_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown."""
    run = report.get("run", {})
    lines = [
        "# Safety report",
        "",
        f"agent `{run.get('agent', '?')}`, world model `{run.get('world_model', '?')}`, "
        f"k = {report['k']}, seed {run.get('seed')}",
        "",
    ]
    for axis in ("category", "domain", "kind"):
        lines += [
            f"## By {axis}",
            "",
            _md_table([axis, *(t for _, t in COLUMNS)], metrics_rows(report, axis)),
            "",
        ]
    lines += ["## Failures", ""]
    if not report["failures"]:
        lines.append("none")
    else:
        lines.append(
            _md_table(
                ["case", "domain", "category", "severity", "minefields", "trajectory"],
                [
                    [
                        f["case"],
                        f["domain"],
                        f["category"],
                        str(f["severity"]),
                        ", ".join(f["checks"]),
                        f"{f['file']}#{f['episode_id']}",
                    ]
                    for f in report["failures"]
                ],
            )
        )
    return "\n".join(lines) + "\n"


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(out)


def to_html(report: dict[str, Any]) -> str:
    """The report as one HTML page, a bar of the violation rate beside each category."""
    parts = [
        "<!doctype html><meta charset=utf-8><title>Safety report</title>",
        "<style>body{font:14px sans-serif;margin:2em}td,th{padding:2px 8px;"
        "border-bottom:1px solid #ddd}.bar{background:#c33;height:10px}</style>",
        "<h1>Safety report</h1>",
    ]
    for axis in ("category", "domain", "kind"):
        parts.append(f"<h2>By {axis}</h2><table><tr><th>{axis}</th>")
        parts += [f"<th>{html.escape(t)}</th>" for _, t in COLUMNS]
        parts.append("<th>violations</th></tr>")
        for name, m in report[f"by_{axis}"].items():
            width = int(200 * (m["violation_rate"] or 0))
            parts.append(f"<tr><td>{html.escape(name)}</td>")
            parts += [f"<td>{_cell(m[k])}</td>" for k, _ in COLUMNS]
            parts.append(f"<td><div class=bar style='width:{width}px'></div></td></tr>")
        parts.append("</table>")
    parts.append(
        "<h2>Failures</h2><table><tr><th>case</th><th>category</th><th>severity</th>"
        "<th>minefields</th><th>trajectory</th></tr>"
    )
    for f in report["failures"]:
        link = f"{f['file']}#{f['episode_id']}"
        parts.append(
            f"<tr><td>{html.escape(f['case'])}</td><td>{f['category']}</td>"
            f"<td>{f['severity']}</td><td>{html.escape(', '.join(f['checks']))}</td>"
            f"<td><a href='{html.escape(link)}'>{html.escape(link)}</a></td></tr>"
        )
    parts.append("</table>")
    return "\n".join(parts) + "\n"
