"""The back-office service: its rules, its traces, its OCEL log and the session driver."""

from __future__ import annotations

import json
import sqlite3

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("opentelemetry.sdk")

from fastapi.testclient import TestClient  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)

from simgym.real.backoffice.app import create_app  # noqa: E402
from simgym.real.backoffice.driver import run_sessions  # noqa: E402
from simgym.real.backoffice.ocel import build_ocel, write_ocel_sqlite  # noqa: E402
from simgym.real.backoffice.store import Bank  # noqa: E402
from simgym.real.backoffice.telemetry import read_otlp_jsonl, tracer_provider  # noqa: E402

OPERATOR = {"X-Actor": "alice", "X-Role": "operator", "X-Session": "t1"}
REVIEWER = {"X-Actor": "rita", "X-Role": "reviewer", "X-Session": "t1"}
MANAGER = {"X-Actor": "maya", "X-Role": "manager", "X-Session": "t1"}
AUDITOR = {"X-Actor": "aaron", "X-Role": "auditor", "X-Session": "t1"}
CUSTOMER = {
    "name": "Ada Berg",
    "email": "ada@example.com",
    "date_of_birth": "1980-05-01",
    "country": "DE",
    "documents": ["id_card", "proof_of_address"],
}


def error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


@pytest.fixture
def traced(tmp_path):
    provider = tracer_provider(tmp_path / "traces.otlp.jsonl", batch=False)
    bank = Bank(":memory:")
    client = TestClient(create_app(bank, tracer=provider), raise_server_exceptions=False)
    yield client, bank, tmp_path / "traces.otlp.jsonl"
    provider.shutdown()
    bank.close()


@pytest.fixture
def client(traced):
    return traced[0]


def onboard(client, amount: int = 20_000) -> tuple[str, str, str]:
    cid = client.post("/customers", json=CUSTOMER, headers=OPERATOR).json()["id"]
    assert client.post(f"/kyc/{cid}", headers=OPERATOR).json()["result"] == "passed"
    aid = client.post(
        "/accounts", json={"customer_id": cid, "account_type": "checking"}, headers=OPERATOR
    ).json()["id"]
    loan = client.post(
        "/loans",
        json={
            "customer_id": cid,
            "account_id": aid,
            "amount": amount,
            "term_months": 36,
            "purpose": "car",
        },
        headers=OPERATOR,
    )
    assert loan.status_code == 201 and loan.json()["status"] == "draft"
    return cid, aid, loan.json()["id"]


def test_loan_life_cycle_happy_path(client):
    _, _, lid = onboard(client)
    assert client.post(f"/loans/{lid}/submit", headers=OPERATOR).json()["status"] == "submitted"
    assert client.post(f"/loans/{lid}/review", headers=REVIEWER).json()["status"] == "under_review"
    approved = client.post(f"/loans/{lid}/approve", headers=REVIEWER)
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    assert client.get(f"/loans/{lid}", headers=AUDITOR).json()["status"] == "approved"


def test_invalid_transitions_answer_409(client):
    _, _, lid = onboard(client)
    err = error(client.post(f"/loans/{lid}/approve", headers=MANAGER), 409, "invalid_transition")
    assert err["details"]["status"] == "draft"
    assert err["details"]["allowed_from"] == ["under_review"]
    client.post(f"/loans/{lid}/submit", headers=OPERATOR)
    error(client.post(f"/loans/{lid}/submit", headers=OPERATOR), 409, "invalid_transition")
    client.post(f"/loans/{lid}/withdraw", headers=OPERATOR)
    error(client.post(f"/loans/{lid}/review", headers=REVIEWER), 409, "invalid_transition")
    assert client.get(f"/loans/{lid}", headers=OPERATOR).json()["status"] == "withdrawn"


def test_permissions_answer_403(client):
    cid, _, lid = onboard(client, amount=80_000)
    client.post(f"/loans/{lid}/submit", headers=OPERATOR)
    err = error(client.post(f"/loans/{lid}/review", headers=OPERATOR), 403, "forbidden")
    assert err["details"]["allowed_roles"] == ["reviewer"]
    client.post(f"/loans/{lid}/review", headers=REVIEWER)
    err = error(
        client.post(f"/loans/{lid}/approve", headers=REVIEWER), 403, "approval_limit_exceeded"
    )
    assert err["details"]["limit"] == 50_000
    error(client.post("/customers", json=CUSTOMER, headers=AUDITOR), 403, "forbidden")
    error(client.get("/audit", headers=OPERATOR), 403, "forbidden")
    error(
        client.get(f"/customers/{cid}", headers={"X-Actor": "x", "X-Role": "intern"}),
        403,
        "unknown_role",
    )
    error(client.get(f"/customers/{cid}"), 401, "unauthenticated")
    assert client.post(f"/loans/{lid}/approve", headers=MANAGER).json()["status"] == "approved"
    # the creator may not approve their own application (four eyes)
    own = client.post(
        "/loans",
        json={"customer_id": cid, "amount": 5_000, "term_months": 12, "purpose": "car"},
        headers=MANAGER,
    ).json()["id"]
    client.post(f"/loans/{own}/submit", headers=MANAGER)
    client.post(f"/loans/{own}/review", headers=REVIEWER)
    error(client.post(f"/loans/{own}/approve", headers=MANAGER), 403, "four_eyes")


