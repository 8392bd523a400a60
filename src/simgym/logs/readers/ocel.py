"""OCEL 2.0 object-centric event logs, JSON or SQLite (https://www.ocel-standard.org).

Each event becomes a record: its type is the operation, its attributes the arguments,
its related objects (``relationships``: ``objectId`` and ``qualifier``) the objects
touched, each with the object's attributes as they stood after the event. The actor is
its ``resource``/``org:resource``/``user``/``actor`` attribute, the role its
``role``/``org:role``. Each related object's id is also an argument, ``<type>_id``
(``<type>_ids`` when the event relates several objects of a type): the parameter that
names what the tool acts on; not an object the event made (its first event, which set
its attributes at the event's time): that id is the event's outcome.

The session is the event's own grouping: a ``session``-like attribute
(:data:`SESSION_KEYS`, or the mapping file's), else a related object whose type or
qualifier names a session or case, else the first related object (``type:id``, the
record saying ``session_from: object``). JSON and SQLite of one log give the same ones.

Object attributes carry times, not events, and several events may share one timestamp.
Each change is put on an event of its object: a change at time ``t`` belongs to the next
event of that object at ``t`` that has not yet taken a change of that attribute (one
whose attributes hold the new value first), refused events (``outcome`` not ok, HTTP
status >= 400) taking none; a change between events shows from the next event on. So
two transitions within a second are two transitions, in event order, and none is made
up. Event order is the file's (the JSON array, the SQLite ``event`` table).

An event that carries the HTTP call it came in as (``http.request.method`` and
``http.route``, optionally ``url.path`` and ``http.response.status_code``:
:data:`simgym.logs.model.HTTP_METHOD_KEYS` and the rest) is named as the HTTP readers
name the call ("POST /loans/{loan_id}/approve", the event type kept as the ``event_type``
attribute), with that status; else the event type is the operation.

JSON is read in streamed passes (objects, then events twice), never as one document;
SQLite through the standard tables (``event``, ``object``, ``event_object``,
``event_map_type``, ``object_map_type``, ``event_<Type>``, ``object_<Type>``).
"""

from __future__ import annotations

import bisect
import sqlite3
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from simgym.logs.jsonstream import iter_array
from simgym.logs.mapping import FieldMap
from simgym.logs.model import (
    HTTP_STATUS_KEYS,
    JSON,
    ImportReport,
    LogRecord,
    ObjectRef,
    maybe_json,
    parse_time,
    pop_http,
    pop_outcome,
)

ACTOR_KEYS = ("resource", "org:resource", "user", "actor", "user.id")
ROLE_KEYS = ("role", "org:role", "user.roles")
SESSION_KEYS = (
    "session",
    "session.id",
    "session_id",
    "sessionId",
    "case",
    "case_id",
    "case:concept:name",
    "conversation_id",
    "gen_ai.conversation.id",
)
SESSION_TYPES = ("session", "case", "conversation", "journey")
# object types that are people: an event related to one of them was done by that person
PERSON_TYPES = ("employee", "user", "person", "staff", "worker", "clerk", "resource", "actor")
PERSON_ROLE_KEYS = ("roles", "role", "org:role", "user.roles")
_OK = ("ok", "success", "complete", "completed", "accepted")

LOOKS_FOR = {
    "body": "event attributes (as arguments) and outcome attributes (as the answer)",
    "actor": "event attributes " + ", ".join(ACTOR_KEYS),
    "role": "event attributes " + ", ".join(ROLE_KEYS),
    "session": "event attributes "
    + ", ".join(SESSION_KEYS)
    + "; related objects typed or qualified "
    + "/".join(SESSION_TYPES),
    "objects": "event relationships (event_object)",
}


@dataclass(slots=True)
class _Touch:
    time: float
    order: int
    refused: bool
    hints: frozenset[str]


