"""Business rules of a tool, enforced from the hidden state: who may call it, from which
status, what it refuses and with which answer, what it sets.

A tool's :class:`ToolRules` (``tool_map[tool]["rules"]``, mined from a company's logs by
:mod:`simgym.logs.behaviour`) is data, so a person can read and edit it:

``guards``   refusals in the order the system checks them: when every condition of a
             guard holds, the call is refused with ``status`` and ``answer`` (the body the
             real system gave, with ``{{feature}}`` placeholders for the call's values);
``missing``  the answer to a call on a record that does not exist;
``sets``     fields every successful call sets to one value (``{"status": "approved"}``);
``defaults`` values of fields a call may give, when it does not (``account_id``: null);
``copies``   fields taken from an argument (``{"decision_reason": "reason"}``) or from a
             record the call points to (``{"approved_amount": "assessments.amount"}``);
``values``   fields the system decides from the state: a default and a decision list;
``stamps``   fields that hold the time of the call (``{"updated_at": "iso-us-z"}``);
``parents``  changes to a related record (the customer's ``kyc_status`` takes the new
             check's ``result``);
``shape``    the answer's fields in the order the system writes them.

A condition reads one *feature* of the call (:func:`features`): ``arg.<name>`` an
argument's value, ``rec.exists`` / ``rec.<field>`` the record the call names,
``<collection>.exists`` / ``<collection>.<field>`` a record an ``..._id`` argument or field
points to, ``<feature>~<item>`` whether a list holds an item, ``has.<name>`` /
``type.<name>`` / ``fmt.<name>`` whether an argument was given, its JSON type and its
shape (``"31/02/1990"`` -> ``"99/99/9999"``), and ``args.size`` the length of the
arguments as JSON (a body too large). A feature the call does
not have reads as None.

Relations, so a rule names no person: ``hist.<tool>`` the actor of the last successful
call of ``<tool>`` on the record the call names (kept in the state's ``_history``;
``hist.<collection>.<tool>`` the same for a record it points to), and
``match.<collection>`` the sets of argument fields on which a record of the collection
agrees with a call that names no record (a duplicate). A condition relates two features
with ``equals`` / ``differs`` (``arg.actor`` equals ``rec.created_by``: self-approval;
``arg.actor`` equals ``hist.approve_loan``: segregation of duties; ``rec.customer_id``
differs from ``accounts.customer_id``: linked records that do not match), bounds a number
per group with ``limits`` and ``limit_by`` (``rec.amount`` above ``{"reviewer": 50000}``
by ``arg.role``), or asks for a record agreeing on every field of ``covers``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Features = dict[str, Any]
_PLACEHOLDER = re.compile(r"\{\{([^{}]+)\}\}")
_ID_SUFFIX = re.compile(r"_?(id|key|uuid)$", re.IGNORECASE)
_DIGIT = re.compile(r"\d")
_FORMAT_RUN = re.compile(r"[^\W\d_]+")  # a run of letters: a word's shape, not its length


class Condition(BaseModel):
    """One test of one feature: its value is (not) among ``in``/``not_in``, a number
    ``above``/``below`` a bound, the same as (``equals``) or not (``differs``) another
    feature, above the bound ``limits`` gives its group (the value of ``limit_by``), or
    (for ``match.<collection>``) a record agrees on all fields of ``covers``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    feature: str
    in_: list[Any] | None = Field(None, alias="in")
    not_in: list[Any] | None = None
    above: float | None = None
    below: float | None = None
    equals: str | None = None
    differs: str | None = None
    limits: dict[str, float] | None = None
    limit_by: str | None = None
    covers: list[str] | None = None
    unless: dict[str, list[Any]] | None = None
    over: str | None = None
    under: str | None = None
    allowed: dict[str, list[Any]] | None = None
    allowed_by: str | None = None

    def reads(self) -> list[str]:
        """Every feature the condition reads."""
        sides = (self.feature, self.equals, self.differs, self.limit_by, self.over, self.under)
        return [f for f in (*sides, self.allowed_by) if f]

    def bound(self, feats: Features) -> float | None:
        """The limit that applies to this call (its group's), if the condition has one."""
        if self.limits is None:
            return self.above
        group = feats.get(self.limit_by or "")
        if not _scalar(group) or group is None:
            return None
        own = self.limits.get(str(group))
        if own is not None or self.limit_by != "arg.role":
            return own
        # a caller with several roles ("finance,senior_adjuster") has the largest bound
        # among its roles that have one
        members = [r.strip() for r in str(group).split(",") if r.strip()]
        known = [self.limits[r] for r in members if r in self.limits]
        return max(known) if len(members) > 1 and known else None

    def holds(self, feats: Features) -> bool:
        value = feats.get(self.feature)
        if not self._related(value, feats):
            return False
        if self.in_ is not None and value not in self.in_:
            return False
        if self.not_in is not None and value in self.not_in:
            return False
        number = value if _is_number(value) else None
        if self.above is not None and (number is None or number <= self.above):
            return False
        if self.below is not None and (number is None or number >= self.below):
            return False
        return True

    def _related(self, value: Any, feats: Features) -> bool:
        """The relational tests; a relation with a side missing does not hold."""
        if self.equals is not None:
            other = feats.get(self.equals)
            if value is None or other is None or not same(value, other):
                return False
        if self.differs is not None:
            other = feats.get(self.differs)
            if value is None or other is None or same(value, other):
                return False
        if self.limits is not None:
            limit = self.bound(feats)
            if limit is None or not _is_number(value) or value <= limit:
                return False
        if self.covers is not None and self.duplicate(value, feats) is None:
            return False
        for other, sign in ((self.over, 1), (self.under, -1)):
            if other is not None and compare(value, feats.get(other)) != sign:
                return False
        if self.allowed is not None:
            group = feats.get(self.allowed_by or "")
            values = self.allowed.get(str(group)) if _scalar(group) and group is not None else None
            if values is None or value is None or value in values:
                return False
        return True

    def duplicate(self, value: Any, feats: Features) -> int | None:
        """Which matched record (its index) agrees on every field of ``covers`` with none
        of its fields holding a value ``unless`` lists (a rejected claim is no
        duplicate); None when none does."""
        wanted = set(self.covers or ())
        if not isinstance(value, list):
            return None
        found = feats.get("matchrec." + self.feature.split(".", 1)[-1])
        for i, fields in enumerate(value):
            if not isinstance(fields, list) or not wanted <= set(fields):
                continue
            if self.unless:
                record = found[i] if isinstance(found, list) and i < len(found) else None
                if not isinstance(record, dict) or any(
                    record.get(k) in v for k, v in self.unless.items()
                ):
                    continue
            return i
        return None

    def text(self) -> str:
        if self.equals is not None:
            return f"{self.feature} = {self.equals}"
        if self.differs is not None:
            return f"{self.feature} != {self.differs}"
        if self.limits is not None:
            by = ", ".join(f"{k}: {v:g}" for k, v in sorted(self.limits.items()))
            return f"{self.feature} > the limit of its {self.limit_by} ({by})"
        if self.covers is not None:
            what = self.feature.split(".", 1)[-1]
            but = "".join(f" and {k} not in {v}" for k, v in sorted((self.unless or {}).items()))
            return f"a {what} record has the same {', '.join(self.covers)}{but}"
        if self.over is not None:
            return f"{self.feature} > {self.over}"
        if self.under is not None:
            return f"{self.feature} < {self.under}"
        if self.allowed is not None:
            by = "; ".join(f"{k}: {v}" for k, v in sorted(self.allowed.items()))
            return f"{self.feature} not allowed for its {self.allowed_by} ({by})"
        if self.in_ is not None:
            return f"{self.feature} in {self.in_}"
        if self.not_in is not None:
            return f"{self.feature} not in {self.not_in}"
        bound = f"> {self.above}" if self.above is not None else f"< {self.below}"
        return f"{self.feature} {bound}"


