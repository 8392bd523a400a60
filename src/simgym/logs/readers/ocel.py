"""OCEL 2.0 object-centric event logs, JSON or SQLite (https://www.ocel-standard.org).

Each event becomes a record: its type is the operation, its attributes the arguments,
its related objects (``relationships``: ``objectId`` and ``qualifier``) the objects
touched, each with the object's attributes as they stood at the event's time (OCEL keeps
attribute values with the time they were set). The actor is its
``resource``/``org:resource``/``user`` attribute, the role its ``role``/``org:role``.
The session is its ``session`` attribute (``session.id`` too) when it has one, else its
first related object. An event that carries the HTTP call it came in as
(``http.request.method`` and ``http.route``, optionally ``url.path`` and
``http.response.status_code``: :data:`simgym.logs.model.HTTP_METHOD_KEYS` and the rest)
is named as the HTTP readers name the call ("POST /loans/{loan_id}/approve", the event
type kept as the ``event_type`` attribute), with that status; else the event type is the
operation.

JSON is read in two streamed passes (objects, then events), never as one document;
SQLite through the standard tables (``event``, ``object``, ``event_object``,
``event_map_type``, ``object_map_type``, ``event_<Type>``, ``object_<Type>``).
"""

from __future__ import annotations

import bisect
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from simgym.logs.jsonstream import iter_array
from simgym.logs.model import (
    JSON,
    ImportReport,
    LogRecord,
    ObjectRef,
    parse_time,
    pop_http,
    pop_outcome,
)

_ACTOR_KEYS = ("resource", "org:resource", "user", "actor")
_ROLE_KEYS = ("role", "org:role")
_SESSION_KEYS = ("session", "session.id")


class _Objects:
    """Object types and timed attribute values, by object id."""

    def __init__(self) -> None:
        self.types: dict[str, str] = {}
        # id -> sorted [(time, name, value)]
        self.history: dict[str, list[tuple[float, str, JSON]]] = {}

    def add(self, oid: str, otype: str) -> None:
        self.types[oid] = otype
        self.history.setdefault(oid, [])

    def set(self, oid: str, time: float | None, name: str, value: JSON) -> None:
        bisect.insort(self.history.setdefault(oid, []), (time or 0.0, name, value))

    def state_at(self, oid: str, time: float | None) -> dict[str, JSON] | None:
        state: dict[str, JSON] = {}
        for when, name, value in self.history.get(oid, []):
            if time is not None and when > time:
                break
            state[name] = value
        return state or None


def _record(
    event_id: str,
    event_type: str,
    time: float | None,
    attrs: dict[str, JSON],
    related: list[tuple[str, str | None]],
    objects: _Objects,
    source: str,
) -> LogRecord:
    refs = [
        ObjectRef(objects.types.get(oid, "object"), oid, qualifier, objects.state_at(oid, time))
        for oid, qualifier in related
    ]
    actor = next((attrs[k] for k in _ACTOR_KEYS if attrs.get(k) is not None), None)
    role = next((attrs[k] for k in _ROLE_KEYS if attrs.get(k) is not None), None)
    named = next((attrs[k] for k in _SESSION_KEYS if attrs.get(k) not in (None, "")), None)
    arguments = {
        k: v for k, v in attrs.items() if k not in _ACTOR_KEYS + _ROLE_KEYS + _SESSION_KEYS
    }
    method, route, path, status = pop_http(arguments)
    answer = pop_outcome(arguments)
    if named is not None:  # the events' own grouping, the same in JSON and SQLite
        session = str(named)
    else:
        session = f"{refs[0].type}:{refs[0].id}" if refs else event_id
    http = method is not None and route is not None
    return LogRecord(
        session=session,
        operation=route if http else event_type,  # type: ignore[arg-type]
        system="http" if http else "process",
        time=time,
        actor=str(actor) if actor is not None else None,
        role=str(role) if role is not None else None,
        method=method if http else None,
        arguments=arguments,
        status=status,
        error=status is not None and status >= 500,
        response=answer,
        objects=refs,
        source=source,
        path=path if http else None,
        attributes={"event_id": event_id, "event_type": event_type},
    )


