"""Business worlds from operation logs: every reader on data its real writer made where
one exists (OpenTelemetry SDK, Chromium's HAR), spec-shaped files for the rest, and a
world built from a small loan life cycle."""

from __future__ import annotations

import csv
import inspect
import json
import sqlite3
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simgym.logs import READERS, ImportReport, build_world, detect_format, read_logs
from simgym.logs.model import LogRecord, parse_time, templatize

# --------------------------------------------------------------------------- OTel SDK data


def _otel_exporter(path: Path):
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class OtlpJsonLines(SpanExporter):
        """What the Collector's file exporter writes: one export request per line."""

        def export(self, spans: Sequence) -> SpanExportResult:
            with open(path, "a", encoding="utf-8") as f:
                f.write(MessageToJson(encode_spans(spans), indent=None) + "\n")
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            pass

    return OtlpJsonLines()


T0 = 1_760_000_000 * 10**9  # ns


class _LoanService:
    """Spans a small loan API would emit: HTTP server spans with bodies, one tool call."""

    def __init__(self, path: Path) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        self.provider = TracerProvider(resource=Resource.create({"service.name": "loans"}))
        self.provider.add_span_processor(SimpleSpanProcessor(_otel_exporter(path)))
        self.tracer = self.provider.get_tracer("test.loans")
        self.clock = T0

    def call(self, session, user, role, method, route, path, status, request=None, response=None,
             ms=10.0, old_names=False):  # fmt: skip
        from opentelemetry.trace import SpanKind

        if old_names:
            attrs = {"http.method": method, "http.target": path, "http.status_code": status}
        else:
            attrs = {
                "http.request.method": method,
                "http.route": route,
                "url.path": path,
                "http.response.status_code": status,
            }
        attrs.update({"session.id": session, "enduser.id": user, "enduser.role": role})
        if request is not None:
            attrs["http.request.body"] = json.dumps(request)
        if response is not None:
            attrs["http.response.body"] = json.dumps(response)
        self.clock += 1_000_000_000
        span = self.tracer.start_span(
            f"{method} {route}", kind=SpanKind.SERVER, attributes=attrs, start_time=self.clock
        )
        span.end(end_time=self.clock + int(ms * 1e6))

    def other_spans(self) -> None:
        from opentelemetry.trace import SpanKind

        self.clock += 1_000_000_000
        tool = self.tracer.start_span(
            "execute_tool credit_score",
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "credit_score",
                "gen_ai.tool.call.arguments": json.dumps({"customer_email": "bob@bank.test"}),
                "gen_ai.tool.call.result": json.dumps({"score": 712}),
                "gen_ai.conversation.id": "agent-1",
            },
            start_time=self.clock,
        )
        tool.end(end_time=self.clock + 5_000_000)
        db = self.tracer.start_span("SELECT loans", kind=SpanKind.CLIENT, start_time=self.clock)
        db.end(end_time=self.clock + 1_000_000)


def _loan_traces(path: Path) -> Path:
    svc = _LoanService(path)
    people = [
        ("Alice Smith", "alice@bank.test", "123456789012", "12m"),
        ("Bob Jones", "bob@bank.test", "987654321098", "24m"),
        ("Carol White", "carol@bank.test", "555566667777", "12m"),
        ("Dan Brown", "dan@bank.test", "111122223333", "24m"),
    ]
    for i, (name, email, account, term) in enumerate(people, 1):
        loan = {
            "applicant_name": name,
            "email": email,
            "account_number": account,
            "amount": 1000 * i,
            "term": term,
            "start_date": f"2025-0{i}-01",
        }
        lid = f"L-{i}"
        state = {"id": lid, "status": "submitted", **loan}
        svc.call(
            f"s{i}", email, "applicant", "POST", "/loans", "/loans", 201, loan, state, ms=20 + i
        )
        approved = {**state, "status": "approved" if i != 4 else "rejected"}
        verb = "approve" if i != 4 else "reject"
        svc.call(f"s{i}", "olga@bank.test", "officer", "POST", f"/loans/{{loan_id}}/{verb}",
                 f"/loans/{lid}/{verb}", 200, None, approved, ms=40 + i)  # fmt: skip
        svc.call(f"s{i}", email, "applicant", "GET", "/loans/{loan_id}", f"/loans/{lid}", 200,
                 None, approved, ms=5, old_names=(i == 2))  # fmt: skip
    # an illegal transition (approve an approved loan) and a wrong role
    svc.call("s1", "olga@bank.test", "officer", "POST", "/loans/{loan_id}/approve",
             "/loans/L-1/approve", 409, None, {"detail": "loan L-1 is approved"})  # fmt: skip
    svc.call("s2", "bob@bank.test", "applicant", "POST", "/loans/{loan_id}/approve",
             "/loans/L-2/approve", 403, None, {"detail": "officers only"})  # fmt: skip
    # a 422 for a missing field
    svc.call("s3", "carol@bank.test", "applicant", "POST", "/loans", "/loans", 422,
             {"applicant_name": "Carol White", "email": "carol@bank.test", "term": "12m",
              "account_number": "555566667777", "start_date": "2025-03-02"},
             {"detail": [{"loc": ["body", "amount"], "msg": "Field required"}]})  # fmt: skip
    svc.other_spans()
    svc.provider.shutdown()
    with open(path, "a") as f:
        f.write('{"resourceSpans": [ broken\n')
    return path


