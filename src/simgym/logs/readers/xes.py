"""IEEE 1849 XES event logs, streamed with ``iterparse`` (each element is cleared once
read). A trace is a session (named by its ``concept:name``); an event is a record with
``concept:name`` as the operation, ``time:timestamp`` as the time, ``org:resource`` as
the actor, ``org:role`` as the role, and its other attributes (``lifecycle:transition``
included) as the arguments. The trace is the object the event touched ("case").

Object references. An event attribute named ``<type>_id`` names an object of that type
the event touched, and the attributes nested inside it are that object's state (IEEE
1849's nested attributes). Logs nobody here wrote often name the object without the
suffix (``invoice`` holding "INV-1001"), so the file is read twice: the first pass
profiles every attribute, and one is taken as an object reference (its key, less a
``_ref``/``_no``/``Id`` suffix, the type) when most of its values are ids of objects seen
elsewhere in the log (a ``<type>_id`` value, a trace's name), or look like ids (letters
and digits like "INV-1001", UUIDs, long hex) and are not people (``org:resource``
values). A mapping file's ``objects`` names them outright.

An event carrying its HTTP call (``http.request.method`` and ``http.route``, optionally
``url.path`` and ``http.response.status_code``) is named as the HTTP readers name the
call, with that status, its ``concept:name`` kept as the ``activity`` attribute. Without
a status, a ``lifecycle:transition`` of "ate_abort" or "pi_abort" marks the event
failed."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree.ElementTree import Element, ParseError, iterparse

from simgym.logs.mapping import FieldMap
from simgym.logs.model import (
    JSON,
    ImportReport,
    LogRecord,
    ObjectRef,
    maybe_json,
    parse_time,
    pop_http,
    pop_outcome,
)

_TYPED = {"string", "date", "int", "float", "boolean", "id"}
# IEEE 1849-2016's compound attributes: a list's values keep their order (and repeated
# keys), a container's are named; a list may wrap its values in <values>
_COMPOUND = {"list", "container"}
_ATTRIBUTES = _TYPED | _COMPOUND
_ABORTED = {"ate_abort", "pi_abort"}
# attributes the standard's extensions define, and the HTTP call's: never object references
_STANDARD_PREFIXES = ("concept:", "org:", "time:", "lifecycle:", "cost:", "http.", "url.")
_LOOKS_LIKE_ID = re.compile(
    r"^(?:[A-Za-z]{1,16}[-_:#/]?\d[\w-]*|[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}|[0-9a-fA-F]{16,})$"
)
_TYPE_SUFFIXES = ("_id", "_ref", "_no", "_number", "Id", "Ref", "No")
# event attributes naming the working session an event belongs to (a trace is a case)
SESSION_KEYS = ("session", "session_id", "session.id", "sessionId")
_CASE = "\0case"  # where an event's nested attributes carry its trace's attributes
MAX_PROFILED = 2000  # distinct values kept per attribute while profiling
MIN_SHARE = 0.8  # of an attribute's values that must be ids for it to name objects

LOOKS_FOR = {
    "body": "event attributes (as arguments) and outcome attributes (as the answer)",
    "actor": "event attribute org:resource",
    "role": "event attributes org:role, org:group",
    "session": "the trace's concept:name",
    "objects": "event attributes <type>_id, and attributes whose values are ids",
}


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _value(element: Element) -> JSON:
    kind, raw = _local(element.tag), element.get("value")
    if raw is None:
        return None
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        return raw
    if kind == "boolean":
        return raw.strip().lower() == "true"
    return raw


def object_type(key: str) -> str:
    """The object type an attribute names: "invoice_id" and "invoiceRef" -> "invoice"."""
    for suffix in _TYPE_SUFFIXES:
        if key.endswith(suffix) and len(key) > len(suffix):
            return key[: -len(suffix)]
    return key


@dataclass
class _Profile:
    """What the first pass saw of each event attribute's values."""

    values: dict[str, Counter[str]] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    id_like: Counter[str] = field(default_factory=Counter)
    known: set[str] = field(default_factory=set)  # ids named by <type>_id, trace names
    people: set[str] = field(default_factory=set)

    def add(self, case: str, attrs: dict[str, JSON]) -> None:
        self.known.add(case)
        if attrs.get("org:resource") is not None:
            self.people.add(str(attrs["org:resource"]))
        for key, value in attrs.items():
            if key.startswith(_STANDARD_PREFIXES) or not isinstance(value, str | int):
                continue
            if isinstance(value, bool):
                continue
            text = str(value)
            if key.endswith("_id") and len(key) > 3:
                self.known.add(text)
            self.counts[key] += 1
            self.id_like[key] += bool(_LOOKS_LIKE_ID.match(text)) and isinstance(value, str)
            seen = self.values.setdefault(key, Counter())
            if len(seen) < MAX_PROFILED or text in seen:
                seen[text] += 1

    def references(self) -> dict[str, str]:
        """Attribute key -> object type, for the attributes that name objects by value."""
        found: dict[str, str] = {}
        for key, n in self.counts.items():
            if key in SESSION_KEYS:
                continue  # the working session, not an object
            if key.endswith("_id") and len(key) > 3:
                found[key] = key[:-3]
                continue
            values = self.values.get(key, Counter())
            sampled = sum(values.values()) or 1
            known = sum(c for v, c in values.items() if v in self.known) / sampled
            people = sum(c for v, c in values.items() if v in self.people) / sampled
            if people >= 0.5 or len(values) < 2 and n > 2:
                continue  # a person, or one constant value: not an object
            if known >= MIN_SHARE or self.id_like[key] / n >= MIN_SHARE:
                found[key] = object_type(key)
        return found