def test_payout_separates_duties_and_matches_the_loan(client):
    cid, aid, lid = onboard(client, amount=120_000)
    client.post(f"/loans/{lid}/submit", headers=OPERATOR)
    client.post(f"/loans/{lid}/review", headers=REVIEWER)
    err = error(
        client.post(f"/loans/{lid}/approve", headers=REVIEWER), 403, "approval_limit_exceeded"
    )
    # the bound is the reviewer's own, and the refusal says it
    assert "approval limit of 50000" in err["message"] and err["details"]["limit"] == 50_000
    paid = {"account_id": aid, "amount": 120_000}
    error(
        client.post(f"/loans/{lid}/disburse", json=paid, headers=OPERATOR),
        409,
        "invalid_transition",
    )
    assert client.post(f"/loans/{lid}/approve", headers=MANAGER).json()["status"] == "approved"
    # the approver may not pay it out: read from who approved, not from a loan field
    error(
        client.post(f"/loans/{lid}/disburse", json=paid, headers=MANAGER),
        403,
        "segregation_of_duties",
    )
    other = client.post(
        "/customers", json={**CUSTOMER, "name": "Bo Lind"}, headers=OPERATOR
    ).json()["id"]
    client.post(f"/kyc/{other}", headers=OPERATOR)
    theirs = client.post(
        "/accounts",
        json={"customer_id": other, "account_type": "savings", "opening_deposit": 500},
        headers=OPERATOR,
    ).json()
    assert theirs["balance"] == 500
    wrong_account = {"account_id": theirs["id"], "amount": 120_000}
    error(
        client.post(f"/loans/{lid}/disburse", json=wrong_account, headers=OPERATOR),
        409,
        "account_mismatch",
    )
    err = error(
        client.post(f"/loans/{lid}/disburse", json={**paid, "amount": 12_000}, headers=OPERATOR),
        422,
        "amount_mismatch",
    )
    assert err["details"] == {"approved": 120_000, "requested": 12_000}
    other_manager = {**MANAGER, "X-Actor": "marc"}
    done = client.post(f"/loans/{lid}/disburse", json=paid, headers=other_manager)
    assert done.status_code == 200 and done.json()["status"] == "disbursed"
    assert client.get(f"/accounts/{aid}", headers=OPERATOR).json()["balance"] == 120_000
    error(
        client.post(f"/loans/{lid}/disburse", json=paid, headers=OPERATOR),
        409,
        "invalid_transition",
    )
    # a manager's own limit is higher, and still a limit
    big = client.post(
        "/loans",
        json={"customer_id": cid, "amount": 250_000, "term_months": 120, "purpose": "home"},
        headers=OPERATOR,
    ).json()["id"]
    client.post(f"/loans/{big}/submit", headers=OPERATOR)
    client.post(f"/loans/{big}/review", headers=REVIEWER)
    err = error(
        client.post(f"/loans/{big}/approve", headers=MANAGER), 403, "approval_limit_exceeded"
    )
    assert "approval limit of 200000 for role manager" in err["message"]


def test_the_same_person_is_one_customer(client):
    first = client.post("/customers", json=CUSTOMER, headers=OPERATOR)
    assert first.status_code == 201
    again = {**CUSTOMER, "email": "ada.berg@example.org"}
    err = error(client.post("/customers", json=again, headers=OPERATOR), 409, "duplicate_customer")
    assert err["details"] == {"existing_id": first.json()["id"]}
    # another country, or another birth date, is another person
    for changed in ({"country": "FR"}, {"date_of_birth": "1981-05-01"}):
        made = client.post("/customers", json={**again, **changed}, headers=OPERATOR)
        assert made.status_code == 201, made.text


