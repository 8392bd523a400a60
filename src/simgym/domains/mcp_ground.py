"""State grounding for the mcp domain: record tools read and change the hidden ledger.

A tool server's data is the scenario's ``state``: collections of records, each a list of
objects (``{"customers": [{"id": "C-1001", ...}]}``). Most tools of such a server are
CRUD on those lists, and their names and schemas say which, so simgym can work out what a
call reads, what it changes, and often the exact result (:mod:`simgym.core.grounding`).

Recognition (:func:`resolve`), from the tool's name split into words:

* the verb: get/fetch/read/show/describe/retrieve/view/lookup/load (one record by id),
  list/search/find/query/filter/browse (records matching the arguments),
  create/add/insert/new/register/place/book, update/set/change/edit/patch/rename/modify,
  delete/remove/cancel/destroy/drop. A name with verbs of two kinds is not guessed;
* the collection: the state key whose noun is a word of the name (singular or plural:
  ``get_customer`` -> ``customers``), else the one an id argument names
  (``update_email(customer_id=...)`` -> ``customers``), else the only collection;
* the id argument: ``id``, ``<noun>_id`` / ``<noun>Id``, ``key``, ``uuid`` or the
  collection's key field itself; it matches the record's ``id`` (or ``<noun>_id``) field,
  else the first field every record has with a value no other shares (``sku``);
* the other arguments: record fields (equality filters for a list, so a foreign key
  lists its records: ``list_accounts(customer_id)``; new values for an update, the new
  record's fields for a create), ``new_<field>``, an object of changes
  (``fields``/``updates``/``data``/...), free-text queries (``query``, ``q``, ``search``,
  ...), and a result limit.

What a tool's description says is read too (:func:`infer_search`, :func:`infer_order`):
a free-text query searches the fields the description names (``Find customers whose
name, email or phone contains the query``), the query stripped and found anywhere in
their text ignoring case, the way typical servers search; where a server could as well
compare otherwise (spaces inside a phone number, SQL ``LIKE`` wildcards, case beyond
ASCII) and that changes what matches, the search stays the server's. A description that
names no field leaves the search the server's (the facts say so). A list that promises
``oldest first`` / ``newest first`` is ordered by the records' date field; else lists
keep the collection's order (the server's own, when the state was read from it). A
create fills in the schema's defaults for the arguments left out.

Before any of that, the call is checked against the tool's input schema the way the
server's SDK checks it (:mod:`.mcp_schema`): a call that breaks it (a ``pattern``, a
``format``, a length, an ``enum``, a bound, a ``required`` argument, a type) is refused
with the Python SDK's validation error, to the character, unless the episode showed
that this server words its errors otherwise (then only the refusal is certain); the
server's own errors (not found) carry the SDK's ``Error executing tool NAME:`` prefix
when the schema bears the SDK's mark (its title ``<tool>Arguments``). New email
addresses are stored the way the records store theirs: in lower case with no space
around them, when at least ``MIN_NORMALIZED`` stored addresses all are.

A name with words that are neither the collection, a field nor filler
(``get_account_balance``, ``remove_email``) or an argument that names nothing known makes
the call *unsure*: simgym then sends the records it touches as facts and changes nothing;
a tool it cannot read as an operation at all gets a fact saying its effect is not known.
A scenario can bind tools explicitly with ``tool_map`` (:class:`ToolBinding`); for a list
tool it can also declare how its free-text query matches (``search``: which fields, compared
how), which makes a search as decided as a plain filter, and the layout of its answer
(``answer``), used until the server has shown one of its own.

Results: a read returns the record as ``json.dumps(record, ensure_ascii=False)``, an
update the updated record, a missing id ``{"error": {"code": 404, "message": "customer C-9
not found"}}``; the ``mcp`` format wraps these in a CallToolResult envelope; the ``text``
format has no exact form, only values that must (``expect``) or must not (``forbid``)
appear. Creates and deletes have no exact form in any format (servers differ in what
they answer), only ``expect``/``forbid``; nor has a list, until its layout was learned from
the server's answers (:mod:`.mcp_style`) or declared, and then only when the state decides
which records it shows (no search matched the server's own way).

Effects are merge patches that set a changed collection's whole list (RFC 7386 replaces
lists whole). A delete also keeps the record under ``_deleted`` in the ledger, so a later
read or list can be checked not to bring it back, and a create never reuses its id.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from simgym.core.grounding import Grounding
from simgym.core.patterns import compile_pattern
from simgym.core.types import Action, ToolSpec
from simgym.domains import mcp_output, mcp_rules, mcp_schema, mcp_style
from simgym.domains.mcp_rules import ToolRules, collections

if TYPE_CHECKING:
    from simgym.domains.mcp import MCPScenario

Op = Literal["get", "list", "create", "update", "delete", "none"]
# How a declared search compares its query with one field of a record (ToolBinding.search).
SearchMode = Literal["contains", "contains_ignoring_spaces"]
SEARCH_MODES: dict[str, str] = {  # each mode in words, for the facts
    "contains": "ignoring case",
    "contains_ignoring_spaces": "ignoring case and spaces",
}

VERBS: dict[str, frozenset[str]] = {
    "get": frozenset(
        {"get", "fetch", "read", "show", "describe", "retrieve", "view", "lookup", "load"}
    ),
    "list": frozenset({"list", "search", "find", "query", "filter", "browse"}),
    "create": frozenset({"create", "add", "insert", "new", "register", "place", "book"}),
    "update": frozenset({"update", "set", "change", "edit", "patch", "rename", "modify"}),
    "delete": frozenset({"delete", "remove", "cancel", "destroy", "drop"}),
}
ALL_VERBS = frozenset().union(*VERBS.values())
# Words a tool name may carry without changing what it does.
FILLER = frozenset(
    {
        "a", "an", "the", "by", "of", "for", "to", "from", "in", "on", "with", "all", "one",
        "my", "id", "ids", "key", "details", "detail", "info", "information", "record",
        "records", "data", "entry", "entries", "single", "tool",
    }
)  # fmt: skip
QUERY_ARGS = frozenset(
    {"query", "q", "search", "term", "terms", "keyword", "keywords", "text", "search_term"}
)
LIMIT_ARGS = frozenset({"limit", "max_results", "page_size", "per_page", "top_k", "top", "max"})
ORDER_ARGS = frozenset({"sort", "sort_by", "order", "order_by", "direction", "ascending"})
PAGE_ARGS = frozenset({"offset", "page", "cursor", "skip", "page_token", "start", "after"})
FUZZY_VERBS = frozenset({"search", "find", "query", "filter"})  # their text filters are substrings
CHANGE_ARGS = frozenset(
    {"fields", "updates", "update", "changes", "data", "patch", "values", "attributes"}
)
TOMBSTONES = mcp_style.TOMBSTONES
MAX_FACT_RECORDS = 20
# the records a list's facts show, in characters: a small model's context holds the
# prompt, these and its answer (4,096 tokens for the embedded one)
MAX_FACT_CHARS = 2400
MIN_FORBID = 3  # shorter values ("1", "ok") appear anywhere by chance
MAX_EXPECT = 200  # longer values may be shortened by a text server


class ListAnswer(BaseModel):
    """The layout of a list tool's answer, declared the way :mod:`.mcp_style` learns one
    from the server: ``{"shape": {"customers": "{items}", "total": "{count}"}, "fields":
    ["id", "name"]}``. Used until the server has shown an answer of its own."""

    model_config = ConfigDict(extra="forbid")

    shape: Any = Field(
        description=f"the answer: {mcp_style.ITEMS} (a bare list) or an object with one "
        f"{mcp_style.ITEMS} value, others {mcp_style.COUNT} (the number of matches, more "
        "than the items when a limit cut them), {arg:NAME} (an argument echoed) or constants"
    )
    fields: list[str] = Field(description="the fields each item shows, in the answer's order")

    @model_validator(mode="after")
    def _valid(self) -> ListAnswer:
        mcp_style.check_layout(self.shape, self.fields)
        return self

    def layout(self) -> mcp_style.Layout:
        return self.shape, list(self.fields)


class ToolBinding(BaseModel):
    """How one tool touches the records, for a tool whose name or arguments do not say it
    (or say it wrongly): ``{"op": "update", "collection": "customers", "id_arg": "cust",
    "fields": {"mail": "email"}}``."""

    model_config = ConfigDict(extra="forbid")

    op: Op = Field(
        description="get (one record by id), list (records matching the arguments), create, "
        "update, delete, or none (never ground this tool)"
    )
    collection: str | None = Field(
        None, description="the state key of the records (a list of objects); default: by name"
    )
    key: str | None = Field(
        None, description="the record field that identifies a record; default id"
    )
    id_arg: str | None = Field(
        None, description="the argument that holds the record's key; default: found by name"
    )
    fields: dict[str, str] = Field(
        default_factory=dict, description="argument name -> record field, where they differ"
    )
    context: list[str] = Field(
        default_factory=list,
        description="arguments that say who calls or why (actor, role, reason) and touch no "
        "record: left out of grounding",
    )
    rules: ToolRules | None = Field(
        None,
        description="business rules enforced from the state: refusals with the system's own "
        "answers, and what a successful call sets (simgym.domains.mcp_rules)",
    )
    search: dict[str, SearchMode] | None = Field(
        None,
        description="a list tool: how its free-text query (query, q, search, ...) matches "
        "records, field -> contains (the query, stripped, is a substring of the field's "
        "text, ignoring case) or contains_ignoring_spaces (the same with every space "
        "removed from both); a record matches when any field does. The search is then "
        "decided from the state, its matches listed in the collection's order (a limit "
        "cuts them there); without it a search is matched the server's own way",
    )
    answer: ListAnswer | None = Field(
        None,
        description="a list tool: the layout of its answer (simgym.domains.mcp_style), used "
        "until the server has shown one, so its first answer can be exact",
    )

    @model_validator(mode="after")
    def _list_only(self) -> ToolBinding:
        if self.op != "list" and (self.search is not None or self.answer is not None):
            raise ValueError(f"search and answer describe a list tool, not op {self.op!r}")
        if self.search is not None and not self.search:
            raise ValueError("search needs at least one field -> mode")
        return self


@dataclass
class Call:
    """One tool call read as an operation on one collection of records."""

    tool: str
    op: str
    collection: str
    noun: str  # one record of the collection, for messages ("customer")
    key: str  # the record field that identifies a record
    id_value: Any = None  # the key the call names, if any
    values: dict[str, Any] = field(default_factory=dict)  # fields set, or filtered on
    queries: list[str] = field(default_factory=list)  # free text matched against any field
    limit: int | None = None
    fuzzy: bool = False  # text filters match as case-insensitive substrings (a search)
    search: dict[str, str] | None = None  # how the queries match, when the scenario says
    layout: mcp_style.Layout | None = None  # the answer's declared layout, for a list
    unknown: list[str] = field(default_factory=list)  # what of the call was not understood
    arguments: dict[str, Any] = field(default_factory=dict)  # as the agent passed them
    # other ways the server may compare an inferred search's query (see infer_search):
    # the search is decided only where they all find the same records
    variants: list[dict[str, str]] = field(default_factory=list)
    inferred: str | None = None  # where an inferred search's fields came from, for facts
    # a list's order: (field, newest first) where the tool's description says it, "?"
    # where it says an order simgym cannot map to a field, None: the collection's
    order: tuple[str, bool] | str | None = None
    prefix: str | None = None  # what the server writes before an error (SDK's, if built so)
    notes: list[str] = field(default_factory=list)  # inferences made, for the facts
    # what the tool's output schema says of its answer (simgym.domains.mcp_output)
    form: mcp_output.RecordForm | None = None
    list_form: mcp_output.ListForm | None = None
    schema_layout: bool = False  # the list's layout is its output schema's (not tool_map's)
    required: frozenset[str] = frozenset()  # the arguments the input schema requires
    refuses: frozenset[str] = frozenset()  # doubts its description makes certain refusals
    defaults: dict[str, Any] = field(default_factory=dict)  # the input schema's defaults
    description: str = ""  # the tool's description
    clock: datetime | None = None  # the server's clock, where the scenario holds it

    @property
    def sure(self) -> bool:
        return not self.unknown


# -- recognising a call -------------------------------------------------------------------


def ground_mcp(action: Action, state: dict[str, Any], scenario: MCPScenario) -> Grounding | None:
    """The mcp domain's ``ground``: what a tool call reads and certainly changes."""
    if action.kind != "tool_call":
        return None
    tool = scenario.tool(action.name or "")
    if tool is None:
        return None
    fmt = scenario.output_format
    state = _sdk_layout(tool, state, fmt)
    # the server validates the arguments against the tool's schema before the tool runs
    verdict = mcp_schema.check(tool, action.arguments)
    if verdict.refused:
        return schema_refusal(tool, verdict, state, fmt)
    arguments = {**action.arguments, **(verdict.values or {})}  # as the tool receives them
    binding = scenario.tool_map.get(tool.name)
    if binding is not None and binding.rules is not None:
        ruled = ground_ruled(tool, arguments, state, binding, fmt, scenario.clock)
        if ruled is not None:
            return ruled
    if binding is not None and binding.op == "none":
        return None
    skip = set(binding.context) if binding is not None else set()
    args = {k: v for k, v in arguments.items() if v is not None and k not in skip}
    call = resolve(tool, args, state, binding)
    if call is None:
        return _not_understood(tool, args, state)
    call.clock = scenario.clock
    records = collections(state)[call.collection]
    if not call.sure:
        return _unsure(call, records)
    return OPS[call.op](call, records, state, fmt)


