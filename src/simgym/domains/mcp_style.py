"""How a tool server writes its results, learned from what it has answered.

Two servers holding the same record answer it differently: one writes compact JSON in
the order the record was created, another indents by two and lists columns in its table's
order. The facts are the ledger's; the layout is the server's, and the best witness of
it is the server's own earlier answers. :func:`observe_mcp` (the mcp domain's ``observe``
hook) reads each answer and keeps in the ledger's ``_style``:

* ``indent``: the indentation of its JSON (``None``: compact);
* ``order``: per collection, the field order of the records it showed (an answer whose
  object carries a record's key and only fields of that collection counts);
* ``error_prefix``: what it writes before an error's message, with the tool's name as
  ``{tool}`` (the official SDK's servers write ``Error executing tool {tool}: ``);
* ``lists``: per list tool, the shape of its answer (``{"customer_id": "{arg:customer_id}",
  "accounts": "{items}"}``) and the fields each item shows, learned from an answer that
  listed exactly the records simgym had computed for that call (``pending``, left by
  grounding), so a shape is only kept once the server and simgym agree on what matches;
* ``doubt``: the call whose update the server may refuse (see ``_partial`` below) and
  why (:class:`~simgym.domains.mcp_ground.Doubt`): its error answer means the record did
  not change;
* ``refusals``: per tool, the message of an update it refused for one reason (a taken or
  malformed value of a field), with the value as ``{value}``: the next update refused
  for that reason gets the same wording (:func:`refusal`);
* ``error_fields``: the fields of its json error objects (``["message"]``: no code);
* ``undo``: how to take back the change of the last call that grounding applied as
  certain (:func:`mark_undo`), should the server answer it with an error;
* ``not_found``: per kind of record, how this server words a call on one that does not
  exist (``customer {id} not found``), learned from the error a call got that grounding
  had found naming no record (``missing``, left by grounding: :func:`mark_missing`).

The ledger's ``_partial`` marks records whose fields only the server knows (a create's
defaults, a doubted update) until an answer shows them whole.

and :func:`arrange`, :func:`dumps` and :func:`list_answer` write exact answers that way.
Until a server has shown anything, answers are compact and in the ledger's order, and
lists have no exact answer unless the scenario declares a list tool's layout (its
``tool_map`` entry's ``answer``, checked by :func:`check_layout`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from simgym.domains.mcp_rules import collections

STYLE = "_style"  # ledger key (``_`` keys are simgym's, not records)
TOMBSTONES = "_deleted"  # ledger key of deleted records: {collection: {id: record}}
# state key naming the collections that hold only a sample of the server's records (a twin
# made by `simgym mcp import --sample-records N`): an id outside them may still exist
SAMPLED = "_sampled"
MAX_INDENT = 8


def dumps(value: Any, state: dict[str, Any] | None) -> str:
    """JSON as this server writes it: its indentation, non-ASCII kept."""
    indent = _style(state).get("indent")
    if isinstance(indent, int) and 0 < indent <= MAX_INDENT:
        return json.dumps(value, ensure_ascii=False, indent=indent)
    return json.dumps(value, ensure_ascii=False)


TEXT_JSON = "text_json"  # style key: the text format's answers are the result's JSON text


def text_json(state: dict[str, Any] | None) -> bool:
    """Whether this server's text answers are its results' JSON text (a tool built with
    the Python SDK, whose text content is its structured result written out)."""
    return _style(state).get(TEXT_JSON) is True


def arrange(record: dict[str, Any], collection: str, state: dict[str, Any] | None) -> dict:
    """The record with its fields in the order the server shows them (fields it never
    showed keep their place after those)."""
    order = _style(state).get("order", {}).get(collection)
    if not isinstance(order, list):
        return record
    first = {k: record[k] for k in order if k in record}
    return {**first, **{k: v for k, v in record.items() if k not in first}}


def error_text(
    message: str, tool: str, state: dict[str, Any] | None, default: str | None = None
) -> str:
    """An error message as this server words its errors: with the prefix its errors
    showed, else ``default`` (``{tool}`` stands for the tool's name; the Python SDK's
    servers write ``Error executing tool {tool}: ``)."""
    prefix = error_prefix(state)
    prefix = prefix if prefix is not None else default
    return prefix.replace("{tool}", tool) + message if isinstance(prefix, str) else message


def error_prefix(state: dict[str, Any] | None) -> str | None:
    """What this server's errors showed before their message (``{tool}`` for the tool's
    name), None until one did."""
    prefix = _style(state).get("error_prefix")
    return prefix if isinstance(prefix, str) else None


PARTIAL = "_partial"  # ledger key: {collection: {id: [fields the server fills in]}}


Reason = tuple[str, str, str, str | None]  # field, kind, the new value, the value's holder


def mark_partial(
    collection: str,
    record_id: Any,
    fields: list[str],
    *,
    tool: str | None = None,
    reasons: list[Reason] | None = None,
) -> dict[str, Any]:
    """The ledger patch that notes a record's fields only the server knows (a create's
    defaults, or the fields of an update it may refuse or rewrite). With ``tool``, an
    error answer of that call clears the note again: a refused call changed nothing;
    with one of ``reasons`` (why the server might refuse), that answer's wording is kept
    for the next call refused for the same reason (:func:`refusal`)."""
    patch: dict[str, Any] = {PARTIAL: {collection: {str(record_id): list(fields)}}}
    if tool is not None:
        doubt = [tool, collection, str(record_id), [list(r) for r in reasons or []]]
        patch[STYLE] = {"doubt": doubt}
    return patch


def mark_undo(
    tool: str, collection: str, key: str, record_id: Any, before: dict | None, at: int | None
) -> dict[str, Any]:
    """The ledger patch that remembers how to take back a change the grounding applied
    as certain (a create, an update, a delete): an error answer of that call means the
    server changed nothing. ``before`` is the record as it was (None: the call creates
    it) and ``at`` its place in the collection."""
    return {STYLE: {"undo": [tool, collection, key, str(record_id), before, at]}}


NOUN, CAP_NOUN = "{noun}", "{Noun}"


def not_found(noun: str, record_id: Any, state: dict[str, Any] | None) -> tuple[str, bool]:
    """The message of an error about a ``noun`` that does not exist, and whether it is
    this server's own wording: the one its errors showed for that kind of record, else
    one it showed for another kind that named the kind (``{noun} {id} not found``), else
    simgym's default, ``<noun> <id> not found`` (a guess, as is a learned wording equal to
    it: in a simulated episode the answer it was learned from may be simgym's own)."""
    learned = _style(state).get("not_found")
    learned = learned if isinstance(learned, dict) else {}
    template = learned.get(noun)
    if not isinstance(template, str):
        generic = [
            t for t in learned.values() if isinstance(t, str) and (NOUN in t or CAP_NOUN in t)
        ]
        template = generic[0] if generic else None
    default = f"{noun} {record_id} not found"
    if template is None:
        return default, False
    filled = {RECORD: str(record_id), NOUN: noun, CAP_NOUN: noun[:1].upper() + noun[1:]}
    message = re.sub("|".join(map(re.escape, filled)), lambda m: filled[m.group(0)], template)
    # a wording learned from an answer in simgym's own default words says no more than it
    return message, message != default