class Guard(BaseModel):
    """A refusal: when all ``when`` conditions hold, the call gets ``answer``."""

    model_config = ConfigDict(extra="forbid")

    when: list[Condition]
    status: int | None  # None: the log gave no status and its error body named none
    answer: Any = None
    support: int = 0  # logged refusals this guard explains

    def holds(self, feats: Features) -> bool:
        return all(c.holds(feats) for c in self.when)

    def quoted(self, feats: Features) -> Features:
        """The features its answer may quote: the call's, and each limit that applied
        (``limit.rec.amount``), so a refusal states its own group's bound."""
        out = dict(feats)
        for cond in self.when:
            bound = cond.bound(feats) if cond.limits is not None else None
            if bound is not None:
                out[f"limit.{cond.feature}"] = int(bound) if bound == int(bound) else bound
            if cond.covers is not None:  # the record it duplicates: ``match.<c>.id``
                at = cond.duplicate(feats.get(cond.feature), feats)
                ids = feats.get("matched." + cond.feature.split(".", 1)[-1]) or []
                if at is not None and at < len(ids):
                    out[f"{cond.feature}.id"] = ids[at]
        return out


class DecisionList(BaseModel):
    """A field's value: the first rule whose conditions hold, else ``default``."""

    model_config = ConfigDict(extra="forbid")

    default: Any = None
    rules: list[tuple[list[Condition], Any]] = Field(default_factory=list)

    def value(self, feats: Features) -> Any:
        for when, value in self.rules:
            if all(c.holds(feats) for c in when):
                return value
        return self.default