def test_kyc_gates_accounts_and_submission(client):
    cid = client.post(
        "/customers", json={**CUSTOMER, "documents": ["id_card"]}, headers=OPERATOR
    ).json()["id"]
    check = client.post(f"/kyc/{cid}", headers=OPERATOR).json()
    assert check["result"] == "failed" and check["missing_documents"] == ["proof_of_address"]
    error(
        client.post(
            "/accounts", json={"customer_id": cid, "account_type": "savings"}, headers=OPERATOR
        ),
        409,
        "kyc_required",
    )
    lid = client.post(
        "/loans",
        json={"customer_id": cid, "amount": 5_000, "term_months": 12, "purpose": "home"},
        headers=OPERATOR,
    ).json()["id"]
    error(client.post(f"/loans/{lid}/submit", headers=OPERATOR), 409, "kyc_required")
    client.post(
        f"/customers/{cid}/documents", json={"documents": ["proof_of_address"]}, headers=OPERATOR
    )
    assert client.post(f"/kyc/{cid}", headers=OPERATOR).json()["result"] == "passed"
    error(client.post(f"/kyc/{cid}", headers=OPERATOR), 409, "kyc_already_passed")
    sanctioned = client.post(
        "/customers", json={**CUSTOMER, "country": "KP"}, headers=OPERATOR
    ).json()["id"]
    assert client.post(f"/kyc/{sanctioned}", headers=OPERATOR).json()["reason"] == (
        "sanctioned_country"
    )


def test_validation_and_bad_requests(client):
    err = error(
        client.post("/loans", json={"amount": "10k", "extra": 1}, headers=OPERATOR),
        422,
        "validation_failed",
    )
    fields = {f["field"]: f["problem"] for f in err["details"]["fields"]}
    assert fields["amount"] == "must be an integer" and fields["extra"] == "unknown field"
    assert fields["customer_id"] == "required"
    _, _, lid = onboard(client)
    client.post(f"/loans/{lid}/submit", headers=OPERATOR)
    client.post(f"/loans/{lid}/review", headers=REVIEWER)
    error(client.post(f"/loans/{lid}/reject", json={}, headers=REVIEWER), 422, "validation_failed")
    error(client.post("/customers", content=b'{"name": ', headers=OPERATOR), 400, "invalid_json")
    error(client.post("/customers", content=b"[1]", headers=OPERATOR), 422, "validation_failed")
    error(
        client.post("/customers", content=b"{}" + b" " * 70_000, headers=OPERATOR),
        413,
        "body_too_large",
    )
    error(client.get("/nowhere", headers=OPERATOR), 404, "not_found")
    error(client.delete("/loans", headers=OPERATOR), 405, "method_not_allowed")
    error(client.get("/loans/loan-999", headers=OPERATOR), 404, "not_found")
    error(client.get("/audit?limit=abc", headers=AUDITOR), 422, "validation_failed")


def test_idempotent_retry_returns_the_first_answer(client):
    cid, _, _ = onboard(client)
    body = {"customer_id": cid, "amount": 9_000, "term_months": 24, "purpose": "education"}
    key = {**OPERATOR, "Idempotency-Key": "k-1"}
    first, again = (client.post("/loans", json=body, headers=key) for _ in range(2))
    assert first.json() == again.json() and again.headers["idempotent-replayed"] == "true"
    listed = client.get(f"/loans?customer_id={cid}", headers=OPERATOR).json()
    assert listed["count"] == 2  # onboard's loan and this one, not a third