def _sdk_layout(tool: ToolSpec, state: dict[str, Any], fmt: str) -> dict[str, Any]:
    """The ledger as this call's answers are written from it. A tool built with the
    Python SDK (its schema's mark) writes its result's text indented by two
    (``pydantic_core.to_json(value, indent=2)``), which the ``text`` format shows as it
    is and the ``mcp`` format inside its envelope; an error is its message alone (the
    ``json`` format: ``{"error": {"message": ...}}``, as simgym's real backend shows an
    MCP server's failed call). Each holds until the server's own answers showed
    otherwise (:mod:`.mcp_style`)."""
    if not mcp_schema.sdk_built(tool):
        return state
    style = state.get(mcp_style.STYLE)
    style = dict(style) if isinstance(style, dict) else {}
    if fmt in ("mcp", "text") and mcp_output.output_schema(tool) is not None:
        # a structured result's text is always the SDK's: whatever earlier answers showed
        # (a simulated episode's are the world model's as much as the server's)
        style["indent"] = mcp_output.SDK_INDENT
    elif fmt in ("mcp", "text"):
        style.setdefault("indent", mcp_output.SDK_INDENT)
    if fmt == "text":
        style[mcp_style.TEXT_JSON] = True
    if fmt == "json":
        style.setdefault("error_fields", ["message"])
    return {**state, mcp_style.STYLE: style}


def schema_refusal(
    tool: ToolSpec, verdict: mcp_schema.Verdict, state: dict[str, Any], fmt: str
) -> Grounding:
    """A call its tool's input schema refuses: the SDK's validation error (its exact text
    where :mod:`.mcp_schema` rebuilt the check and the server's errors, as far as the
    episode showed them, are worded the SDK's way), and nothing changes."""
    why = "; ".join(verdict.reasons[:5])
    facts = [f"the server's input validation refuses this call ({why}); nothing changes"]
    message = verdict.message
    shown = mcp_style.error_prefix(state)
    if shown is not None and shown != mcp_schema.SDK_PREFIX:
        message = None  # this server words its errors otherwise: not the Python SDK's
    observation = None
    if message is not None and fmt == "mcp":
        observation = _answer(message, fmt, error=True)
    elif message is not None and fmt == "json":
        # simgym's real backend shows an SDK server's failed call as {"error": {"message"}}
        if mcp_style.error_fields(state) in (None, ["message"]):
            observation = compact({"error": {"message": message}})
    if observation is not None:
        return Grounding(facts=facts, observation=observation)
    expect = {"mcp": ['"isError": true'], "json": ['"error"']}.get(fmt, [])
    if message is not None and fmt == "text":
        answer = exact_error(422, message, fmt, state)
        if answer is not None:
            return Grounding(facts=facts, observation=answer)
        expect = [message.splitlines()[0]]
    return Grounding(facts=facts, expect=expect)


def _not_understood(tool: ToolSpec, args: dict[str, Any], state: dict[str, Any]) -> Grounding:
    """A declared tool simgym cannot read as an operation on the records: what it does is
    the world model's to say, and the record of the turn says so; the records its
    arguments name go along as facts."""
    note = (
        f"what {tool.name} reads or changes is not known from the records (simgym could "
        "not read it as a lookup, list, create, update or delete): the server decides"
    )
    related = related_facts(args, state)
    return Grounding(facts=[*(related.facts if related is not None else []), note])


def ground_ruled(
    tool: ToolSpec,
    arguments: dict[str, Any],
    state: dict[str, Any],
    binding: ToolBinding,
    fmt: str,
    clock: datetime | None = None,
) -> Grounding | None:
    """A call of a tool with business rules: refused with the system's own answer when a
    guard holds, else answered and applied from the state (lists and deletes, which the
    rules do not describe, go the ordinary way: None)."""
    rules = binding.rules
    assert rules is not None
    args = {k: v for k, v in arguments.items() if v is not None}
    name = binding.collection or ""
    records = collections(state).get(name) if name else None
    served = records is not None and binding.op in ("get", "update", "create")
    key = binding.key or "id"
    noun = collection_noun(name)
    id_value = args.get(binding.id_arg) if binding.id_arg else None
    record = mcp_rules.find(records or [], key, id_value)
    feats = mcp_rules.features(args, record, state, key)
    guard = mcp_rules.decide(rules, feats)
    if guard is None and served and record is None and binding.op != "create":
        guard = rules.missing
    if guard is None and not served:
        return None
    records = records or []
    if guard is not None:
        why = "; ".join(c.text() for c in guard.when) or "the record does not exist"
        return Grounding(
            facts=[f"the system refuses this call with status {guard.status} ({why})"],
            observation=_answer(
                mcp_rules.render(guard.answer, guard.quoted(feats)), fmt, error=True
            ),
        )
    if binding.op != "create" and record is None:
        return _missing(Call(tool.name, binding.op, name, noun, key, id_value), state, fmt)
    if binding.op == "get":
        return _get(Call(tool.name, "get", name, noun, key, id_value), records, state, fmt)
    context = set(binding.context) | {binding.id_arg}
    known = record_fields(records) | set(rules.shape)
    given = {k: v for k, v in args.items() if k not in context and k in known and k != key}
    changes = {**given, **mcp_rules.new_values(rules, feats, args, clock)}
    if binding.op == "create":
        changes = {**rules.defaults, **changes}
    if binding.op == "update":
        assert record is not None
        after = mcp_rules.ordered({**record, **changes}, rules.shape)
        effects = {name: [after if r is record else r for r in records]}
        facts = [f"this call changes {noun} {id_value} to: {compact(after)}"]
    else:
        gone = _tombstones(state, name).values()
        taken = [r.get(key) for r in [*records, *gone] if isinstance(r, dict)]
        new_id = next_id([i for i in taken if i is not None]) or f"{noun}-1"
        after = mcp_rules.ordered({key: new_id, **changes}, rules.shape)
        effects = {name: [*records, after]}
        facts = [f"this call creates {noun} {new_id}: {compact(after)}"]
    _parent_effects(rules, args, after, state, key, effects)
    if args.get("actor") is not None:  # who did what to it: segregation-of-duties rules
        history = mcp_rules.remember(state, tool.name, args["actor"], name, after.get(key))
        effects[mcp_rules.HISTORY] = history
    complete = bool(rules.shape) and all(k in after for k in rules.shape)
    if not complete:
        unknown = sorted(set(rules.shape) - set(after))
        if unknown:
            facts.append(f"the system fills in {', '.join(unknown)} itself")
    return Grounding(
        facts=facts,
        effects=effects,
        observation=exact_result(after, fmt, state) if complete else None,
        expect=[] if complete else _expect_values(after, key, fmt),
    )