def _objects(
    case: str,
    attrs: dict[str, JSON],
    nested: dict[str, dict[str, JSON]],
    references: dict[str, str],
) -> list[ObjectRef]:
    found = [ObjectRef("case", case, None, nested.get(_CASE) or None)]
    for key, value in attrs.items():
        otype = references.get(key)
        if otype and isinstance(value, str | int) and not isinstance(value, bool):
            found.append(ObjectRef(otype, str(value), key, nested.get(key) or None))
    return found


def _record(
    case: str,
    attrs: dict[str, JSON],
    nested: dict[str, dict[str, JSON]],
    source: str,
    references: dict[str, str],
    mapping: FieldMap | None,
    *,
    first: bool = False,
) -> LogRecord:
    name = attrs.pop("concept:name")
    marked_failed = mapping.failed(attrs) if mapping is not None else None
    mapped = {
        f: mapping.first(f, attrs) if mapping is not None else None
        for f in ("actor", "role", "session", "body", "response", "status", "error")
    }
    for found in mapped.values():
        if found is not None:
            attrs.pop(found[0], None)
    actor = attrs.pop("org:resource", None)
    role = attrs.pop("org:role", None)
    group = attrs.pop("org:group", None)
    role = role if role is not None else group  # a department stands in for a role
    actor = mapped["actor"][1] if mapped["actor"] else actor
    role = mapped["role"][1] if mapped["role"] else role
    time = parse_time(attrs.pop("time:timestamp", None))
    method, route, path, status = pop_http(attrs)
    if mapped["status"] is not None:
        try:
            status = int(mapped["status"][1])  # type: ignore[arg-type]
        except (TypeError, ValueError):
            pass
    http = method is not None and route is not None
    aborted = str(attrs.get("lifecycle:transition", "")).lower() in _ABORTED
    objects = _objects(case, attrs, nested, references)
    answer = pop_outcome(attrs)
    extra: dict[str, JSON] = {"activity": str(name)} if http else {}
    session = case
    named = next((k for k in SESSION_KEYS if attrs.get(k) not in (None, "")), None)
    if mapped["session"] is not None:
        session = str(mapped["session"][1])
    elif named is not None:  # the event says which working session it was part of
        session = str(attrs.pop(named))
        extra["case"] = case
        if not first:  # the case is what a later event acts on: name it (the first made it)
            attrs.setdefault("case_id", case)
    arguments: JSON = dict(attrs)
    if mapped["body"] is not None:
        arguments = maybe_json(mapped["body"][1])
    if mapped["response"] is not None:
        answer = maybe_json(mapped["response"][1])
    if isinstance(role, str) and "," in role:  # several roles held: as the other readers
        role = ",".join(sorted({r.strip() for r in role.split(",") if r.strip()}))
    return LogRecord(
        session=session,
        operation=route if http else str(name),  # type: ignore[arg-type]
        system="http" if http else "process",
        time=time,
        actor=str(actor) if actor is not None else None,
        role=str(role) if role is not None else None,
        method=method if http else None,
        arguments=arguments,
        status=status,
        error=(status is not None and status >= 500)
        or (status is None and aborted)
        or bool(marked_failed),
        response=answer,
        objects=objects,
        path=path if http else None,
        source=source,
        attributes=extra,
    )