class ParentEffect(BaseModel):
    """A related record changes with the call: ``collection``'s record named by the
    argument or field ``via`` gets ``field`` = the new record's ``source`` field (``op``
    ``add``: its ``field`` grows by it, as a balance by a payout; ``op`` ``value``: it
    becomes ``constant``, as a claim becomes "paid" by a payout)."""

    model_config = ConfigDict(extra="forbid")

    collection: str
    via: str
    field: str
    source: str
    op: str = "set"
    constant: Any = None  # op ``value``: the one value the field takes (a claim "paid")

    def value(self, parent: dict[str, Any], record: dict[str, Any]) -> Any:
        """The related record's new value of ``field``."""
        if self.op == "value":
            return self.constant
        new = record.get(self.source)
        if self.op == "add":
            old = parent.get(self.field)
            return old + new if _is_number(old) and _is_number(new) else old
        return new


class ToolRules(BaseModel):
    """What a tool refuses, and what it sets when it succeeds (see the module doc)."""

    model_config = ConfigDict(extra="forbid")

    guards: list[Guard] = Field(default_factory=list)
    missing: Guard | None = None
    sets: dict[str, Any] = Field(default_factory=dict)
    defaults: dict[str, Any] = Field(default_factory=dict)
    copies: dict[str, str] = Field(default_factory=dict)
    values: dict[str, DecisionList] = Field(default_factory=dict)
    stamps: dict[str, str] = Field(default_factory=dict)
    parents: list[ParentEffect] = Field(default_factory=list)
    shape: list[str] = Field(default_factory=list)


# -- features -----------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ][\d:.]+)?(Z|[+-]\d{2}:?\d{2})?$")


def compare(a: Any, b: Any) -> int | None:
    """1 when ``a`` > ``b``, -1 when smaller, 0 when equal; None when the two are not of
    one ordered kind (numbers, or ISO dates and times, which order as text)."""
    if _is_number(a) and _is_number(b):
        return (a > b) - (a < b)
    if isinstance(a, str) and isinstance(b, str) and _DATE.match(a) and _DATE.match(b):
        a, b = a[:10] if len(b) == 10 else a, b[:10] if len(a) == 10 else b
        return (a > b) - (a < b)
    return None


def same(a: Any, b: Any) -> bool:
    """Equal and of one kind: 0 is not False, nor 1 the text "1"."""
    return (
        a == b
        and isinstance(a, bool) == isinstance(b, bool)
        and (isinstance(a, str) == isinstance(b, str))
    )


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _add(feats: Features, prefix: str, record: dict[str, Any]) -> None:
    for name, value in record.items():
        if _scalar(value):
            feats[f"{prefix}.{name}"] = value
        elif isinstance(value, list) and all(_scalar(v) for v in value):
            for item in value:
                feats[f"{prefix}.{name}~{item}"] = True