def _parent_effects(
    rules: ToolRules,
    args: dict[str, Any],
    record: dict[str, Any],
    state: dict[str, Any],
    key: str,
    effects: dict[str, Any],
) -> None:
    """Related records the call changes (a customer's KYC status after a check)."""
    for effect in rules.parents:
        if effect.source not in record:
            continue
        pointer = args.get(effect.via, record.get(effect.via))
        records = effects.get(effect.collection, collections(state).get(effect.collection))
        parent = mcp_rules.find(
            records or [], mcp_rules.key_of(state, effect.collection, key), pointer
        )
        if parent is None:
            continue
        changed = {**parent, effect.field: effect.value(parent, record)}
        effects[effect.collection] = [changed if r is parent else r for r in records or []]


def _answer(body: Any, fmt: str, *, error: bool) -> str | None:
    """An answer body as the scenario's format shows it."""
    if fmt == "json":
        return compact(body)
    if fmt == "mcp":
        text = body if isinstance(body, str) else compact(body)
        return compact({"content": [{"type": "text", "text": text}], "isError": error})
    return None


def resolve(
    tool: ToolSpec, args: dict[str, Any], state: dict[str, Any], binding: ToolBinding | None = None
) -> Call | None:
    """Read a call as an operation on one collection, or None when it is not one."""
    cols = collections(state)
    words = split_words(tool.name)
    op = binding.op if binding is not None else _name_op(words, cols)
    if op is None or op == "none":
        return None
    name = binding.collection if binding and binding.collection else None
    name = name or find_collection(words, args, cols)
    if name is None or name not in cols:
        return None
    records = cols[name]
    noun = collection_noun(name)
    key = binding.key if binding and binding.key else key_field(records, noun)
    id_arg = binding.id_arg if binding and binding.id_arg else id_argument(args, noun, key)
    call = Call(
        tool.name, op, name, noun, key, fuzzy=bool(FUZZY_VERBS & set(words)), arguments=args
    )
    call.prefix = mcp_schema.SDK_PREFIX if mcp_schema.sdk_built(tool) else None
    _declared(call, tool, records)
    if id_arg is not None and id_arg in args:
        call.id_value = args[id_arg]
    if binding is not None:
        call.search = dict(binding.search) if binding.search is not None else None
        call.layout = binding.answer.layout() if binding.answer is not None else None
    if op == "get" and call.id_value is None:
        call.op = "list"  # a lookup by other fields answers like a search
    if binding is None:
        call.unknown += _odd_words(words, call, record_fields(records))
    _read_arguments(call, tool, {k: v for k, v in args.items() if k != id_arg}, records, binding)
    if call.op == "list" and call.queries and call.search is None:
        infer_search(call, tool, records)
    if call.op == "list":
        call.order = infer_order(tool, records)
    if call.op == "create":
        _schema_defaults(call, tool, records, args)
    if call.op == "list" and call.layout is None:
        _declared_layout(call)
    if call.op in ("update", "delete") and call.id_value is None:
        call.unknown.append("no id argument")
    if call.op == "update" and not call.values:
        call.unknown.append("no field to change")
    if call.op == "delete" and "cancel" in words and _has_field(records, "status"):
        call.unknown.append("cancel may only set a status")
    return call