def mark_missing(tool: str, noun: str, record_id: Any) -> dict[str, Any]:
    """The ledger patch grounding leaves for a call on a record that does not exist, so
    that the server's error teaches how it words such errors (:func:`not_found`)."""
    return {STYLE: {"missing": [tool, noun, str(record_id)]}}


def _learn_not_found(text: str, tool: str, missing: list[Any], prefix: str | None) -> str | None:
    """The template of a not-found error (its message without the prefix the server puts
    before every error, the id and the kind of record made placeholders); None unless
    the message names the id."""
    if len(missing) != 3 or missing[0] != tool:
        return None
    _, noun, record_id = missing
    if not isinstance(record_id, str) or len(record_id) < MIN_NAMED:
        return None
    if isinstance(prefix, str) and text.startswith(prefix.replace("{tool}", tool)):
        text = text[len(prefix.replace("{tool}", tool)) :]
    if record_id not in text or "{" in text:
        return None
    template = text.replace(record_id, RECORD)
    if isinstance(noun, str) and noun:
        template = re.sub(rf"\b{re.escape(noun)}\b", NOUN, template)
        capital = noun[:1].upper() + noun[1:]
        template = re.sub(rf"\b{re.escape(capital)}\b", CAP_NOUN, template)
    return template


def _undo(undo: list[Any], state: dict[str, Any]) -> dict[str, Any] | None:
    """The ledger patch that takes back the change ``undo`` describes (see
    :func:`mark_undo`): the record as it was, in its place, and no notes about it."""
    _, collection, key, record_id, before, at = undo
    records = state.get(collection)
    if not isinstance(records, list):
        return None
    kept = [r for r in records if not (isinstance(r, dict) and str(r.get(key)) == record_id)]
    if isinstance(before, dict):
        kept.insert(at if isinstance(at, int) and 0 <= at <= len(kept) else len(kept), before)
    patch: dict[str, Any] = {collection: kept, PARTIAL: {collection: {record_id: None}}}
    if isinstance(state.get(TOMBSTONES), dict):  # a refused delete leaves no tombstone
        patch[TOMBSTONES] = {collection: {record_id: None}}
    return patch


