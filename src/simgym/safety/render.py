"""A safety report as Markdown or HTML: the summary, tables per category, domain and
kind, the LLM judge's verdicts beside the rules' (when the run had a judge), and every
failure linked to its trajectory (file and episode id). The HTML page draws its bar
charts (per category and per domain) as inline SVG: one file, no script, no assets."""

from __future__ import annotations

import html
from typing import Any

from simgym.safety.charts import bar_chart

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
JUDGE_COLUMN = ("judge_violation_rate", "judge violation rate")
# The bars of each chart: metric, legend, colour (violations red, the judge's orange).
CHART_SERIES = (
    ("violation_rate", "violation rate (rules)", "#c0392b"),
    ("judge_violation_rate", "violation rate (judge)", "#e67e22"),
    ("pass_k", "pass^k", "#27ae60"),
    ("helpfulness", "helpfulness", "#2980b9"),
)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def has_judge(report: dict[str, Any]) -> bool:
    """Whether the run had an LLM safety judge (graded or failed episodes)."""
    summary = report["summary"]
    return bool(summary.get("judged") or summary.get("judge_errors"))


def columns(report: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The metric columns: the judge's violation rate beside the rules' when judged."""
    if not has_judge(report):
        return COLUMNS
    return (*COLUMNS[:3], JUDGE_COLUMN, *COLUMNS[3:])


def metrics_rows(report: dict[str, Any], axis: str) -> list[list[str]]:
    """Rows of one table: ``axis`` is category, domain or kind; the last row is all."""
    cols = columns(report)
    rows = [[name, *(_cell(m.get(k)) for k, _ in cols)] for name, m in report[f"by_{axis}"].items()]
    rows.append(["**all**", *(_cell(report["summary"].get(k)) for k, _ in cols)])
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
    cols = columns(report)
    for axis in ("category", "domain", "kind"):
        lines += [
            f"## By {axis}",
            "",
            _md_table([axis, *(t for _, t in cols)], metrics_rows(report, axis)),
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
    if has_judge(report):
        lines += ["", *_judge_markdown(report, run.get("judge") or {})]
    return "\n".join(lines) + "\n"


def _judge_markdown(report: dict[str, Any], judge: dict[str, Any]) -> list[str]:
    summary = report["summary"]
    lines = [
        "## Safety judge",
        "",
        f"model `{judge.get('model', '?')}`: {summary.get('judged', 0)} episode(s) graded, "
        f"{summary.get('judge_errors', 0)} not (errors below); likelihood x severity, "
        "scores 0-1 are violations",
        "",
    ]
    flags = report.get("judge_flags") or []
    if flags:
        lines.append(
            _md_table(
                ["case", "score", "label", "rules", "rationale", "trajectory"],
                [
                    [
                        f["case"],
                        _cell(f["score"]),
                        f["label"] or "-",
                        "safe" if f["rule_safe"] else "violation",
                        _one_line(f.get("rationale")),
                        f"{f['file']}#{f['episode_id']}",
                    ]
                    for f in flags
                ],
            )
        )
    else:
        lines.append("no judge violations")
    errors = report.get("judge_errors") or []
    if errors:
        lines += ["", "Not graded:", ""]
        lines += [
            f"- {e['case']} ({e['file']}#{e['episode_id']}): {_one_line(e.get('error'))}"
            for e in errors
        ]
    return lines


def _one_line(text: str | None, limit: int = 160) -> str:
    if not text:
        return "-"
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(out)


# -- HTML -----------------------------------------------------------------------------------

_STYLE = (
    "body{font:14px sans-serif;margin:2em;max-width:72em}td,th{padding:2px 8px;"
    "border-bottom:1px solid #ddd;text-align:left}th{background:#f4f4f4}"
    "figure{margin:1em 0}figcaption{font-weight:bold;margin-bottom:.3em}"
    "a{color:#2255aa}.bad{color:#c0392b}"
)


def to_html(report: dict[str, Any]) -> str:
    """The report as one HTML page: bar charts per category and per domain, the tables,
    the failures and the judge's flags, each linked to its trajectory."""
    run = report.get("run", {})
    esc = html.escape
    parts = [
        "<!doctype html><meta charset=utf-8><title>Safety report</title>",
        f"<style>{_STYLE}</style>",
        "<h1>Safety report</h1>",
        f"<p>agent <code>{esc(str(run.get('agent', '?')))}</code>, world model "
        f"<code>{esc(str(run.get('world_model', '?')))}</code>, k = {report['k']}, "
        f"seed {esc(str(run.get('seed')))}</p>",
    ]
    series = [s for s in CHART_SERIES if s[0] != "judge_violation_rate" or has_judge(report)]
    for axis in ("category", "domain"):
        groups = report[f"by_{axis}"]
        parts.append(
            bar_chart(
                f"By {axis}",
                [(name, [m.get(key) for key, _, _ in series]) for name, m in groups.items()],
                [(label, colour) for _, label, colour in series],
            )
        )
    cols = columns(report)
    for axis in ("category", "domain", "kind"):
        parts.append(f"<h2>By {axis}</h2><table><tr><th>{axis}</th>")
        parts += [f"<th>{esc(t)}</th>" for _, t in cols]
        parts.append("</tr>")
        for name, m in report[f"by_{axis}"].items():
            parts.append(f"<tr><td>{esc(name)}</td>")
            parts += [f"<td>{_cell(m.get(k))}</td>" for k, _ in cols]
            parts.append("</tr>")
        parts.append("</table>")
    parts.append(
        f"<h2>Failures ({len(report['failures'])})</h2><table><tr><th>case</th><th>domain</th>"
        "<th>category</th><th>severity</th><th>minefields</th><th>trajectory</th></tr>"
    )
    for f in report["failures"]:
        parts.append(
            f"<tr><td>{esc(f['case'])}</td><td>{esc(f['domain'])}</td>"
            f"<td>{esc(f['category'])}</td><td>{f['severity']}</td>"
            f"<td>{esc(', '.join(f['checks']))}</td><td>{_link(f)}</td></tr>"
        )
    parts.append("</table>")
    if has_judge(report):
        parts.append(_judge_html(report))
    return "\n".join(parts) + "\n"


def _link(row: dict[str, Any]) -> str:
    """A link to the episode in its trajectory file (relative: the report's folder)."""
    target = f"{row.get('file')}#{row['episode_id']}"
    return f"<a href='{html.escape(target, quote=True)}'>{html.escape(target)}</a>"


def _judge_html(report: dict[str, Any]) -> str:
    esc = html.escape
    flags = report.get("judge_flags") or []
    parts = [
        f"<h2>Safety judge: {len(flags)} violation(s)</h2><table><tr><th>case</th>"
        "<th>score</th><th>label</th><th>rules</th><th>rationale</th><th>trajectory</th></tr>"
    ]
    for f in flags:
        rules = "safe" if f["rule_safe"] else "<span class=bad>violation</span>"
        parts.append(
            f"<tr><td>{esc(f['case'])}</td><td>{_cell(f['score'])}</td>"
            f"<td>{esc(f['label'] or '-')}</td><td>{rules}</td>"
            f"<td>{esc(_one_line(f.get('rationale'), 300))}</td><td>{_link(f)}</td></tr>"
        )
    parts.append("</table>")
    errors = report.get("judge_errors") or []
    if errors:
        parts.append(f"<h3>Not graded ({len(errors)})</h3><ul>")
        parts += [
            f"<li>{esc(e['case'])} {_link(e)}: {esc(_one_line(e.get('error'), 300))}</li>"
            for e in errors
        ]
        parts.append("</ul>")
    return "\n".join(parts)
