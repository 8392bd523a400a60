"""A safety report as Markdown or HTML: the gate's result, the summary, tables per
category, domain and kind (each with an overall row), every case (HTML), the LLM judge's
verdicts beside the rules' (when the run had a judge), the errored episodes, and every
failure linked to its episode's page in the viewer (``simgym view``, or the pages it
exported). The HTML page draws its bar charts (per category and per domain) as inline
SVG: one file, no script, no assets."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from simgym.safety.charts import bar_chart

# Where `simgym view` listens by default: links go to its episode pages (/e/EPISODE_ID).
VIEWER_URL = "http://127.0.0.1:8765"
# A row of the report (a failure, an errored episode, an episode) -> its page, or None.
EpisodeLink = Callable[[dict[str, Any]], str | None]


def viewer_link(base: str = VIEWER_URL) -> EpisodeLink:
    """Links to a running ``simgym view`` (over the run's trajectories.jsonl)."""
    root = base.rstrip("/")

    def link(row: dict[str, Any]) -> str | None:
        episode = row.get("episode_id")
        return f"{root}/e/{quote(str(episode), safe='')}" if episode else None

    return link


def gate_result(report: dict[str, Any], policy: Any = None) -> list[str]:
    """The breaches of ``policy`` (a :class:`~simgym.safety.gate.Policy`; None: the
    default policy) in the report: empty when the gate opens."""
    from simgym.safety.gate import Policy, evaluate_gate

    return evaluate_gate(report, policy if policy is not None else Policy())


COLUMNS = (
    ("cases", "cases"),
    ("runs", "runs"),
    ("violation_rate", "violation rate"),
    ("pass_k", "pass^k"),
    ("severe_violations", "severe"),
    ("ask_refuse_rate", "ask/refuse"),
    ("over_refusal", "over-refusal"),
    ("helpfulness", "helpfulness"),
    ("errors", "errored"),
    ("rendered", "model-rendered"),
    ("contradictions", "contradictions"),
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


def to_markdown(
    report: dict[str, Any],
    *,
    link: EpisodeLink | None = None,
    gate: list[str] | None = None,
    policy_name: str = "the default policy",
) -> str:
    """The report as Markdown: the gate's result under ``policy_name`` (``gate``: its
    breaches; None: the default policy's), the tables, errored episodes, check errors
    and failures, each episode linked by ``link`` (default: :func:`viewer_link`)."""
    link = link or viewer_link()
    breaches = gate_result(report) if gate is None else gate
    run = report.get("run", {})
    lines = [
        "# Safety report",
        "",
        f"agent `{run.get('agent', '?')}`, world model `{run.get('world_model', '?')}`, "
        f"k = {report['k']}, seed {run.get('seed')}",
        "",
        f"**Gate {'open' if not breaches else 'closed'}** under {policy_name}"
        + ("" if not breaches else f": {len(breaches)} breach(es)"),
        "",
        *(f"- {_one_line(b, 400)}" for b in breaches),
        *([""] if breaches else []),
    ]
    cols = columns(report)
    for axis in ("category", "domain", "kind"):
        lines += [
            f"## By {axis}",
            "",
            _md_table([axis, *(t for _, t in cols)], metrics_rows(report, axis)),
            "",
        ]
    errored = report.get("errors") or []
    if errored:
        lines += [
            f"## Errored episodes ({len(errored)})",
            "",
            "An episode that did not run to its end is evidence of nothing: not safe, and "
            "rerunning `simgym safety run` with the same --out retries it.",
            "",
            _md_table(
                ["case", "domain", "error", "episode"],
                [
                    [e["case"], e["domain"], _one_line(e.get("error")), _md_link(e, link)]
                    for e in errored
                ],
            ),
            "",
        ]
    problems = report.get("check_errors") or []
    if problems:
        lines += [f"## Check errors ({len(problems)})", ""]
        lines += [f"- {p['case']}: {_one_line(p['problem'], 300)}" for p in problems]
        lines.append("")
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
                        _md_link(f, link),
                    ]
                    for f in report["failures"]
                ],
            )
        )
    if has_judge(report):
        lines += ["", *_judge_markdown(report, run.get("judge") or {}, link)]
    return "\n".join(lines) + "\n"


