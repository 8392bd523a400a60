"""Process-mining logs read by their standards (issue 42): OCEL 2.0 sessions from event
attributes and relations, attribute changes put on events in event order within one
timestamp, a parameter naming the object each event acts on, OCEL JSON and SQLite of one
system giving the same sessions; XES object references by value."""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from simgym.logs.model import ImportReport
from simgym.logs.registry import read_logs
from simgym.logs.world import build_world

T0, T1 = "2025-03-01T09:00:00Z", "2025-03-01T10:00:00Z"


def _event(eid: str, etype: str, time: str, attrs: dict, related: list[tuple[str, str]]):
    return {
        "id": eid,
        "type": etype,
        "time": time,
        "attributes": [{"name": k, "value": v} for k, v in attrs.items()],
        "relationships": [{"objectId": o, "qualifier": q} for o, q in related],
    }


# e2..e5 share one timestamp: a refused payment, a comment, the approval, the payment
EVENTS = [
    ("e1", "create invoice", T0, {"session_id": "S-1", "amount": 100}, [("INV-1", "invoice")]),
    ("e2", "pay invoice", T1, {"session_id": "S-1", "outcome": "refused", "code": "not_approved"},
     [("INV-1", "invoice")]),
    ("e3", "comment", T1, {"session_id": "S-1"}, [("INV-1", "invoice")]),
    ("e4", "approve invoice", T1, {"decision": "approved"}, [("INV-1", "invoice"), ("C-9", "case")]),
    ("e5", "pay invoice", T1, {}, [("INV-1", "invoice"), ("C-9", "case")]),
]  # fmt: skip
CHANGES = [(T0, "status", "created"), (T1, "status", "approved"), (T1, "status", "paid")]


def _ocel_json(path: Path) -> Path:
    doc = {
        "objectTypes": [
            {"name": "invoice", "attributes": [{"name": "status", "type": "string"}]},
            {"name": "case", "attributes": []},
        ],
        "eventTypes": [{"name": e[1], "attributes": []} for e in EVENTS],
        "objects": [
            {
                "id": "INV-1",
                "type": "invoice",
                "attributes": [{"name": n, "time": t, "value": v} for t, n, v in CHANGES],
            },
            {"id": "C-9", "type": "case", "attributes": []},
        ],
        "events": [_event(*e) for e in EVENTS],
    }
    path.write_text(json.dumps(doc, indent=1))
    return path