def _events(
    path: Path, report: ImportReport | None
) -> Iterator[tuple[str, int, dict[str, JSON], dict[str, dict[str, JSON]]]]:
    """(case, trace number, event attributes, nested attributes) of each event, streamed;
    ``report`` (the second pass's) counts them and their faults."""
    stack: list[str] = []
    # the nested attributes of each open attribute, as (key, value) pairs in order
    children: list[list[tuple[str, JSON]]] = []
    trace_attrs: dict[str, JSON] = {}
    event_attrs: dict[str, JSON] = {}
    event_nested: dict[str, dict[str, JSON]] = {}
    traces = 0
    try:
        for kind, element in iterparse(path, events=("start", "end")):
            tag = _local(element.tag)
            if kind == "start":
                stack.append(tag)
                if tag == "trace":
                    traces += 1
                    trace_attrs = {}
                elif tag == "event":
                    event_attrs, event_nested = {}, {}
                elif tag in _ATTRIBUTES:
                    children.append([])
                continue
            stack.pop()
            parent = stack[-1] if stack else None
            if tag in _ATTRIBUTES:
                inner = children.pop() if children else []
                key = element.get("key")
                if tag == "list":
                    value: JSON = [v for _, v in inner]
                elif tag == "container":
                    value = dict(inner)
                else:
                    value = _value(element)
                if key is None and parent != "values":
                    continue
                if parent == "event":
                    event_attrs[key] = value  # type: ignore[index]
                    if inner and tag in _TYPED:
                        event_nested[key] = dict(inner)  # type: ignore[index]
                elif parent == "trace":
                    trace_attrs[key] = value  # type: ignore[index]
                elif parent in (*_ATTRIBUTES, "values") and children:
                    children[-1].append((key or "", value))
            elif tag == "event":
                if report is not None:
                    report.read += 1
                if event_attrs.get("concept:name") is None:
                    if report is not None:
                        report.skip("XES event without concept:name", f"{path.name}#trace{traces}")
                else:
                    case = str(trace_attrs.get("concept:name", f"trace-{traces}"))
                    if len(trace_attrs) > 1:  # the case's own attributes: its state
                        event_nested[_CASE] = {
                            k: v for k, v in trace_attrs.items() if not k.startswith("concept:")
                        }
                    yield case, traces, event_attrs, event_nested
                element.clear()
            elif tag == "trace":
                element.clear()
    except ParseError as exc:
        if report is not None:
            report.skip(f"XML ends early or is malformed ({exc})")


def read(
    path: Path, report: ImportReport, *, mapping: FieldMap | None = None
) -> Iterator[LogRecord]:
    profile = _Profile()
    for case, _, attrs, _ in _events(path, None):
        profile.add(case, attrs)
    references = profile.references()
    if mapping is not None:
        references.update({name: otype for otype, name in mapping.objects.items()})
    last = None
    for case, trace, attrs, nested in _events(path, report):
        source = f"{path.name}#trace{trace}"
        yield _record(case, attrs, nested, source, references, mapping, first=trace != last)
        last = trace