def collections(state: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The state's collections: keys holding lists of objects (``_`` keys are simgym's)."""
    return {
        k: v
        for k, v in state.items()
        if not k.startswith("_") and isinstance(v, list) and all(isinstance(r, dict) for r in v)
    }


def owner_collection(name: str, state: dict[str, Any]) -> str | None:
    """The collection an ``..._id`` name points into (``customer_id`` -> ``customers``), or
    whose records' key field it is (the state's ``_keys``: ``claim_number`` -> ``claims``)."""
    keys = state.get(KEYS)
    if isinstance(keys, dict):
        for collection, field in keys.items():
            if field == name and isinstance(state.get(collection), list):
                return collection
    if not _ID_SUFFIX.search(name) or name.lower() in ("id", "key", "uuid"):
        return None
    stem = _ID_SUFFIX.sub("", name).lower()
    for collection in state:
        if collection.startswith("_") or not isinstance(state[collection], list):
            continue
        lowered = collection.lower()
        plurals = (f"{stem}s", f"{stem}es", f"{stem[:-1]}ies" if stem.endswith("y") else "")
        if stem in (lowered, lowered.rstrip("s")) or lowered in plurals:
            return collection
    return None


KEYS = "_keys"  # collection -> the field its records are keyed by, where it is not "id"


def key_of(state: dict[str, Any], collection: str, default: str = "id") -> str:
    """The field that keys ``collection``'s records: the state's ``_keys`` says where a
    log named it otherwise than ``id``; else ``default``."""
    keys = state.get(KEYS)
    if isinstance(keys, dict):
        return str(keys.get(collection) or "id")
    return default


def find(records: list[Any], key: str, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    for record in records:
        if isinstance(record, dict) and str(record.get(key)) == str(value):
            return record
    return None


def features(
    args: dict[str, Any],
    record: dict[str, Any] | None,
    state: dict[str, Any],
    key: str = "id",
) -> Features:
    """What conditions can read about a call: its arguments, the record it names and the
    records those point to (see the module doc)."""
    feats: Features = {"args.size": len(json.dumps(args, ensure_ascii=False, default=str))}
    _add(feats, "arg", args)
    for name, value in args.items():
        feats[f"has.{name}"] = True
        feats[f"type.{name}"] = type(value).__name__
        if isinstance(value, str) and len(value) <= 40:
            feats[f"fmt.{name}"] = _FORMAT_RUN.sub("a", _DIGIT.sub("9", value))
    feats["rec.exists"] = record is not None
    if record is not None:
        _add(feats, "rec", record)
        for tool, actor in history_of(state, record, key).items():
            feats[f"hist.{tool}"] = actor
    else:
        for collection, found in _matching(args, state, key).items():
            feats[f"match.{collection}"] = [fields for fields, _, _ in found]
            feats[f"matched.{collection}"] = [rid for _, rid, _ in found]
            # the matched records' own values: a duplicate rule may ignore some by state
            feats[f"matchrec.{collection}"] = [
                {k: v for k, v in r.items() if _scalar(v)} for _, _, r in found
            ]
    # a sub-resource of another record is not one of the named record's: the
    # assessment of another claim is not found for this claim (REST nesting)
    own = _collection_holding(record, state) if record is not None else None
    field = key_of(state, own, key) if own else None
    # only a key with a name of its own (``claim_number``): every record has an ``id``
    scope = (own, field, record.get(field)) if own and field not in ("id", "key", "uuid") else None
    linked = _link(feats, list(args.items()), record, state, key, scope)
    linked += _link(feats, list((record or {}).items()), record, state, key)
    # a second hop: the record a linked record points to (an assessment's claim's policy,
    # whose coverage bounds the amount), where the call itself names no such record
    for parent in linked:
        _link(feats, list(parent.items()), record, state, key)
    return feats


def _link(
    feats: Features,
    pointers: list[tuple[str, Any]],
    record: dict[str, Any] | None,
    state: dict[str, Any],
    key: str,
    scope: tuple[str, str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Add the features of the records ``pointers`` name (``<collection>.<field>``) and
    return those records. ``scope`` (the named record's collection, key field and
    value): a linked record of another collection that holds that field with another
    value belongs to another record, and reads as not there."""
    found: list[dict[str, Any]] = []
    for name, value in pointers:
        if not isinstance(value, str | int) or isinstance(value, bool):
            continue
        collection = owner_collection(name, state)
        if collection is None or f"{collection}.exists" in feats:
            continue
        parent = find(state[collection], key_of(state, collection, key), value)
        if parent is not None and parent is record:
            continue
        if parent is not None and scope is not None and scope[0] != collection:
            theirs = parent.get(scope[1])
            if theirs is not None and _scalar(theirs) and str(theirs) != str(scope[2]):
                parent = None
        feats[f"{collection}.exists"] = parent is not None
        if parent is not None:
            found.append(parent)
            _add(feats, collection, parent)
            # who did what to a linked record: the one who ordered may not pay its invoice
            done = (
                _book(state)
                .get(collection, {})
                .get(str(parent.get(key_of(state, collection, key))))
            )
            for tool, actor in (done or {}).items():
                feats[f"hist.{collection}.{tool}"] = actor
    return found


HISTORY = "_history"  # collection -> record id -> tool -> the actor of its last success
_NOT_COMPARED = frozenset({"actor", "role"})  # who calls is no field of a record


def _collection_holding(record: dict[str, Any], state: dict[str, Any]) -> str | None:
    for name, records in collections(state).items():
        if any(r is record for r in records):
            return name
    return None


def _book(state: dict[str, Any]) -> dict[str, Any]:
    book = state.get(HISTORY)
    return book if isinstance(book, dict) else {}