def _read(path: Path, fmt: str = "auto") -> tuple[list[LogRecord], ImportReport]:
    report = ImportReport()
    return list(read_logs([path], report, format=fmt)), report


# --------------------------------------------------------------------------- readers


def test_otlp_reader_on_sdk_spans(tmp_path: Path) -> None:
    path = _loan_traces(tmp_path / "traces.jsonl")
    first = json.loads(path.read_text().splitlines()[0])
    assert "resourceSpans" in first  # the SDK's own encoding, as JSON
    assert detect_format(path) == "otlp"
    records, report = _read(path)
    http = [r for r in records if r.system == "http"]
    assert len(http) == 15
    create = http[0]
    assert (create.key, create.status, create.session) == ("POST /loans", 201, "s1")
    assert (create.actor, create.role) == ("alice@bank.test", "applicant")
    assert create.arguments["amount"] == 1000 and create.response["status"] == "submitted"
    assert create.duration_ms == pytest.approx(21.0)
    assert create.time == pytest.approx((T0 + 1_000_000_000) / 1e9)
    assert [(o.type, o.id, o.qualifier) for o in create.objects] == [("loan", "L-1", "created")]
    old = next(r for r in http if r.session == "s2" and r.method == "GET")
    assert old.operation == "/loans/{id}" and old.status == 200  # http.target templated
    assert [o.id for o in old.objects] == ["L-2"]
    tool = next(r for r in records if r.system == "tool")
    assert tool.operation == "credit_score" and tool.response == {"score": 712}
    assert tool.session == "agent-1" and tool.arguments == {"customer_email": "bob@bank.test"}
    assert report.skipped["unreadable OTLP line"] == 1
    assert report.skipped["HTTP client span (the server's span is the call)"] == 0
    assert report.skipped["span is neither a server call nor a tool call"] == 1
    assert report.records == 16 and report.read == 18