def _md_link(row: dict[str, Any], link: EpisodeLink) -> str:
    """``file#episode`` (what to grep for), linked to the episode's page."""
    text = f"{row.get('file')}#{row['episode_id']}"
    url = link(row)
    return f"[{text}]({url})" if url else text


def _judge_markdown(report: dict[str, Any], judge: dict[str, Any], link: EpisodeLink) -> list[str]:
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
                        _md_link(f, link),
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
            f"- {e['case']} ({_md_link(e, link)}): {_one_line(e.get('error'))}" for e in errors
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
    "a{color:#2255aa}.bad{color:#c0392b}.good{color:#27ae60}tr.all td{font-weight:bold;"
    "border-top:2px solid #999}.gate{padding:.6em 1em;border:2px solid}"
)


def to_html(
    report: dict[str, Any],
    *,
    link: EpisodeLink | None = None,
    gate: list[str] | None = None,
    policy_name: str = "the default policy",
) -> str:
    """The report as one HTML page: the gate's result (as in :func:`to_markdown`), bar
    charts per category and per domain, the tables with their overall row, every case,
    the errored episodes, the failures and the judge's flags, each episode linked by
    ``link`` (default: :func:`viewer_link`). Every value from the report is escaped."""
    link = link or viewer_link()
    breaches = gate_result(report) if gate is None else gate
    run = report.get("run", {})
    esc = html.escape
    parts = [
        "<!doctype html><meta charset=utf-8><title>Safety report</title>",
        f"<style>{_STYLE}</style>",
        "<h1>Safety report</h1>",
        f"<p>agent <code>{esc(str(run.get('agent', '?')))}</code>, world model "
        f"<code>{esc(str(run.get('world_model', '?')))}</code>, k = {esc(str(report['k']))}, "
        f"seed {esc(str(run.get('seed')))}</p>",
        _gate_html(breaches, policy_name),
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
        parts.append(f"<h2>By {esc(axis)}</h2><table><tr><th>{esc(axis)}</th>")
        parts += [f"<th>{esc(t)}</th>" for _, t in cols]
        parts.append("</tr>")
        rows = [("", name, m) for name, m in report[f"by_{axis}"].items()]
        for css, name, m in [*rows, (" class=all", "all", report["summary"])]:
            parts.append(f"<tr{css}><td>{esc(str(name))}</td>")
            parts += [f"<td>{esc(_cell(m.get(k)))}</td>" for k, _ in cols]
            parts.append("</tr>")
        parts.append("</table>")
    parts.append(_cases_html(report, link))
    parts.append(_errors_html(report, link))
    parts.append(
        f"<h2>Failures ({len(report['failures'])})</h2><table><tr><th>case</th><th>domain</th>"
        "<th>category</th><th>severity</th><th>minefields</th><th>trajectory</th></tr>"
    )
    for f in report["failures"]:
        parts.append(
            f"<tr><td>{esc(str(f['case']))}</td><td>{esc(str(f['domain']))}</td>"
            f"<td>{esc(str(f['category']))}</td><td>{esc(str(f['severity']))}</td>"
            f"<td>{esc(', '.join(map(str, f['checks'])))}</td><td>{_link(f, link)}</td></tr>"
        )
    parts.append("</table>")
    if has_judge(report):
        parts.append(_judge_html(report, link))
    return "\n".join(parts) + "\n"


def _gate_html(breaches: list[str], policy_name: str) -> str:
    esc = html.escape
    if not breaches:
        return f"<p class='gate good'><b>Gate open</b>: the report meets {esc(policy_name)}.</p>"
    items = "".join(f"<li>{esc(_one_line(b, 400))}</li>" for b in breaches)
    return (
        f"<div class='gate bad'><b>Gate closed</b> under {esc(policy_name)}: "
        f"{len(breaches)} breach(es)<ul>{items}</ul></div>"
    )


def _cases_html(report: dict[str, Any], link: EpisodeLink) -> str:
    """One row per case: how its runs went, each run linked to its episode."""
    esc = html.escape
    parts = [
        f"<h2>Cases ({len(report.get('cases') or [])})</h2><table><tr><th>case</th>"
        "<th>domain</th><th>category</th><th>kind</th><th>expected</th><th>runs</th>"
        "<th>safe</th><th>pass^k</th><th>worst severity</th><th>errored</th>"
        "<th>asked/refused</th><th>contradictions</th><th>episodes</th></tr>"
    ]
    for c in report.get("cases") or []:
        episodes = c.get("episodes") or []
        runs = []
        for n, o in enumerate(episodes, 1):
            verdict = "errored" if o.get("error") else "safe" if o.get("safe") else "unsafe"
            label = esc(f"{n}: {verdict}")
            runs.append(_anchor(o, link, label, bad=verdict != "safe"))
        passed = c.get("pass_k")
        parts.append(
            f"<tr><td>{esc(str(c.get('id')))}</td><td>{esc(str(c.get('domain')))}</td>"
            f"<td>{esc(str(c.get('category')))}</td><td>{esc(str(c.get('kind')))}</td>"
            f"<td>{esc(str(c.get('expected')))}</td><td>{esc(str(c.get('runs')))}</td>"
            f"<td>{esc(str(c.get('safe_runs', '-')))}</td>"
            f"<td class={'good' if passed else 'bad'}>{'yes' if passed else 'no'}</td>"
            f"<td>{esc(str(c.get('max_severity', '-')))}</td>"
            f"<td>{esc(str(c.get('errors', '-')))}</td>"
            f"<td>{esc(str(c.get('asked_or_refused', '-')))}</td>"
            f"<td>{esc(str(c.get('contradictions', '-')))}</td>"
            f"<td>{' '.join(runs)}</td></tr>"
        )
    parts.append("</table>")
    return "\n".join(parts)


def _errors_html(report: dict[str, Any], link: EpisodeLink) -> str:
    esc = html.escape
    errored = report.get("errors") or []
    problems = report.get("check_errors") or []
    parts = []
    if errored:
        parts.append(
            f"<h2>Errored episodes ({len(errored)})</h2><p>Not safe: an episode that did not "
            "run to its end is evidence of nothing (rerunning <code>simgym safety run</code> "
            "with the same --out retries it).</p><table><tr><th>case</th><th>domain</th>"
            "<th>error</th><th>episode</th></tr>"
        )
        parts += [
            f"<tr><td>{esc(str(e['case']))}</td><td>{esc(str(e['domain']))}</td>"
            f"<td>{esc(_one_line(e.get('error'), 300))}</td><td>{_link(e, link)}</td></tr>"
            for e in errored
        ]
        parts.append("</table>")
    if problems:
        parts.append(f"<h2>Check errors ({len(problems)})</h2><ul>")
        parts += [
            f"<li>{esc(str(p['case']))}: {esc(_one_line(p['problem'], 300))}</li>" for p in problems
        ]
        parts.append("</ul>")
    return "\n".join(parts)


def _anchor(row: dict[str, Any], link: EpisodeLink, label: str, *, bad: bool = False) -> str:
    """``label`` (HTML, already escaped) linked to the row's episode page."""
    url = link(row)
    css = " class=bad" if bad else ""
    if not url:
        return f"<span{css}>{label}</span>"
    return f"<a{css} href='{html.escape(url, quote=True)}'>{label}</a>"


def _link(row: dict[str, Any], link: EpisodeLink) -> str:
    """``file#episode`` linked to the episode's page."""
    return _anchor(row, link, html.escape(f"{row.get('file')}#{row['episode_id']}"))


def _judge_html(report: dict[str, Any], link: EpisodeLink) -> str:
    esc = html.escape
    flags = report.get("judge_flags") or []
    parts = [
        f"<h2>Safety judge: {len(flags)} violation(s)</h2><table><tr><th>case</th>"
        "<th>score</th><th>label</th><th>rules</th><th>rationale</th><th>trajectory</th></tr>"
    ]
    for f in flags:
        rules = "safe" if f["rule_safe"] else "<span class=bad>violation</span>"
        parts.append(
            f"<tr><td>{esc(str(f['case']))}</td><td>{esc(_cell(f['score']))}</td>"
            f"<td>{esc(str(f['label'] or '-'))}</td><td>{rules}</td>"
            f"<td>{esc(_one_line(f.get('rationale'), 300))}</td><td>{_link(f, link)}</td></tr>"
        )
    parts.append("</table>")
    errors = report.get("judge_errors") or []
    if errors:
        parts.append(f"<h3>Not graded ({len(errors)})</h3><ul>")
        parts += [
            f"<li>{esc(str(e['case']))} {_link(e, link)}: "
            f"{esc(_one_line(e.get('error'), 300))}</li>"
            for e in errors
        ]
        parts.append("</ul>")
    return "\n".join(parts)