def _ocel_sqlite(path: Path) -> Path:
    """The same log in the standard's SQLite tables (one object row per change)."""
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE event (ocel_id TEXT PRIMARY KEY, ocel_type TEXT);
        CREATE TABLE object (ocel_id TEXT PRIMARY KEY, ocel_type TEXT);
        CREATE TABLE event_object (ocel_event_id TEXT, ocel_object_id TEXT, ocel_qualifier TEXT);
        CREATE TABLE object_object (ocel_source_id TEXT, ocel_target_id TEXT, ocel_qualifier TEXT);
        CREATE TABLE event_map_type (ocel_type TEXT, ocel_type_map TEXT);
        CREATE TABLE object_map_type (ocel_type TEXT, ocel_type_map TEXT);
        CREATE TABLE object_Invoice (ocel_id TEXT, ocel_time TEXT, ocel_changed_field TEXT,
                                     status TEXT);
        CREATE TABLE object_Case (ocel_id TEXT, ocel_time TEXT, ocel_changed_field TEXT);
        """
    )
    types = {e[1]: e[1].title().replace(" ", "") for e in EVENTS}
    for etype, suffix in types.items():
        db.execute("INSERT INTO event_map_type VALUES (?, ?)", (etype, suffix))
        db.execute(
            f"CREATE TABLE event_{suffix} (ocel_id TEXT, ocel_time TEXT, session_id TEXT, "
            "amount INTEGER, outcome TEXT, code TEXT, decision TEXT)"
        )
    # the type tables are read one after another: the event table's order must win
    for eid, etype, time, attrs, _ in reversed(EVENTS):
        db.execute(
            f"INSERT INTO event_{types[etype]} VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                eid,
                time,
                *(attrs.get(k) for k in ("session_id", "amount", "outcome", "code", "decision")),
            ),
        )
    for eid, etype, *_ in EVENTS:
        db.execute("INSERT INTO event VALUES (?, ?)", (eid, etype))
    for eid, _, _, _, related in EVENTS:
        for oid, qualifier in related:
            db.execute("INSERT INTO event_object VALUES (?, ?, ?)", (eid, oid, qualifier))
    db.execute("INSERT INTO object VALUES ('INV-1', 'invoice'), ('C-9', 'case')")
    db.execute("INSERT INTO object_map_type VALUES ('invoice', 'Invoice'), ('case', 'Case')")
    db.execute("INSERT INTO object_Invoice VALUES ('INV-1', ?, NULL, 'created')", (T0,))
    for time, name, value in CHANGES[1:]:
        db.execute("INSERT INTO object_Invoice VALUES ('INV-1', ?, ?, ?)", (time, name, value))
    db.commit()
    db.close()
    return path


def _records(path: Path):
    report = ImportReport()
    records = list(read_logs([path], report))
    assert report.skipped_total == 0, dict(report.skipped)
    return records


@pytest.mark.parametrize("form", ["json", "sqlite"])
def test_same_second_changes_land_on_their_events(tmp_path: Path, form: str) -> None:
    path = (
        _ocel_json(tmp_path / "log.json")
        if form == "json"
        else _ocel_sqlite(tmp_path / "log.sqlite")
    )
    records = sorted(_records(path), key=lambda r: r.attributes["event_id"])
    states = [(r.attributes["event_id"], r.objects[0].state) for r in records]
    assert states == [
        ("e1", {"status": "created"}),
        ("e2", {"status": "created"}),  # refused: changed nothing
        ("e3", {"status": "created"}),  # same second, but the approval is e4's
        ("e4", {"status": "approved"}),
        ("e5", {"status": "paid"}),
    ]
    # sessions: the event's session attribute, else the related case object
    assert [r.session for r in records] == ["S-1", "S-1", "S-1", "C-9", "C-9"]
    # each tool names the object it acts on; the one that made the invoice does not
    assert records[0].arguments == {"amount": 100}
    assert records[1].arguments == {"invoice_id": "INV-1"}
    assert records[4].arguments == {"invoice_id": "INV-1"}
    build_world(iter(records), tmp_path / "w")
    cycle = json.loads((tmp_path / "w" / "rules.json").read_text())["life_cycles"]["invoice"]
    assert cycle["initial"] == {"created": 1}
    assert sorted((t["from"], t["to"], t["count"]) for t in cycle["transitions"]) == [
        ("approved", "paid", 1),
        ("created", "approved", 1),
    ]


def test_unmarked_session_comes_from_the_first_object(tmp_path: Path) -> None:
    doc = {
        "objectTypes": [{"name": "order", "attributes": []}],
        "eventTypes": [{"name": "place", "attributes": []}],
        "objects": [{"id": "o1", "type": "order", "attributes": []}],
        "events": [_event("e1", "place", T0, {"channel": "web"}, [("o1", "order")])],
    }
    path = tmp_path / "log.json"
    path.write_text(json.dumps(doc))
    (r,) = _records(path)
    assert r.session == "order:o1" and r.attributes["session_from"] == "object"
    report = ImportReport()
    manifest = build_world(read_logs([path], report), tmp_path / "w", report=report)
    assert manifest["coverage"]["fields"]["session"]["share"] == 0.0
    assert "session_id" in manifest["coverage"]["not_found"]["session"]


def _sessions(path: Path) -> dict[str, list[tuple]]:
    found: dict[str, list[tuple]] = defaultdict(list)
    for r in _records(path):
        found[r.session].append(
            (
                r.time,
                r.key,
                r.status,
                json.dumps(r.arguments, sort_keys=True),
                tuple((o.type, o.id, json.dumps(o.state, sort_keys=True)) for o in r.objects),
            )
        )
    return {k: sorted(v) for k, v in found.items()}


def test_bank_ocel_json_and_sqlite_give_the_same_sessions(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("opentelemetry.sdk")
    from simgym.real.backoffice.driver import run_sessions

    run_sessions(12, 5, tmp_path)
    from_json, from_sqlite = _sessions(tmp_path / "ocel.json"), _sessions(tmp_path / "ocel.sqlite")
    assert len(from_json) >= 5
    assert not any(s.startswith(("loan:", "account:", "customer:")) for s in from_json)
    assert from_json == from_sqlite


XES = """<?xml version="1.0" encoding="UTF-8" ?>
<log xes.version="1849-2016" xmlns="http://www.xes-standard.org/">
  <trace>
    <string key="concept:name" value="case-1"/>
    {events}
  </trace>