def split_words(name: str) -> list[str]:
    """``getCustomerByID`` / ``get-customer_by.id`` -> ``["get", "customer", "by", "id"]``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


def singular(word: str) -> str:
    """English singular, enough for collection names (customers, categories, addresses)."""
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes", "zes", "uses")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def collection_noun(name: str) -> str:
    """One record of a collection, by its name: ``support_tickets`` -> ``ticket``."""
    words = split_words(name)
    return singular(words[-1]) if words else name


def _name_op(words: list[str], cols: dict[str, list[dict[str, Any]]]) -> str | None:
    """The operation a tool's name says, a word that names a collection read as that
    noun, not as a verb (``get_book`` of a library's ``books`` gets a book)."""
    nouns = {collection_noun(name) for name in cols}
    return verb_op([w for w in words if singular(w) not in nouns]) or verb_op(words)


def verb_op(words: list[str]) -> str | None:
    """The one kind of operation the name's verbs say, or None (no verb, or two kinds)."""
    ops = {op for word in words for op, verbs in VERBS.items() if word in verbs}
    return ops.pop() if len(ops) == 1 else None


def find_collection(
    words: list[str], args: dict[str, Any], cols: dict[str, list[dict[str, Any]]]
) -> str | None:
    """The collection the tool's name names, else the one an id argument names, else the
    only one; None when that is ambiguous."""
    nouns = {name: collection_noun(name) for name in cols}
    for word in reversed([w for w in words if w not in ALL_VERBS]):
        hits = [name for name, noun in nouns.items() if noun == singular(word)]
        if len(hits) == 1:
            return hits[0]
    for arg in args:
        owner = _id_owner(arg)
        hits = [name for name, noun in nouns.items() if owner and noun == owner]
        if len(hits) == 1:
            return hits[0]
    return next(iter(cols)) if len(cols) == 1 else None


def _id_owner(arg: str) -> str | None:
    """``customer_id`` / ``customerId`` -> ``customer``."""
    words = split_words(arg)
    if len(words) >= 2 and words[-1] == "id":
        return singular("_".join(words[:-1]))
    return None


def record_fields(records: list[dict[str, Any]]) -> set[str]:
    """Every field any record of a collection has."""
    return {k for record in records for k in record}


def _has_field(records: list[dict[str, Any]], name: str) -> bool:
    return any(name in record for record in records)


def key_field(records: list[dict[str, Any]], noun: str) -> str:
    """The field that identifies a record: ``id``, else ``<noun>_id`` / ``<noun>Id``,
    else the first field every record has with a value no other record shares (``sku``
    of ``{"sku": "SKU-0001", "name": ...}``)."""
    for name in ("id", f"{noun}_id", f"{noun}Id", "uuid", "key"):
        if _has_field(records, name):
            return name
    if len(records) >= 2:
        for name in ordered_fields(records):
            values = [r.get(name) for r in records]
            scalar = all(isinstance(v, str | int) and not isinstance(v, bool) for v in values)
            if scalar and len(set(map(str, values))) == len(values):
                return name
    return "id"


def ordered_fields(records: list[dict[str, Any]]) -> list[str]:
    """Every field any record of a collection has, in the records' own order."""
    return list(dict.fromkeys(k for record in records for k in record))


def id_argument(args: dict[str, Any], noun: str, key: str) -> str | None:
    """The argument that names one record of the collection, if the call has one."""
    for name in (key, "id", f"{noun}_id", f"{noun}Id", f"{noun}id", f"{noun}_key", "key", "uuid"):
        if name in args and isinstance(args[name], str | int) and not isinstance(args[name], bool):
            return name
    return None


def _odd_words(words: list[str], call: Call, fields: set[str]) -> list[str]:
    """Words of the tool's name that make its result differ from a plain CRUD answer:
    ``get_account_balance`` returns a balance, ``remove_email`` clears a field."""
    field_words = {singular(w) for f in fields for w in split_words(f)}
    odd = []
    for word in words:
        if word in ALL_VERBS or word in FILLER or singular(word) == call.noun:
            continue
        if call.op in ("update", "list") and singular(word) in field_words:
            continue  # update_email, search_customers_by_name
        odd.append(f"the word {word!r} in the tool's name")
    return odd


def _read_arguments(
    call: Call,
    tool: ToolSpec,
    args: dict[str, Any],
    records: list[dict[str, Any]],
    binding: ToolBinding | None,
) -> None:
    """Sort the non-id arguments into field values, queries and a limit; note the rest."""
    fields = record_fields(records)
    renames = binding.fields if binding is not None else {}
    for name, value in args.items():
        target = renames.get(name) or _field_for(name, fields)
        if target is not None:
            call.values[target] = value
        elif (
            call.op in ("create", "update")
            and isinstance(value, dict)
            and (name in CHANGE_ARGS or singular(name) == call.noun)
        ):
            _take_changes(call, value, fields, name)
        elif call.op == "create" and not records:
            call.values[name] = value  # nothing to compare with: every argument is a field
        elif call.op == "list" and name in QUERY_ARGS and isinstance(value, str):
            call.queries.append(value)
        elif call.op == "list" and name in LIMIT_ARGS and _is_int(value):
            call.limit = value
        elif call.op == "list" and (name in ORDER_ARGS or (name in PAGE_ARGS and not value)):
            pass  # order is not checked; a first page is the whole answer
        else:
            call.unknown.append(f"the argument {name!r}")
    if call.op == "update" and not call.values and len(call.unknown) == 1:
        _value_for_named_field(call, tool, args, fields)
    if call.op == "list" and call.limit is None:
        call.limit = _default_limit(tool)


def _field_for(arg: str, fields: set[str]) -> str | None:
    """The record field an argument names: itself, or ``new_<field>``."""
    if arg in fields:
        return arg
    if arg.startswith("new_") and arg[4:] in fields:
        return arg[4:]
    return None


def _take_changes(call: Call, value: dict[str, Any], fields: set[str], name: str) -> None:
    """An object of changes (``fields={"email": ...}``): its keys must be record fields
    (any key, for a new record)."""
    strange = [k for k in value if k not in fields]
    if strange and call.op == "update":
        call.unknown.append(f"the field(s) {', '.join(strange)} in {name!r}")
        return
    call.values.update(value)


def _value_for_named_field(
    call: Call, tool: ToolSpec, args: dict[str, Any], fields: set[str]
) -> None:
    """``set_status(ticket_id, value)``: the one other argument is the value of the one
    field the tool's name names (``rename_x(new)`` names ``name``)."""
    words = [w for w in split_words(tool.name) if w not in FILLER and singular(w) != call.noun]
    words = ["name" if w == "rename" else w for w in words if w not in ALL_VERBS or w == "rename"]
    named = [w for w in words if w in fields]
    if len(named) == 1 and len(args) == 1:
        call.values[named[0]] = next(iter(args.values()))
        call.unknown.clear()


def _default_limit(tool: ToolSpec) -> int | None:
    """A limit the schema defaults to (``"limit": {"default": 10}``)."""
    props = tool.parameters.get("properties")
    if not isinstance(props, dict):
        return None
    for name in LIMIT_ARGS & set(props):
        schema = props[name]
        if isinstance(schema, dict) and _is_int(schema.get("default")):
            return schema["default"]
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- what a tool's description says: which fields a search covers, the order of a list ---

SPACED_NUMBER = re.compile(r"[+(]?\d[\d\s().\-/]*\d")
LIKE_WILDCARDS = ("%", "_")


OUTPUT_WORDS = frozenset({"return", "returns", "returning", "result", "results", "output"})


def described_words(tool: ToolSpec, args: list[str]) -> set[str]:
    """The words of the tool's description and of the given arguments' descriptions
    (singular forms too), leaving out the sentences about what the tool returns (``...
    Returns each customer's id, name and tier.`` names no searched field)."""
    props = tool.parameters.get("properties")
    sentences = re.split(r"(?<=[.;!?])\s+", tool.description)
    texts = [t for t in sentences if not OUTPUT_WORDS & set(split_words(t))]
    if isinstance(props, dict):
        texts += [
            str(props[a].get("description") or "") for a in args if isinstance(props.get(a), dict)
        ]
    words = {w for text in texts for w in split_words(text)}
    return words | {singular(w) for w in words}


def infer_search(call: Call, tool: ToolSpec, records: list[dict[str, Any]]) -> None:
    """A free-text search the scenario did not declare: the fields its description names
    (``Find customers whose name, email or phone contains the query``) are the ones it
    searches, each compared the way typical servers compare, the query stripped and
    found anywhere in the field's text, ignoring case. Where a server could as well
    compare otherwise (spaces inside a phone number, ``%``/``_`` as SQL ``LIKE``
    wildcards, case folded beyond ASCII, a query not stripped) the alternatives go to
    ``call.variants``: the search is decided only where they all find the same records.
    A description that names no field leaves the search the server's."""
    asked = [a for a in call.arguments if a in QUERY_ARGS]
    words = described_words(tool, asked)
    named = [
        name
        for name in ordered_fields(records)
        if split_words(name) and all(singular(w) in words for w in split_words(name))
    ]
    if not named:
        return
    call.search = {name: "contains" for name in named}
    call.inferred = "as the tool's description says"
    spaced = [name for name in named if _spaced_numbers(records, name)]
    if spaced:
        call.variants.append(
            {n: "contains_ignoring_spaces" if n in spaced else "contains" for n in named}
        )
    if any(mark in q for q in call.queries for mark in LIKE_WILDCARDS):
        call.variants.append({name: "like" for name in named})
    if any(q != q.strip() for q in call.queries):  # a server may not strip the query
        call.variants.append({name: "contains_unstripped" for name in named})
    if not all(q.isascii() for q in call.queries):
        call.variants.append({name: "contains_ascii_case" for name in named})


def _spaced_numbers(records: list[dict[str, Any]], name: str) -> bool:
    """Whether a field holds numbers written with spaces (``+351 913 671 955``), which
    some servers search with the spaces left out and others as written."""
    values = [r.get(name) for r in records if isinstance(r.get(name), str)]
    return any(" " in v and SPACED_NUMBER.fullmatch(v.strip()) for v in values)


DATED = re.compile(r"\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?")


def infer_order(tool: ToolSpec, records: list[dict[str, Any]]) -> tuple[str, bool] | str | None:
    """The order a list tool's description promises (``oldest first``, ``most recent
    first``): ``(field, newest first)`` by the records' one date field (or the one the
    description names), ``"?"`` when it promises an order simgym cannot place, None
    when it says nothing (the collection's own order, the server's when the state was
    read from it)."""
    text = " ".join(split_words(tool.description))
    newest = re.search(r"\b(newest|latest|most recent|recent)( ones?)? first\b", text)
    oldest = re.search(r"\b(oldest|earliest)( ones?)? first\b", text)
    if bool(newest) == bool(oldest):
        return None if not newest else "?"
    dated = [n for n in ordered_fields(records) if _dated(records, n)]
    words = set(split_words(tool.description))
    named = [n for n in dated if all(w in words for w in split_words(n))]
    pick = named if len(named) == 1 else dated
    return (pick[0], bool(newest)) if len(pick) == 1 else "?"


def _dated(records: list[dict[str, Any]], name: str) -> bool:
    values = [r.get(name) for r in records if r.get(name) is not None]
    return bool(values) and all(isinstance(v, str) and DATED.fullmatch(v) for v in values)


def _schema_defaults(
    call: Call, tool: ToolSpec, records: list[dict[str, Any]], args: dict[str, Any]
) -> None:
    """A create leaves out an argument whose schema has a default: the server stores
    that default in the record's field of the same name (``priority: normal``)."""
    props = tool.parameters.get("properties")
    fields = record_fields(records)
    if not isinstance(props, dict):
        return
    for name, schema in props.items():
        if name in args or not isinstance(schema, dict) or "default" not in schema:
            continue
        if name in fields and name not in call.values and schema["default"] is not None:
            call.values[name] = schema["default"]
            call.notes.append(f"{name} takes the schema's default {compact(schema['default'])}")


# -- what a tool declares: its answer's layout, its required arguments, its refusals -------

# A description that says an update is refused for a value another record holds, or for
# one that is not valid ("it must be valid and not used by another customer").
REFUSES_TAKEN = re.compile(
    r"\b(not|never) (be )?(already )?(used|taken|held|in use|owned) by (another|any other|"
    r"other|a different)\b|\bmust be unique\b|\bunique (across|among|per)\b|"
    r"\b(not|never) (be )?(already )?(taken|in use)\b"
)
REFUSES_MALFORMED = re.compile(r"\b(must|should|has to|needs to) be (a )?(syntactically )?valid\b")


def _declared(call: Call, tool: ToolSpec, records: list[dict[str, Any]]) -> None:
    """What the tool's declaration says of its answers and refusals: the layout of its
    result (its output schema, :mod:`.mcp_output`), the arguments it requires, its input
    defaults, and the refusals its description promises."""
    fields = record_fields(records)
    call.form = mcp_output.record_form(tool, fields, call.key)
    call.list_form = mcp_output.list_form(tool, fields, call.key)
    required = tool.parameters.get("required")
    call.required = frozenset(r for r in required or [] if isinstance(r, str))
    call.defaults = mcp_output.input_defaults(tool)
    call.description = tool.description
    text = " ".join(tool.description.lower().split())
    refuses = set()
    if REFUSES_TAKEN.search(text):
        refuses.add("taken")
    if REFUSES_MALFORMED.search(text):
        refuses.add("malformed")
    call.refuses = frozenset(refuses)


def _declared_layout(call: Call) -> None:
    """A list tool's answer layout from its output schema, where every property of its
    wrapper is one simgym can fill (the records, the count of matches, an argument)."""
    form = call.list_form
    if form is None or form.unknown:
        return
    call.layout = (form.shape, list(form.item.fields))
    call.schema_layout = True
    call.notes.append(
        f"({call.tool}'s output schema says its answer: "
        f"{compact(form.shape) if form.shape != mcp_output.ITEMS else 'a list'}, each item "
        f"showing {', '.join(form.item.fields)})"
    )


def _absent_parent(call: Call, state: dict[str, Any]) -> tuple[str, Any, str] | None:
    """``(noun, id, argument)`` when a required argument names a record of another
    collection that does not exist (``list_accounts(customer_id="C-0000")``): a tool
    whose every call is about one such record looks it up first, and refuses the call
    the way it refuses an unknown id (inferred from the schema: the argument is required
    and holds that collection's key)."""
    cols = collections(state)
    for name, value in call.values.items():
        if name not in call.required or not isinstance(value, str | int):
            continue
        owner = _id_owner(name)
        parents = [c for c in cols if owner and owner != call.noun and collection_noun(c) == owner]
        if len(parents) != 1 or sampled(state, parents[0]):
            continue
        records = cols[parents[0]]
        if find_record(records, key_field(records, owner), value) is None:
            return owner, value, name
    return None


def _parent_refusal(
    call: Call, absent: tuple[str, Any, str], state: dict[str, Any], fmt: str
) -> Grounding:
    """The refusal of a call about a record that does not exist (:func:`_absent_parent`)."""
    owner, value, name = absent
    message, learned = mcp_style.not_found(owner, value, state)
    text = mcp_style.error_text(message, call.tool, state, call.prefix)
    facts = [
        f"no {owner} with id {value} exists",
        f"{call.tool} requires {name}, the {owner} it is about, so the server refuses this "
        f"call as it refuses an unknown {owner} (inferred from its input schema); nothing "
        "changes",
    ]
    if not learned:
        facts.append(WORDING_GUESSED)
    return Grounding(
        facts=facts,
        effects=mcp_style.mark_missing(call.tool, owner, value),
        observation=exact_error(404, text, fmt, state),
    )


WORDING_GUESSED = (
    "(the wording of this error is simgym's default: no answer of the server has shown another)"
)


def _record_reshaper(
    call: Call, record: dict[str, Any], fmt: str, state: dict[str, Any], likely: dict[str, Any]
) -> Callable[[str], str | None] | None:
    """For a create whose answer the output schema lays out but whose record the server
    completes itself (a status, a time): the model's answer rewritten into that layout,
    every field simgym knows from the call taken from the ledger, the ones it can only
    call ``likely`` (:func:`_likely_fills`) filled so, the others as the model wrote
    them; None while no schema says the layout."""
    form = call.form
    if form is None or (fmt == "text" and not mcp_style.text_json(state)):
        return None
    layout = {mcp_style.STYLE: state.get(mcp_style.STYLE)}

    def reshape(observation: str) -> str | None:
        value = _answer_value(observation, fmt)
        given = value if isinstance(value, dict) else {}
        merged = {**given, **{k: v for k, v in form.defaults.items() if k not in given}}
        shown = form.show({**merged, **likely, **record})
        return None if shown is None else exact_result(shown, fmt, layout)

    return reshape


CREATION_WORDS = frozenset(
    {"created", "creation", "opened", "submitted", "added", "registered", "inserted", "filed",
     "logged", "reported", "placed", "timestamp"}
)  # fmt: skip
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|\+00:00)")
MAX_STATES = 8  # more distinct values than this are no set of states


