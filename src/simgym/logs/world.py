"""A business world from log records: a folder a person can read, and a simulator can
load, describing what the company's systems do.

``interface.json``  every operation: calls, an argument schema inferred from the calls,
                    status codes seen and the shape of each status's answers
``entities.json``   object types, the fields their records have, and each object's
                    last-seen record (masked)
``rules.json``      mined rules: status life cycles (transitions seen, with counts, and
                    transitions refused with 409), event flows per object type,
                    permissions (401/403 by operation and role), required fields (400/422),
                    latency percentiles and error rates per operation
``manifest.json``   version, when, source files and formats, counts, skips, masking rules
``sessions.jsonl``  one line per session: its records in time order (masked)

Records are read once, as a stream, in bounded memory: sessions and each object's
history (for life cycles and event flows) go through a temporary SQLite file beside the
world; in memory stay one summary per operation (schemas, counters, latencies: exact up
to :data:`EXACT_LATENCIES` calls, then a log-bucketed histogram, see :class:`Latencies`)
and at most :data:`MAX_ENTITIES` last-seen records per object type.
"""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from simgym.core.files import replacing, write_atomic
from simgym.logs.artifacts import add_artifacts
from simgym.logs.coverage import COVERAGE_KEY, CoverageCounter
from simgym.logs.mask import RULES, Masker
from simgym.logs.model import JSON, ImportReport, LogRecord
from simgym.logs.schema import Shape

VERSION = 1
STATUS_KEYS = ("status", "state", "lifecycle", "stage")
MAX_ENTITIES = 10_000  # last-seen records kept per object type
EXACT_LATENCIES = 10_000  # latencies kept as they are, per operation, before a histogram
LATENCY_ACCURACY = 0.01  # relative accuracy of the histogram's percentiles
_INF = float("inf")


def _status_of(state: dict[str, JSON] | None) -> str | None:
    if not state:
        return None
    for key in STATUS_KEYS:
        value = state.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return str(value)
    return None


def key_field(state: dict[str, JSON], object_id: str) -> str | None:
    """The field of an object's state that holds its id: ``id`` where it does, else the
    first field holding the id's value (a key of any name: ``order_number``)."""
    if str(state.get("id")) == object_id:
        return "id"
    for name, value in state.items():
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value) == object_id:
            return name
    return None