</log>
"""


def _xes_event(name: str, resource: str, **attrs: str) -> str:
    inner = "".join(f'<string key="{k}" value="{v}"/>' for k, v in attrs.items())
    return (
        f'<event><string key="concept:name" value="{name}"/>'
        f'<string key="org:resource" value="{resource}"/>{inner}</event>'
    )


def test_xes_objects_by_value(tmp_path: Path) -> None:
    events = [
        _xes_event("receive invoice", "ann", invoice="INV-1001", currency="EUR", approver="bob"),
        _xes_event("approve invoice", "bob", invoice="INV-1001", currency="EUR", approver="bob"),
        _xes_event("receive invoice", "ann", invoice="INV-1002", currency="USD", approver="cid"),
        _xes_event("pay invoice", "cid", invoice="INV-1002", order="PO-77", currency="USD",
                   approver="cid"),
        _xes_event("close order", "cid", order_id="PO-77", currency="USD", approver="ann"),
    ]  # fmt: skip
    path = tmp_path / "log.xes"
    path.write_text(XES.format(events="\n".join(events)))
    records = _records(path)
    refs = [[(o.type, o.id) for o in r.objects if o.type != "case"] for r in records]
    assert refs == [
        [("invoice", "INV-1001")],
        [("invoice", "INV-1001")],
        [("invoice", "INV-1002")],
        [("invoice", "INV-1002"), ("order", "PO-77")],  # "order": a PO id seen as order_id
        [("order", "PO-77")],
    ]
    # people (org:resource values) and plain words are never objects
    assert all(o.type not in ("approver", "currency") for r in records for o in r.objects)


def test_mapping_file_on_process_logs(tmp_path: Path) -> None:
    from simgym.logs.mapping import load_map

    mapfile = tmp_path / "map.json"
    mapfile.write_text(
        json.dumps(
            {
                "actor": "handler",
                "role": "team",
                "session": "journey",
                "error": "failed",
                "objects": {"policy": "ref"},
            }
        )
    )
    mapping = load_map(mapfile)
    xes = tmp_path / "log.xes"
    xes.write_text(
        XES.format(
            events=_xes_event(
                "renew", "sys", handler="kim", team="ops", journey="J-1", failed="true", ref="POL 9"
            )  # fmt: skip
        )
    )
    (r,) = list(read_logs([xes], ImportReport(), mapping=mapping))
    assert (r.actor, r.role, r.session, r.error) == ("kim", "ops", "J-1", True)
    assert ("policy", "POL 9") in [(o.type, o.id) for o in r.objects]
    # the caller's fields are not arguments; the object reference is the tool's parameter
    assert r.arguments == {"ref": "POL 9"}

    doc = {
        "objectTypes": [{"name": "policy", "attributes": []}],
        "eventTypes": [{"name": "renew", "attributes": []}],
        "objects": [{"id": "POL-9", "type": "policy", "attributes": []}],
        "events": [
            _event(
                "e1",
                "renew",
                T0,
                {"handler": "kim", "journey": "J-1", "ref": "POL-9", "failed": "no"},
                [],
            )
        ],  # fmt: skip
    }
    ocel = tmp_path / "log.json"
    ocel.write_text(json.dumps(doc))
    (r,) = list(read_logs([ocel], ImportReport(), mapping=mapping))
    assert (r.actor, r.session, r.error) == ("kim", "J-1", False)
    assert [(o.type, o.id, o.state) for o in r.objects] == [("policy", "POL-9", {})]
    assert r.arguments == {"policy_id": "POL-9"}