def _likely_fills(
    call: Call, records: list[dict[str, Any]], tool_description: str, fields: list[str]
) -> tuple[dict[str, Any], list[str]]:
    """Values a create's server fills in that its records and description make likely,
    though not certain: a creation time (a field every record holds as a UTC date-time,
    named for creation: ``created``) is the time of the call, in the records' format; a
    state (a field with a few values, ``open``/``pending``/``closed``) is the one the
    tool's description names (``Open a new support ticket``). Returns the values and
    what was inferred, in words."""
    words = {w.lower() for w in split_words(tool_description)}
    likely: dict[str, Any] = {}
    notes = []
    for name in fields:
        values = [r.get(name) for r in records if name in r]
        if not values or not all(isinstance(v, str) for v in values):
            continue
        named = set(split_words(name)) & CREATION_WORDS
        if named and all(ISO_TIME.fullmatch(v) for v in values):
            last = values[-1]
            style = ("iso-us" if "." in last else "iso") + ("-z" if last.endswith("Z") else "")
            likely[name] = mcp_rules.stamp(style, call.clock)
            notes.append(f"{name} is likely the time of the call, {likely[name]}")
            continue
        states = set(values)
        hits = [v for v in sorted(states) if v.lower() in words]
        if len(states) <= MAX_STATES and len(hits) == 1:
            likely[name] = hits[0]
            notes.append(f"{name} is likely {hits[0]!r}, as {call.tool}'s description says")
    return likely, notes


# -- what each operation reads, changes and answers ---------------------------------------


def _get(call: Call, records: list[dict], state: dict[str, Any], fmt: str) -> Grounding:
    record = find_record(records, call.key, call.id_value)
    if record is None:
        return _missing(call, state, fmt)
    shown = _exact_record(call, record, record, state, fmt)
    return Grounding(
        facts=[f"{call.tool} reads {call.noun} {call.id_value}: {compact(record)}"],
        observation=shown,
        expect=_expect_values(record, call.key, fmt),
    )


def _update(call: Call, records: list[dict], state: dict[str, Any], fmt: str) -> Grounding:
    record = find_record(records, call.key, call.id_value)
    if record is None:
        return _missing(call, state, fmt)
    changes = {k: v for k, v in call.values.items() if k != call.key}
    changes, normal = normalized(changes, records, call)
    doubts = value_doubts(changes, record, records, call)
    if doubts:
        before = f"{call.noun} {call.id_value} before this call: {compact(record)}"
        refused = _refused_again(call, doubts, state, fmt)
        if refused is not None:
            refused.facts.insert(0, before)
            return refused
        # until the server shows the record again, these fields are not known
        reasons = _reasons(doubts)
        unsure = mcp_style.mark_partial(
            call.collection, call.id_value, sorted(changes), tool=call.tool, reasons=reasons
        )
        promised = _promised_refusal(call, doubts, state, fmt)
        if promised is not None:
            promised.facts[:0] = [before, *normal]
            promised.effects = unsure  # an answer that says otherwise is the server's word
            return promised
        return Grounding(facts=[before, *normal, *(d.fact for d in doubts)], effects=unsure)
    after = {**record, **changes}
    shown = _exact_record(call, record, after, state, fmt)
    changed = ", ".join(f"{k} to {compact(v)}" for k, v in changes.items())
    grounding = Grounding(
        facts=[
            f"{call.noun} {call.id_value} before this call: {compact(record)}",
            *normal,
            f"this call sets {changed}; afterwards {call.noun} {call.id_value} is: "
            f"{compact(after)}",
        ],
        observation=shown,
        expect=_unique([shown_value(v, fmt) for v in [call.id_value, *_scalars(changes)]]),
    )
    if after != record:
        grounding.effects = {
            call.collection: [after if r is record else r for r in records],
            **_undoable(call, record, records),
        }
    old = [v for k, v in record.items() if k in changes and changes[k] != v]
    grounding.forbid = _forbidden(old, fmt, [shown or "", *grounding.expect, compact(after)])
    return grounding


def _refused_again(
    call: Call, doubts: list[Doubt], state: dict[str, Any], fmt: str
) -> Grounding | None:
    """An update this server refused before for the same reason (a taken value, a
    malformed address: :func:`mcp_style.refusal`): refused again, with the wording it
    used then; None when the episode has not shown such a refusal."""
    message = mcp_style.refusal(call.tool, call.id_value, _reasons(doubts), state)
    if message is None:
        return None
    doubt = doubts[0]
    # a json error's code is only known when this server's errors carry none
    known = fmt != "json" or mcp_style.error_fields(state) == ["message"]
    answer = exact_error(409, message, fmt, state) if known else None
    facts = [
        f"this server refused a {doubt.kind} {doubt.field} earlier in this episode, "
        f"so it refuses this call too: {message}",
        f"{call.noun} {call.id_value} does not change",
    ]
    if doubt.kind in DEFAULT_REFUSALS and message == _default_refusal(call, doubt, state):
        facts.append(WORDING_GUESSED)  # what it learned was simgym's own default
    return Grounding(
        facts=facts,
        observation=answer,
        expect=[shown_value(doubt.value, fmt)] if answer is None else [],
    )


# simgym's wording of a refusal the description promises, until the server shows its own
DEFAULT_REFUSALS = {
    "taken": "{field} {value} is already used by another {noun}",
    "malformed": "invalid {field} {value!r}",
}


def _default_refusal(call: Call, doubt: Doubt, state: dict[str, Any]) -> str:
    """simgym's text of a refusal for ``doubt`` (the error prefix this server shows)."""
    message = DEFAULT_REFUSALS[doubt.kind].format(
        field=doubt.field, value=doubt.value, noun=call.noun
    )
    return mcp_style.error_text(message, call.tool, state, call.prefix)


def _promised_refusal(
    call: Call, doubts: list[Doubt], state: dict[str, Any], fmt: str
) -> Grounding | None:
    """An update the tool's description says is refused (``it must be valid and not used
    by another customer``) for a value that is taken or malformed: refused, in simgym's
    default wording (the server's own, once it showed it, comes from
    :func:`_refused_again`); None when the description promises no refusal for these."""
    certain = [d for d in doubts if d.kind in call.refuses]
    if not certain:
        return None
    doubt = certain[0]
    text = _default_refusal(call, doubt, state)
    return Grounding(
        facts=[
            *(d.fact for d in doubts),
            f"{call.tool}'s description says it refuses a {doubt.kind} {doubt.field}, so the "
            f"server refuses this call; {call.noun} {call.id_value} does not change",
            WORDING_GUESSED,
        ],
        observation=exact_error(409, text, fmt, state),
    )


def _undoable(call: Call, record: dict[str, Any], records: list[dict]) -> dict[str, Any]:
    """The note that takes back this call's change to ``record`` should the server
    answer it with an error (a rule simgym cannot see refused it)."""
    at = next(i for i, r in enumerate(records) if r is record)
    return mcp_style.mark_undo(call.tool, call.collection, call.key, call.id_value, record, at)


def _reasons(doubts: list[Doubt]) -> list[mcp_style.Reason]:
    return [(d.field, d.kind, d.value, d.holder) for d in doubts]


def _exact_record(
    call: Call, record: dict[str, Any], shown: dict[str, Any], state: dict[str, Any], fmt: str
) -> str | None:
    """The exact answer showing ``shown`` (``record`` as the call leaves it), in the
    server's layout; None while the server holds fields of the record the ledger lacks."""
    if mcp_style.partial(state, call.collection, record.get(call.key)):
        return None
    if call.form is not None:  # the output schema: the fields it shows, in its order
        declared = call.form.show(shown)
        return None if declared is None else exact_result(declared, fmt, state)
    return exact_result(mcp_style.arrange(shown, call.collection, state), fmt, state)


def _create(call: Call, records: list[dict], state: dict[str, Any], fmt: str) -> Grounding:
    new_id = call.values.get(call.key, call.id_value)
    if new_id is not None and find_record(records, call.key, new_id) is not None:
        message = f"{call.noun} {new_id} already exists"
        return Grounding(
            facts=[f"a {call.noun} with {call.key} {new_id} already exists; nothing is created"],
            observation=exact_error(
                409, mcp_style.error_text(message, call.tool, state, call.prefix), fmt, state
            ),
            expect=[shown_value(new_id, fmt)],
        )
    parent = _absent_parent(call, state)
    if parent is not None:
        return _parent_refusal(call, parent, state, fmt)
    absent = missing_parents(call, state)
    if absent:
        return Grounding(facts=[*absent, f"so this call creates no {call.noun}"])
    if new_id is None:
        gone = _tombstones(state, call.collection).values()
        taken = [r.get(call.key) for r in [*records, *gone] if isinstance(r, dict)]
        new_id = next_id([i for i in taken if i is not None])
    if new_id is None:
        return Grounding(
            facts=[f"this call creates a {call.noun}; its {call.key} is not known in advance"]
        )
    values, normal = normalized(
        {k: v for k, v in call.values.items() if k != call.key}, records, call
    )
    record = _in_record_order({call.key: new_id, **values}, records)
    facts = [*normal, *call.notes, f"this call creates {call.noun} {new_id}: {compact(record)}"]
    missing = sorted(record_fields(records) - set(record))
    if missing:
        facts.append(f"the server fills in {', '.join(missing)} of the new {call.noun} itself")
    effects: dict[str, Any] = {call.collection: [*records, record]}
    if missing:
        effects.update(mcp_style.mark_partial(call.collection, new_id, missing))
    # a server may refuse a create for rules no schema states (a subject too short)
    effects.update(mcp_style.mark_undo(call.tool, call.collection, call.key, new_id, None, None))
    # the output schema lays out the answer: exact when simgym knows every field it shows
    shown = None
    likely: dict[str, Any] = {}
    if call.form is not None:
        # a field the call does not give is the server's to fill (its model's default
        # is only what the tool did not set)
        unknown = [f for f in call.form.fields if f not in record]
        if unknown:
            facts.append(
                f"{call.tool} answers with the new {call.noun}'s "
                f"{', '.join(call.form.fields)} (its output schema); the server decides "
                f"{', '.join(unknown)}"
            )
            likely, guessed = _likely_fills(call, records, call.description, unknown)
            if guessed:
                facts.append(f"(not certain: {'; '.join(guessed)})")
        else:
            shown = call.form.show(record)
    return Grounding(
        facts=facts,
        effects=effects,
        observation=exact_result(shown, fmt, state) if shown is not None else None,
        expect=[]
        if shown is not None
        else _unique([shown_value(new_id, fmt)] + _expect_values(record, call.key, fmt)),
        reshape=_record_reshaper(call, record, fmt, state, likely) if shown is None else None,
    )