def _keyed(state: dict[str, JSON], key: str, object_id: str) -> dict[str, JSON]:
    """A record with its key: a process log's object states (OCEL, XES) hold their
    attributes only, the id beside them."""
    return state if key in state else {key: object_id, **state}


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of sorted ``values``, by linear interpolation."""
    if len(values) == 1:
        return values[0]
    position = q * (len(values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


class Latencies:
    """An operation's latencies in bounded memory. The first :data:`EXACT_LATENCIES`
    values are kept as they are, so their percentiles are exact (linear interpolation,
    as :func:`percentile`). Past that they move into a histogram with logarithmic
    buckets (the idea of DDSketch, Masson et al., VLDB 2019): a value ``x > 0`` counts in
    bucket ``ceil(log(x) / log(g))`` with ``g = (1 + a) / (1 - a)``, ``a`` =
    :data:`LATENCY_ACCURACY`, and a quantile is its bucket's middle, within ``a``
    (1%) of the value at that rank, whatever the number of calls; a few hundred buckets
    cover microseconds to hours. Values of 0 or less count apart and read as the least
    seen; every estimate stays within the least and greatest values seen."""

    _LOG_GAMMA = math.log((1 + LATENCY_ACCURACY) / (1 - LATENCY_ACCURACY))

    def __init__(self) -> None:
        self.count = 0
        self.values: list[float] | None = []  # None once the histogram took over
        self.buckets: Counter[int] = Counter()
        self.nonpositive = 0
        self.low = _INF
        self.high = -_INF

    def __bool__(self) -> bool:
        return self.count > 0

    def add(self, value: float) -> None:
        if value != value:  # NaN: no latency
            return
        self.count += 1
        self.low, self.high = min(self.low, value), max(self.high, value)
        if self.values is not None:
            self.values.append(value)
            if len(self.values) <= EXACT_LATENCIES:
                return
            values, self.values = self.values, None
            for v in values:
                self._bucket(v)
        else:
            self._bucket(value)

    def _bucket(self, value: float) -> None:
        if value <= 0:
            self.nonpositive += 1
        else:
            self.buckets[math.ceil(math.log(value) / self._LOG_GAMMA)] += 1

    def quantile(self, q: float) -> float:
        """The ``q`` quantile (0..1): exact while the values are kept, else within
        :data:`LATENCY_ACCURACY` of it."""
        if self.values is not None:
            return percentile(sorted(self.values), q)
        rank = q * (self.count - 1)
        seen = self.nonpositive
        if rank < seen:
            return self.low
        estimate = self.high
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if rank < seen:
                # the middle of (g^(i-1), g^i] in relative terms: 2 g^i / (g + 1)
                gamma = math.exp(self._LOG_GAMMA)
                estimate = 2 * gamma**index / (gamma + 1)
                break
        return min(max(estimate, self.low), self.high)


def _fields_named(response: JSON) -> list[str]:
    """Field names an error answer blames: FastAPI/pydantic ``detail[].loc`` or
    ``errors[].field``/``path``, or ``{"field": ...}`` / ``{"missing": [...]}``."""
    found: list[str] = []
    if not isinstance(response, dict):
        return found
    for key in ("detail", "errors"):
        items = response.get(key)
        if isinstance(items, list):
            for item in items:
                if isinstance(item, dict):
                    loc = item.get("loc") or item.get("path") or item.get("field")
                    if isinstance(loc, list) and loc:
                        found.append(str(loc[-1]))
                    elif isinstance(loc, str):
                        found.append(loc)
    for key in ("field", "missing", "required"):
        value = response.get(key)
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list):
            found.extend(str(v) for v in value)
    return found


_PARAM = re.compile(r"\{[^}]*\}")
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def _operation_id(record: LogRecord) -> str:
    """One id for one HTTP operation however its route's parameters were named: a route
    template ("/loans/{loan_id}") and a path made into one ("/loans/{id}") are the same."""
    return _PARAM.sub("{}", record.key) if record.method else record.key


class _Operation:
    def __init__(self, record: LogRecord) -> None:
        self.system = record.system
        self.method = record.method
        self.names: Counter[str] = Counter()  # route templates as the logs named them
        self.calls = 0
        self.failed = 0
        self.arguments = Shape()
        self.ok_arguments = Shape()
        self.statuses: Counter[str] = Counter()
        self.responses: dict[str, Shape] = {}
        self.durations = Latencies()
        self.roles_ok: Counter[str] = Counter()
        self.denied: Counter[tuple[str, int]] = Counter()
        self.invalid: list[tuple[int, frozenset[str] | None, list[str]]] = []
        self.pages = 0  # answers that were HTML pages: a screen of the web app
        self.title: str | None = None
        self.ok = 0  # successful calls
        self.made: Counter[str] = Counter()  # types of objects first seen in a success
        self.acted: Counter[str] = Counter()  # types of the other objects successes named

    @property
    def route(self) -> str:
        """The best name seen: a template with named parameters over generic "{id}"s."""
        return min(self.names, key=lambda n: (_PARAM.sub("{id}", n) == n, -self.names[n], n))

    @property
    def name(self) -> str:
        return f"{self.method} {self.route}" if self.method else self.route

    def add(self, r: LogRecord) -> None:
        self.names[r.operation] += 1
        self.calls += 1
        mime = r.attributes.get("mime") if isinstance(r.attributes, dict) else None
        if isinstance(mime, str) and "html" in mime:
            self.pages += 1
            if self.title is None and isinstance(r.response, str):
                found = _TITLE.search(r.response)
                self.title = " ".join(found.group(1).split())[:120] if found else None
        self.failed += r.failed
        if r.arguments is not None:
            self.arguments.add(r.arguments)
        outcome = str(r.status) if r.status is not None else ("error" if r.error else "ok")
        self.statuses[outcome] += 1
        self.responses.setdefault(outcome, Shape()).add(r.response)
        if r.duration_ms is not None:
            self.durations.add(r.duration_ms)
        if not r.failed:
            if r.arguments is not None:
                self.ok_arguments.add(r.arguments)
            self.roles_ok[r.role or "(none)"] += 1
        if r.status in (401, 403):
            self.denied[(r.role or "(none)", r.status)] += 1
        if r.status in (400, 422) and len(self.invalid) < 1000:
            keys = frozenset(r.arguments) if isinstance(r.arguments, dict) else None
            self.invalid.append((r.status, keys, _fields_named(r.response)))

    def describe(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"name": self.name, "system": self.system}
        if self.method:
            out["method"], out["route"] = self.method, self.route
            if len(self.names) > 1:
                out["route_names"] = dict(self.names.most_common())
        out["calls"] = self.calls
        # the schema of valid calls: those that succeeded, when any did
        shape = self.ok_arguments if self.ok_arguments.count else self.arguments
        out["arguments"] = shape.schema() if shape.count else None
        out["statuses"] = dict(sorted(self.statuses.items()))
        out["responses"] = {k: s.schema() for k, s in sorted(self.responses.items())}
        if not self.method and (self.made or self.acted):
            # a process event has no route to say what it does: the objects it made and
            # those it acted on do (the twin binds it by them)
            out["objects"] = {
                "ok_calls": self.ok,
                "made": dict(self.made.most_common()),
                "acted_on": dict(self.acted.most_common()),
            }
        return out

    def screen(self) -> dict[str, JSON] | None:
        """The operation as a screen of a web app (HAR), when its answers were pages."""
        if not self.pages:
            return None
        return {
            "route": self.route,
            "method": self.method,
            "visits": self.pages,
            "title": self.title,
        }


_BATCH = 5000  # rows written to the scratch file at a time


class _Builder:
    """What a world keeps while records stream in. Each object's history goes to the
    table ``h`` of ``db`` (the scratch file): one row per record that touched it, with
    ``ev`` counting rows in arrival order (an object's first ``ev`` orders objects as they
    were first seen, and breaks ties of time and record)."""

    def __init__(self, masker: Masker, db: sqlite3.Connection) -> None:
        self.masker = masker
        self.ops: dict[str, _Operation] = {}
        self.op_index: dict[str, int] = {}
        self.entities: dict[str, dict[str, tuple[float, int, dict[str, JSON]]]] = defaultdict(dict)
        self.entity_fields: dict[str, Shape] = defaultdict(Shape)
        self.keys: dict[str, Counter[str]] = defaultdict(Counter)  # type -> key fields seen
        self.seen_objects: set[tuple[str, str]] = set()
        self.db = db
        db.execute(
            "CREATE TABLE h (type TEXT, id TEXT, ev INTEGER, time REAL, seq INTEGER,"
            " status TEXT, op INTEGER, code INTEGER)"
        )
        # (type, id, ev, time, seq, status or None, operation index, record status)
        self.events: list[tuple[str, str, int, float, int, str | None, int, int | None]] = []
        self.event_count = 0
        self.records = 0

    def declare(self, otype: str, oid: str, state: dict[str, JSON]) -> None:
        """An object the log declares that no record names: an entity with its state,
        masked as a record's would be (read after every record: never over one)."""
        masked = self.masker.value(state)
        mid = self.masker.text(oid)
        items = self.entities[otype]
        if mid in items or len(items) >= MAX_ENTITIES or not isinstance(masked, dict):
            return
        self.entity_fields[otype].add(masked)
        items[mid] = (_INF, -1, masked)

    def add(self, record: LogRecord, seq: int) -> LogRecord:
        r = self.masker.record(record)
        self.records += 1
        key = _operation_id(r)
        if key not in self.ops:
            self.ops[key] = _Operation(r)
            self.op_index[key] = len(self.op_index)
        self.ops[key].add(r)
        if not r.failed:
            op = self.ops[key]
            op.ok += 1
            for otype, oid in dict.fromkeys((o.type, o.id) for o in r.objects):
                fresh = (otype, oid) not in self.seen_objects
                (op.made if fresh else op.acted)[otype] += 1
        self.seen_objects.update((o.type, o.id) for o in r.objects)
        index = self.op_index[key]
        when = r.time if r.time is not None else _INF
        touched: set[tuple[str, str]] = set()
        # a refused call is the refusal of the object it acts on, not of those it links to
        # (a disbursement refused for its loan says nothing of the account it names)
        primary = any(o.qualifier != "linked" for o in r.objects)
        for obj in r.objects:
            if r.failed and primary and obj.qualifier == "linked":
                continue
            # an event may name one object twice (OCEL allows it): one step of its history
            if (obj.type, obj.id) in touched:
                continue
            touched.add((obj.type, obj.id))
            status = None
            if obj.state is not None and not r.failed:
                self.entity_fields[obj.type].add(obj.state)
                key = key_field(obj.state, obj.id)
                if key is not None:
                    self.keys[obj.type][key] += 1
                seen = self.entities[obj.type].get(obj.id)
                if (seen is None or (when, seq) >= seen[:2]) and (
                    seen is not None or len(self.entities[obj.type]) < MAX_ENTITIES
                ):
                    state = obj.state
                    if obj.qualifier == "embedded" and seen is not None:
                        state = {**seen[2], **state}  # a record shown in part, inside another
                    self.entities[obj.type][obj.id] = (when, seq, state)
                status = _status_of(obj.state)
            self.events.append(
                (obj.type, obj.id, self.event_count, when, seq, status, index, r.status)
            )
            self.event_count += 1
        if len(self.events) >= _BATCH:
            self.flush()
        return r

    def key_of(self, otype: str) -> str:
        """The field that holds a record's key in the type's states (``id`` unless they
        named it otherwise, as ``order_number``)."""
        seen = self.keys.get(otype)
        return seen.most_common(1)[0][0] if seen else "id"

    def flush(self) -> None:
        self.db.executemany("INSERT INTO h VALUES (?, ?, ?, ?, ?, ?, ?, ?)", self.events)
        self.events.clear()

    def histories(self) -> Iterable[tuple[str, list[tuple[str | None, int, int | None]]]]:
        """(type, [(status, operation index, record status)]) per object, in time order,
        objects in the order they were first seen; one object in memory at a time."""
        self.flush()
        query = (
            "SELECT type, status, op, code, MIN(ev) OVER (PARTITION BY type, id) AS first"
            " FROM h ORDER BY first, time, seq, ev"
        )
        current, otype, events = None, "", []
        for row_type, status, op, code, first in self.db.execute(query):
            if first != current:
                if current is not None:
                    yield otype, events
                current, otype, events = first, row_type, []
            events.append((status, op, code))
        if current is not None:
            yield otype, events

    def rules(self) -> dict[str, JSON]:
        transitions: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
        initial: dict[str, Counter[str]] = defaultdict(Counter)
        refused: dict[str, Counter[tuple[str, str, int]]] = defaultdict(Counter)
        flows: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
        names = [op.name for op in self.ops.values()]  # by operation index
        for otype, events in self.histories():
            current: str | None = None
            previous_op: str | None = None
            for status, op, code in events:
                if code in (409, 412, 423) and current is not None:
                    refused[otype][(current, names[op], code)] += 1
                if status is not None and status != current:
                    if current is None:
                        initial[otype][status] += 1
                    else:
                        transitions[otype][(current, status)] += 1
                    current = status
                if code is None or code < 400:
                    if previous_op is not None:
                        flows[otype][(previous_op, names[op])] += 1
                    previous_op = names[op]
        life_cycles = {
            otype: {
                "status_keys": list(STATUS_KEYS),
                "initial": dict(initial[otype].most_common()),
                "transitions": [
                    {"from": a, "to": b, "count": n}
                    for (a, b), n in transitions[otype].most_common()
                ],
                "refused": [
                    {"from": a, "operation": op, "status": code, "count": n}
                    for (a, op, code), n in refused[otype].most_common()
                ],
            }
            for otype in sorted(set(transitions) | set(initial) | set(refused))
        }
        permissions, required, performance = [], [], []
        for op in sorted(self.ops.values(), key=lambda o: o.name):
            key = op.name
            for (role, code), n in sorted(op.denied.items()):
                permissions.append(
                    {
                        "operation": key,
                        "role": role,
                        "status": code,
                        "count": n,
                        "allowed_roles": sorted(op.roles_ok),
                    }
                )
            needed = set(op.ok_arguments.required()) if op.ok_arguments.count else set()
            blamed: Counter[tuple[str, int]] = Counter()
            for code, keys, named in op.invalid:
                fields = set(named)
                if keys is not None:
                    fields |= needed - keys
                for f in fields:
                    blamed[(f, code)] += 1
            for (f, code), n in sorted(blamed.items()):
                required.append({"operation": key, "field": f, "status": code, "count": n})
            row: dict[str, JSON] = {
                "operation": key,
                "calls": op.calls,
                "error_rate": round(op.failed / op.calls, 4) if op.calls else 0.0,
            }
            if op.durations:
                for name, q in (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99)):
                    row[name] = round(op.durations.quantile(q), 3)
            performance.append(row)
        return {
            "life_cycles": life_cycles,
            "event_flows": {
                otype: [{"from": a, "to": b, "count": n} for (a, b), n in c.most_common()]
                for otype, c in sorted(flows.items())
            },
            "permissions": permissions,
            "required_fields": required,
            "performance": performance,
        }