def read(path: Path, report: ImportReport) -> Iterator[LogRecord]:
    with open(path, "rb") as f:
        sqlite = f.read(16).startswith(b"SQLite format 3")
    yield from (_read_sqlite if sqlite else _read_json)(path, report)


def _read_json(path: Path, report: ImportReport) -> Iterator[LogRecord]:
    objects = _Objects()
    try:
        for obj in iter_array(path, "objects"):
            if not isinstance(obj, dict) or "id" not in obj or "type" not in obj:
                report.skip("OCEL object without id or type")
                continue
            oid = str(obj["id"])
            objects.add(oid, str(obj["type"]))
            for attr in obj.get("attributes") or []:
                if isinstance(attr, dict) and "name" in attr:
                    objects.set(oid, parse_time(attr.get("time")), attr["name"], attr.get("value"))
    except ValueError:
        report.skip("malformed OCEL objects array (rest of it unread)")
    try:
        for event in iter_array(path, "events"):
            report.read += 1
            if not isinstance(event, dict) or "type" not in event:
                report.skip("OCEL event without a type")
                continue
            attrs = {
                a["name"]: a.get("value")
                for a in event.get("attributes") or []
                if isinstance(a, dict) and "name" in a
            }
            related = [
                (str(r["objectId"]), r.get("qualifier"))
                for r in event.get("relationships") or []
                if isinstance(r, dict) and "objectId" in r
            ]
            yield _record(
                str(event.get("id", report.read)),
                str(event["type"]),
                parse_time(event.get("time")),
                attrs,
                related,
                objects,
                f"{path.name}#{event.get('id')}",
            )
    except ValueError:
        report.skip("malformed OCEL events array (rest of it unread)")


def _table(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _read_sqlite(path: Path, report: ImportReport) -> Iterator[LogRecord]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        objects = _Objects()
        for oid, otype in db.execute("SELECT ocel_id, ocel_type FROM object"):
            objects.add(str(oid), str(otype))
        for otype, suffix in db.execute("SELECT ocel_type, ocel_type_map FROM object_map_type"):
            try:
                cursor = db.execute(f"SELECT * FROM {_table('object_' + suffix)}")
            except sqlite3.Error:
                report.skip(f"OCEL object table missing for type {otype!r}")
                continue
            columns = [c[0] for c in cursor.description]
            for row in cursor:
                data = dict(zip(columns, row, strict=True))
                oid, when = str(data.pop("ocel_id")), parse_time(data.pop("ocel_time", None))
                changed = data.pop("ocel_changed_field", None)
                for name, value in data.items():
                    if value is not None and (changed is None or changed == name):
                        objects.set(oid, when, name, value)
        tables = dict(db.execute("SELECT ocel_type, ocel_type_map FROM event_map_type"))
        for etype, suffix in tables.items():
            try:
                cursor = db.execute(f"SELECT * FROM {_table('event_' + suffix)}")
            except sqlite3.Error:
                report.skip(f"OCEL event table missing for type {etype!r}")
                continue
            columns = [c[0] for c in cursor.description]
            for row in cursor:
                report.read += 1
                data = dict(zip(columns, row, strict=True))
                eid = str(data.pop("ocel_id"))
                when = parse_time(data.pop("ocel_time", None))
                related = [
                    (str(o), q)
                    for o, q in db.execute(
                        "SELECT ocel_object_id, ocel_qualifier FROM event_object"
                        " WHERE ocel_event_id = ?",
                        (eid,),
                    )
                ]
                attrs = {k: v for k, v in data.items() if v is not None}
                yield _record(eid, etype, when, attrs, related, objects, f"{path.name}#{eid}")
    except sqlite3.DatabaseError as exc:
        report.skip(f"unreadable OCEL SQLite ({exc.__class__.__name__})", f"{path.name}: {exc}")
    finally:
        db.close()