def _in_record_order(record: dict[str, Any], records: list[dict]) -> dict[str, Any]:
    """A new record with its fields in the order the collection's records have them
    (the server's own order when the state was read from it), new fields last."""
    order = [k for k in ordered_fields(records) if k in record]
    return {**{k: record[k] for k in order}, **record}


def _delete(call: Call, records: list[dict], state: dict[str, Any], fmt: str) -> Grounding:
    record = find_record(records, call.key, call.id_value)
    if record is None:
        return _missing(call, state, fmt)
    return Grounding(
        facts=[
            f"this call deletes {call.noun} {call.id_value}: {compact(record)}",
            f"afterwards no {call.noun} with {call.key} {call.id_value} exists",
        ],
        effects={
            call.collection: [r for r in records if r is not record],
            TOMBSTONES: {call.collection: {str(call.id_value): record}},
            **_undoable(call, record, records),
        },
        expect=[shown_value(call.id_value, fmt)],
    )


def _list(call: Call, records: list[dict], state: dict[str, Any], fmt: str) -> Grounding:
    found = [r for r in records if matches(r, call)]
    parent = _absent_parent(call, state) if not found else None
    if parent is not None:
        return _parent_refusal(call, parent, state, fmt)
    # an inferred search the server may compare otherwise: decided where every way agrees
    sure, maybe = _search_variants(call, records, found)
    found = sure
    order_known = True
    if isinstance(call.order, tuple):
        name, newest = call.order
        if all(isinstance(r.get(name), str) for r in found):
            found = sorted(found, key=lambda r: r[name], reverse=newest)
        else:
            order_known = len(found) <= 1
    elif call.order == "?":
        order_known = len(found) <= 1
    what = describe_filter(call)
    cut = call.limit is not None and len(found) > call.limit
    surely = " for certain" if maybe else ""
    if not found:
        facts = [f"no {call.collection} match {what}{surely}", *missing_parents(call, state)]
    else:
        many = (
            f"{len(found)} {call.collection} match" if len(found) > 1 else f"1 {call.noun} matches"
        )
        facts = [f"{many} {what}{surely}:"]
        facts += _record_facts(call, found)
    facts += _list_notes(call, maybe, order_known)
    shown = found if call.limit is None else found[: call.limit]
    # free-text search is matched the server's own way (spaces, accents, words): a
    # record without the text may still match (a phone number found without its spaces),
    # unless the scenario declared how it matches or the tool's description names the
    # fields it searches (then only text filters of a search verb, compared as
    # substrings, are left to the server)
    loose = call.fuzzy and any(isinstance(v, str) for v in call.values.values())
    plain = not loose if call.search is not None else not call.queries and not call.fuzzy
    # which records a limit leaves in is the server's order; a declared or inferred
    # search lists them in the collection's order (the order the scenario's records are
    # in), or the one the tool's description promises
    decided = not cut or (plain and call.search is not None and order_known)
    if decided and found and cut:
        facts.append(f"the answer lists the first {call.limit} of them, in this order")
    expect = []
    if decided:
        expect = [shown_value(r[call.key], fmt) for r in shown[:MAX_FACT_RECORDS] if call.key in r]
    listed = {id(r) for r in [*found, *maybe]}
    others = [r.get(call.key) for r in records if id(r) not in listed] if plain else []
    gone = [r.get(call.key) for r in _tombstones(state, call.collection).values()]
    context = [compact(r) for r in shown] + [shown_value(compact(r), fmt) for r in shown]
    # a record the server completed itself may match or show fields the ledger lacks
    known = not any(_may_list(call, r, state) for r in records)
    # with an id that names nothing the server may answer an error, or list nothing
    refused = not found and bool(missing_parents(call, state))
    if refused:
        facts.append(f"(the server may refuse this call, or list no {call.collection})")
    partial = sampled(state, call.collection)
    if partial:
        facts.append(f"(the twin holds a sample of the server's {call.collection}; more may exist)")
    complete = known and plain and decided and order_known and not maybe and not refused
    complete = complete and not partial
    form = call.list_form if call.schema_layout else None
    if form is not None and cut and form.ambiguous_count:
        complete = False  # a count of the items shown, or of every match: not known
    items = shown
    if form is not None:  # each record as the output schema shows it (defaults filled)
        declared = [form.item.show(r) for r in shown]
        complete = complete and all(d is not None for d in declared)
        items = [{**form.item.defaults, **r} for r in shown]
    answer = None
    if complete:
        echoed = {**call.defaults, **call.arguments}
        answer = mcp_style.list_answer(
            call.tool, items, echoed, state, call.layout, len(found), authoritative=form is not None
        )
    reshape = None
    if answer is None and not refused:
        reshape = _list_reshaper(call, records, state, fmt, len(found))
    # the server's answer teaches its layout only where simgym knows what it lists
    pending = mcp_style.pending(call.tool, call.arguments, shown, call.key, len(found))
    if maybe:
        pending = {mcp_style.STYLE: {"pending": None}}
    observation = None
    if answer is not None:
        parts = form is not None and form.wrapped and isinstance(answer, list)
        observation = exact_parts(answer, fmt, state) if parts else exact_result(answer, fmt, state)
    return Grounding(
        facts=facts + call.notes,
        effects=pending,
        observation=observation,
        expect=expect if observation is None else [],
        forbid=_forbidden([i for i in others + gone if i is not None], fmt, context),
        reshape=reshape,
    )


def _may_list(call: Call, record: dict[str, Any], state: dict[str, Any]) -> bool:
    """Whether a record with fields only the server knows may be in this list: it
    matches the call on the fields the ledger knows (a filter or a search on a field it
    lacks may match too). A record that certainly is not listed leaves the answer known."""
    unknown = mcp_style.partial_fields(state, call.collection, record.get(call.key))
    if unknown is None:
        return False
    if call.op != "list" or (call.queries and call.search is None):
        return True
    searched_unknown = call.search is not None and bool(set(call.search) & set(unknown))
    probe = replace(
        call,
        values={k: v for k, v in call.values.items() if k not in unknown},
        queries=[] if searched_unknown else call.queries,
    )
    return matches(record, probe)


def _search_variants(
    call: Call, records: list[dict], found: list[dict]
) -> tuple[list[dict], list[dict]]:
    """The records an inferred search finds whichever way the server compares (see
    :func:`infer_search`), and those only some ways find."""
    if not call.variants:
        return found, []
    ways = [{id(r) for r in records if matches(r, call, v)} for v in call.variants]
    ways.append({id(r) for r in found})
    sure = [r for r in records if all(id(r) in w for w in ways)]
    maybe = [
        r for r in records if id(r) not in {id(s) for s in sure} and any(id(r) in w for w in ways)
    ]
    return sure, maybe


def _list_notes(call: Call, maybe: list[dict], order_known: bool) -> list[str]:
    """What the facts of a list must say of its inferences and of what stays unknown."""
    notes = []
    if call.inferred is not None and call.search is not None:
        fields = ", ".join(call.search)
        notes.append(f"({call.tool} searches {fields}, {call.inferred}, ignoring case)")
    elif call.queries and call.search is None:
        notes.append(f"(which fields {call.tool} searches is not known: the server may list fewer)")
    if maybe:
        notes.append(
            "whether these match too depends on how the server compares the query "
            "(spaces, wildcards, case): not known"
        )
        notes += _record_facts(call, maybe, more=False)
    if isinstance(call.order, tuple):
        name, newest = call.order
        first = "newest" if newest else "oldest"
        notes.append(f"({call.tool} lists them by {name}, {first} first, as its description says)")
    if not order_known:
        notes.append(f"(the order {call.tool} lists them in is not known)")
    return notes


def _list_reshaper(
    call: Call, records: list[dict], state: dict[str, Any], fmt: str, matched: int
) -> Callable[[str], str | None] | None:
    """For a list answer the state does not decide whole (a free-text search, records
    the server completed): the model's answer rewritten into this tool's learned (else
    declared) shape
    (its wrapper, the count, the arguments it echoes) in the server's layout, each item
    that names a record the ledger knows whole showing that record's learned fields, and
    none that names a record that does not exist (the ledger holds the server's records,
    as a not-found answer already assumes). Which of the records that exist are listed
    stays the model's say. None until the shape was learned or declared."""
    learned = mcp_style.learned_list(
        call.tool, state, call.layout, authoritative=call.schema_layout
    )
    if learned is None or fmt == "text":
        return None
    if call.schema_layout and call.list_form is not None and call.list_form.wrapped:
        return None  # one text item per element: not a layout the model writes
    shape, fields = learned
    layout = {mcp_style.STYLE: state.get(mcp_style.STYLE)}  # the layout as of this call
    existing = {str(r[call.key]): r for r in records if call.key in r}
    whole = {k: r for k, r in existing.items() if not mcp_style.partial(state, call.collection, k)}

    declared = call.list_form.item if call.schema_layout and call.list_form else None

    def item(shown: dict[str, Any]) -> dict[str, Any]:
        record = whole.get(str(shown.get(call.key)))
        if record is not None and declared is not None and fields == declared.fields:
            return declared.show(record) or shown
        if record is None or fields is None or any(f not in record for f in fields):
            return shown  # a record the ledger does not know whole: as the model wrote it
        return {f: record[f] for f in fields}

    def exists(shown: dict[str, Any]) -> bool:
        return call.key not in shown or str(shown[call.key]) in existing

    def count(value: Any, shown: list[dict], dropped: bool) -> int:
        """The count of matches: the model's, where it gave one and listed no record that
        does not exist (the items may be cut at a limit), else the items', else, with the
        items at the limit, simgym's own."""
        keys = (
            [k for k, v in shape.items() if v == mcp_style.COUNT] if isinstance(shape, dict) else []
        )
        given = value.get(keys[0]) if keys and isinstance(value, dict) else None
        if _is_int(given) and not dropped:
            return given
        cut = call.limit is not None and len(shown) >= call.limit
        return max(matched, len(shown)) if cut else len(shown)

    def reshape(observation: str) -> str | None:
        value = _answer_value(observation, fmt)
        items = _listed(value)
        if items is None:
            return None
        listed = [i for i in items if isinstance(i, dict)]
        shown = [item(i) for i in listed if exists(i)]
        echoed = {**call.defaults, **call.arguments}
        answer = mcp_style.fill(shape, shown, echoed, count(value, shown, len(shown) < len(listed)))
        return exact_result(answer, fmt, layout)

    return reshape