def _write_sessions(db: sqlite3.Connection, f) -> int:
    """Write one line per session from the scratch table ``r`` (each record's body as it
    comes, so one long session costs no memory) and return how many sessions there were."""
    current, sessions = None, 0
    query = "SELECT session, body FROM r ORDER BY session, time, seq"
    for session, body in db.execute(query):
        if session != current:
            if current is not None:
                f.write("]}\n")
            f.write(f'{{"session": {json.dumps(session)}, "records": [')
            current, sessions = session, sessions + 1
        else:
            f.write(", ")
        f.write(body)
    if current is not None:
        f.write("]}\n")
    return sessions


def _write_json(path: Path, data: JSON) -> None:
    write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def build_world(
    records: Iterable[LogRecord],
    out_dir: str | os.PathLike[str],
    *,
    report: ImportReport | None = None,
    mask_key: str = "simgym",
) -> dict[str, JSON]:
    """Write a business world built from ``records`` (read once, as they come) into
    ``out_dir`` and return its manifest. ``report`` (the import's) fills the manifest's
    sources and skips; ``mask_key`` keys the pseudonyms (same key, same pseudonyms)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    scratch = out / ".sessions.sqlite"
    scratch.unlink(missing_ok=True)
    db = sqlite3.connect(scratch)
    try:
        db.execute("PRAGMA journal_mode = OFF")  # a scratch file: nothing to roll back to
        db.execute("PRAGMA synchronous = OFF")
        db.execute("CREATE TABLE r (session TEXT, time REAL, seq INTEGER, body TEXT)")
        builder = _Builder(Masker(mask_key), db)
        coverage = CoverageCounter()
        batch: list[tuple[str, float, int, str]] = []
        for seq, record in enumerate(records):
            coverage.add(record)
            masked = builder.add(record, seq)
            when = masked.time if masked.time is not None else _INF
            batch.append((masked.session, when, seq, json.dumps(masked.to_json(), default=str)))
            if len(batch) >= _BATCH:
                db.executemany("INSERT INTO r VALUES (?, ?, ?, ?)", batch)
                batch.clear()
        db.executemany("INSERT INTO r VALUES (?, ?, ?, ?)", batch)
        for otype, oid, state in report.declared if report is not None else []:
            builder.declare(otype, oid, state)
        db.execute("CREATE INDEX ix ON r (session, time, seq)")
        with replacing(out / "sessions.jsonl") as f:
            sessions = _write_sessions(db, f)
        rules = builder.rules()
    finally:
        db.close()
        scratch.unlink(missing_ok=True)

    operations = sorted((op.describe() for op in builder.ops.values()), key=lambda o: o["name"])
    screens = [op.screen() for op in builder.ops.values() if op.pages]
    interface: dict[str, JSON] = {"version": VERSION, "operations": operations}
    if screens:  # a browser's log (HAR): the pages the users saw, by route
        interface["screens"] = sorted(screens, key=lambda x: str(x["route"]))  # type: ignore[index]
    _write_json(out / "interface.json", interface)
    entities = {
        otype: {
            "count": len(items),
            "key": builder.key_of(otype),
            "fields": builder.entity_fields[otype].schema(),
            "records": {
                oid: _keyed(state, builder.key_of(otype), oid)
                for oid, (_, _, state) in sorted(items.items())
            },
        }
        for otype, items in sorted(builder.entities.items())
    }
    _write_json(out / "entities.json", {"version": VERSION, "types": entities})
    _write_json(out / "rules.json", {"version": VERSION, **rules})
    manifest: dict[str, JSON] = {
        "version": VERSION,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "sources": report.files if report else [],
        "counts": {
            "read": report.read if report else builder.records,
            "records": builder.records,
            "sessions": sessions,
            "operations": len(builder.ops),
            "entity_types": len(entities),
            "entities": sum(e["count"] for e in entities.values()),
        },
        "skipped": {
            "total": report.skipped_total if report else 0,
            "reasons": dict(report.skipped.most_common()) if report else {},
        },
        "masking": {"method": "HMAC-SHA256 pseudonyms under one key", "rules": RULES},
        "files": ["interface.json", "entities.json", "rules.json", "sessions.jsonl"],
        # what the logs carried, field by field, and why the world may not be a twin
        COVERAGE_KEY: coverage.report(
            sessions=sessions,
            entity_types=len(entities),
            looked_for=report.looked_for if report else None,
        ),
    }
    _write_json(out / "manifest.json", manifest)
    _mine(out, manifest)
    return add_artifacts(out, manifest)  # experience, SFT rows, tasks (logs/artifacts.py)


def _mine(out: Path, manifest: dict[str, JSON]) -> None:
    """Mine the operations' behaviour (guards, effects) into ``behaviour.json``; a world
    the twin cannot serve (no operation with a route) keeps the reason instead."""
    from simgym.logs.behaviour import BEHAVIOUR_FILE, mine_behaviour
    from simgym.logs.faults import FAULTS_FILE, write_faults
    from simgym.logs.twin import WorldError

    try:
        mine_behaviour(out)
        write_faults(out)
    except WorldError as exc:
        manifest["behaviour"] = f"not mined: {exc}"
    else:
        files = [*manifest["files"], BEHAVIOUR_FILE, FAULTS_FILE]  # type: ignore[misc]
        manifest["files"] = files
    _write_json(out / "manifest.json", manifest)
