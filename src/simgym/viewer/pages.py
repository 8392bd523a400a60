"""Whole pages: the episode list, an episode, sim vs real, GRPO groups, reports. Each page
is a function from index data to an HTML string; :class:`Links` says where links point,
so the same pages serve live (``/episode/3?...``) and as a static site (``episode-3.html``)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any
from urllib.parse import urlencode

import orjson

from simgym.core.domain import family_of
from simgym.core.types import Trajectory, Turn
from simgym.viewer.blocks import (
    Html,
    as_json,
    details,
    diff_columns,
    e,
    fmt,
    json_block,
    observation_block,
    similarity,
    table,
    tree_change,
)
from simgym.viewer.store import HIT_END, HIT_START, Filters, Index

PER_PAGE = 50


class Links:
    """URLs of the pages: live routes, or the flat file names of an exported site."""

    def __init__(self, static: bool = False) -> None:
        self.static = static

    def _q(self, params: dict[str, Any]) -> str:
        params = {k: v for k, v in params.items() if v not in (None, "")}
        return "?" + urlencode(params) if params else ""

    def episodes(self, params: dict[str, str] | None = None, page: int = 1) -> str:
        if self.static:
            return "index.html" if page <= 1 else f"list-{page}.html"
        return "/" + self._q({**(params or {}), "page": page if page > 1 else None})

    def episode(self, rowid: int, params: dict[str, str] | None = None) -> str:
        if self.static:
            return f"episode-{rowid}.html"
        return f"/episode/{rowid}" + self._q(params or {})

    def compare_list(self) -> str:
        return "compare.html" if self.static else "/compare"

    def compare(self, sim: int, real: int) -> str:
        return f"compare-{sim}-{real}.html" if self.static else f"/compare/{sim}/{real}"

    def groups(self) -> str:
        return "groups.html" if self.static else "/groups"

    def group(self, group_id: str) -> str:
        if self.static:
            return f"group-{group_slug(group_id)}.html"
        return "/group" + self._q({"id": group_id})

    def reports(self) -> str:
        return "reports.html" if self.static else "/reports"

    def report(self, number: int) -> str:
        return f"report-{number}.html" if self.static else f"/report/{number}"

    def state(self, rowid: int, raw: bool = False) -> str | None:
        """Where an episode's final state is served on demand (None in a static site)."""
        if self.static:
            return None
        return f"/episode/{rowid}/state" + (".json" if raw else "")

    def asset(self, name: str) -> str:
        return name if self.static else f"/static/{name}"


def group_slug(group_id: str) -> str:
    return hashlib.sha1(group_id.encode()).hexdigest()[:12]


def layout(title: str, body: str, links: Links, *, live: bool = False, extra: str = "") -> str:
    nav = (
        f'<a href="{links.episodes()}">Episodes</a>'
        f'<a href="{links.compare_list()}">Sim vs real</a>'
        f'<a href="{links.groups()}">GRPO groups</a>'
        f'<a href="{links.reports()}">Reports</a>'
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)} · simgym view</title>"
        f'<link rel="stylesheet" href="{links.asset("viewer.css")}">'
        f'</head><body data-live="{int(live)}"{extra}>'
        f"<header><b>simgym view</b><nav>{nav}</nav>"
        '<span class="keys">j/k turns · n/p episodes</span></header>'
        f"<main>{body}</main>"
        f'<script src="{links.asset("viewer.js")}"></script></body></html>'
    )


# -- the episode list -------------------------------------------------------------------
def _select(name: str, label: str, options: list[tuple[str, str]], current: str) -> str:
    opts = "".join(
        f'<option value="{e(v)}"{" selected" if v == current else ""}>{e(t)}</option>'
        for v, t in [("", f"any {label}"), *options]
    )
    return f'<label>{e(label)} <select name="{name}">{opts}</select></label>'