VALUE, HOLDER, RECORD = "{value}", "{holder}", "{id}"
MIN_NAMED = 3  # a shorter value or id in a message is not surely that value


def refusal(tool: str, record_id: Any, reasons: list[Reason], state: dict[str, Any]) -> str | None:
    """The error message of an update this server refused before for the same one reason
    (the same field, a taken value or a malformed one), with this call's values put in;
    None when the episode has shown no such refusal."""
    if len(reasons) != 1:
        return None  # two reasons: which one the server checks first is not known
    field, kind, value, holder = reasons[0]
    learned = _style(state).get("refusals", {}).get(tool, {})
    template = learned.get(f"{field}:{kind}") if isinstance(learned, dict) else None
    if not isinstance(template, str) or (HOLDER in template and holder is None):
        return None
    filled = {VALUE: value, HOLDER: holder or "", RECORD: str(record_id)}
    return re.sub("|".join(map(re.escape, filled)), lambda m: filled[m.group(0)], template)


def _learn_refusal(text: str, doubt: list[Any]) -> tuple[str, str] | None:
    """``(reason, template)`` from the error a doubted update got: its message with the
    call's value, the value's holder and the record's id made placeholders. None unless
    the update had one reason and the message names the refused value (a message that
    does not may depend on something simgym cannot see)."""
    reasons = doubt[3] if len(doubt) > 3 and isinstance(doubt[3], list) else []
    if len(reasons) != 1 or not isinstance(reasons[0], list) or len(reasons[0]) != 4:
        return None
    field, kind, value, holder = reasons[0]
    if not isinstance(value, str) or not value or value not in text:
        return None
    names = {value: VALUE, doubt[2]: RECORD}
    if isinstance(holder, str) and holder:
        names[holder] = HOLDER
    if any(len(name) < MIN_NAMED and name in text for name in names):
        return None  # "7" in a message may be the record's id or any other seven
    # the longest first: a value may contain the record's id
    pattern = "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
    return f"{field}:{kind}", re.sub(pattern, lambda m: names[m.group(0)], text)


def partial(state: dict[str, Any], collection: str, record_id: Any) -> bool:
    """Whether the ledger lacks fields of this record that the server filled in."""
    marks = state.get(PARTIAL)
    found = marks.get(collection) if isinstance(marks, dict) else None
    return isinstance(found, dict) and str(record_id) in found


def partial_fields(state: dict[str, Any], collection: str, record_id: Any) -> list[str] | None:
    """The fields of this record only the server knows (None: the ledger knows it whole)."""
    marks = state.get(PARTIAL)
    found = marks.get(collection) if isinstance(marks, dict) else None
    fields = found.get(str(record_id)) if isinstance(found, dict) else None
    return [str(f) for f in fields] if isinstance(fields, list) else None


def _complete(value: Any, state: dict[str, Any]) -> dict[str, Any] | None:
    """The ledger patch that fills in partial records from an answer that shows them
    whole (a create's answer names the status and time the server gave)."""
    marks = state.get(PARTIAL)
    if not isinstance(marks, dict) or not marks:
        return None
    patch: dict[str, Any] = {}
    for obj in _objects(value):
        for collection, pending_ids in marks.items():
            records = state.get(collection)
            if not isinstance(pending_ids, dict) or not isinstance(records, list):
                continue
            for record_id, fields in pending_ids.items():
                shown = [
                    r for r in records if isinstance(r, dict) and str(r.get("id")) == record_id
                ]
                if not shown or str(obj.get("id")) != record_id or not set(fields) <= set(obj):
                    continue
                whole = {**shown[0], **{k: obj[k] for k in fields}}
                current = patch.get(collection, records)
                patch[collection] = [whole if r is shown[0] else r for r in current]
                patch.setdefault(PARTIAL, {}).setdefault(collection, {})[record_id] = None
    return patch or None


