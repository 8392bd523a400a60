"""The back office's history as an IEEE 1849 (XES) event log, written with the standard
library's ``xml.etree``.

XES has one case notion, so the OCEL log (:mod:`.ocel`) is flattened by working session:
one trace per session (``concept:name`` = the session id), its events in time order, each
with ``concept:name`` (the operation, the OCEL event type), ``time:timestamp``,
``org:resource`` (the actor), ``org:role``, ``lifecycle:transition`` ("complete" for an
accepted change, "ate_abort" for a refusal: the standard life-cycle model's abort) and the
event's other attributes (the HTTP call under OpenTelemetry's names, the outcome, the
change's data). The objects an event touched are attributes named ``<type>_id`` (a
``loan_id`` of "loan-7"), each holding the object's attributes as they stood after the
event as nested attributes (IEEE 1849 allows attributes inside attributes; the log
declares ``xes.features="nested-attributes"``).

What XES does not carry here: the OCEL qualifier of each relation, object-to-object
relations, two objects of one type on one event (none happen in this service), and,
like OCEL, request and response bodies and the calls the audit log does not record.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import Element, SubElement, tostring

XES_NS = "http://www.xes-standard.org/"
EXTENSIONS = (
    ("Concept", "concept"),
    ("Time", "time"),
    ("Organizational", "org"),
    ("Lifecycle", "lifecycle"),
)
_CALLER = ("actor", "role", "session")


def _time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _typed(parent: Element, key: str, value: Any) -> Element:
    """An XES attribute element of the type the value has."""
    if isinstance(value, bool):
        tag, text = "boolean", "true" if value else "false"
    elif isinstance(value, int):
        tag, text = "int", str(value)
    elif isinstance(value, float):
        tag, text = "float", repr(value)
    else:
        tag, text = "string", str(value)
    return SubElement(parent, tag, key=key, value=text)


class _States:
    """Each object's type and its attribute values over time, from the OCEL objects."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.types: dict[str, str] = {}
        self.history: dict[str, list[tuple[float, int, str, Any]]] = defaultdict(list)
        for obj in objects:
            self.types[obj["id"]] = obj["type"]
            for n, attr in enumerate(obj["attributes"]):
                item = (_time(attr["time"]), n, attr["name"], attr["value"])
                bisect.insort(self.history[obj["id"]], item)

    def at(self, oid: str, when: float) -> dict[str, Any]:
        state: dict[str, Any] = {}
        for t, _, name, value in self.history.get(oid, []):
            if t > when:
                break
            state[name] = value
        return state


def _event(parent: Element, event: dict[str, Any], states: _States) -> None:
    attrs = {a["name"]: a["value"] for a in event["attributes"]}
    node = SubElement(parent, "event")
    SubElement(node, "string", key="concept:name", value=event["type"])
    SubElement(node, "date", key="time:timestamp", value=event["time"])
    if attrs.get("actor"):
        SubElement(node, "string", key="org:resource", value=str(attrs["actor"]))
    if attrs.get("role"):
        SubElement(node, "string", key="org:role", value=str(attrs["role"]))
    refused = attrs.get("outcome") not in (None, "ok")
    SubElement(
        node, "string", key="lifecycle:transition", value="ate_abort" if refused else "complete"
    )
    for name, value in attrs.items():
        if name not in _CALLER:
            _typed(node, name, value)
    when = _time(event["time"])
    for rel in event["relationships"]:
        oid = rel["objectId"]
        holder = SubElement(node, "string", key=f"{states.types.get(oid, 'object')}_id", value=oid)
        for name, value in states.at(oid, when).items():
            _typed(holder, name, value)


def write_xes(ocel: dict[str, Any], path: str | Path) -> Path:
    """Write the OCEL document ``ocel`` (:func:`.ocel.build_ocel`) as XES to ``path``,
    one trace at a time."""
    path = Path(path)
    states = _States(ocel["objects"])
    traces: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in ocel["events"]:
        session = next((a["value"] for a in event["attributes"] if a["name"] == "session"), "")
        traces[str(session) or "(no session)"].append(event)
    with open(path, "w", encoding="utf-8") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n')
        f.write(
            f'<log xes.version="1849-2016" xes.features="nested-attributes" xmlns="{XES_NS}">\n'
        )
        for name, prefix in EXTENSIONS:
            uri = f"{XES_NS}{prefix}.xesext"
            f.write(f'  <extension name="{name}" prefix="{prefix}" uri="{uri}"/>\n')
        f.write('  <classifier name="Activity" keys="concept:name"/>\n')
        for session, events in traces.items():
            trace = Element("trace")
            SubElement(trace, "string", key="concept:name", value=session)
            for event in sorted(events, key=lambda e: _time(e["time"])):
                _event(trace, event, states)
            f.write("  " + tostring(trace, encoding="unicode") + "\n")
        f.write("</log>\n")
    return path