def filter_form(index: Index, f: Filters) -> str:
    pairs = lambda values: [(v, v) for v in values]  # noqa: E731
    return (
        '<form class="filters" method="get" action="/">'
        f'<input type="search" name="q" placeholder="search actions and observations" '
        f'value="{e(f.q)}" id="q">'
        + _select("domain", "domain", pairs(index.distinct("domain")), f.domain)
        + f'<label>task <input name="task" value="{e(f.task)}" size="12"></label>'
        + f'<label>reward <input name="rmin" value="{e(fmt(f.rmin) if f.rmin is not None else "")}"'
        ' size="4" placeholder="min"> – '
        f'<input name="rmax" value="{e(fmt(f.rmax) if f.rmax is not None else "")}" size="4"'
        ' placeholder="max"></label>'
        + _select(
            "status",
            "end",
            [("done", "done"), ("truncated", "truncated"), ("open", "neither")],
            f.status,
        )
        + _select("errors", "errors", [("yes", "with errors"), ("no", "no errors")], f.errors)
        + _select(
            "faults",
            "faults",
            [("yes", "any fault"), ("no", "no fault"), *pairs(index.fault_names())],
            f.faults,
        )
        + _select("agent", "agent", pairs(index.distinct("agent")), f.agent)
        + _select("wm", "world model", pairs(index.distinct("world_model")), f.wm)
        + (f'<input type="hidden" name="sort" value="{e(f.sort)}">' if f.sort else "")
        + '<button type="submit">Filter</button> <a href="/">clear</a></form>'
    )


def _status(row: dict[str, Any]) -> str:
    parts = []
    if row["done"]:
        parts.append('<span class="tag ok">done</span>')
    if row["truncated"]:
        parts.append('<span class="tag warn">truncated</span>')
    if row["errors"]:
        parts.append(f'<span class="tag bad">{e(row["errors"])} err</span>')
    for fault in (row["faults"] or "").split():
        parts.append(f'<span class="tag fault">{e(fault)}</span>')
    return " ".join(parts)


# The list's columns: (heading, the ?sort= name that orders by it, or None).
LIST_COLUMNS = [
    ("#", "id"),
    ("task", "task"),
    ("domain", "domain"),
    ("agent", "agent"),
    ("world model", "wm"),
    ("turns", "turns"),
    ("reward", "reward"),
    ("end", None),
    ("tokens", "tokens"),
    ("file", "file"),
]


def _heading(label: str, key: str | None, links: Links, params: dict[str, str]) -> Html:
    """A column heading; live, a sortable one links to the list sorted by it (ascending
    first, then, clicked again, descending), its arrow showing the current order."""
    current = params.get("sort", "")
    if key is None or links.static:
        return Html(e(label))
    arrow, ask = "", key
    if current == key:
        arrow, ask = " ▲", "-" + key
    elif current == "-" + key:
        arrow, ask = " ▼", key
    href = links.episodes({**params, "sort": ask})
    state = {" ▲": "ascending", " ▼": "descending"}.get(arrow, "none")
    return Html(
        f'<a class="sort" data-sort="{e(key)}" aria-sort="{state}" href="{e(href)}">'
        f"{e(label)}{arrow}</a>"
    )


def marked(text: str) -> str:
    """A search snippet as HTML: escaped, the matched words in ``<mark>``."""
    return e(text).replace(HIT_START, "<mark>").replace(HIT_END, "</mark>")


def highlight(text: str, query: str) -> str:
    """``text`` escaped, with every word of the search ``query`` in it marked."""
    words = sorted({w.rstrip("*").lower() for w in query.split() if w.rstrip("*")}, key=len)
    if not words:
        return e(text)
    pattern = re.compile("|".join(re.escape(w) for w in reversed(words)), re.IGNORECASE)
    out, last = [], 0
    for found in pattern.finditer(text):
        out += [e(text[last : found.start()]), f"<mark>{e(found.group())}</mark>"]
        last = found.end()
    return "".join(out) + e(text[last:])


def episode_rows(
    rows: list[dict[str, Any]],
    links: Links,
    params: dict[str, str],
    index: Index | None = None,
) -> str:
    query = params.get("q", "")

    def task_cell(r: dict[str, Any]) -> Html:
        hit = r.get("hit")
        return Html(
            f'<a href="{e(links.episode(r["id"], params))}"><code>{highlight(r["task_id"], query)}'
            f'</code></a><div class="instr">{highlight(r["instruction"][:140], query)}</div>'
            + (f'<div class="hit">{marked(hit)}</div>' if hit else "")
        )

    def file_cell(r: dict[str, Any]) -> str:
        return f"{index.file_name(r['file_id']) if index else r['file_id']}:{r['line']}"

    return table(
        [_heading(label, key, links, params) for label, key in LIST_COLUMNS],
        (
            [
                Html(f'<a href="{e(links.episode(r["id"], params))}">{e(r["id"])}</a>'),
                task_cell(r),
                r["domain"],
                r["agent"],
                r["world_model"],
                r["turns"],
                Html(f'<span class="reward">{e(fmt(r["total_reward"]))}</span>'),
                Html(_status(r)),
                r["tokens"],
                Html(f'<span class="file">{e(file_cell(r))}</span>'),
            ]
            for r in rows
        ),
        cls="grid episodes",
    )