ITEMS = "{items}"
COUNT = "{count}"
WHOLE_RECORD = "*"  # a declared layout's fields: each item shows its whole record


ARG_MARK = re.compile(r"\{arg:([^{}]+)\}")
# A list layout a scenario declares: the answer's shape and the fields each item shows.
Layout = tuple[Any, list[str]]


def pending(
    tool: str,
    arguments: dict[str, Any],
    records: list[dict[str, Any]],
    key: str,
    count: int | None = None,
) -> dict[str, Any]:
    """The ledger patch grounding leaves for a list call: what simgym found (``count``:
    how many matched, more than the records shown when a limit cut them), for
    :func:`observe_mcp` to compare with the server's answer."""
    ids = [r.get(key) for r in records]
    found = {"tool": tool, "arguments": arguments, "ids": ids, "key": key}
    if count is not None and count != len(ids):
        found["count"] = count  # else the count is the ids' own, as before
    return {STYLE: {"pending": [found]}}  # a list: a merge patch replaces it whole


def list_answer(
    tool: str,
    records: list[dict[str, Any]],
    arguments: dict,
    state: dict,
    declared: Layout | None = None,
    count: int | None = None,
    *,
    authoritative: bool = False,
) -> Any:
    """The exact answer of a list tool whose shape was learned (else declared, see
    :func:`learned_list`), or None; ``count`` is the number of matches, when a limit
    left some of them out of ``records``."""
    layout = learned_list(tool, state, declared, authoritative=authoritative)
    if layout is None:
        return None
    shape, fields = layout
    if fields == [WHOLE_RECORD]:  # each item is the record as stored, all its fields
        return _fill(shape, [dict(r) for r in records], arguments, count)
    if records and fields is None:
        return None  # only an empty answer was seen: what an item shows is not known
    if records and any(k not in r for r in records for k in fields or []):
        return None  # a record the server completed itself (a create's defaults)
    items = [{k: r[k] for k in fields or []} for r in records] if records else []
    return _fill(shape, items, arguments, count)


def learned_list(
    tool: str, state: dict[str, Any], declared: Layout | None = None, *, authoritative: bool = False
) -> tuple[Any, list[str] | None] | None:
    """The shape of a list tool's answers and the fields its items show (None: only an
    empty answer was seen), as the server showed them; before it showed any, the layout
    the scenario ``declared`` (a learned one wins: it is the server's own word, but the
    declared fields fill in for an answer that showed no item); None when neither. An
    ``authoritative`` declaration (the tool's own output schema) wins over what answers
    showed: in a simulated episode those are the world model's as much as the server's."""
    learned = _style(state).get("lists", {}).get(tool)
    if authoritative and declared is not None:
        return declared[0], list(declared[1])
    if not isinstance(learned, dict) or "shape" not in learned:
        return (declared[0], list(declared[1])) if declared is not None else None
    fields = learned.get("fields")
    if not isinstance(fields, list) and declared is not None:
        fields = list(declared[1])
    return learned["shape"], fields if isinstance(fields, list) else None


def check_layout(shape: Any, fields: Any) -> None:
    """Raise ValueError unless ``shape`` and ``fields`` make a list layout the way
    :func:`observe_mcp` learns one: ``shape`` is ``{items}`` (a bare list) or an object
    with exactly one ``{items}`` value, other values ``{count}``, ``{arg:NAME}`` or a
    constant (text, a number, true/false/null); ``fields`` is a non-empty list of
    distinct field names (the fields each item shows, in order)."""
    if not isinstance(fields, list) or not fields:
        raise ValueError("a list answer's fields must be a non-empty list of field names")
    odd = [f for f in fields if not isinstance(f, str) or not f]
    if odd or len(set(fields)) != len(fields):
        raise ValueError(f"a list answer's fields must be distinct names, not {fields!r}")
    if shape == ITEMS:
        return
    if not isinstance(shape, dict):
        raise ValueError(
            f"a list answer's shape must be {ITEMS!r} or an object holding it, not {shape!r}"
        )
    lists = [k for k, v in shape.items() if v == ITEMS]
    if len(lists) != 1:
        raise ValueError(f"a list answer's shape needs exactly one {ITEMS!r} value: {shape!r}")
    for name, value in shape.items():
        # nested values would not be found again in an answer (its items are the
        # object's one list), and a "{...}" text that is no marker is likely a typo
        marker = value in (ITEMS, COUNT) or (
            isinstance(value, str) and ARG_MARK.fullmatch(value) is not None
        )
        if isinstance(value, dict | list) or (
            isinstance(value, str) and value.startswith("{") and not marker
        ):
            raise ValueError(
                f"a list answer's shape has {name!r}: {value!r}; each value is {ITEMS}, "
                f"{COUNT}, {{arg:NAME}} or a constant"
            )