def test_ocel_json_and_sqlite(tmp_path: Path) -> None:
    doc = {
        "objectTypes": [
            {"name": "order", "attributes": [{"name": "status", "type": "string"}]},
            {"name": "item", "attributes": []},
        ],  # fmt: skip
        "eventTypes": [
            {"name": "place order", "attributes": [{"name": "resource", "type": "string"}]},
            {"name": "pay order", "attributes": []},
        ],  # fmt: skip
        "objects": [
            {
                "id": "o1",
                "type": "order",
                "attributes": [
                    {"name": "status", "time": "2025-01-01T00:00:00Z", "value": "placed"},
                    {"name": "status", "time": "2025-01-02T00:00:00Z", "value": "paid"},
                ],
                "relationships": [{"objectId": "i1", "qualifier": "contains"}],
            },
            {"id": "i1", "type": "item", "attributes": []},
        ],  # fmt: skip
        "events": [
            {
                "id": "e1",
                "type": "place order",
                "time": "2025-01-01T00:00:00Z",
                "attributes": [
                    {"name": "resource", "value": "ann@shop.test"},
                    {"name": "channel", "value": "web"},
                ],
                "relationships": [
                    {"objectId": "o1", "qualifier": "order"},
                    {"objectId": "i1", "qualifier": "item"},
                ],
            },
            {
                "id": "e2",
                "type": "pay order",
                "time": "2025-01-02T00:00:00Z",
                "attributes": [],
                "relationships": [{"objectId": "o1", "qualifier": "order"}],
            },
            {"id": "e3"},
        ],  # fmt: skip
    }
    path = tmp_path / "log.jsonocel"
    path.write_text(json.dumps(doc, indent=1))
    assert detect_format(path) == "ocel"
    records, report = _read(path)
    assert [r.operation for r in records] == ["place order", "pay order"]
    first = records[0]
    assert first.session == "order:o1" and first.actor == "ann@shop.test"
    # each related object's id is a parameter naming what the tool acts on, but for the
    # order this event made (its status set at the event's time): that id is its outcome
    assert first.arguments == {"channel": "web", "item_id": "i1"}
    assert [(o.type, o.id, o.qualifier) for o in first.objects] == [
        ("order", "o1", "order"),
        ("item", "i1", "item"),
    ]
    assert first.objects[0].state == {"status": "placed"}
    assert records[1].objects[0].state == {"status": "paid"}
    assert report.skipped["OCEL event without a type"] == 1

    db_path = tmp_path / "log.sqlite"
    db = sqlite3.connect(db_path)
    db.executescript(
        """
        CREATE TABLE event (ocel_id TEXT, ocel_type TEXT);
        CREATE TABLE object (ocel_id TEXT, ocel_type TEXT);
        CREATE TABLE event_object (ocel_event_id TEXT, ocel_object_id TEXT, ocel_qualifier TEXT);
        CREATE TABLE object_object (ocel_source_id TEXT, ocel_target_id TEXT, ocel_qualifier TEXT);
        CREATE TABLE event_map_type (ocel_type TEXT, ocel_type_map TEXT);
        CREATE TABLE object_map_type (ocel_type TEXT, ocel_type_map TEXT);
        CREATE TABLE event_PlaceOrder (ocel_id TEXT, ocel_time TEXT, resource TEXT);
        CREATE TABLE event_PayOrder (ocel_id TEXT, ocel_time TEXT);
        CREATE TABLE object_Order (ocel_id TEXT, ocel_time TEXT, ocel_changed_field TEXT,
                                   status TEXT);
        INSERT INTO event VALUES ('e1', 'place order'), ('e2', 'pay order');
        INSERT INTO object VALUES ('o1', 'order');
        INSERT INTO event_object VALUES ('e1', 'o1', 'order'), ('e2', 'o1', 'order');
        INSERT INTO event_map_type VALUES ('place order', 'PlaceOrder'), ('pay order', 'PayOrder');
        INSERT INTO object_map_type VALUES ('order', 'Order');
        INSERT INTO event_PlaceOrder VALUES ('e1', '2025-01-01 00:00:00', 'ann');
        INSERT INTO event_PayOrder VALUES ('e2', '2025-01-02 00:00:00');
        INSERT INTO object_Order VALUES ('o1', '1970-01-01 00:00:00', NULL, 'placed');
        INSERT INTO object_Order VALUES ('o1', '2025-01-02 00:00:00', 'status', 'paid');
        """
    )
    db.commit()
    db.close()
    assert detect_format(db_path) == "ocel"
    records, report = _read(db_path)
    by_op = {r.operation: r for r in records}
    assert set(by_op) == {"place order", "pay order"}
    assert by_op["place order"].actor == "ann"
    assert by_op["place order"].objects[0].state == {"status": "placed"}
    assert by_op["pay order"].objects[0].state == {"status": "paid"}
    world = build_world(read_logs([db_path], ImportReport()), tmp_path / "w")
    rules = json.loads((tmp_path / "w" / "rules.json").read_text())
    assert rules["life_cycles"]["order"]["transitions"] == [
        {"from": "placed", "to": "paid", "count": 1}
    ]
    assert world["counts"]["records"] == 2


