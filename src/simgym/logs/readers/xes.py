"""IEEE 1849 XES event logs, streamed with ``iterparse`` (each element is cleared once
read). A trace is a session (named by its ``concept:name``); an event is a record with
``concept:name`` as the operation, ``time:timestamp`` as the time, ``org:resource`` as
the actor, ``org:role`` as the role, and its other attributes (``lifecycle:transition``
included) as the arguments. The trace is the object the event touched ("case").

Two conventions give a flattened business log more (both are what the back office's XES
export writes): an event attribute named ``<type>_id`` names an object of that type that
the event touched too, and the attributes nested inside it are that object's state
(IEEE 1849's nested attributes); an event carrying its HTTP call (``http.request.method``
and ``http.route``, optionally ``url.path`` and ``http.response.status_code``) is named as
the HTTP readers name the call, with that status, its ``concept:name`` kept as the
``activity`` attribute. Without a status, a ``lifecycle:transition`` of "ate_abort" or
"pi_abort" marks the event failed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from xml.etree.ElementTree import Element, ParseError, iterparse

from simgym.logs.model import (
    JSON,
    ImportReport,
    LogRecord,
    ObjectRef,
    parse_time,
    pop_http,
    pop_outcome,
)

_TYPED = {"string", "date", "int", "float", "boolean", "id"}
_ABORTED = {"ate_abort", "pi_abort"}


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


def _objects(case: str, attrs: dict[str, JSON], nested: dict[str, dict[str, JSON]]) -> list:
    found = [ObjectRef("case", case, None, None)]
    for key, value in attrs.items():
        if key.endswith("_id") and len(key) > 3 and isinstance(value, str | int):
            found.append(ObjectRef(key[:-3], str(value), None, nested.get(key) or None))
    return found


def _record(
    case: str, attrs: dict[str, JSON], nested: dict[str, dict[str, JSON]], source: str
) -> LogRecord:
    name = attrs.pop("concept:name")
    actor = attrs.pop("org:resource", None)
    role = attrs.pop("org:role", None)
    time = parse_time(attrs.pop("time:timestamp", None))
    method, route, path, status = pop_http(attrs)
    http = method is not None and route is not None
    aborted = str(attrs.get("lifecycle:transition", "")).lower() in _ABORTED
    objects = _objects(case, attrs, nested)
    answer = pop_outcome(attrs)
    return LogRecord(
        session=case,
        operation=route if http else str(name),  # type: ignore[arg-type]
        system="http" if http else "process",
        time=time,
        actor=str(actor) if actor is not None else None,
        role=str(role) if role is not None else None,
        method=method if http else None,
        arguments=dict(attrs),
        status=status,
        error=(status is not None and status >= 500) or (status is None and aborted),
        response=answer,
        objects=objects,
        path=path if http else None,
        source=source,
        attributes={"activity": str(name)} if http else {},
    )


def read(path: Path, report: ImportReport) -> Iterator[LogRecord]:
    stack: list[str] = []
    children: list[dict[str, JSON]] = []  # the nested attributes of each open attribute
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
                elif tag in _TYPED:
                    children.append({})
                continue
            stack.pop()
            parent = stack[-1] if stack else None
            if tag in _TYPED:
                inner = children.pop() if children else {}
                key = element.get("key")
                if key is None:
                    continue
                if parent == "event":
                    event_attrs[key] = _value(element)
                    if inner:
                        event_nested[key] = inner
                elif parent == "trace":
                    trace_attrs[key] = _value(element)
                elif parent in _TYPED and children:
                    children[-1][key] = _value(element)
            elif tag == "event":
                report.read += 1
                if event_attrs.get("concept:name") is None:
                    report.skip("XES event without concept:name")
                else:
                    case = str(trace_attrs.get("concept:name", f"trace-{traces}"))
                    yield _record(case, event_attrs, event_nested, f"{path.name}#trace{traces}")
                element.clear()
            elif tag == "trace":
                element.clear()
    except ParseError as exc:
        report.skip(f"XML ends early or is malformed ({exc})")