def shape_arguments(shape: Any) -> list[str]:
    """The arguments a list shape echoes (``{arg:NAME}``)."""
    values = shape.values() if isinstance(shape, dict) else [shape]
    found = [ARG_MARK.fullmatch(v) for v in values if isinstance(v, str)]
    return [m.group(1) for m in found if m is not None]


def fill(shape: Any, items: list[dict], arguments: dict[str, Any], count: int) -> Any:
    """A learned list shape with these items, this count of matches (more than the items
    when a limit cut them) and the call's arguments."""
    return _fill(shape, items, arguments, count)


def _fill(
    shape: Any, items: list[dict], arguments: dict[str, Any], count: int | None = None
) -> Any:
    if shape == ITEMS:
        return items
    if shape == COUNT:
        return len(items) if count is None else count
    if isinstance(shape, str) and shape.startswith("{arg:") and shape.endswith("}"):
        return arguments.get(shape[5:-1])
    if isinstance(shape, dict):
        return {k: _fill(v, items, arguments, count) for k, v in shape.items()}
    return shape


def _learn_list(value: Any, wanted: dict[str, Any], state: dict) -> dict | None:
    """The shape of a list answer that shows exactly the records ``wanted["ids"]`` in
    that order, with every other value explained by the call's arguments or the count
    (of the matches: ``wanted["count"]`` when a limit cut them, else of the ids); None
    when the answer is not that."""
    ids, arguments = wanted.get("ids") or [], wanted.get("arguments") or {}
    key = wanted.get("key") or "id"
    if isinstance(value, list):
        items, shape = value, ITEMS
    elif isinstance(value, dict):
        lists = [k for k, v in value.items() if isinstance(v, list)]
        if len(lists) != 1:
            return None
        items, shape = value[lists[0]], {}
        for name, item in value.items():
            if name == lists[0]:
                shape[name] = ITEMS
            elif item == wanted.get("count", len(ids)) and not isinstance(item, bool):
                shape[name] = COUNT
            else:
                named = [a for a, v in arguments.items() if v == item]
                if len(named) != 1:
                    return None
                shape[name] = "{arg:" + named[0] + "}"
    else:
        return None
    if not all(isinstance(i, dict) for i in items) or [i.get(key) for i in items] != ids:
        return None
    keys = {tuple(i) for i in items}
    if len(keys) > 1:
        return None
    return {"shape": shape, "fields": list(next(iter(keys))) if keys else None}


