"""The back office's history as an OCEL 2.0 object-centric event log, JSON and SQLite.

Events are the audit log's entries: the accepted state changes and the refusals it
records (403 by role or limit, 409 by life cycle; reads that were allowed change nothing
and are not audited), one event type per operation. Each event carries its caller
(``actor``, ``role``, ``session``), its outcome (``outcome`` "ok" or "refused", ``code``
for a refusal) and the HTTP call it came in as, under OpenTelemetry's names
(``http.request.method``, ``http.route``, ``url.path``, ``http.response.status_code``), as
an API gateway's process-mining extract has them. A refusal is related to the object it
refused to change. Objects are the customers, accounts, KYC checks and loans, typed with
the API's resource names (``customer``, ``account``, ``kyc``, ``loan``); their attributes
carry every value they took, with its time. Object-to-object relations come from the
records (an account is ``owned_by`` a customer, a loan has an ``applicant`` and a
``disbursement_account``, a KYC check ``checks`` a customer).

Not here, because the audit log does not have them: request and response bodies, reads,
and refusals before a caller is known or of a request's fields (401, 400, 404, 422).

JSON: ``{"objectTypes", "eventTypes", "objects", "events"}`` with the specification's
field names. SQLite: the specification's tables ``event``, ``object``, ``event_object``,
``object_object``, ``event_map_type``, ``object_map_type``, one ``event_<Type>`` table per
event type (``ocel_id``, ``ocel_time``, attributes) and one ``object_<Type>`` table per
object type (``ocel_id``, ``ocel_time``, ``ocel_changed_field``, attributes; the first
row of an object holds its initial values with ``ocel_changed_field`` NULL, each later
row one changed attribute).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

from simgym.real.backoffice.store import Bank

OBJECT_TYPES: dict[str, dict[str, str]] = {
    "customer": {
        "name": "string",
        "email": "string",
        "country": "string",
        "documents": "string",
        "kyc_status": "string",
    },
    "account": {
        "account_type": "string",
        "currency": "string",
        "status": "string",
        "balance": "integer",
    },
    "kyc": {"result": "string", "reason": "string"},
    "loan": {
        "amount": "integer",
        "term_months": "integer",
        "purpose": "string",
        "status": "string",
    },
}
_CALLER = {
    "actor": "string",
    "role": "string",
    "session": "string",
    "outcome": "string",
    "code": "string",
    "http.request.method": "string",
    "http.route": "string",
    "url.path": "string",
    "http.response.status_code": "integer",
}
_MOVE = {"from_status": "string", "to_status": "string", "reason": "string"}
EVENT_TYPES: dict[str, dict[str, str]] = {
    "create_customer": {**_CALLER, "country": "string", "documents": "integer"},
    "add_documents": {**_CALLER, "added": "string"},
    "run_kyc": {**_CALLER, "result": "string", "reason": "string"},
    "open_account": {**_CALLER, "account_type": "string", "currency": "string"},
    "create_loan": {**_CALLER, "amount": "integer", "term_months": "integer", "purpose": "string"},
    "submit_loan": {**_CALLER, **_MOVE},
    "review_loan": {**_CALLER, **_MOVE},
    "approve_loan": {**_CALLER, **_MOVE},
    "reject_loan": {**_CALLER, **_MOVE},
    "withdraw_loan": {**_CALLER, **_MOVE},
}
_SQL_TYPES = {
    "string": "TEXT",
    "integer": "INTEGER",
    "float": "REAL",
    "boolean": "INTEGER",
    "time": "TIMESTAMP",
}


def _scalar(value: Any) -> Any:
    """OCEL attribute values are scalars; lists become comma-separated strings."""
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return "" if value is None else value


def build_ocel(bank: Bank) -> dict[str, Any]:
    """The OCEL 2.0 JSON document of everything ``bank`` has recorded."""
    history = bank.history()
    # a refused read is an event of its own type, with the caller's attributes only
    event_types = dict(EVENT_TYPES)
    events = []
    for entry in history["audit"]:
        declared = event_types.setdefault(entry["operation"], dict(_CALLER))
        values = {
            "actor": entry["actor"],
            "role": entry["role"],
            "session": entry["session"] or "",
            "outcome": entry["outcome"],
            "http.request.method": entry["method"],
            "http.route": entry["route"],
            "url.path": entry["path"],
            "http.response.status_code": entry["status"],
            **entry["attributes"],
        }
        values = {k: v for k, v in values.items() if v is not None}
        events.append(
            {
                "id": f"ev-{entry['seq']}",
                "type": entry["operation"],
                "time": entry["time"],
                "attributes": [
                    {"name": k, "value": _scalar(values[k])} for k in declared if k in values
                ],
                "relationships": [
                    {"objectId": o["object_id"], "qualifier": o["qualifier"]}
                    for o in entry["objects"]
                ],
            }
        )
    objects: dict[str, dict[str, Any]] = {}
    for change in history["changes"]:
        obj = objects.setdefault(
            change["object_id"],
            {
                "id": change["object_id"],
                "type": change["object_type"],
                "attributes": [],
                "relationships": [],
            },
        )
        obj["attributes"].append(
            {"name": change["field"], "time": change["time"], "value": _scalar(change["value"])}
        )
    for relation in history["relations"]:
        if relation["source_id"] in objects:
            objects[relation["source_id"]]["relationships"].append(
                {"objectId": relation["target_id"], "qualifier": relation["qualifier"]}
            )
    return {
        "objectTypes": [
            {"name": name, "attributes": [{"name": a, "type": t} for a, t in attrs.items()]}
            for name, attrs in OBJECT_TYPES.items()
        ],
        "eventTypes": [
            {"name": name, "attributes": [{"name": a, "type": t} for a, t in attrs.items()]}
            for name, attrs in event_types.items()
        ],
        "objects": list(objects.values()),
        "events": events,
    }


def write_ocel_json(ocel: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.write_text(json.dumps(ocel, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def type_map(name: str) -> str:
    """The table-name suffix of a type (letters, digits and underscores)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def write_ocel_sqlite(ocel: dict[str, Any], path: str | Path) -> Path:
    """Write ``ocel`` (the JSON form) in the specification's SQLite layout."""
    path = Path(path)
    if path.exists():
        path.unlink()
    db = sqlite3.connect(path)
    try:
        with db:
            _write_tables(db, ocel)
    finally:
        db.close()
    return path