XES = """<?xml version="1.0" encoding="UTF-8" ?>
<log xes.version="1849-2016" xmlns="http://www.xes-standard.org/">
  <extension name="Concept" prefix="concept" uri="http://www.xes-standard.org/concept.xesext"/>
  <global scope="event"><string key="concept:name" value="__INVALID__"/></global>
  <trace>
    <string key="concept:name" value="case-1"/>
    <event>
      <string key="concept:name" value="register claim"/>
      <date key="time:timestamp" value="2025-02-01T09:00:00.000+01:00"/>
      <string key="org:resource" value="Pete"/>
      <string key="lifecycle:transition" value="complete"/>
      <float key="amount" value="120.5"/>
      <int key="items" value="2"/>
      <boolean key="urgent" value="true"/>
    </event>
    <event>
      <string key="concept:name" value="pay claim"/>
      <date key="time:timestamp" value="2025-02-02T09:00:00.000+01:00"/>
      <string key="org:role" value="clerk"/>
    </event>
    <event><string key="org:resource" value="Nobody"/></event>
  </trace>
  <trace>
    <string key="concept:name" value="case-2"/>
    <event><string key="concept:name" value="register claim"/></event>
    <event><string key="concept:name" value="broken"
"""


def test_xes_streams_traces(tmp_path: Path) -> None:
    path = tmp_path / "claims.xes"
    path.write_text(XES)
    assert inspect.isgeneratorfunction(READERS.get("xes"))
    records, report = _read(path)
    assert [(r.session, r.operation) for r in records] == [
        ("case-1", "register claim"),
        ("case-1", "pay claim"),
        ("case-2", "register claim"),
    ]
    first = records[0]
    assert first.actor == "Pete" and records[1].role == "clerk"
    assert first.arguments == {"amount": 120.5, "items": 2, "urgent": True}
    assert first.response == {"lifecycle:transition": "complete"}  # an outcome, not an input
    assert first.time == parse_time("2025-02-01T08:00:00Z")
    assert report.skipped["XES event without concept:name"] == 1
    assert any(reason.startswith("XML ends early") for reason in report.skipped)


def test_mcp_jsonrpc_log(tmp_path: Path) -> None:
    lines = [
        {"time": "2025-03-01T10:00:00Z", "message": {"jsonrpc": "2.0", "id": 0,
         "method": "initialize", "params": {"clientInfo": {"name": "claude"}}}},
        {"time": "2025-03-01T10:00:00.1Z", "message": {"jsonrpc": "2.0", "id": 0, "result": {}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"time": "2025-03-01T10:00:01Z", "message": {"jsonrpc": "2.0", "id": 1,
         "method": "tools/call", "params": {"name": "get_invoice", "arguments": {"id": "INV-7"}}}},
        {"time": "2025-03-01T10:00:01.25Z", "message": {"jsonrpc": "2.0", "id": 1, "result": {
         "content": [{"type": "text", "text": '{"id": "INV-7", "total": 40}'}]}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "pay_invoice", "arguments": {"id": "INV-7"}}},
        {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "already paid"}],
         "isError": True}},
        {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "file:///a"}},
        {"jsonrpc": "2.0", "id": 3, "error": {"code": -32002, "message": "not found"}},
        {"jsonrpc": "2.0", "id": 99, "result": {}},
    ]  # fmt: skip
    path = tmp_path / "mcp.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n")
    assert detect_format(path) == "mcp"
    records, report = _read(path)
    assert [(r.operation, r.error) for r in records] == [
        ("get_invoice", False),
        ("pay_invoice", True),
        ("resources/read", True),
    ]
    get = records[0]
    assert get.arguments == {"id": "INV-7"} and get.response == {"id": "INV-7", "total": 40}
    assert get.actor == "claude" and get.duration_ms == pytest.approx(250.0)
    assert records[1].response == "already paid"
    assert report.skipped["handshake or listing (initialize)"] == 1
    assert report.skipped["notification (no reply expected)"] == 1
    assert report.skipped["response to no logged request"] == 2  # initialize's reply, id 99
    assert report.skipped["not a JSON-RPC message"] == 1


def test_trajectories_reader(tmp_path: Path) -> None:
    from simgym.core.trajectories import TrajectoryWriter
    from simgym.core.types import Action, Observation, Task, Trajectory, Turn

    path = tmp_path / "traj.jsonl"
    trajectory = Trajectory(
        task=Task(instruction="refund"),
        domain="mcp",
        agent={"name": "react"},
        turns=[
            Turn(
                index=0,
                action=Action.tool_call("refund", {"order": "A1"}),
                observation=Observation(text="refunded"),
                latency_s=0.5,
            ),  # fmt: skip
            Turn(index=1, action=Action.say("done"), observation=Observation(text="", error="x")),
        ],
    )
    writer = TrajectoryWriter(path, fsync=False)
    writer.write(trajectory)
    writer.close()
    with open(path, "a") as f:
        f.write("{broken\n")
    assert detect_format(path) == "trajectories"
    records, report = _read(path)
    assert [(r.operation, r.arguments, r.error) for r in records] == [
        ("refund", {"order": "A1"}, False),
        ("text", "done", True),
    ]
    assert records[0].session == trajectory.episode_id and records[0].actor == "react"
    assert records[0].duration_ms == 500.0 and records[0].system == "mcp"
    assert report.skipped["unreadable trajectory line"] == 1