def last_page(total: int) -> int:
    """The number of the list's last page (1 for an empty list)."""
    return max(1, -(-total // PER_PAGE))


def pager(links: Links, params: dict[str, str], page: int, total: int) -> str:
    last = last_page(total)
    noun = "episode" if total == 1 else "episodes"
    out = [f'<span class="count">{total} {noun} · page {page} of {last}</span>']
    if page > 1:
        out.append(f'<a rel="prev" href="{e(links.episodes(params, page - 1))}">← previous</a>')
    if page < last:
        out.append(f'<a rel="next" href="{e(links.episodes(params, page + 1))}">next →</a>')
    return '<div class="pager">' + " ".join(out) + "</div>"


def list_page(index: Index, f: Filters, page: int, links: Links, *, live: bool = True) -> str:
    """The episode list. A page past the last shows the last (a filter that narrowed the
    list keeps a useful page), and says which page was asked for."""
    params = f.params()
    total = index.count(f)
    asked, page = page, min(max(1, page), last_page(total))
    rows = index.page(f, page, PER_PAGE)
    form = filter_form(index, f) if live else ""
    note = (
        f'<p class="note" id="clamped">there is no page {e(asked)}: '
        f"{total} episodes make {last_page(total)} page(s); showing page {page}</p>"
        if asked != page
        else ""
    )
    body = (
        "<h1>Episodes</h1>"
        + form
        + (
            '<div id="indexing">still indexing: the counts grow as you reload</div>'
            if live and (index.indexing or index.behind)
            else ""
        )
        + '<div id="fresh" hidden></div>'
        + note
        + pager(links, params, page, total)
        + episode_rows(rows, links, params, index)
        + pager(links, params, page, total)
    )
    return layout("Episodes", body, links, live=live, extra=f' data-total="{index.count()}"')


# -- one episode ------------------------------------------------------------------------
def _action(turn: Turn) -> str:
    if turn.action_text:
        return f'<pre class="action">{e(turn.action_text)}</pre>'
    if turn.action is not None:
        return json_block(turn.action.model_dump(exclude_defaults=True))
    return '<p class="muted">(no action)</p>'


def _tree_block(turn: Turn, domain: str, before: str | None) -> str:
    """A GUI turn's observation: the change from the previous turn's page tree, the whole
    tree folded below it (a tree repeated in full every turn hides what the action did)."""
    text = turn.observation.text
    if before is None or turn.observation.kind == "error" or as_json(text) is not None:
        return observation_block(text, domain, turn.observation.kind)
    lines = text.count("\n") + 1
    return (
        '<div class="label">change from the previous turn</div>'
        + tree_change(before, text)
        + details(f"whole page ({lines} lines)", observation_block(text, domain), cls="full")
    )


def turn_block(turn: Turn, domain: str, before: str | None = None) -> str:
    """One turn. ``before``: the previous observation, for a GUI domain's page-tree diff."""
    usage = turn.usage
    meta = [
        f"reward {fmt(turn.reward)}",
        f"latency {fmt(turn.latency_s)} s",
        f"tokens {usage.prompt_tokens}+{usage.completion_tokens}",
    ]
    if turn.attempts:
        meta.append(f"attempts {turn.attempts}")
    if not turn.in_history:
        meta.append("not in history")
    flags = ""
    if turn.perturbation:
        flags += f'<span class="tag fault">fault: {e(turn.perturbation.get("fault"))}</span>'
    if turn.error:
        flags += '<span class="tag bad">error</span>'
    parts = [
        f'<h3>Turn {turn.index} {flags}<span class="meta">{e(" · ".join(meta))}</span></h3>',
        '<div class="label">action</div>',
        _action(turn),
    ]
    if turn.reasoning:
        parts.append(details("reasoning", f'<pre class="text">{e(turn.reasoning)}</pre>'))
    parts.append('<div class="label">observation</div>')
    if family_of(domain) == "gui":
        parts.append(_tree_block(turn, domain, before))
    else:
        parts.append(observation_block(turn.observation.text, domain, turn.observation.kind))
    if turn.error or turn.observation.error:
        parts.append(f'<p class="err">{e(turn.error or turn.observation.error)}</p>')
    if turn.format_problems:
        parts.append('<p class="warn">format: ' + e("; ".join(turn.format_problems)) + "</p>")
    if turn.perturbation:
        parts.append(details("injected fault", json_block(turn.perturbation), opened=True))
    if turn.grounding:
        parts.append(details("grounding facts", json_block(turn.grounding)))
    change = ledger_change(turn)
    if change:
        parts.append(details("ledger change", json_block(change)))
    if turn.state_error:
        parts.append(f'<p class="err">state not applied: {e(turn.state_error)}</p>')
    return f'<section class="turn" id="turn-{turn.index}" tabindex="-1">{"".join(parts)}</section>'


def _kv(pairs: list[tuple[str, str]]) -> str:
    return '<dl class="kv">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in pairs if v) + "</dl>"


def episode_page(
    index: Index, rowid: int, t: Trajectory, links: Links, f: Filters | None = None
) -> str:
    f = f or Filters()
    params = f.params()
    prev, nxt = index.neighbours(rowid, f)
    row = index.row(rowid) or {}
    nav = []
    if prev:
        nav.append(f'<a id="prev-episode" href="{e(links.episode(prev, params))}">← p previous</a>')
    nav.append(f'<a href="{e(links.episodes(params))}">list</a>')
    if nxt:
        nav.append(f'<a id="next-episode" href="{e(links.episode(nxt, params))}">n next →</a>')
    pair = index.counterpart(rowid)
    if pair:
        nav.append(f'<a href="{e(links.compare(*pair))}">sim vs real</a>')
    if t.group_id:
        nav.append(f'<a href="{e(links.group(t.group_id))}">GRPO group</a>')
    head = _kv(
        [
            ("domain", e(t.domain)),
            ("task", f"<code>{e(t.task.id)}</code>"),
            ("file", e(f"{index.file_name(row.get('file_id', 0))}:{row.get('line', '')}")),
            ("episode", f"<code>{e(t.episode_id)}</code>"),
            ("world model", e(json.dumps(t.world_model, ensure_ascii=False))),
            ("agent", e(json.dumps(t.agent, ensure_ascii=False)) if t.agent else ""),
            ("group", e(f"{t.group_id} sample {t.sample}") if t.group_id else ""),
            ("reward", f'<span class="reward">{e(fmt(t.total_reward))}</span>'),
            (
                "reward parts",
                e(", ".join(f"{k} {fmt(v)}" for k, v in t.reward_parts.items())),
            ),
            ("end", _status(row) if row else ""),
            ("error", f'<span class="err">{e(t.error)}</span>' if t.error else ""),
            ("answer", e(t.answer)),
            ("seed", e(t.seed)),
        ]
    )
    body = [
        f'<nav class="epnav">{" ".join(nav)}</nav>',
        f"<h1>{e(t.task.id)}</h1>",
        f'<div class="task"><div class="label">task</div><p>{e(t.task.instruction)}</p></div>',
        head,
    ]
    if t.metrics:
        body.append(details("metrics", json_block(t.metrics)))
    if t.initial_observation is not None:
        body.append(
            '<section class="turn" id="turn-0" tabindex="-1"><h3>Start</h3>'
            '<div class="label">initial observation</div>'
            + observation_block(t.initial_observation.text, t.domain)
            + "</section>"
        )
    before = t.initial_observation.text if t.initial_observation is not None else None
    for turn in t.turns:
        body.append(turn_block(turn, t.domain, before))
        before = turn.observation.text
    if t.final_state is not None:
        body.append(state_block(t.final_state, links.state(rowid), links.state(rowid, raw=True)))
    return layout(f"{t.task.id}", "".join(body), links)


# A final state bigger than this (as JSON) is not put in the page: it loads when opened.
INLINE_STATE_BYTES = 256_000


def _json_size(value: Any) -> int:
    """The bytes of ``value`` as JSON. orjson: the stdlib takes seconds on a 40 MB state,
    which would be most of the page's time."""
    try:
        return len(orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS))
    except (TypeError, orjson.JSONEncodeError):  # what orjson refuses, json may still say
        return len(json.dumps(value, default=str).encode())


def state_block(state: Any, lazy_url: str | None, raw_url: str | None) -> str:
    """The final hidden state, folded. A big one (a run's whole file tree) is only sized
    here and fetched from ``lazy_url`` when opened; without a server (a static site) it is
    shown capped: the first nodes, long strings cut."""
    size = _json_size(state)
    if size <= INLINE_STATE_BYTES:
        return details("final hidden state", json_block(state))
    n = len(state) if isinstance(state, dict | list) else 0
    noun = ("key" if isinstance(state, dict) else "item") + ("" if n == 1 else "s")
    keys = f", {n:,} {noun}" if n else ""
    summary = f"final hidden state ({size / 1e6:.1f} MB{keys})"
    if lazy_url is None:
        return details(summary + ", capped", json_block(state, open_top=False))
    raw = f' · <a href="{e(raw_url)}">raw JSON</a>' if raw_url else ""
    return (
        f'<details class="lazy" data-src="{e(lazy_url)}"><summary>{e(summary)}: '
        f"loads when opened{raw}</summary>"
        '<div class="lazy-body muted">loading…</div></details>'
    )


# -- sim vs real ------------------------------------------------------------------------
def compare_list_page(index: Index, links: Links) -> str:
    pairs = index.pairs()
    body = ["<h1>Sim vs real</h1>"]
    if not pairs:
        body.append(
            "<p>No pair of files: give both <code>OUT.jsonl</code> and <code>OUT.real.jsonl</code>"
            " of <code>simgym run --compare real</code>.</p>"
        )
    for sim, real in pairs:
        rows = index.compared(sim, real, 1, 500)
        body.append(f"<h2>{e(index.file_name(sim))} vs {e(index.file_name(real))}</h2>")
        body.append(
            table(
                ["task", "domain", "turns", "instruction"],
                (
                    [
                        Html(
                            f'<a href="{e(links.compare(r["sim"], r["real"]))}"><code>'
                            f"{e(r['task_id'])}</code></a>"
                        ),
                        r["domain"],
                        r["turns"],
                        r["instruction"][:120],
                    ]
                    for r in rows
                ),
            )
        )
    return layout("Sim vs real", "".join(body), links)


def compare_page(
    index: Index, sim_row: int, real_row: int, sim: Trajectory, real: Trajectory, links: Links
) -> str:
    rows = []
    scores = []
    for k in range(max(len(sim.turns), len(real.turns))):
        a = sim.turns[k] if k < len(sim.turns) else None
        b = real.turns[k] if k < len(real.turns) else None
        action = (a or b).action_text if (a or b) else ""
        if a is not None and b is not None:
            score = similarity(a.observation.text, b.observation.text)
            scores.append(score)
            left, right = diff_columns(a.observation.text, b.observation.text)
            badge = f'<span class="sim" style="--s:{score}">{score:.3f}</span>'
        else:
            left = e(a.observation.text) if a else '<span class="muted">(no turn)</span>'
            right = e(b.observation.text) if b else '<span class="muted">(no turn)</span>'
            badge = '<span class="sim">-</span>'
        index_no = (a or b).index if (a or b) else k
        rows.append(
            f'<section class="turn pair" id="turn-{index_no}" tabindex="-1">'
            f"<h3>Turn {index_no} · edit similarity {badge}</h3>"
            f'<pre class="action">{e(action)}</pre>'
            f'<div class="cols"><pre class="diff">{left}</pre><pre class="diff">{right}</pre></div>'
            "</section>"
        )
    mean = sum(scores) / len(scores) if scores else None
    body = (
        f'<nav class="epnav"><a href="{e(links.episode(sim_row))}">simulated episode</a> '
        f'<a href="{e(links.episode(real_row))}">real episode</a> '
        f'<a href="{e(links.compare_list())}">all pairs</a></nav>'
        f"<h1>Sim vs real: {e(sim.task.id)}</h1>"
        f'<div class="task"><div class="label">task</div><p>{e(sim.task.instruction)}</p></div>'
        f"<p>{len(scores)} turns compared · mean edit similarity "
        f"<b>{e(fmt(mean))}</b> · simulated {e(sim.world_model.get('backend', ''))} "
        f"vs real; left simulated, right real; changed lines marked.</p>"
        '<div class="cols heads"><b>simulated</b><b>real</b></div>' + "".join(rows)
    )
    return layout(f"sim vs real {sim.task.id}", body, links)


# -- GRPO groups ------------------------------------------------------------------------
def groups_page(index: Index, links: Links, page: int = 1) -> str:
    rows = index.groups(page, 200)
    body = "<h1>GRPO groups</h1>" + (
        table(
            ["group", "domain", "samples", "mean reward", "min", "max"],
            (
                [
                    Html(
                        f'<a href="{e(links.group(r["group_id"]))}">'
                        f"<code>{e(r['group_id'])}</code></a>"
                    ),
                    r["domain"],
                    r["samples"],
                    fmt(r["mean"]),
                    fmt(r["low"]),
                    fmt(r["high"]),
                ]
                for r in rows
            ),
        )
        if rows
        else "<p>No episode carries a group id (GRPO rollouts with several samples do).</p>"
    )
    return layout("GRPO groups", body, links)


def group_page(
    index: Index, group_id: str, members: list[tuple[dict[str, Any], Trajectory]], links: Links
) -> str:
    rewards = [row["total_reward"] for row, _ in members]
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    columns = []
    for row, t in members:
        advantage = row["total_reward"] - mean
        turns = "".join(
            f'<div class="gturn"><div class="label">turn {turn.index} · reward {fmt(turn.reward)}'
            f'</div><pre class="action">{e(turn.action_text[:400])}</pre>'
            f'<pre class="obs text">{e(turn.observation.text[:600])}</pre></div>'
            for turn in t.turns
        )
        columns.append(
            '<div class="sample">'
            f'<h3><a href="{e(links.episode(row["id"]))}">sample {e(t.sample)}</a></h3>'
            f'<p>reward <span class="reward">{e(fmt(t.total_reward))}</span> · advantage '
            f"{advantage:+.3f}</p>"
            + (
                "<p>" + e(", ".join(f"{k} {fmt(v)}" for k, v in t.reward_parts.items())) + "</p>"
                if t.reward_parts
                else ""
            )
            + (f"<p>answer: {e(t.answer)}</p>" if t.answer else "")
            + turns
            + "</div>"
        )
    task = members[0][1].task if members else None
    body = (
        f"<h1>GRPO group <code>{e(group_id)}</code></h1>"
        + (f'<div class="task"><p>{e(task.instruction)}</p></div>' if task else "")
        + f"<p>{len(members)} samples · mean reward {fmt(mean)}</p>"
        + f'<div class="samples">{"".join(columns)}</div>'
    )
    return layout(f"group {group_id}", body, links)


# -- reports ----------------------------------------------------------------------------
def reports_page(names: list[str], links: Links) -> str:
    items = "".join(
        f'<li><a href="{e(links.report(i))}">{e(name)}</a></li>' for i, name in enumerate(names)
    )
    body = "<h1>Reports</h1>" + (
        f"<ul>{items}</ul>" if names else "<p>No report given (pass a report .json).</p>"
    )
    return layout("Reports", body, links)


def report_page(name: str, kind: str, body_html: str, links: Links) -> str:
    titles = {"safety": "Safety report", "score": "Fidelity score", "consistency": "Consistency"}
    title = titles.get(kind, "Report")
    return layout(name, f"<h1>{title}: {e(name)}</h1>{body_html}", links)


def ledger_change(turn: Turn) -> dict[str, Any]:
    """What the turn did to the hidden state, by who did it: simgym's certain effects,
    the model's own update, and the keys the observation itself set (a GUI's screen)."""
    grounding = turn.grounding or {}
    change: dict[str, Any] = {}
    if grounding.get("effects"):
        change["certain effects (simgym)"] = grounding["effects"]
    if turn.state_patch is not None:
        change["state update (world model)"] = turn.state_patch
    if grounding.get("observed"):
        change["read off the observation"] = grounding["observed"]
    return change