def _write_tables(db: sqlite3.Connection, ocel: dict[str, Any]) -> None:
    db.executescript("""
        CREATE TABLE event (ocel_id TEXT PRIMARY KEY, ocel_type TEXT);
        CREATE TABLE object (ocel_id TEXT PRIMARY KEY, ocel_type TEXT);
        CREATE TABLE event_object (ocel_event_id TEXT, ocel_object_id TEXT,
            ocel_qualifier TEXT, PRIMARY KEY (ocel_event_id, ocel_object_id, ocel_qualifier));
        CREATE TABLE object_object (ocel_source_id TEXT, ocel_target_id TEXT,
            ocel_qualifier TEXT, PRIMARY KEY (ocel_source_id, ocel_target_id, ocel_qualifier));
        CREATE TABLE event_map_type (ocel_type TEXT PRIMARY KEY, ocel_type_map TEXT);
        CREATE TABLE object_map_type (ocel_type TEXT PRIMARY KEY, ocel_type_map TEXT);
    """)
    event_attrs: dict[str, list[tuple[str, str]]] = {}
    for kind in ocel["eventTypes"]:
        table = "event_" + type_map(kind["name"])
        event_attrs[kind["name"]] = [(a["name"], a["type"]) for a in kind["attributes"]]
        columns = "".join(
            f", {_q(a)} {_SQL_TYPES.get(t, 'TEXT')}" for a, t in event_attrs[kind["name"]]
        )
        db.execute(
            f"CREATE TABLE {_q(table)} (ocel_id TEXT PRIMARY KEY, ocel_time TIMESTAMP{columns})"
        )
        db.execute(
            "INSERT INTO event_map_type VALUES (?, ?)", (kind["name"], type_map(kind["name"]))
        )
    object_attrs: dict[str, list[tuple[str, str]]] = {}
    for kind in ocel["objectTypes"]:
        table = "object_" + type_map(kind["name"])
        object_attrs[kind["name"]] = [(a["name"], a["type"]) for a in kind["attributes"]]
        columns = "".join(
            f", {_q(a)} {_SQL_TYPES.get(t, 'TEXT')}" for a, t in object_attrs[kind["name"]]
        )
        db.execute(
            f"CREATE TABLE {_q(table)} (ocel_id TEXT, ocel_time TIMESTAMP, "
            f"ocel_changed_field TEXT{columns})"
        )
        db.execute(
            "INSERT INTO object_map_type VALUES (?, ?)", (kind["name"], type_map(kind["name"]))
        )

    for event in ocel["events"]:
        db.execute("INSERT INTO event VALUES (?, ?)", (event["id"], event["type"]))
        names = [a for a, _ in event_attrs[event["type"]]]
        values = {a["name"]: a["value"] for a in event["attributes"]}
        db.execute(
            f"INSERT INTO {_q('event_' + type_map(event['type']))} VALUES "
            f"(?, ?{', ?' * len(names)})",
            (event["id"], event["time"], *(values.get(n) for n in names)),
        )
        db.executemany(
            "INSERT OR IGNORE INTO event_object VALUES (?, ?, ?)",
            [(event["id"], r["objectId"], r["qualifier"]) for r in event["relationships"]],
        )

    for obj in ocel["objects"]:
        db.execute("INSERT INTO object VALUES (?, ?)", (obj["id"], obj["type"]))
        names = [a for a, _ in object_attrs[obj["type"]]]
        table = _q("object_" + type_map(obj["type"]))
        insert = f"INSERT INTO {table} VALUES (?, ?, ?{', ?' * len(names)})"
        by_time: dict[str, dict[str, Any]] = defaultdict(dict)
        for attribute in obj["attributes"]:
            by_time[attribute["time"]][attribute["name"]] = attribute["value"]
        for i, (time, values) in enumerate(sorted(by_time.items())):
            if i == 0:
                db.execute(insert, (obj["id"], time, None, *(values.get(n) for n in names)))
                continue
            for changed, value in values.items():
                row = [value if n == changed else None for n in names]
                db.execute(insert, (obj["id"], time, changed, *row))
        db.executemany(
            "INSERT OR IGNORE INTO object_object VALUES (?, ?, ?)",
            [(obj["id"], r["objectId"], r["qualifier"]) for r in obj["relationships"]],
        )