def test_flat_csv_and_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "calls.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["session", "time", "actor", "role", "operation", "method", "route",
                    "request", "status", "response"])  # fmt: skip
        w.writerow(["a", "2025-01-01T00:00:00Z", "u1", "clerk", "", "POST", "/tickets",
                    '{"title": "x"}', "201", '{"id": "T-1", "status": "open"}'])  # fmt: skip
        w.writerow(["a", "1735689601", "u1", "clerk", "", "PUT", "/tickets/T-1/close",
                    "", "200", '{"id": "T-1", "status": "closed"}'])  # fmt: skip
        w.writerow(["a", "", "u1", "", "search", "", "", "plain text", "", "no json"])
        w.writerow(["a", "", "u1", "", "", "", "", "", "", ""])
        w.writerow(["a", "", "u1", "", "x", "GET", "/x", "", "oops", ""])
    assert detect_format(path) == "csv"
    records, report = _read(path)
    assert [r.key for r in records] == ["POST /tickets", "PUT /tickets/{id}/close", "search"]
    assert records[0].arguments == {"title": "x"} and records[0].status == 201
    assert records[1].time == 1735689601.0 == records[0].time + 1
    assert [(o.type, o.id) for o in records[1].objects] == [("ticket", "T-1")]
    assert records[2].arguments == "plain text" and records[2].response == "no json"
    assert report.skipped == {"row without an operation or route": 1, "status is not a number": 1}

    jpath = tmp_path / "calls.jsonl"
    rows = [{"session": "b", "operation": "lookup", "request": {"q": 1}, "response": [1, 2]}]
    jpath.write_text(json.dumps(rows[0]) + "\n[1, 2]\n{bad\n")
    assert detect_format(jpath) == "jsonl"
    records, report = _read(jpath)
    assert [(r.operation, r.arguments, r.response) for r in records] == [
        ("lookup", {"q": 1}, [1, 2])
    ]
    assert report.skipped["unreadable JSON line"] == 2