def observe_mcp(observation: str, action: Any, state: dict[str, Any]) -> dict[str, Any] | None:
    """The ledger patch that records how this answer was written (None: nothing new).
    A list call's ``pending`` record stays until an answer agrees with it; an error
    answer clears a doubted update's marks and takes back a change grounding applied."""
    before = _style(state)
    style = dict(before)
    tool = getattr(action, "name", None) or ""
    text, failed = _result_text(observation)
    doubt = style.pop("doubt", None)
    undo = style.pop("undo", None)
    missing = style.pop("missing", None)
    cleared = None
    if text is not None and failed:
        prefix = _error_prefix(text, tool)
        if prefix is not None:
            style["error_prefix"] = prefix
        if isinstance(missing, list):
            template = _learn_not_found(text, tool, missing, style.get("error_prefix"))
            if template is not None:
                style["not_found"] = {**style.get("not_found", {}), missing[1]: template}
        fields = _error_fields(observation)
        if fields is not None:
            style["error_fields"] = fields
        if isinstance(doubt, list) and len(doubt) >= 3 and doubt[0] == tool:
            cleared = {PARTIAL: {doubt[1]: {doubt[2]: None}}}  # refused: nothing changed
            learned = _learn_refusal(text, doubt)
            if learned is not None:
                refusals = {k: dict(v) for k, v in style.get("refusals", {}).items()}
                refusals.setdefault(tool, {})[learned[0]] = learned[1]
                style["refusals"] = refusals
        if isinstance(undo, list) and len(undo) == 6 and undo[0] == tool:
            cleared = _undo(undo, state)  # refused: what grounding applied did not happen
    value = _loads(text) if text is not None and not failed else None
    completed = None
    if isinstance(value, dict | list):
        assert text is not None
        indent = _indent(text)
        if indent is not None:  # an empty "[]" shows no layout: the known one stays
            style["indent"] = indent
        orders = dict(style.get("order", {}))
        for collection, order in _orders(value, state).items():
            orders[collection] = _merge(orders.get(collection), order)
        if orders:
            style["order"] = orders
        completed = _complete(value, state)
        wanted = (style.get("pending") or [None])[0]
        if isinstance(wanted, dict) and wanted.get("tool") == tool:
            lists = dict(style.get("lists", {}))
            learned = _learn_list(value, wanted, state)
            if learned is None:
                lists.pop(tool, None)  # this answer disagrees with simgym's matching
            else:
                known = lists.get(tool) or {}
                if learned["fields"] is None and known.get("shape") == learned["shape"]:
                    learned["fields"] = known.get("fields")  # an empty list shows no fields
                lists[tool] = learned
                style.pop("pending")
            style["lists"] = lists
    patch = {**(_patch(before, style) or {}), **(completed or {}), **(cleared or {})}
    return patch or None


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _patch(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch (RFC 7386) that turns the ledger's style ``before`` into ``after``."""

    def diff(old: Any, new: Any) -> Any:
        if not (isinstance(old, dict) and isinstance(new, dict)):
            return new
        out = {k: None for k in old if k not in new}
        out.update({k: diff(old.get(k), v) for k, v in new.items() if old.get(k) != v})
        return out

    return None if before == after else {STYLE: diff(before, after)}


def _style(state: dict[str, Any] | None) -> dict[str, Any]:
    found = (state or {}).get(STYLE)
    return found if isinstance(found, dict) else {}


TEXT_ERRORS = ("Error executing tool ", "Error: ")


def _result_text(observation: str) -> tuple[str | None, bool]:
    """The text of a result (inside a CallToolResult envelope, an ``{"error": ...}``
    object's message, the whole JSON answer, or a text-format error) and whether it is
    an error; ``(None, False)`` for other plain text."""
    try:
        outer = json.loads(observation)
    except ValueError:
        # the text format: an error is text that says so first, the way simgym's real
        # backend writes a failed call ("Error executing tool ...", else "Error: ...")
        failed = observation.startswith(TEXT_ERRORS)
        return (observation, True) if failed else (None, False)
    if isinstance(outer, dict) and isinstance(outer.get("content"), list):
        texts = [c.get("text") for c in outer["content"] if isinstance(c, dict)]
        text = texts[0] if len(texts) == 1 and isinstance(texts[0], str) else None
        return text, bool(outer.get("isError"))
    error = outer.get("error") if isinstance(outer, dict) and len(outer) == 1 else None
    if isinstance(error, dict):
        message = error.get("message")
        return (message if isinstance(message, str) else None), True
    return observation, False


def error_fields(state: dict[str, Any] | None) -> list[str] | None:
    """The fields of this server's json error objects, as its errors showed them."""
    fields = _style(state).get("error_fields")
    return fields if isinstance(fields, list) else None


def _error_fields(observation: str) -> list[str] | None:
    """``["message"]`` from a json error answer ``{"error": {"message": ...}}``."""
    value = _loads(observation)
    inner = value.get("error") if isinstance(value, dict) and len(value) == 1 else None
    return list(inner) if isinstance(inner, dict) else None


def _error_prefix(text: str, tool: str) -> str | None:
    """``Error executing tool {tool}: `` from an error that names the tool before a colon."""
    mark = f"{tool}: " if tool else ""
    at = text.find(mark) if mark else -1
    if at < 0 or at > 60:
        return None
    return text[:at] + "{tool}: "


def _indent(text: str) -> int | None:
    """The width of the first indented line of pretty-printed JSON, 0 when compact; None
    when the text says nothing of it (lines with none indented, an empty ``[]``)."""
    lines = text.splitlines()
    for line in lines[1:]:
        width = len(line) - len(line.lstrip(" "))
        if width:
            return width
    if len(lines) > 1 or text.strip() in ("[]", "{}"):
        return None
    return 0


def _orders(value: Any, state: dict[str, Any]) -> dict[str, list[str]]:
    """Field orders of the objects in an answer that are records of a collection."""
    fields = {name: {k for r in records for k in r} for name, records in collections(state).items()}
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