@dataclass
class _Objects:
    """Object types, their attribute changes, and the events that touched them; once
    :meth:`settle` ran, each change sits on the event that made it."""

    types: dict[str, str] = field(default_factory=dict)
    changes: dict[str, list[tuple[float, int, str, JSON]]] = field(default_factory=dict)
    touches: dict[str, list[_Touch]] = field(default_factory=lambda: defaultdict(list))
    # id -> [(position among the object's touches from which it shows, seq, name, value)]
    placed: dict[str, list[tuple[int, int, str, JSON]]] = field(default_factory=dict)
    positions: dict[str, dict[int, int]] = field(default_factory=dict)
    # id -> the event that made the object: its first touch, with a change of its time
    created_by: dict[str, int] = field(default_factory=dict)

    def add(self, oid: str, otype: str) -> None:
        self.types[oid] = otype
        self.changes.setdefault(oid, [])

    def set(self, oid: str, time: float | None, name: str, value: JSON) -> None:
        changes = self.changes.setdefault(oid, [])
        changes.append((time if time is not None else 0.0, len(changes), name, value))

    def touch(
        self, oid: str, time: float | None, order: int, refused: bool, hints: frozenset[str]
    ) -> None:
        self.touches[oid].append(_Touch(time if time is not None else 0.0, order, refused, hints))

    def settle(self) -> None:
        """Put each attribute change on the event that made it (module docstring)."""
        for oid, changes in self.changes.items():
            touches = sorted(self.touches.get(oid, []), key=lambda t: (t.time, t.order))
            self.positions[oid] = {t.order: i for i, t in enumerate(touches)}
            times = [t.time for t in touches]
            eligible = [i for i, t in enumerate(touches) if not t.refused]
            placed: list[tuple[int, int, str, JSON]] = []
            by_name: dict[str, list[tuple[float, int, JSON]]] = defaultdict(list)
            for when, seq, name, value in changes:
                by_name[name].append((when, seq, value))
            for name, items in by_name.items():
                items.sort(key=lambda c: (c[0], c[1]))
                j = 0  # the next eligible touch that may take a change of ``name``
                for when, seq, value in items:
                    while j < len(eligible) and touches[eligible[j]].time < when:
                        j += 1
                    if j < len(eligible) and touches[eligible[j]].time == when:
                        group = [
                            k for k in range(j, len(eligible)) if touches[eligible[k]].time == when
                        ]
                        hinted = [k for k in group if str(value) in touches[eligible[k]].hints]
                        k = hinted[0] if hinted else group[0]
                        placed.append((eligible[k], seq, name, value))
                        if eligible[k] == 0:
                            self.created_by[oid] = touches[0].order
                        j = k + 1
                    elif j > 0 and touches[eligible[j - 1]].time == when:
                        # more changes at ``when`` than events: the last one there holds it
                        placed.append((eligible[j - 1], seq, name, value))
                    else:  # made between events: it shows from the next touch on
                        at = bisect.bisect_left(times, when)
                        if at < len(touches):
                            placed.append((at, seq, name, value))
            placed.sort(key=lambda p: (p[0], p[1]))
            self.placed[oid] = placed

    def untouched(self) -> list[tuple[str, str, dict[str, JSON]]]:
        """(type, id, last attributes) of the objects the log declares that no event
        relates to: records of the system all the same (a customer who never ordered)."""
        out = []
        for oid, otype in self.types.items():
            if self.touches.get(oid):
                continue
            state: dict[str, JSON] = {}
            for _, _, name, value in sorted(self.changes.get(oid, []), key=lambda c: c[:2]):
                state[name] = value
            out.append((otype, oid, state))
        return out

    def state_after(self, oid: str, order: int) -> dict[str, JSON] | None:
        """The object's attributes as they stood after event ``order`` (before it, for
        an event that changed nothing of it)."""
        at = self.positions.get(oid, {}).get(order)
        if at is None:
            return None
        state: dict[str, JSON] = {}
        for pos, _, name, value in self.placed.get(oid, []):
            if pos > at:
                break
            state[name] = value
        # an object the log declares is a record even with no attributes
        return state if state or oid in self.types else None


def _refused(attrs: dict[str, JSON]) -> bool:
    outcome = attrs.get("outcome")
    if outcome not in (None, "") and str(outcome).lower() not in _OK:
        return True
    for key in HTTP_STATUS_KEYS:
        try:
            if attrs.get(key) is not None and int(attrs[key]) >= 400:  # type: ignore[arg-type]
                return True
        except (TypeError, ValueError):
            continue
    return False


def _hints(attrs: dict[str, JSON]) -> frozenset[str]:
    return frozenset(
        str(v) for v in attrs.values() if isinstance(v, str | int) and len(str(v)) < 80
    )


def _pick(
    attrs: dict[str, JSON], mapping: FieldMap | None, name: str, keys: tuple[str, ...]
) -> tuple[str, JSON] | None:
    if mapping is not None:
        found = mapping.first(name, attrs)
        if found is not None:
            return found
    return next(((k, attrs[k]) for k in keys if attrs.get(k) not in (None, "")), None)


def _mapped_related(
    attrs: dict[str, JSON], mapping: FieldMap | None
) -> list[tuple[str, str | None, str]]:
    """(object id, qualifier, type) of the objects a mapping file names by attribute."""
    if mapping is None:
        return []
    return [
        (str(attrs[name]), name, otype)
        for otype, name in mapping.objects.items()
        if attrs.get(name) not in (None, "")
    ]


