"""Score reports as a rich table, JSON, Markdown and HTML.

The HTML report embeds a per-domain bar chart: drawn with matplotlib when it is
installed (a PNG inside the page), otherwise as a small inline SVG, so the report never
needs more than the standard library.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from pathlib import Path
from typing import Any

from rich.table import Table

from simgym.bench.judge import DIMENSIONS
from simgym.bench.metrics import METRIC_NAMES

COLUMNS = (*DIMENSIONS, "total")


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _failures(group: dict[str, Any]) -> str:
    parts = [
        f"{group[k]} {label}"
        for k, label in (
            ("infer_failed", "inference"),
            ("empty", "empty"),
            ("judge_failed", "judge"),
        )
        if group.get(k)
    ]
    return ", ".join(parts) if parts else "0"


def score_rows_table(report: dict[str, Any]) -> list[list[str]]:
    """Header plus one line per domain and the two overall lines."""
    header = [
        "domain",
        *(c.capitalize() for c in COLUMNS),
        "strict",
        "graded/rows",
        "failures",
    ]
    lines = [header]
    for name, group in report["domains"].items():
        lines.append(
            [
                name,
                *(_fmt(group["scores"][c]) for c in COLUMNS),
                _fmt(group["total_strict"]),
                f"{group['graded']}/{group['rows']}",
                _failures(group),
            ]
        )
    macro = report["overall"]["macro"]
    micro = report["overall"]["micro"] or {"scores": {}, "graded": 0, "rows": 0}
    lines.append(
        [
            "overall (macro)",
            *(_fmt(macro["scores"].get(c)) for c in COLUMNS),
            _fmt(macro["total_strict"]),
            f"{len(macro['domains'])} domains",
            "",
        ]
    )
    lines.append(
        [
            "overall (micro)",
            *(_fmt(micro["scores"].get(c)) for c in COLUMNS),
            _fmt(micro.get("total_strict")),
            f"{micro['graded']}/{micro['rows']}",
            _failures(micro) if report["overall"]["micro"] else "",
        ]
    )
    return lines


def metric_rows_table(report: dict[str, Any]) -> list[list[str]]:
    header = ["domain", *METRIC_NAMES]
    lines = [header]
    groups = dict(report["domains"])
    if report["overall"]["micro"]:
        groups["all rows"] = report["overall"]["micro"]
    for name, group in groups.items():
        cells = [name]
        for metric in METRIC_NAMES:
            entry = group["metrics"][metric]
            cells.append(f"{_fmt(entry['mean'], 3)} ({entry['n']})" if entry["n"] else "n/a")
        lines.append(cells)
    return lines


def rich_tables(report: dict[str, Any]) -> list[Table]:
    """The judge scores and the rule metrics, for the terminal."""
    tables = []
    for title, lines in (
        ("judge scores (0-100)", score_rows_table(report)),
        ("rule metrics: mean (rows where it applies)", metric_rows_table(report)),
    ):
        table = Table(*lines[0], title=title)
        for line in lines[1:]:
            table.add_row(*line)
        tables.append(table)
    return tables


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False)


def md_table(lines: list[list[str]]) -> str:
    """A Markdown table of ``lines`` (the header first); pipes in cells are escaped."""
    out = ["| " + " | ".join(lines[0]) + " |", "|" + "---|" * len(lines[0])]
    out += [
        "| " + " | ".join(cell.replace("|", "\\|") for cell in line) + " |" for line in lines[1:]
    ]
    return "\n".join(out)


def _models(report: dict[str, Any]) -> list[str]:
    lines = []
    for wm in report.get("world_models", []):
        lines.append("world model: " + _describe(wm))
    for judge in report.get("judges", []):
        lines.append("judge: " + _describe(judge))
    return lines


def _describe(info: dict[str, Any]) -> str:
    keys = (
        "backend",
        "model",
        "model_path",
        "base_url",
        "temperature",
        "max_tokens",
        "attempts_allowed",
    )
    return ", ".join(f"{k}={info[k]}" for k in keys if info.get(k) is not None)


NOTES = (
    "Scores map each 1-5 judge dimension to 0-100 as (mean - 1) / 4 * 100. "
    "Macro averages the domains, micro all graded rows. "
    "`strict` counts every failure (inference failed, empty answer, unreadable judge "
    "answer) as the lowest grade; the other columns average graded rows only, and the "
    "failures are listed beside them."
)


def to_markdown(report: dict[str, Any], title: str = "World-model fidelity") -> str:
    parts = [f"# {title}", ""]
    parts += [f"- {line}" for line in _models(report)]
    parts += [f"- rows: {report['rows']}; sources: {', '.join(report['sources']) or '-'}", ""]
    parts += ["## Judge scores (0-100)", "", md_table(score_rows_table(report)), ""]
    parts += ["## Rule metrics", "", md_table(metric_rows_table(report)), ""]
    parts += [NOTES, ""]
    return "\n".join(parts)


def chart_png(report: dict[str, Any]) -> bytes | None:
    """A per-domain bar chart of the totals as PNG, or None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    names, values = _chart_data(report)
    fig, ax = plt.subplots(figsize=(max(4, 1 + len(names)), 3.2))
    ax.bar(names, [v or 0 for v in values], color="#4472c4")
    ax.set_ylim(0, 100)
    ax.set_ylabel("score (0-100)")
    ax.set_title("judge total per domain")
    for i, v in enumerate(values):
        ax.text(i, (v or 0) + 1.5, _fmt(v, 1), ha="center", fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _chart_data(report: dict[str, Any]) -> tuple[list[str], list[float | None]]:
    names = list(report["domains"])
    values = [report["domains"][d]["scores"]["total"] for d in names]
    names.append("overall")
    values.append(report["overall"]["macro"]["scores"]["total"])
    return names, values


def chart_svg(report: dict[str, Any]) -> str:
    """The same chart as an inline SVG, needing nothing installed."""
    names, values = _chart_data(report)
    bar, gap, height, top = 56, 16, 160, 20
    width = len(names) * (bar + gap) + gap
    shapes = []
    for i, (name, value) in enumerate(zip(names, values, strict=True)):
        x = gap + i * (bar + gap)
        h = (value or 0) / 100 * height
        y = top + height - h
        shapes.append(f'<rect x="{x}" y="{y:.1f}" width="{bar}" height="{h:.1f}" fill="#4472c4"/>')
        shapes.append(
            f'<text x="{x + bar / 2}" y="{y - 4:.1f}" font-size="11" text-anchor="middle">'
            f"{_fmt(value, 1)}</text>"
        )
        shapes.append(
            f'<text x="{x + bar / 2}" y="{top + height + 14}" font-size="11" '
            f'text-anchor="middle">{html.escape(name)}</text>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + height + 24}" '
        f'role="img" aria-label="judge total per domain">{"".join(shapes)}</svg>'
    )


def _html_table(lines: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in lines[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in line) + "</tr>" for line in lines[1:]
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def to_html(report: dict[str, Any], title: str = "World-model fidelity") -> str:
    png = chart_png(report)
    if png is not None:
        encoded = base64.b64encode(png).decode()
        chart = f'<img alt="judge total per domain" src="data:image/png;base64,{encoded}">'
    else:
        chart = chart_svg(report)
    models = "".join(f"<li>{html.escape(line)}</li>" for line in _models(report))
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
        "td:first-child,th:first-child{text-align:left}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><ul>{models}<li>rows: {report['rows']}</li></ul>"
        f"{chart}<h2>Judge scores (0-100)</h2>{_html_table(score_rows_table(report))}"
        f"<h2>Rule metrics</h2>{_html_table(metric_rows_table(report))}"
        f"<p>{html.escape(NOTES)}</p></body></html>"
    )


def write_reports(
    report: dict[str, Any],
    *,
    json_path: str | os.PathLike[str] | None = None,
    markdown_path: str | os.PathLike[str] | None = None,
    html_path: str | os.PathLike[str] | None = None,
) -> list[Path]:
    """Write the requested report files; returns their paths."""
    written = []
    for path, render in (
        (json_path, to_json),
        (markdown_path, to_markdown),
        (html_path, to_html),
    ):
        if path is None:
            continue
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render(report), encoding="utf-8")
        written.append(target)
    return written
