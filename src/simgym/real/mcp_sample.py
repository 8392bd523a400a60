"""Read a bounded sample of a real MCP server's records through its read-only tools, so
that a twin made by ``simgym mcp import --sample-records N`` knows records that exist
instead of leaving the world model to invent them.

Which tools may be called (never one that may change the server):

* a tool that carries MCP tool annotations is called only when it says
  ``readOnlyHint: true`` (the MCP default is false: an annotated tool that does not say
  it only reads is taken to write);
* a tool with no annotations at all is called only when its name's first word lists,
  searches or reads (``list_``, ``search_``, ``get_``, ``find_``, ``read_``, ``fetch_``,
  ``query_``, ``show_``, ``describe_``, ``lookup_``; ``listTickets`` too) and no word of it
  writes (``create``, ``update``, ``delete``, ``set``, ``send``, ...).

How they are called: first each such tool whose required arguments are none or a search
text (``query``, ``q``, ``search``, ...), given as ``""`` (which SDK servers match every
record with) or, where the schema wants at least one character, as the commonest letters
one by one until N records came back, with its page size (``limit``, ``max_results``,
...) set to N where it has one; then each tool whose one missing argument names a record
(``customer_id``, ``id``) with the ids of the records read so far (``get_customer``,
``list_tickets``), up to N ids each. At most ``max_calls`` calls in all; a call the server
refuses is skipped.

What is kept: every list of objects in a result (``{"customers": [...]}``) as records of
the collection its key names (a generic key, ``items`` or ``results``, takes the tool's
noun: ``list_tickets`` -> ``tickets``), a single object with an ``id`` as one record of
the tool's noun, the wrapper's ``*_id`` fields copied into records that lack them (a
customer's accounts keep their ``customer_id``); records with the same id are merged
(a search's summary, then the full record). At most N records per collection.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

READ_VERBS = frozenset(
    "list search get find read fetch query show describe lookup browse count".split()
)
WRITE_WORDS = frozenset(
    """create update delete remove set put post send add insert write edit modify patch
    upsert cancel close open assign move rename archive restore reset approve reject
    submit execute run start stop kill purge drop merge import upload book pay
    transfer""".split()
)
SEARCH_ARGS = frozenset(
    "query q search search_query term text keyword keywords pattern filter".split()
)
PROBES = ("e", "a", "o", "i", "n")  # search texts for a search that needs one: common letters
PAGE_ARGS = frozenset("limit max_results page_size per_page count top_k n size".split())
GENERIC_KEYS = frozenset("items results result data records rows entries hits matches".split())
MAX_CALLS = 60

# a tool call: (name, arguments) -> (is_error, the result's JSON value or None)
CallTool = Callable[[str, dict[str, Any]], Awaitable[tuple[bool, Any]]]


@dataclass
class Sample:
    """What sampling read: records by collection, the calls made, and why tools were left."""

    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # tool -> why it was not called

    def count(self) -> int:
        """How many records in all."""
        return sum(len(rows) for rows in self.records.values())


def _words(name: str) -> list[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def why_not_read_only(tool: dict[str, Any]) -> str | None:
    """Why sampling must not call ``tool`` (a scenario tool or a tools/list entry), or
    None when it only reads: see the module docstring for the rule."""
    annotations = tool.get("annotations")
    if annotations:
        hint = annotations.get("readOnlyHint", annotations.get("read_only_hint"))
        return None if hint is True else "its annotations do not say readOnlyHint: true"
    words = _words(str(tool.get("name", "")))
    if not words or words[0] not in READ_VERBS:
        return "no annotations, and its name does not start with list/search/get/..."
    if set(words) & WRITE_WORDS:
        return "no annotations, and its name also says it writes"
    return None


def _noun(tool_name: str) -> str:
    words = _words(tool_name)
    rest = words[1:] if words and words[0] in READ_VERBS else words
    return "_".join(rest) or "records"


def _plural(noun: str) -> str:
    if noun.endswith("s"):
        return noun
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u"):
        return noun[:-1] + "ies"
    return noun + "s"


def _id_field(record: dict[str, Any]) -> str | None:
    if "id" in record:
        return "id"
    return next((k for k in record if k.lower().endswith("id")), None)


def records_in(value: Any, tool_name: str) -> list[tuple[str, dict[str, Any]]]:
    """The records one result holds, each with the collection it belongs to."""
    noun = _plural(_noun(tool_name))
    if isinstance(value, list):
        return [(noun, item) for item in value if isinstance(item, dict)]
    if not isinstance(value, dict):
        return []
    lists = {
        key: items
        for key, items in value.items()
        if isinstance(items, list) and items and all(isinstance(i, dict) for i in items)
    }
    if not lists:
        return [(noun, value)] if _id_field(value) == "id" else []
    # the wrapper's own ids (an account list's customer_id) belong to each of its records
    keys = {k: v for k, v in value.items() if k.endswith("_id") and isinstance(v, str | int)}
    found = []
    for key, items in lists.items():
        collection = noun if key in GENERIC_KEYS else key
        for item in items:
            found.append((collection, {**{k: v for k, v in keys.items() if k not in item}, **item}))
    return found


def _keep(sample: Sample, collection: str, record: dict[str, Any], limit: int) -> None:
    rows = sample.records.setdefault(collection, [])
    key = _id_field(record)
    if key is not None:
        for row in rows:
            if row.get(key) == record[key]:
                row.update(record)  # a fuller view of the same record (get after search)
                return
    elif record in rows:
        return
    if len(rows) < limit:
        rows.append(dict(record))


def _page_args(schema: dict[str, Any], limit: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        if name in PAGE_ARGS and isinstance(prop, dict) and prop.get("type") == "integer":
            top = prop.get("maximum")
            out[name] = min(limit, top) if isinstance(top, int) else limit
    return out


@dataclass
class _Plan:
    args: dict[str, Any]  # what every call gives
    id_arg: str | None = None  # the argument naming a record, filled from records read
    probe: str | None = None  # a search text that must not be empty: probed with letters


def _plan(schema: dict[str, Any]) -> _Plan | None:
    """How to call a tool, or None when a required argument cannot be filled."""
    props = schema.get("properties") or {}
    plan = _Plan({})
    for name in schema.get("required") or []:
        prop = props.get(name) if isinstance(props.get(name), dict) else {}
        if name in SEARCH_ARGS and prop.get("type", "string") == "string":
            least = prop.get("minLength", 0)
            if least > 1 or plan.probe is not None:
                return None
            if least == 1:
                plan.probe = name
            else:
                plan.args[name] = ""  # SDK servers' "contains" matches every record
        elif (name == "id" or name.lower().endswith("id")) and plan.id_arg is None:
            plan.id_arg = name
        else:
            return None
    return plan


def _ids_for(sample: Sample, id_arg: str, tool_name: str) -> list[Any]:
    words = _words(id_arg)
    noun = "_".join(words[:-1]) if len(words) > 1 else _noun(tool_name)
    rows = sample.records.get(_plural(noun)) or []
    return [row["id"] for row in rows if "id" in row]


async def sample_records(
    tools: list[dict[str, Any]], call: CallTool, limit: int, max_calls: int = MAX_CALLS
) -> Sample:
    """Read up to ``limit`` records per collection through the read-only ``tools``.

    Args:
        tools: the server's tools (tools/list entries or scenario tools: ``name``,
            ``inputSchema`` or ``parameters``, ``annotations``).
        call: calls one tool on the server: ``(name, arguments)`` to ``(is_error, value)``.
        limit: the most records kept per collection (at least 1).
        max_calls: the most calls made in all.

    Returns:
        The records by collection, the calls made, and the tools left out and why.
    """
    if limit < 1:
        raise ValueError(f"sample at least one record per collection, not {limit}")
    sample = Sample()
    later: list[tuple[str, dict[str, Any], str]] = []
    budget = max_calls

    async def run(name: str, arguments: dict[str, Any]) -> int:
        """Call one tool; how many records its answer held."""
        nonlocal budget
        budget -= 1
        sample.calls.append(f"{name}({json.dumps(arguments, sort_keys=True)})")
        failed, value = await call(name, arguments)
        found = [] if failed else records_in(value, name)
        for collection, record in found:
            _keep(sample, collection, record, limit)
        return len(found)

    for tool in tools:
        name = str(tool.get("name", ""))
        why = why_not_read_only(tool)
        if why is not None:
            sample.skipped[name] = why
            continue
        schema = tool.get("inputSchema") or tool.get("parameters") or {}
        plan = _plan(schema)
        if plan is None:
            sample.skipped[name] = "a required argument sampling cannot fill"
            continue
        args = plan.args | _page_args(schema, limit)
        if plan.id_arg is not None:
            later.append((name, args, plan.id_arg))
        elif plan.probe is not None:
            # a search that needs a text: the commonest letters, until a page is full
            seen = 0
            for letter in PROBES:
                if budget <= 0 or seen >= limit:
                    break
                seen += await run(name, {**args, plan.probe: letter})
        elif budget > 0:
            await run(name, args)
    for name, args, id_arg in later:
        ids = _ids_for(sample, id_arg, name)[:limit]
        if not ids:
            sample.skipped[name] = f"no {id_arg} was read to call it with"
        for record_id in ids:
            if budget <= 0:
                break
            await run(name, {**args, id_arg: record_id})
    return sample


def result_value(result: Any) -> Any:
    """A CallToolResult's value: its structured content, else its text parsed as JSON
    (one item, or a list of items as the SDK writes a list), else None."""
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        if isinstance(structured, dict) and list(structured) == ["result"]:
            return structured["result"]  # the SDK's wrapper around a non-object return
        return structured
    values = []
    for item in getattr(result, "content", None) or []:
        text = getattr(item, "text", None)
        if not isinstance(text, str):
            continue
        try:
            values.append(json.loads(text))
        except ValueError:
            continue
    if len(values) == 1:
        return values[0]
    return values or None


def records_note(state: dict[str, Any]) -> str:
    """One line saying what records a twin's ``state`` holds: none (then its answers about
    the server's data are the world model's inventions), or how many, of which kinds."""
    kinds = {
        name: len(rows)
        for name, rows in state.items()
        if not name.startswith("_")
        and isinstance(rows, list)
        and rows
        and all(isinstance(r, dict) for r in rows)
    }
    if not kinds:
        return (
            "the twin has no records: its answers about the server's data are invented by "
            "the world model (`simgym mcp import --sample-records N` reads some, or fill "
            "`state`)"
        )
    listed = ", ".join(f"{count} {name}" for name, count in kinds.items())
    return f"the twin holds {sum(kinds.values())} records ({listed})"
