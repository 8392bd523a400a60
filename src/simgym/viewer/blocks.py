"""HTML pieces the pages are built from: escaped text, observations shown as what they
are (a terminal screen, JSON folded with ``<details>``, an accessibility tree), tables,
inline SVG bar charts and side-by-side diffs. Plain functions returning strings."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from simgym.core.domain import family_of

# JSON nodes with more children than this start folded
_FOLD_OVER = 8
_MAX_JSON_NODES = 5_000
# A string longer than this shows its start and how much more there is: one file's
# contents in a state must not make the page megabytes long.
STRING_CAP = 2_000
# A string up to this long that holds JSON (an MCP result's text) is shown parsed.
_PARSE_STRINGS_UP_TO = 1_000_000
# How each domain family's observations are shown (a domain with none: plain text)
_FAMILY_CLASS = {"shell": "term", "gui": "tree"}


class Html(str):
    """Markup built here from escaped parts. A table shows an ``Html`` cell as it is and
    escapes every other value: escaping happens in one place, so a value a file carries
    (a metric's name, a case id) can never be taken for markup by forgetting it."""


def e(value: Any) -> str:
    """Escaped text (None shows as nothing)."""
    return "" if value is None else escape(str(value), quote=True)


def cell(value: Any) -> str:
    """A table cell's HTML: :class:`Html` as it is, anything else escaped."""
    return value if isinstance(value, Html) else e(value)


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}".rstrip("0").rstrip(".") if value == value else "-"
    return str(value)


def as_json(text: str) -> Any:
    """The JSON a text holds, or None."""
    stripped = text.strip()
    if stripped[:1] not in ("{", "["):
        return None
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        return None


def json_block(value: Any, *, open_top: bool = True) -> str:
    """JSON pretty-printed, every object and array foldable (large ones start folded)."""
    budget = [_MAX_JSON_NODES]
    return '<div class="json">' + _json_node(value, open_top, budget) + "</div>"


def _json_node(value: Any, opened: bool, budget: list[int]) -> str:
    budget[0] -= 1
    if budget[0] < 0:
        return '<span class="more">…</span>'
    if isinstance(value, dict) and value:
        items = [
            f'<div class="kv"><span class="k">{e(json.dumps(k, ensure_ascii=False))}</span>: '
            f"{_json_node(v, len(v) <= _FOLD_OVER if isinstance(v, dict | list) else True, budget)}"
            "</div>"
            for k, v in value.items()
        ]
        return _fold("{", "}", _count(len(value), "key"), items, opened)
    if isinstance(value, list) and value:
        items = [
            '<div class="kv">'
            + _json_node(v, len(v) <= _FOLD_OVER if isinstance(v, dict | list) else True, budget)
            + "</div>"
            for v in value
        ]
        return _fold("[", "]", _count(len(value), "item"), items, opened)
    if isinstance(value, str):
        return _string_node(value, budget)
    return f'<span class="n">{e(json.dumps(value, ensure_ascii=False))}</span>'


def _string_node(value: str, budget: list[int]) -> str:
    """A JSON string: one that holds JSON itself (the text of an MCP result) shown parsed
    and marked so; a long one cut at :data:`STRING_CAP`; lines kept as lines."""
    if len(value) <= _PARSE_STRINGS_UP_TO:
        inner = as_json(value)
        if isinstance(inner, dict | list) and inner:
            return (
                '<span class="jtext" title="a string holding JSON, shown parsed">'
                '<span class="tag">json text</span>' + _json_node(inner, True, budget) + "</span>"
            )
    shown, rest = value[:STRING_CAP], len(value) - STRING_CAP
    more = f'<span class="more">… {rest:,} more characters</span>' if rest > 0 else ""
    if "\n" in shown.rstrip("\n"):  # several lines: shown as lines, not as \n escapes
        return f'<span class="s ml">{e(shown)}</span>{more}'
    quoted = json.dumps(shown, ensure_ascii=False)
    return f'<span class="s">{e(quoted if not more else quoted[:-1])}</span>{more}'


def _fold(left: str, right: str, summary: str, items: list[str], opened: bool) -> str:
    attr = " open" if opened else ""
    return (
        f'<details{attr}><summary>{left}<span class="sum">{e(summary)}</span></summary>'
        f'<div class="in">{"".join(items)}</div>{right}</details>'
    )


def observation_block(text: str, domain: str, kind: str = "observation") -> str:
    """An observation shown as what it is."""
    cls = "obs error" if kind == "error" else "obs"
    value = as_json(text)
    if value is not None:
        return f'<div class="{cls}">{json_block(value)}</div>'
    shown = _FAMILY_CLASS.get(family_of(domain), "text")
    return f'<pre class="{cls} {shown}">{e(text)}</pre>'