def _answer_value(observation: str, fmt: str) -> Any:
    """The JSON value of a successful answer (the envelope's text, for the mcp format);
    None for an error answer or one that is not JSON."""
    try:
        value = json.loads(observation)
        if fmt == "mcp":
            if not isinstance(value, dict) or value.get("isError") is True:
                return None
            texts = [c.get("text") for c in value.get("content") or [] if isinstance(c, dict)]
            value = json.loads(texts[0]) if len(texts) == 1 and isinstance(texts[0], str) else None
    except ValueError:
        return None
    if isinstance(value, dict) and set(value) == {"error"}:
        return None
    return value


def _listed(value: Any) -> list[Any] | None:
    """The items of a list answer: the list itself, or an object's one list."""
    if isinstance(value, list):
        return value
    lists = [v for v in value.values() if isinstance(v, list)] if isinstance(value, dict) else []
    return lists[0] if len(lists) == 1 else None


def sampled(state: dict[str, Any], collection: str) -> bool:
    """Whether the state holds only a sample of ``collection`` (``_sampled``): then an id
    it lacks may exist on the server, and a list of it may have more items."""
    names = state.get(mcp_style.SAMPLED)
    return isinstance(names, list) and collection in names


def _unsampled(call: Call) -> Grounding:
    """A call on an id outside a sampled collection: whether it exists is not known."""
    return Grounding(
        facts=[
            f"{call.noun} {call.id_value} is not among the {call.collection} this twin "
            "sampled from the server; the server may hold it or not"
        ]
    )


def _missing(call: Call, state: dict[str, Any], fmt: str) -> Grounding:
    """A call on an id that does not exist: the server's not-found error."""
    deleted = str(call.id_value) in _tombstones(state, call.collection)
    if sampled(state, call.collection) and not deleted:
        return _unsampled(call)
    message, learned = mcp_style.not_found(call.noun, call.id_value, state)
    facts = [f"no {call.noun} with {call.key} {call.id_value} exists"]
    if not learned:
        facts.append(WORDING_GUESSED)
    text = mcp_style.error_text(message, call.tool, state, call.prefix)
    shown = exact_error(404, text, fmt, state)
    old = _tombstones(state, call.collection).get(str(call.id_value))
    forbid: list[str] = []
    if old is not None:
        facts.append(f"({call.noun} {call.id_value} was deleted earlier in this episode)")
        values = [v for k, v in old.items() if k != call.key]
        forbid = _forbidden(values, fmt, [shown or "", message])
    return Grounding(
        facts=facts,
        effects=mcp_style.mark_missing(call.tool, call.noun, call.id_value),
        observation=shown,
        expect=[shown_value(call.id_value, fmt)] if shown is None else [],
        forbid=forbid,
    )


_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s.]+")
MIN_UNIQUE = 3  # fewer records prove nothing about a field being unique
# fewer stored addresses all in lower case prove nothing about the server lower-casing
MIN_NORMALIZED = 5


@dataclass(frozen=True)
class Doubt:
    """Why a server might refuse or rewrite one new value: ``kind`` is ``taken`` (another
    record, ``holder``, holds it in a field no two records share), ``malformed`` (not an
    email address) or ``case`` (an email address not in lower case)."""

    field: str
    kind: Literal["taken", "malformed", "case"]
    value: str
    fact: str  # the doubt in words, for the facts block
    holder: str | None = None  # the key of the record that holds a taken value


def normalized(
    changes: dict[str, Any], records: list[dict], call: Call
) -> tuple[dict[str, Any], list[str]]:
    """New email addresses as the server stores them, where the records show how: when
    every stored address of the field (at least ``MIN_NORMALIZED``) is in lower case
    with no space around it, the server normalizes what it is given (``Ana@X.org `` is
    stored ``ana@x.org``); with fewer records, or one stored otherwise, the value stays as
    typed (and :func:`value_doubts` says the server may rewrite it). Returns the changes
    and the inferences in words, for the facts."""
    out, notes = dict(changes), []
    for name, value in changes.items():
        if not isinstance(value, str) or "email" not in name.lower():
            continue
        stored = [r[name] for r in records if isinstance(r.get(name), str)]
        if len(stored) < MIN_NORMALIZED or any(v != v.strip().lower() for v in stored):
            continue
        clean = value.strip().lower()
        if clean != value:
            out[name] = clean
            notes.append(
                f"every stored {name} of the {call.collection} is in lower case with no "
                f"space around it, so the server stores {value!r} as {clean!r}"
            )
    return out, notes


def value_doubts(
    changes: dict[str, Any], record: dict[str, Any] | None, records: list[dict], call: Call
) -> list[Doubt]:
    """Why a server might refuse or rewrite these new values, which makes their effect
    uncertain: a value another record holds in a field where every record's value is
    distinct (an email, a username), or an email address that is malformed or not in
    lower case (servers commonly reject the one and normalize the other)."""
    doubts = []
    for name, value in changes.items():
        if not isinstance(value, str):
            continue
        values = [r.get(name) for r in records if r is not record and name in r]
        distinct = len(values) >= MIN_UNIQUE and len(set(map(str, values))) == len(values)
        holder = next((r for r in records if r is not record and r.get(name) == value), None)
        if distinct and holder is not None:
            held = str(holder.get(call.key))
            fact = (
                f"{call.noun} {held} already has {name} {value!r}, and no two "
                f"{call.collection} share a {name}: the server may refuse this call"
            )
            doubts.append(Doubt(name, "taken", value, fact, held))
        if "email" in name.lower() and not _EMAIL.fullmatch(value):
            fact = f"{value!r} is not a well-formed email address: the server may refuse it"
            doubts.append(Doubt(name, "malformed", value, fact))
        elif "email" in name.lower() and value != value.lower():
            fact = f"the server may store the email address {value!r} in lower case"
            doubts.append(Doubt(name, "case", value, fact))
    return doubts


def _unsure(call: Call, records: list[dict]) -> Grounding | None:
    """A call not fully understood: the records it touches, as facts only."""
    note = f"({call.tool} was not fully understood: {'; '.join(call.unknown)})"
    if call.id_value is not None:
        record = find_record(records, call.key, call.id_value)
        if record is None:
            return Grounding(facts=[f"no {call.noun} with {call.key} {call.id_value} exists"])
        return Grounding(facts=[f"{call.noun} {call.id_value} now: {compact(record)}"])
    if call.op != "list":
        return None
    found = [r for r in records if matches(r, call)][:MAX_FACT_RECORDS]
    if not found:
        return None
    head = f"{call.collection} matching {describe_filter(call)} {note}:"
    return Grounding(facts=[head] + [_record_fact(call, r) for r in found])


def missing_parents(call: Call, state: dict[str, Any]) -> list[str]:
    """Facts about ids the call refers to in other collections that do not exist
    (``create_ticket(customer_id="C-9")`` when there is no customer C-9)."""
    cols = collections(state)
    facts = []
    for name, value in call.values.items():
        owner = _id_owner(name)
        parents = [c for c in cols if owner and owner != call.noun and collection_noun(c) == owner]
        if len(parents) != 1 or not isinstance(value, str | int):
            continue
        records = cols[parents[0]]
        if find_record(records, key_field(records, owner), value) is None:
            facts.append(f"no {owner} with id {value} exists")
    return facts


def related_facts(args: dict[str, Any], state: dict[str, Any]) -> Grounding | None:
    """For a tool simgym does not understand: the records whose key an argument names."""
    wanted = {str(v) for v in args.values() if isinstance(v, str | int) and not isinstance(v, bool)}
    facts = []
    for name, records in collections(state).items():
        noun = collection_noun(name)
        key = key_field(records, noun)
        facts += [f"{noun} {r[key]}: {compact(r)}" for r in records if str(r.get(key)) in wanted]
    return Grounding(facts=facts[:MAX_FACT_RECORDS]) if facts else None


OPS: dict[str, Callable[[Call, list[dict], dict[str, Any], str], Grounding]] = {
    "get": _get,
    "list": _list,
    "create": _create,
    "update": _update,
    "delete": _delete,
}


# -- records --------------------------------------------------------------------------------


def find_record(records: list[dict[str, Any]], key: str, value: Any) -> dict[str, Any] | None:
    """The record whose key is ``value`` (compared as text: ``7`` finds id ``"7"``)."""
    return next((r for r in records if key in r and str(r[key]) == str(value)), None)


def matches(record: dict[str, Any], call: Call, search: dict[str, str] | None = None) -> bool:
    """Whether a record passes a list call's filters: fields equal, queries contained
    (``search``: compared this way instead of the call's own)."""
    for name, wanted in call.values.items():
        have = record.get(name)
        if call.fuzzy and isinstance(wanted, str) and isinstance(have, str):
            if wanted.strip().lower() not in have.lower():
                return False
        elif isinstance(wanted, list) and not isinstance(have, list):
            if have not in wanted and str(have) not in map(str, wanted):
                return False
        elif have != wanted and str(have) != str(wanted):
            return False
    if call.id_value is not None and str(record.get(call.key)) != str(call.id_value):
        return False
    search = search if search is not None else call.search
    if search is not None:
        return all(searched(record, q, search) for q in call.queries)
    texts = [str(v).lower() for v in record.values() if isinstance(v, str | int | float)]
    return all(any(q.strip().lower() in t for t in texts) for q in call.queries)