def _record(
    event_id: str,
    event_type: str,
    time: float | None,
    order: int,
    attrs: dict[str, JSON],
    related: list[tuple[str, str | None]],
    objects: _Objects,
    source: str,
    mapping: FieldMap | None,
) -> LogRecord:
    refs = [
        ObjectRef(objects.types.get(oid, "object"), oid, qualifier, objects.state_after(oid, order))
        for oid, qualifier in related
    ]
    known = {r.id for r in refs}
    person = _person(refs)
    if person is not None:  # the employee the event relates is who acted, not an object
        refs = [r for r in refs if r is not person]
    for oid, qualifier, otype in _mapped_related(attrs, mapping):
        if oid not in known:
            refs.append(ObjectRef(otype, oid, qualifier, objects.state_after(oid, order)))
    arguments = dict(attrs)
    taken: set[str] = set(mapping.mapped()) if mapping is not None else set()
    actor = _pick(attrs, mapping, "actor", ACTOR_KEYS)
    role = _pick(attrs, mapping, "role", ROLE_KEYS)
    named = _pick(attrs, mapping, "session", SESSION_KEYS)
    for found in (actor, role, named):
        if found is not None:
            taken.add(found[0])
    taken.update(ACTOR_KEYS + ROLE_KEYS + SESSION_KEYS)
    body = mapping.first("body", attrs) if mapping is not None else None
    mapped_response = mapping.first("response", attrs) if mapping is not None else None
    mapped_status = mapping.first("status", attrs) if mapping is not None else None
    mapped_error = mapping.failed(attrs) if mapping is not None else None
    arguments = {k: v for k, v in attrs.items() if k not in taken}
    method, route, path, status = pop_http(arguments)
    if mapped_status is not None:
        try:
            status = int(mapped_status[1])  # type: ignore[arg-type]
        except (TypeError, ValueError):
            pass
    answer = pop_outcome(arguments)
    if mapped_response is not None:
        answer = maybe_json(mapped_response[1])
    if body is not None:
        arguments = maybe_json(body[1])
    if isinstance(arguments, dict):
        # an object this event made is its outcome, not a parameter the caller names
        _name_objects(arguments, [r for r in refs if objects.created_by.get(r.id) != order])
    extra: dict[str, JSON] = {"event_id": event_id, "event_type": event_type}
    session_ref = next(
        (r for r in refs if r.type in SESSION_TYPES or (r.qualifier or "") in SESSION_TYPES), None
    )
    if named is not None:
        session = str(named[1])
    elif session_ref is not None:
        session = session_ref.id
    elif refs:
        session = f"{refs[0].type}:{refs[0].id}"
        extra["session_from"] = "object"
    else:
        session = event_id
        extra["session_from"] = "event"
    if actor is None and person is not None:
        actor = ("object", person.id)
        extra["actor_from"] = f"{person.type} ({person.qualifier or 'related'})"
        held = (person.state or {}) if role is None else {}
        found_role = next(
            (held[k] for k in PERSON_ROLE_KEYS if held.get(k) not in (None, "")), None
        )
        if found_role is not None:
            role = ("object", found_role)
    http = method is not None and route is not None
    return LogRecord(
        session=session,
        operation=route if http else event_type,  # type: ignore[arg-type]
        system="http" if http else "process",
        time=time,
        actor=str(actor[1]) if actor is not None else None,
        role=_role(role[1]) if role is not None else None,
        method=method if http else None,
        arguments=arguments,
        status=status,
        error=(status is not None and status >= 500)
        or bool(mapped_error)
        or (isinstance(answer, dict) and isinstance(answer.get("error"), dict)),
        response=answer,
        objects=refs,
        source=source,
        path=path if http else None,
        attributes=extra,
    )


def _person(refs: list[ObjectRef]) -> ObjectRef | None:
    """The one related object of a person's type (``employee``, ``user``...): the actor
    of an event that names none in its attributes; None when there is none or several."""
    people = [r for r in refs if r.type.lower() in PERSON_TYPES]
    return people[0] if len(people) == 1 else None


def _role(value: JSON) -> str:
    if isinstance(value, str) and "," in value:  # "senior_adjuster,finance": roles held
        return ",".join(sorted({v.strip() for v in value.split(",") if v.strip()}))
    if isinstance(value, list):
        return ",".join(sorted({str(v) for v in value}))
    return str(value)