def details(summary: str, body: str, *, opened: bool = False, cls: str = "") -> str:
    attr = " open" if opened else ""
    klass = f' class="{cls}"' if cls else ""
    return f"<details{klass}{attr}><summary>{summary}</summary>{body}</details>"


def table(header: Sequence[Any], rows: Iterable[Sequence[Any]], *, cls: str = "grid") -> str:
    """A table. Every header and cell is text and is escaped here, but an :class:`Html`
    value, which is markup made from escaped parts (a link, a tag)."""
    head = "".join(f"<th>{cell(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{e(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def bar_chart(
    title: str, bars: Sequence[tuple[str, float | None]], *, top: float = 1.0, unit: str = ""
) -> str:
    """A horizontal bar chart as inline SVG (no script, no external asset)."""
    if not bars:
        return ""
    row_h, label_w, bar_w = 22, 170, 320
    height = row_h * len(bars) + 30
    parts = [
        f'<svg class="chart" role="img" aria-label="{e(title)}" width="{label_w + bar_w + 70}" '
        f'height="{height}" viewBox="0 0 {label_w + bar_w + 70} {height}">',
        f'<text x="0" y="14" class="ct">{e(title)}</text>',
    ]
    top = top or 1.0
    for i, (label, value) in enumerate(bars):
        if not isinstance(value, int | float) or isinstance(value, bool) or value != value:
            value = None  # a report's value that is no number is shown as missing
        label = str(label)
        y = 24 + i * row_h
        width = 0.0 if value is None else max(0.0, min(1.0, value / top)) * bar_w
        shown = "-" if value is None else f"{value:g}{unit}"
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end" class="cl">'
            f"{e(label[:28])}</text>"
            f'<rect x="{label_w}" y="{y + 3}" width="{bar_w}" height="14" class="bg"/>'
            f'<rect x="{label_w}" y="{y + 3}" width="{width:.1f}" height="14" class="bar"/>'
            f'<text x="{label_w + bar_w + 6}" y="{y + 14}" class="cv">{e(shown)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def similarity(a: str, b: str) -> float:
    """Edit similarity of two texts, 0..1 (difflib's ratio; quick bounds on big texts)."""
    if a == b:
        return 1.0
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=len(a) + len(b) > 20_000)
    return round(matcher.ratio(), 4)


def diff_columns(a: str, b: str) -> tuple[str, str]:
    """Two texts side by side, line by line, the lines that differ marked (and within a
    changed line, the characters that differ)."""
    left: list[str] = []
    right: list[str] = []
    a_lines, b_lines = a.splitlines(), b.splitlines()
    matcher = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            left += [f"<div>{e(line) or ' '}</div>" for line in a_lines[i1:i2]]
            right += [f"<div>{e(line) or ' '}</div>" for line in b_lines[j1:j2]]
            continue
        old, new = a_lines[i1:i2], b_lines[j1:j2]
        for k in range(max(len(old), len(new))):
            x = old[k] if k < len(old) else None
            y = new[k] if k < len(new) else None
            if x is not None and y is not None:
                hx, hy = _inline_diff(x, y)
                left.append(f'<div class="del">{hx}</div>')
                right.append(f'<div class="add">{hy}</div>')
            else:
                left.append(
                    f'<div class="del">{e(x)}</div>'
                    if x is not None
                    else '<div class="gap"> </div>'
                )
                right.append(
                    f'<div class="add">{e(y)}</div>'
                    if y is not None
                    else '<div class="gap"> </div>'
                )
    return "".join(left), "".join(right)


def _inline_diff(a: str, b: str) -> tuple[str, str]:
    if len(a) + len(b) > 4_000:
        return e(a), e(b)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    x: list[str] = []
    y: list[str] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            x.append(e(a[i1:i2]))
            y.append(e(b[j1:j2]))
        else:
            if i2 > i1:
                x.append(f"<mark>{e(a[i1:i2])}</mark>")
            if j2 > j1:
                y.append(f"<mark>{e(b[j1:j2])}</mark>")
    return "".join(x), "".join(y)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def tree_change(before: str, after: str) -> str:
    """What changed from one page (or screen) tree to the next, as a unified diff of its
    lines with a little context: added lines marked ``add``, removed ``del``."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), n=2, lineterm=""))[
        2:
    ]  # the ---/+++ file header says nothing here
    if not lines:
        return '<p class="muted">unchanged from the previous turn</p>'
    out = []
    for line in lines:
        cls = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "")
        out.append(f'<div class="{cls}">{e(line) or " "}</div>' if cls else f"<div>{e(line)}</div>")
    return '<pre class="diff change">' + "".join(out) + "</pre>"
