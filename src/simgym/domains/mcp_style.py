"""How a tool server writes its results, learned from what it has answered.

Two servers holding the same record answer it differently: one writes compact JSON in
the order the record was created, another indents by two and lists columns in its table's
order. The facts are the ledger's; the layout is the server's, and the best witness of
it is the server's own earlier answers. :func:`observe_mcp` (the mcp domain's ``observe``
hook) reads each answer and keeps in the ledger's ``_style``:

* ``indent``: the indentation of its JSON (``None``: compact), and
* ``order``: per collection, the field order of the records it showed (an answer whose
  object carries a record's key and only fields of that collection counts),
* ``error_prefix``: what it writes before an error's message, with the tool's name as
  ``{tool}`` (the official SDK's servers write ``Error executing tool {tool}: ``),

and :func:`arrange` and :func:`dumps` write exact answers that way. Until a server has
shown anything, answers are compact and in the ledger's order (as before).
"""

from __future__ import annotations

import json
from typing import Any

STYLE = "_style"  # ledger key (``_`` keys are simgym's, not records)
MAX_INDENT = 8


def dumps(value: Any, state: dict[str, Any] | None) -> str:
    """JSON as this server writes it: its indentation, non-ASCII kept."""
    indent = _style(state).get("indent")
    if isinstance(indent, int) and 0 < indent <= MAX_INDENT:
        return json.dumps(value, ensure_ascii=False, indent=indent)
    return json.dumps(value, ensure_ascii=False)


def arrange(record: dict[str, Any], collection: str, state: dict[str, Any] | None) -> dict:
    """The record with its fields in the order the server shows them (fields it never
    showed keep their place after those)."""
    order = _style(state).get("order", {}).get(collection)
    if not isinstance(order, list):
        return record
    first = {k: record[k] for k in order if k in record}
    return {**first, **{k: v for k, v in record.items() if k not in first}}


def error_text(message: str, tool: str, state: dict[str, Any] | None) -> str:
    """An error message as this server words its errors."""
    prefix = _style(state).get("error_prefix")
    return prefix.replace("{tool}", tool) + message if isinstance(prefix, str) else message


def observe_mcp(observation: str, action: Any, state: dict[str, Any]) -> dict[str, Any] | None:
    """The ledger patch that records how this answer was written (None: nothing new)."""
    text, failed = _result_text(observation)
    if text is None:
        return None
    old = _style(state)
    if failed:
        prefix = _error_prefix(text, getattr(action, "name", None) or "")
        if prefix is None or prefix == old.get("error_prefix"):
            return None
        return {STYLE: {**old, "error_prefix": prefix}}
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict | list):
        return None
    style: dict[str, Any] = {**old, "indent": _indent(text), "order": dict(old.get("order", {}))}
    for collection, order in _orders(value, state).items():
        style["order"][collection] = _merge(style["order"].get(collection), order)
    if not style["order"]:
        del style["order"]
    return None if style == old else {STYLE: style}


def _style(state: dict[str, Any] | None) -> dict[str, Any]:
    found = (state or {}).get(STYLE)
    return found if isinstance(found, dict) else {}


def _result_text(observation: str) -> tuple[str | None, bool]:
    """The text of a result (inside a CallToolResult envelope, an ``{"error": ...}``
    object's message, or the whole answer) and whether it is an error."""
    try:
        outer = json.loads(observation)
    except ValueError:
        return None, False
    if isinstance(outer, dict) and isinstance(outer.get("content"), list):
        texts = [c.get("text") for c in outer["content"] if isinstance(c, dict)]
        text = texts[0] if len(texts) == 1 and isinstance(texts[0], str) else None
        return text, bool(outer.get("isError"))
    error = outer.get("error") if isinstance(outer, dict) and len(outer) == 1 else None
    if isinstance(error, dict):
        message = error.get("message")
        return (message if isinstance(message, str) else None), True
    return observation, False


def _error_prefix(text: str, tool: str) -> str | None:
    """``Error executing tool {tool}: `` from an error that names the tool before a colon."""
    mark = f"{tool}: " if tool else ""
    at = text.find(mark) if mark else -1
    if at < 0 or at > 60:
        return None
    return text[:at] + "{tool}: "


def _indent(text: str) -> int | None:
    """The width of the first indented line of pretty-printed JSON, None when compact."""
    for line in text.splitlines()[1:]:
        width = len(line) - len(line.lstrip(" "))
        if width:
            return width
    return None


def _orders(value: Any, state: dict[str, Any]) -> dict[str, list[str]]:
    """Field orders of the objects in an answer that are records of a collection."""
    fields = {
        name: {k for r in records for k in r}
        for name, records in state.items()
        if not name.startswith("_") and isinstance(records, list) and records
        and all(isinstance(r, dict) for r in records)
    }  # fmt: skip
    found: dict[str, list[str]] = {}
    for obj in _objects(value):
        for name, known in fields.items():
            keys = list(obj)
            if "id" in obj and len(keys) > 1 and set(keys) <= known and name not in found:
                found[name] = keys
    return found


def _objects(value: Any) -> list[dict[str, Any]]:
    """Every object in a JSON value, outermost first."""
    out: list[dict[str, Any]] = []
    stack = [value]
    while stack:
        item = stack.pop(0)
        if isinstance(item, dict):
            out.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


def _merge(old: list[str] | None, seen: list[str]) -> list[str]:
    """A longer showing wins; a shorter one that disagrees with it does not reorder it."""
    if not old or len(seen) >= len(old):
        return seen + [k for k in (old or []) if k not in seen]
    return old