def test_audit_log_is_append_only(traced):
    client, bank, _ = traced
    _, _, lid = onboard(client)
    client.post(f"/loans/{lid}/review", headers=OPERATOR)  # refused: audited too
    entries = client.get("/audit", headers=AUDITOR).json()["entries"]
    assert [e["operation"] for e in entries][:2] == ["create_customer", "run_kyc"]
    assert {"outcome": "refused", "status": 403} in [
        {"outcome": e["outcome"], "status": e["status"]} for e in entries
    ]
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        bank._db.execute("UPDATE audit SET actor = 'mallory'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        bank._db.execute("DELETE FROM audit")


def test_spans_carry_http_conventions_and_bodies(traced):
    client, _, path = traced
    _, _, lid = onboard(client)
    client.post(f"/loans/{lid}/approve", headers=MANAGER)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    spans = [
        span
        for line in lines
        for rs in line["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    last = spans[-1]
    attrs = {a["key"]: next(iter(a["value"].values())) for a in last["attributes"]}
    assert last["name"] == "POST /loans/{loan_id}/approve" and last["kind"] == 2
    assert attrs["http.request.method"] == "POST"
    assert attrs["http.route"] == "/loans/{loan_id}/approve"
    assert attrs["url.path"] == f"/loans/{lid}/approve"
    assert attrs["http.response.status_code"] == "409"  # int64 as a JSON string
    assert attrs["backoffice.actor"] == "maya" and attrs["backoffice.role"] == "manager"
    assert attrs["backoffice.session"] == "t1" and attrs["backoffice.operation"] == "approve_loan"
    assert json.loads(attrs["backoffice.response.body"])["error"]["code"] == "invalid_transition"
    assert len(last["traceId"]) == 32 and len(last["spanId"]) == 16  # hex, as OTLP/JSON wants
    parsed = list(read_otlp_jsonl(path))
    assert parsed[-1].resource_spans[0].scope_spans[0].spans[0].trace_id.hex() == last["traceId"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("backoffice")
    return out, run_sessions(10, 7, out)


def test_driver_writes_all_four_files_and_never_500s(run):
    out, summary = run
    for name in ("traces.otlp.jsonl", "ocel.json", "ocel.sqlite", "sessions.jsonl"):
        assert (out / name).stat().st_size > 0, name
    assert not [code for code in summary["statuses"] if code >= 500], summary
    rows = [json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]
    assert len(rows) == summary["requests"] > 20
    assert set(rows[0]) == {
        "session",
        "seq",
        "time",
        "actor",
        "role",
        "operation",
        "method",
        "route",
        "path",
        "request",
        "status",
        "response",
    }
    assert all(r["status"] < 500 for r in rows)


def test_driver_is_deterministic_but_for_times(run, tmp_path):
    out, _ = run
    run_sessions(10, 7, tmp_path)

    def stable(path):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for row in rows:
            row.pop("time")
            for key in ("created_at", "updated_at", "checked_at"):
                if isinstance(row["response"], dict):
                    row["response"].pop(key, None)
        return rows

    assert stable(out / "sessions.jsonl") == stable(tmp_path / "sessions.jsonl")


def test_otlp_file_round_trips_through_protobuf(run):
    out, summary = run
    spans = 0
    for line in (out / "traces.otlp.jsonl").read_text().splitlines():
        data = json.loads(line)
        for rs in data["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    keys = {a["key"] for a in span["attributes"]}
                    assert {
                        "http.request.method",
                        "url.path",
                        "http.response.status_code",
                        "backoffice.request.body",
                        "backoffice.response.body",
                        "backoffice.session",
                    } <= keys
                    spans += 1
        # plain protobuf JSON parsing accepts the line (ids read as base64 there) ...
        json_format.Parse(line, ExportTraceServiceRequest())
    # ... and the reader that knows OTLP's hex ids gets them back exactly
    requests = list(read_otlp_jsonl(out / "traces.otlp.jsonl"))
    assert (
        sum(len(s.spans) for r in requests for rs in r.resource_spans for s in rs.scope_spans)
        == spans
        == summary["requests"]
    )


def test_ocel_json_and_sqlite_follow_the_spec(run):
    out, summary = run
    ocel = json.loads((out / "ocel.json").read_text())
    assert set(ocel) == {"objectTypes", "eventTypes", "objects", "events"}
    assert {t["name"] for t in ocel["objectTypes"]} == {
        "customer",
        "account",
        "kyc",
        "loan",
    }
    types = {t["name"] for t in ocel["eventTypes"]}
    ids = {o["id"] for o in ocel["objects"]}
    for event in ocel["events"]:
        assert event["type"] in types and event["time"].endswith("Z")
        attrs = {a["name"]: a["value"] for a in event["attributes"]}
        assert attrs["http.request.method"] in ("GET", "POST") and attrs["http.route"]
        # a refusal by role touched no object; an accepted change always did
        assert event["relationships"] or attrs["outcome"] == "refused"
        assert all(r["objectId"] in ids for r in event["relationships"])
    refusals = [
        e for e in ocel["events"] if {"name": "outcome", "value": "refused"} in e["attributes"]
    ]
    assert refusals and len(refusals) < len(ocel["events"])
    for obj in ocel["objects"]:
        assert all({"name", "time", "value"} == set(a) for a in obj["attributes"])
    loans = [o for o in ocel["objects"] if o["type"] == "loan"]
    assert any(len([a for a in o["attributes"] if a["name"] == "status"]) > 1 for o in loans)
    db = sqlite3.connect(out / "ocel.sqlite")
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {
        "event",
        "object",
        "event_object",
        "object_object",
        "event_map_type",
        "object_map_type",
        "object_loan",
        "event_approve_loan",
    } <= tables
    assert db.execute("SELECT COUNT(*) FROM event").fetchone()[0] == len(ocel["events"])
    assert db.execute("SELECT COUNT(*) FROM object").fetchone()[0] == len(ocel["objects"])
    columns = [r[1] for r in db.execute("PRAGMA table_info(object_loan)")]
    assert columns[:3] == ["ocel_id", "ocel_time", "ocel_changed_field"]
    assert db.execute("SELECT COUNT(*) FROM object_object").fetchone()[0] > 0
    db.close()


def test_ocel_export_of_an_empty_bank(tmp_path):
    ocel = build_ocel(Bank(":memory:"))
    assert ocel["events"] == [] and ocel["objects"] == []
    write_ocel_sqlite(ocel, tmp_path / "empty.sqlite")
    db = sqlite3.connect(tmp_path / "empty.sqlite")
    assert db.execute("SELECT COUNT(*) FROM event_map_type").fetchone()[0] == 10
    db.close()