def test_jsonl_reader_streams_100k(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    line = '{"session": "s%d", "operation": "op", "request": {"n": %d}, "status": 200}\n'
    with open(path, "w") as f:
        for i in range(100_000):
            f.write(line % (i % 100, i))
    reader = READERS.get("jsonl")
    assert inspect.isgeneratorfunction(reader)
    report = ImportReport()
    stream = reader(path, report)
    first = next(stream)
    assert first.arguments == {"n": 0} and report.read == 1  # one line read, not the file
    assert sum(1 for _ in stream) == 99_999 and report.read == 100_000


def test_har_array_is_streamed(tmp_path: Path) -> None:
    entries = [
        {"startedDateTime": "2025-01-01T00:00:00.000Z", "time": 12.5,
         "request": {"method": "GET", "url": f"http://h/api/items/{i}", "queryString": []},
         "response": {"status": 200, "content": {"mimeType": "application/json",
                      "text": json.dumps({"id": str(i), "n": "x" * 50})}}}
        for i in range(3000)
    ]  # fmt: skip
    entries.append({"request": {"method": "GET", "url": "http://h/a.png"},
                    "response": {"status": 200, "content": {"mimeType": "image/png"}}})  # fmt: skip
    path = tmp_path / "big.har"
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    records, report = _read(path)
    assert len(records) == 3000 and records[-1].objects[0].id == "2999"
    assert records[0].key == "GET /api/items/{id}" and records[0].duration_ms == 12.5
    assert report.skipped["static resource (image, font, style)"] == 1


def test_templatize() -> None:
    assert templatize("/loans/L-1001/approve?x=1") == "/loans/{id}/approve"
    assert templatize("/users/3f2a9b1c-1111-2222-3333-444455556666") == "/users/{id}"
    assert templatize("/api/v1/items") == "/api/v1/items"  # "v1" is a word with a digit


# --------------------------------------------------------------------------- the world


def test_world_from_loan_traces(tmp_path: Path) -> None:
    traces = _loan_traces(tmp_path / "traces.jsonl")
    report = ImportReport()
    out = tmp_path / "world"
    manifest = build_world(read_logs([traces], report), out, report=report)
    assert sorted(p.name for p in out.iterdir()) == [
        "behaviour.json",
        "entities.json",
        "experience.db",
        "experience.jsonl",
        "faults.yaml",
        "interface.json",
        "manifest.json",
        "rules.json",
        "sessions.jsonl",
        "sft.jsonl",
        "tasks.jsonl",
    ]
    assert manifest["version"] == 1 and manifest["created_at"]
    assert manifest["sources"][0]["format"] == "otlp"
    assert manifest["counts"]["records"] == 16 and manifest["counts"]["sessions"] == 5
    assert manifest["skipped"]["reasons"]["unreadable OTLP line"] == 1
    assert any("emails" in rule for rule in manifest["masking"]["rules"])

    interface = {
        op["name"]: op for op in json.loads((out / "interface.json").read_text())["operations"]
    }
    create = interface["POST /loans"]
    assert create["statuses"] == {"201": 4, "422": 1}
    schema = create["arguments"]
    assert schema["type"] == "object"
    # required: present in every call that succeeded (the 422 call left out "amount")
    assert schema["required"] == [
        "account_number",
        "amount",
        "applicant_name",
        "email",
        "start_date",
        "term",
    ]
    props = schema["properties"]
    assert props["amount"]["type"] == "integer" and props["amount"]["minimum"] == 1000
    assert props["term"]["enum"] == ["12m", "24m"]
    assert props["email"]["format"] == "email" and "enum" not in props["applicant_name"]
    assert props["start_date"]["format"] == "date"
    assert create["responses"]["201"]["properties"]["status"]["type"] == "string"
    assert interface["POST /loans/{loan_id}/approve"]["statuses"] == {"200": 3, "403": 1, "409": 1}
    assert interface["credit_score"]["system"] == "tool"
    get = interface["GET /loans/{loan_id}"]  # the old-names span's path joins its template
    assert get["calls"] == 4 and get["route_names"] == {"/loans/{loan_id}": 3, "/loans/{id}": 1}
    assert "GET /loans/{id}" not in interface

    rules = json.loads((out / "rules.json").read_text())
    loans = rules["life_cycles"]["loan"]
    assert loans["initial"] == {"submitted": 4}
    assert loans["transitions"] == [
        {"from": "submitted", "to": "approved", "count": 3},
        {"from": "submitted", "to": "rejected", "count": 1},
    ]
    assert loans["refused"] == [
        {
            "from": "approved",
            "operation": "POST /loans/{loan_id}/approve",
            "status": 409,
            "count": 1,
        }
    ]
    assert rules["permissions"] == [
        {
            "operation": "POST /loans/{loan_id}/approve",
            "role": "applicant",
            "status": 403,
            "count": 1,
            "allowed_roles": ["officer"],
        }
    ]
    assert {"operation": "POST /loans", "field": "amount", "status": 422, "count": 1} in rules[
        "required_fields"
    ]
    perf = {row["operation"]: row for row in rules["performance"]}
    assert perf["POST /loans"]["error_rate"] == 0.2
    assert perf["POST /loans"]["p50_ms"] == pytest.approx(22.0)
    assert perf["GET /loans/{loan_id}"]["p99_ms"] == pytest.approx(5.0)
    assert perf["GET /loans/{loan_id}"]["calls"] == 4
    flows = rules["event_flows"]["loan"]
    assert {"from": "POST /loans", "to": "POST /loans/{loan_id}/approve", "count": 3} in flows

    # masking: nothing personal left anywhere, and one person is one pseudonym everywhere
    # (experience.db indexes experience.jsonl, read here as text)
    everything = "".join(p.read_text() for p in out.iterdir() if p.suffix != ".db")
    for secret in ("alice@bank.test", "Alice Smith", "123456789012", "olga@bank.test"):
        assert secret not in everything
    entities = json.loads((out / "entities.json").read_text())["types"]["loan"]
    assert entities["count"] == 4
    alice = entities["records"]["L-1"]
    assert alice["status"] == "approved" and alice["amount"] == 1000
    assert alice["email"].endswith("@example.com") and alice["applicant_name"].startswith("Person-")
    assert len(alice["account_number"]) == 12 and alice["account_number"].isdigit()
    sessions = [json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]
    s1 = next(s for s in sessions if s["session"] == "s1")
    created = s1["records"][0]
    assert created["arguments"]["email"] == alice["email"] == created["response"]["email"]
    assert created["arguments"]["account_number"] == alice["account_number"]
    # the actor is the applicant's email: one identity, one pseudonym (email-shaped)
    assert created["actor"] == created["arguments"]["email"] and created["role"] == "applicant"
    assert [r["status"] for r in s1["records"]] == [201, 200, 200, 409]  # in time order
    s3 = next(s for s in sessions if s["session"] == "s3")
    invalid = s3["records"][-1]
    assert invalid["status"] == 422
    assert invalid["arguments"]["applicant_name"] == s3["records"][0]["arguments"]["applicant_name"]
    # the same log, built again, gives the same pseudonyms
    again = tmp_path / "again"
    build_world(read_logs([traces], ImportReport()), again)
    assert (again / "entities.json").read_text() == (out / "entities.json").read_text()


def test_cli_import_and_inspect(tmp_path: Path) -> None:
    from simgym.cli.main import app

    traces = _loan_traces(tmp_path / "traces.jsonl")
    runner = CliRunner()
    help_text = runner.invoke(app, ["logs", "import", "--help"], env={"COLUMNS": "200"}).output
    for fmt in ("otlp", "ocel", "xes", "har", "mcp", "trajectories", "jsonl", "csv"):
        assert fmt in help_text
    out = tmp_path / "world"
    result = runner.invoke(app, ["logs", "import", str(traces), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "16 records" in result.output and "(otlp)" in result.output
    assert "unreadable OTLP line" in result.output
    result = runner.invoke(app, ["logs", "inspect", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for text in ("POST /loans/{loan_id}/approve", "loan", "submitted → approved", "applicant"):
        assert text in result.output
    bad = runner.invoke(app, ["logs", "import", str(traces), "--out", str(out), "-f", "nope"])
    assert bad.exit_code == 2 and "unknown format" in bad.output
    missing = runner.invoke(app, ["logs", "inspect", str(tmp_path / "none")])
    assert missing.exit_code == 2


# --------------------------------------------------------------------------- Chromium HAR

CHROMIUM = Path("/usr/bin/chromium")

PAGE = b"""<!doctype html><title>loans</title><script>
async function go() {
  const made = await fetch('/api/loans', {method: 'POST', headers: {'Content-Type':
    'application/json'}, body: JSON.stringify({amount: 500, email: 'eve@bank.test'})});
  const loan = await made.json();
  await fetch('/api/loans/' + loan.id);
  await fetch('/api/loans/L-404');
  document.title = 'done';
}
go();
</script>"""


class _Api(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/":
            self._send(200, PAGE, "text/html")
        elif self.path == "/api/loans/L-7":
            self._send(
                200, b'{"id": "L-7", "status": "submitted", "amount": 500}', "application/json"
            )
        else:
            self._send(404, b'{"detail": "no such loan"}', "application/json")

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._send(201, b'{"id": "L-7", "status": "submitted", "amount": 500}', "application/json")


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium")
def test_har_from_chromium(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    from simgym.real.web import CHROMIUM_ARGS

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    har = tmp_path / "session.har"
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=list(CHROMIUM_ARGS)
            )
            context = browser.new_context(record_har_path=str(har))
            page = context.new_page()
            page.goto(f"http://127.0.0.1:{server.server_port}/")
            page.wait_for_function("document.title === 'done'", timeout=15_000)
            context.close()  # writes the HAR
            browser.close()
    finally:
        server.shutdown()
    assert detect_format(har) == "har"
    records, report = _read(har)
    api = [r for r in records if r.operation.startswith("/api")]
    assert [(r.key, r.status) for r in api] == [
        ("POST /api/loans", 201),
        ("GET /api/loans/{id}", 200),
        ("GET /api/loans/{id}", 404),
    ]
    assert api[0].arguments == {"amount": 500, "email": "eve@bank.test"}
    assert api[0].response == {"id": "L-7", "status": "submitted", "amount": 500}
    assert [(o.type, o.id) for o in api[1].objects] == [("loan", "L-7")]
    assert api[0].time is not None and api[0].duration_ms is not None
    world = build_world(iter(records), tmp_path / "w")
    assert world["counts"]["operations"] >= 3
    interface = json.loads((tmp_path / "w" / "interface.json").read_text())
    assert [s["route"] for s in interface["screens"]] == ["/"]  # the page, not the API calls
    assert "eve@bank.test" not in (tmp_path / "w" / "sessions.jsonl").read_text()


def test_otlp_collector_style_line(tmp_path: Path) -> None:
    """The Collector's own JSON: hex ids, enum numbers, 64-bit ints as text."""

    def attr(key: str, value: dict) -> dict:
        return {"key": key, "value": value}

    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "name": "PUT /claims/{id}",
        "kind": 2,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000250000000",
        "attributes": [
            attr("http.request.method", {"stringValue": "PUT"}),
            attr("http.route", {"stringValue": "/claims/{id}"}),
            attr("url.path", {"stringValue": "/claims/C-9"}),
            attr("http.response.status_code", {"intValue": "500"}),
            attr("app.request.body", {"stringValue": '{"note": "x"}'}),
            attr("tags", {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "2"}]}}),
        ],
        "status": {"code": 2},
    }
    client = {**span, "kind": 3, "spanId": "eee19b7ec3c1b175"}
    line = {
        "resourceSpans": [
            {"resource": {"attributes": []}, "scopeSpans": [{"spans": [span, client]}]}
        ]
    }
    path = tmp_path / "collector.json"
    path.write_text(json.dumps(line) + "\n")
    assert detect_format(path) == "otlp"
    records, report = _read(path)
    (record,) = records
    assert record.key == "PUT /claims/{id}" and record.status == 500 and record.error
    assert record.session == "5b8efff798038103d269b633813fc60c"
    assert record.arguments == {"note": "x"} and record.duration_ms == pytest.approx(250.0)
    assert [(o.type, o.id) for o in record.objects] == [("claim", "C-9")]
    assert report.skipped["HTTP client span (the server's span is the call)"] == 1
    pretty = tmp_path / "pretty.json"  # one request, indented: streamed as one document
    pretty.write_text(json.dumps(line, indent=2))
    assert detect_format(pretty) == "otlp"
    assert [r.key for r in _read(pretty)[0]] == ["PUT /claims/{id}"]


def test_cli_imports_mixed_formats(tmp_path: Path) -> None:
    from simgym.cli.main import app

    xes = tmp_path / "claims.xes"
    xes.write_text(XES)
    flat = tmp_path / "calls.jsonl"
    flat.write_text(json.dumps({"session": "z", "operation": "ping", "status": 200}) + "\n")
    result = CliRunner().invoke(
        app, ["logs", "import", str(xes), str(flat), "--out", str(tmp_path / "w")]
    )
    assert result.exit_code == 0, result.output
    assert "(xes)" in result.output and "(jsonl)" in result.output
    manifest = json.loads((tmp_path / "w" / "manifest.json").read_text())
    assert [s["format"] for s in manifest["sources"]] == ["xes", "jsonl"]
    assert manifest["counts"]["records"] == 4
    rules = json.loads((tmp_path / "w" / "rules.json").read_text())
    assert rules["event_flows"]["case"][0] == {
        "from": "register claim",
        "to": "pay claim",
        "count": 1,
    }


def test_har_cut_short_keeps_what_came_before(tmp_path: Path) -> None:
    big = "y" * 200_000  # an item larger than the reader's buffer
    entry = {"request": {"method": "POST", "url": "http://h/api/notes", "postData": {
             "mimeType": "application/json", "text": json.dumps({"text": big})}},
             "response": {"status": 201, "content": {"mimeType": "application/json",
             "text": "e30=", "encoding": "base64"}}}  # fmt: skip
    text = json.dumps({"log": {"version": "1.2", "entries": [entry, entry]}})
    path = tmp_path / "cut.har"
    path.write_text(text[: len(text) - 150_000])
    records, report = _read(path)
    assert len(records) == 1 and records[0].arguments == {"text": big}
    assert records[0].response == {}  # base64 "{}"
    assert report.skipped["malformed HAR (rest of the entries unread)"] == 1