def searched(record: dict[str, Any], query: str, search: dict[str, str]) -> bool:
    """Whether a declared search (``ToolBinding.search``) finds the record: the query,
    stripped, in any listed field's text, ignoring case (and, for the
    ``contains_ignoring_spaces`` fields, every space on both sides)."""
    needle = query.strip().lower()
    for name, mode in search.items():
        value = record.get(name)
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            continue  # an absent or empty (null) field matches nothing, as in SQL
        text = str(value).lower()
        if mode == "like":  # SQL: '%' + query + '%', its own % and _ wildcards too
            if _like(query.strip(), str(value)):
                return True
            continue
        if mode == "contains_ascii_case":  # case folded in ASCII only (SQLite's lower)
            text, wanted = _ascii_lower(str(value)), _ascii_lower(query.strip())
        elif mode == "contains_unstripped":
            wanted = query.lower()
        elif mode == "contains_ignoring_spaces":
            text, wanted = text.replace(" ", ""), needle.replace(" ", "")
        else:
            wanted = needle
        if wanted in text:
            return True
    return False


def _ascii_lower(text: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in text)


def _like(query: str, text: str) -> bool:
    """SQL ``text LIKE '%query%'`` (ASCII case ignored)."""
    pattern = "".join(
        ".*" if c == "%" else "." if c == "_" else re.escape(c) for c in _ascii_lower(query)
    )
    # the agent writes the query: a linear-time engine, whatever its % and _ (core.patterns)
    return compile_pattern(pattern, dotall=True).search(_ascii_lower(text)) is not None


def describe_filter(call: Call) -> str:
    """The filters of a list call in words, for its facts."""
    parts = [
        f"{k} contains {compact(v)} (ignoring case)"
        if call.fuzzy and isinstance(v, str)
        else f"{k}={compact(v)}"
        for k, v in call.values.items()
    ]
    if call.id_value is not None:
        parts.insert(0, f"{call.key}={compact(call.id_value)}")
    search = call.search
    if search is None:
        parts += [f"{compact(q)} (any field, ignoring case)" for q in call.queries]
    else:  # the declared way: any listed field matches
        for query in call.queries:
            fields = [
                f"{name} contains {compact(query.strip())} ({SEARCH_MODES[mode]})"
                for name, mode in search.items()
            ]
            parts.append(fields[0] if len(fields) == 1 else f"({' or '.join(fields)})")
    return " and ".join(parts) if parts else "(no filter)"


def next_id(taken: list[Any]) -> Any:
    """The id after the highest one, in the same pattern (``C-1002`` -> ``C-1003``,
    ``7`` -> ``8``); None when the ids follow no single pattern."""
    if not taken:
        return None
    if all(_is_int(i) for i in taken):
        return max(taken) + 1
    parts = [re.fullmatch(r"(.*?)(\d+)", i) if isinstance(i, str) else None for i in taken]
    if any(p is None for p in parts) or len({p.group(1) for p in parts if p}) != 1:
        return None
    prefix = parts[0].group(1) if parts[0] else ""
    digits = [p.group(2) for p in parts if p]
    padded = len({len(d) for d in digits}) == 1 and any(d.startswith("0") for d in digits)
    number = max(int(d) for d in digits) + 1
    return f"{prefix}{number:0{len(digits[0])}d}" if padded else f"{prefix}{number}"


def _tombstones(state: dict[str, Any], collection: str) -> dict[str, Any]:
    gone = state.get(TOMBSTONES)
    found = gone.get(collection) if isinstance(gone, dict) else None
    return found if isinstance(found, dict) else {}


def _record_fact(call: Call, record: dict[str, Any]) -> str:
    return f"{call.noun} {record.get(call.key)}: {compact(record)}"


def _record_facts(call: Call, records: list[dict[str, Any]], *, more: bool = True) -> list[str]:
    """The facts of the records a list shows: the first ones, as many as fit
    ``MAX_FACT_RECORDS`` and ``MAX_FACT_CHARS`` (at least one), then how many more."""
    facts: list[str] = []
    used = 0
    for record in records[:MAX_FACT_RECORDS]:
        fact = _record_fact(call, record)
        if facts and used + len(fact) > MAX_FACT_CHARS:
            break
        facts.append(fact)
        used += len(fact)
    if more and len(records) > len(facts):
        facts.append(f"... and {len(records) - len(facts)} more")
    return facts


# -- how results look -----------------------------------------------------------------------


def compact(value: Any) -> str:
    """JSON as a tool server writes it (``json.dumps`` defaults, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False)


def exact_result(value: Any, fmt: str, state: dict[str, Any] | None = None) -> str | None:
    """A successful call's exact observation in the scenario's format (None for text),
    written the way the server has written its answers so far (:mod:`.mcp_style`)."""
    if fmt == "json":
        return mcp_style.dumps(value, state)
    if fmt == "mcp":
        text = mcp_style.dumps(value, state)
        return compact({"content": [{"type": "text", "text": text}], "isError": False})
    if mcp_style.text_json(state):  # a text answer that is the result's JSON text
        return mcp_style.dumps(value, state)
    return None


def exact_parts(items: list[Any], fmt: str, state: dict[str, Any] | None = None) -> str | None:
    """A wrapped list's exact answer (an SDK tool that returns a list: its structured
    result is ``{"result": [...]}``, its text one item per element)."""
    if fmt == "json":
        return compact({"result": items})
    if fmt == "mcp":
        return compact({"content": mcp_output.wrapped_parts(items), "isError": False})
    if mcp_style.text_json(state):
        return "\n".join(part["text"] for part in mcp_output.wrapped_parts(items))
    return None


def exact_error(
    code: int, message: str, fmt: str, state: dict[str, Any] | None = None
) -> str | None:
    """A failed call's exact observation in the scenario's format (None for text). A
    json error carries the fields this server's errors showed (``message`` alone, for
    one that gives no code), else a code and the message."""
    if fmt == "json":
        if mcp_style.error_fields(state) == ["message"]:
            return compact({"error": {"message": message}})
        return compact({"error": {"code": code, "message": message}})
    if fmt == "mcp":
        return compact({"content": [{"type": "text", "text": message}], "isError": True})
    if mcp_style.text_json(state):  # the text format: the message, said to be an error
        return message if message.startswith("Error") else f"Error: {message}"
    return None


def shown_value(value: Any, fmt: str) -> str:
    """How a value's text appears inside a result: JSON escapes it once, the mcp envelope
    twice (its text is a JSON document inside a JSON string)."""
    text = value if isinstance(value, str) else compact(value)
    if fmt == "text":
        return text
    once = compact(text)[1:-1] if isinstance(value, str) else text
    return compact(once)[1:-1] if fmt == "mcp" else once


def _expect_values(record: dict[str, Any], key: str | None, fmt: str) -> list[str]:
    """The id and the short text values of a record, as they must appear."""
    values = [record[key]] if key is not None and key in record else []
    values += [v for k, v in record.items() if k != key and isinstance(v, str) and v.strip()]
    return _unique([shown_value(v, fmt) for v in values if len(str(v)) <= MAX_EXPECT])


def _scalars(values: dict[str, Any]) -> list[Any]:
    """The text and number values of a record or of changes (short enough to check)."""
    out = [v for v in values.values() if isinstance(v, str | int | float)]
    return [
        v for v in out if not isinstance(v, bool) and str(v).strip() and len(str(v)) <= MAX_EXPECT
    ]


def _forbidden(values: list[Any], fmt: str, allowed: list[str]) -> list[str]:
    """Values that must not appear, leaving out any short enough to appear by chance or
    contained in what must appear."""
    out = []
    for value in values:
        if isinstance(value, dict | list | bool) or value is None:
            continue
        text = shown_value(value, fmt)
        if len(text) >= MIN_FORBID and not any(text in a for a in allowed):
            out.append(text)
    return _unique(out)


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


# -- explicit bindings ----------------------------------------------------------------------


def check_tool_map(tools: list[ToolSpec], state: dict[str, Any], tool_map: dict) -> None:
    """Raise ValueError for a binding of an undeclared tool or to a collection the state
    does not hold (scenario validation calls this)."""
    declared = {t.name: t for t in tools}
    cols = collections(state)
    for name, binding in tool_map.items():
        if name not in declared:
            raise ValueError(f"tool_map binds {name!r}, which is not a declared tool")
        if binding.collection is not None and binding.collection not in cols:
            raise ValueError(
                f"tool_map binds {name!r} to {binding.collection!r}, which is not a list of "
                f"records in state (collections: {', '.join(cols) or 'none'})"
            )
        _check_list_binding(declared[name], binding, cols)


def _check_list_binding(
    tool: ToolSpec, binding: ToolBinding, cols: dict[str, list[dict[str, Any]]]
) -> None:
    """Raise ValueError for a declared search or answer that names a field the records
    lack or an argument the tool does not take (a typo would silently match nothing)."""
    props = tool.parameters.get("properties")
    params = set(props) if isinstance(props, dict) else set()
    if binding.search is not None and not params & QUERY_ARGS:
        raise ValueError(
            f"tool_map declares a search for {tool.name!r}, which takes no query argument "
            f"(one of {', '.join(sorted(QUERY_ARGS))})"
        )
    echoed = mcp_style.shape_arguments(binding.answer.shape) if binding.answer else []
    strange = [a for a in echoed if a not in params]
    if strange:
        raise ValueError(f"tool_map's answer for {tool.name!r} echoes unknown arguments {strange}")
    name = binding.collection or find_collection(split_words(tool.name), {}, cols)
    fields = record_fields(cols.get(name or "", []))
    if not fields:
        return  # no records to compare with: any field may be the server's
    wanted = [*(binding.search or {}), *(binding.answer.fields if binding.answer else [])]
    unknown = sorted({f for f in wanted if f not in fields and f != mcp_style.WHOLE_RECORD})
    if unknown:
        raise ValueError(
            f"tool_map's search or answer for {tool.name!r} names field(s) {unknown} that "
            f"no record of {name!r} has (fields: {', '.join(sorted(fields))})"
        )