def history_of(state: dict[str, Any], record: dict[str, Any], key: str = "id") -> dict[str, Any]:
    """Tool -> the actor of its last successful call on ``record``."""
    book = _book(state)
    name = _collection_holding(record, state) if book else None
    if name is None:
        return {}
    return dict(book.get(name, {}).get(str(record.get(key_of(state, name, key))), {}))


def remember(
    state: dict[str, Any], tool: str, actor: Any, collection: str, record_id: Any
) -> dict[str, Any]:
    """The state's ``_history`` after ``actor`` called ``tool`` on a record with success:
    a new mapping (the state's own is never changed in place)."""
    old = state.get(HISTORY) if isinstance(state.get(HISTORY), dict) else {}
    if actor is None or record_id is None or not collection:
        return dict(old)
    by_id = dict(old.get(collection, {}))
    by_id[str(record_id)] = {**by_id.get(str(record_id), {}), tool: actor}
    return {**old, collection: by_id}


def matches(
    args: dict[str, Any], state: dict[str, Any], key: str = "id"
) -> dict[str, list[tuple[list[str], Any]]]:
    """Collection -> for each record agreeing with the call on two fields or more, the
    argument fields it agrees on (scalars only; who calls is not compared) and its id."""
    return {
        name: [(fields, rid) for fields, rid, _ in found]
        for name, found in _matching(args, state, key).items()
    }


def _matching(
    args: dict[str, Any], state: dict[str, Any], key: str = "id"
) -> dict[str, list[tuple[list[str], Any, dict[str, Any]]]]:
    """:func:`matches`, with each matching record itself."""
    given = {
        k: v
        for k, v in args.items()
        if k not in _NOT_COMPARED and _scalar(v) and v is not None and not isinstance(v, bool)
    }
    out: dict[str, list[tuple[list[str], Any, dict[str, Any]]]] = {}
    if len(given) < 2:
        return out
    for name, records in collections(state).items():
        found: list[tuple[list[str], Any, dict[str, Any]]] = []
        for record in records:
            same = sorted(k for k, v in given.items() if k in record and record[k] == v)
            if len(same) >= 2:
                found.append((same, record.get(key_of(state, name, key)), record))
        if found:
            out[name] = found
    return out


# -- answers --------------------------------------------------------------------------------


def render(template: Any, feats: Features) -> Any:
    """A mined answer with the call's values put in: a leaf that is one placeholder takes
    the value itself (a number stays a number), placeholders inside text take its text."""
    if isinstance(template, dict):
        return {k: render(v, feats) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, feats) for v in template]
    if not isinstance(template, str) or "{{" not in template:
        return template
    whole = _PLACEHOLDER.fullmatch(template)
    if whole:
        return feats.get(whole.group(1))
    return _PLACEHOLDER.sub(lambda m: _text(feats.get(m.group(1))), template)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def stamp(style: str, now: datetime | None = None) -> str:
    """The time of a call as the system writes it (``iso-us-z``, ``iso-z``, ``iso-us``,
    ``iso``: with microseconds or not, ``Z`` or ``+00:00``)."""
    moment = now or datetime.now(UTC)
    text = moment.isoformat(timespec="microseconds" if "-us" in style else "seconds")
    return text.replace("+00:00", "Z") if style.endswith("-z") else text


def decide(rules: ToolRules, feats: Features) -> Guard | None:
    """The guard that refuses the call, if one does."""
    for guard in rules.guards:
        if guard.holds(feats):
            return guard
    return None


def new_values(
    rules: ToolRules, feats: Features, args: dict[str, Any], now: datetime | None = None
) -> dict[str, Any]:
    """The fields a successful call writes: sets, copies, decided values and stamps (at
    ``now``, the server's held clock, else the wall clock)."""
    out = dict(rules.sets)
    for name, source in rules.copies.items():
        if source in args:
            out[name] = args[source]
        elif "." in source and feats.get(source) is not None:
            out[name] = feats[source]  # a field of a record the call points to
    for name, decision in rules.values.items():
        out[name] = decision.value(feats)
    for name, style in rules.stamps.items():
        out[name] = stamp(style, now)
    return out


def ordered(record: dict[str, Any], shape: list[str]) -> dict[str, Any]:
    """The record's fields in the order the system writes them (the rest after)."""
    if not shape:
        return record
    head = {k: record[k] for k in shape if k in record}
    return {**head, **{k: v for k, v in record.items() if k not in head}}