def _name_objects(arguments: dict[str, JSON], refs: list[ObjectRef]) -> None:
    """Give the tool a parameter naming each object it acts on: ``<type>_id``, or
    ``<type>_ids`` for several of a type (an event's own attribute of that name wins)."""
    by_type: dict[str, list[str]] = defaultdict(list)
    for ref in refs:
        if ref.type not in SESSION_TYPES and ref.id not in by_type[ref.type]:
            by_type[ref.type].append(ref.id)
    for otype, ids in by_type.items():
        key = f"{otype}_id" if len(ids) == 1 else f"{otype}_ids"
        arguments.setdefault(key, ids[0] if len(ids) == 1 else ids)


def read(
    path: Path, report: ImportReport, *, mapping: FieldMap | None = None
) -> Iterator[LogRecord]:
    with open(path, "rb") as f:
        sqlite = f.read(16).startswith(b"SQLite format 3")
    yield from (_read_sqlite if sqlite else _read_json)(path, report, mapping)


def _json_events(
    path: Path,
) -> Iterator[tuple[int, dict, dict[str, JSON], list[tuple[str, str | None]]]]:
    for order, event in enumerate(iter_array(path, "events")):
        if not isinstance(event, dict):
            yield order, {}, {}, []
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
        yield order, event, attrs, related


def _touch_all(
    objects: _Objects,
    order: int,
    time: float | None,
    attrs: dict[str, JSON],
    related: list[tuple[str, str | None]],
    mapping: FieldMap | None,
) -> None:
    refused, hints = _refused(attrs), _hints(attrs)
    oids = [oid for oid, _ in related] + [oid for oid, _, _ in _mapped_related(attrs, mapping)]
    for oid in dict.fromkeys(oids):
        objects.touch(oid, time, order, refused, hints)


def _read_json(path: Path, report: ImportReport, mapping: FieldMap | None) -> Iterator[LogRecord]:
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
    try:  # first pass: which events touched which objects, in order
        for order, event, attrs, related in _json_events(path):
            if "type" in event:
                _touch_all(objects, order, parse_time(event.get("time")), attrs, related, mapping)
    except ValueError:
        pass  # the second pass meets the same fault and reports it
    objects.settle()
    report.declared.extend(objects.untouched())
    try:
        for order, event, attrs, related in _json_events(path):
            report.read += 1
            if "type" not in event:
                report.skip("OCEL event without a type", f"{path.name}: event #{order}")
                continue
            yield _record(
                str(event.get("id", report.read)),
                str(event["type"]),
                parse_time(event.get("time")),
                order,
                attrs,
                related,
                objects,
                f"{path.name}#{event.get('id')}",
                mapping,
            )
    except ValueError:
        report.skip("malformed OCEL events array (rest of it unread)")


def _table(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sqlite_events(
    db: sqlite3.Connection, report: ImportReport | None
) -> Iterator[tuple[str, str, float | None, dict[str, JSON]]]:
    """(event id, type, time, attributes) of every event, table by table."""
    tables = dict(db.execute("SELECT ocel_type, ocel_type_map FROM event_map_type"))
    for etype, suffix in tables.items():
        try:
            cursor = db.execute(f"SELECT * FROM {_table('event_' + suffix)}")
        except sqlite3.Error:
            if report is not None:
                report.skip(f"OCEL event table missing for type {etype!r}")
            continue
        columns = [c[0] for c in cursor.description]
        for row in cursor:
            data = dict(zip(columns, row, strict=True))
            eid = str(data.pop("ocel_id"))
            when = parse_time(data.pop("ocel_time", None))
            yield eid, str(etype), when, {k: v for k, v in data.items() if v is not None}


def _read_sqlite(path: Path, report: ImportReport, mapping: FieldMap | None) -> Iterator[LogRecord]:
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
        # the event table's row order is the log's event order (ties of time keep it)
        order = {
            str(eid): i
            for i, (eid,) in enumerate(db.execute("SELECT ocel_id FROM event ORDER BY rowid"))
        }
        related: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
        for eid, oid, qualifier in db.execute(
            "SELECT ocel_event_id, ocel_object_id, ocel_qualifier FROM event_object ORDER BY rowid"
        ):
            related[str(eid)].append((str(oid), qualifier))
        for eid, _, when, attrs in _sqlite_events(db, None):
            at = order.setdefault(eid, len(order))  # an event the event table left out
            _touch_all(objects, at, when, attrs, related.get(eid, []), mapping)
        objects.settle()
        report.declared.extend(objects.untouched())
        for eid, etype, when, attrs in _sqlite_events(db, report):
            report.read += 1
            yield _record(
                eid,
                etype,
                when,
                order[eid],
                attrs,
                related.get(eid, []),
                objects,
                f"{path.name}#{eid}",
                mapping,
            )
    except sqlite3.DatabaseError as exc:
        report.skip(f"unreadable OCEL SQLite ({exc.__class__.__name__})", f"{path.name}: {exc}")
    finally:
        db.close()
