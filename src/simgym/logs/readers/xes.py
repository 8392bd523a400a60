"""IEEE 1849 XES event logs, streamed with ``iterparse`` (each element is cleared once
read). A trace is a session (named by its ``concept:name``); an event is a record with
``concept:name`` as the operation, ``time:timestamp`` as the time, ``org:resource`` as
the actor, ``org:role`` as the role, and its other attributes (``lifecycle:transition``
included) as the arguments. The trace is the object the event touched ("case")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from xml.etree.ElementTree import Element, ParseError, iterparse

from simgym.logs.model import JSON, ImportReport, LogRecord, ObjectRef, parse_time

_TYPED = {"string", "date", "int", "float", "boolean", "id"}


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


def read(path: Path, report: ImportReport) -> Iterator[LogRecord]:
    stack: list[str] = []
    trace_attrs: dict[str, JSON] = {}
    event_attrs: dict[str, JSON] = {}
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
                    event_attrs = {}
                continue
            stack.pop()
            parent = stack[-1] if stack else None
            if tag in _TYPED and element.get("key") is not None:
                if parent == "event":
                    event_attrs[element.get("key", "")] = _value(element)
                elif parent == "trace":
                    trace_attrs[element.get("key", "")] = _value(element)
            elif tag == "event":
                report.read += 1
                name = event_attrs.pop("concept:name", None)
                if name is None:
                    report.skip("XES event without concept:name")
                else:
                    case = str(trace_attrs.get("concept:name", f"trace-{traces}"))
                    actor = event_attrs.pop("org:resource", None)
                    role = event_attrs.pop("org:role", None)
                    yield LogRecord(
                        session=case,
                        operation=str(name),
                        system="process",
                        time=parse_time(event_attrs.pop("time:timestamp", None)),
                        actor=str(actor) if actor is not None else None,
                        role=str(role) if role is not None else None,
                        arguments=dict(event_attrs),
                        objects=[ObjectRef("case", case, None, None)],
                        source=f"{path.name}#trace{traces}",
                    )
                element.clear()
            elif tag == "trace":
                element.clear()
    except ParseError as exc:
        report.skip(f"XML ends early or is malformed ({exc})")
