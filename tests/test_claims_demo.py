"""The insurance claims demo (simgym.real.claims): its rules, its logs and its driver."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import UTC, datetime

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("opentelemetry.sdk")

from fastapi.testclient import TestClient  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)

from simgym.real.claims.app import create_app  # noqa: E402
from simgym.real.claims.driver import run_sessions  # noqa: E402
from simgym.real.claims.store import (  # noqa: E402
    APPROVAL_LIMITS,
    ERRORS,
    ClaimsOffice,
    SimClock,
)

XES_NS = "{http://www.xes-standard.org/}"
AGENT = "lena.hoffmann@northwind-mutual.example"
AGENT2 = "tomas.novak@northwind-mutual.example"
ADJ = "jonas.weber@northwind-mutual.example"
ADJ2 = "amelie.laurent@northwind-mutual.example"
SENIOR = "henrik.dahl@northwind-mutual.example"
MANAGER_FIN = "oliver.grant@northwind-mutual.example"  # claims_manager + finance
FIN = "yuki.tanaka@northwind-mutual.example"


class Office:
    """The API in a test client, with one token per person."""

    def __init__(self) -> None:
        self.clock = SimClock(datetime(2026, 3, 2, 9, 0, tzinfo=UTC), 0)
        self.store = ClaimsOffice(self.clock, 0)
        self.client = TestClient(create_app(self.store))
        self.tokens: dict[str, str] = {}
        self.policy = self.store.seed_policy(
            holder="Ada Berg",
            product="home",
            coverage_limit=200_000.0,
            deductible=250.0,
            effective_from="2025-06-01",
            effective_to="2026-05-31",
            issued_by=AGENT,
            issued_at_ns=1_748_000_000 * 10**9,
        )

    def __call__(self, user: str | None, method: str, path: str, body=None):
        headers = {"x-session-id": "t-1"}
        if user is not None:
            if user not in self.tokens:
                self.tokens[user] = self.store.issue_token(user, "web-portal")
            headers["authorization"] = f"Bearer {self.tokens[user]}"
        self.clock.advance_s(1)
        return self.client.request(method, path, headers=headers, json=body)

    def claim(self, amount: float = 3_000.0, incident: str | None = None, by: str = AGENT) -> str:
        if incident is None:  # a different incident each time, so no claim is a duplicate
            incident = f"2026-02-{1 + len(self.store.claims) % 28:02d}"
        r = self(
            by,
            "POST",
            "/v1/claims",
            {
                "policy_id": self.policy,
                "claimant": "Ada Berg",
                "incident_date": incident,
                "loss_type": "water_damage",
                "claimed_amount": amount,
            },
        )
        assert r.status_code == 201, r.text
        return r.json()["claim_number"]

    def assessed(
        self, amount: float = 3_000.0, by: str = AGENT, assessor: str = ADJ
    ) -> tuple[str, str]:
        number = self.claim(amount, by=by)
        assert self(assessor, "POST", f"/v1/claims/{number}/review").status_code == 200
        r = self(
            assessor,
            "POST",
            f"/v1/claims/{number}/assessments",
            {"assessed_amount": amount, "recommendation": "approve"},
        )
        assert r.status_code == 201, r.text
        return number, r.json()["assessment_id"]


def refused(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] == code and body["status"] == status
    assert body["type"].endswith(code.replace("_", "-")) and body["title"] and body["detail"]
    assert ERRORS[code][0] == status
    return body


@pytest.fixture()
def office() -> Office:
    return Office()


# ---- the rules -----------------------------------------------------------------------------


def test_happy_path_through_the_whole_life_cycle(office):
    number, assessment = office.assessed(3_000.0)
    assert number.startswith("CLM-2026-") and len(number) == len("CLM-2026-000001")
    r = office(ADJ2, "POST", f"/v1/claims/{number}/approval", {"assessment_id": assessment})
    assert r.status_code == 200 and r.json()["status"] == "approved"
    assert r.json()["approved_by"] == ADJ2 and r.json()["approved_amount"] == 3_000.0
    r = office(
        FIN,
        "POST",
        "/v1/payouts",
        {"claim_number": number, "amount": 3_000.0, "payee_iban": "DE89370400440532013000"},
    )
    assert r.status_code == 201 and r.json()["payout_id"].startswith("PAY-")
    assert r.headers["location"] == f"/v1/payouts/{r.json()['payout_id']}"
    assert office(FIN, "GET", f"/v1/claims/{number}").json()["status"] == "paid"
    r = office(ADJ, "POST", f"/v1/claims/{number}/closure")
    assert r.status_code == 200 and r.json()["status"] == "closed"
    statuses = [
        c.value for c in office.store.changes if c.object_id == number and c.name == "status"
    ]
    assert statuses == ["filed", "under_review", "approved", "paid", "closed"]


def test_authentication(office):
    refused(office(None, "GET", f"/v1/policies/{office.policy}"), 401, "unauthenticated")
    r = office.client.get(f"/v1/policies/{office.policy}", headers={"authorization": "Bearer nope"})
    refused(r, 401, "unauthenticated")
    assert r.headers["www-authenticate"].startswith("Bearer")


def test_permissions_by_role(office):
    number, assessment = office.assessed()
    body = refused(
        office(AGENT2, "POST", f"/v1/claims/{number}/approval", {"assessment_id": assessment}),
        403,
        "insufficient_role",
    )
    assert "adjuster" in body["allowed_roles"] and "agent" in body["detail"]
    refused(
        office(
            FIN,
            "POST",
            f"/v1/claims/{number}/assessments",
            {"assessed_amount": 10.0, "recommendation": "approve"},
        ),
        403,
        "insufficient_role",
    )
    refused(
        office(
            ADJ,
            "POST",
            "/v1/payouts",
            {"claim_number": number, "amount": 1.0, "payee_iban": "DE89370400440532013000"},
        ),
        403,
        "insufficient_role",
    )
    refused(office(FIN, "POST", "/v1/claims", {}), 403, "insufficient_role")


def test_approval_limit_depends_on_role_and_is_stated(office):
    number, assessment = office.assessed(12_400.0)
    body = refused(
        office(ADJ2, "POST", f"/v1/claims/{number}/approval", {"assessment_id": assessment}),
        403,
        "approval_limit_exceeded",
    )
    assert "EUR 5,000.00" in body["detail"] and "EUR 12,400.00" in body["detail"]
    assert body["approval_limit"] == APPROVAL_LIMITS["adjuster"] == 5_000.0
    r = office(SENIOR, "POST", f"/v1/claims/{number}/approval", {"assessment_id": assessment})
    assert r.status_code == 200
    number, assessment = office.assessed(60_000.0)
    body = refused(
        office(SENIOR, "POST", f"/v1/claims/{number}/approval", {"assessment_id": assessment}),
        403,
        "approval_limit_exceeded",
    )
    assert "EUR 25,000.00" in body["detail"]
    # a claims manager (who is also in finance) has the higher of their limits
    assert (
        office(
            MANAGER_FIN, "POST", f"/v1/claims/{number}/approval", {"assessment_id": assessment}
        ).status_code
        == 200
    )
    # exactly at the limit is allowed
    number, assessment = office.assessed(5_000.0)
    assert (
        office(
            ADJ2, "POST", f"/v1/claims/{number}/approval", {"assessment_id": assessment}
        ).status_code
        == 200
    )


def test_no_self_approval(office):
    number, assessment = office.assessed(1_000.0, assessor=ADJ)
    body = refused(
        office(ADJ, "POST", f"/v1/claims/{number}/approval", {"assessment_id": assessment}),
        403,
        "self_approval_forbidden",
    )
    assert body["conflicting_field"] == "assessor"
    number, assessment = office.assessed(1_000.0, by=ADJ2, assessor=ADJ)
    body = refused(
        office(ADJ2, "POST", f"/v1/claims/{number}/approval", {"assessment_id": assessment}),
        403,
        "self_approval_forbidden",
    )
    assert body["conflicting_field"] == "filed_by" and ADJ2 in body["detail"]


def test_segregation_of_duties_and_payout_match(office):
    number, assessment = office.assessed(8_000.0)
    r = office(MANAGER_FIN, "POST", f"/v1/claims/{number}/approval", {"assessment_id": assessment})
    assert r.status_code == 200
    pay = {"claim_number": number, "amount": 8_000.0, "payee_iban": "DE89370400440532013000"}
    body = refused(office(MANAGER_FIN, "POST", "/v1/payouts", pay), 403, "segregation_of_duties")
    assert body["conflicting_field"] == "approved_by"
    body = refused(
        office(FIN, "POST", "/v1/payouts", {**pay, "amount": 8_250.0}),
        422,
        "payout_amount_mismatch",
    )
    assert body["approved_amount"] == 8_000.0 and "EUR 8,000.00" in body["detail"]
    assert office(FIN, "POST", "/v1/payouts", pay).status_code == 201
    # paying twice is a refused transition
    refused(office(FIN, "POST", "/v1/payouts", pay), 409, "invalid_state_transition")


def test_duplicate_claims_over_three_fields(office):
    first = office.claim(2_500.0, incident="2026-02-11")
    body = refused(
        office(
            AGENT2,
            "POST",
            "/v1/claims",
            {
                "policy_id": office.policy,
                "claimant": "Ada Berg",
                "incident_date": "2026-02-11",
                "loss_type": "storm",
                "claimed_amount": 2_500.0,
            },
        ),
        409,
        "duplicate_claim",
    )
    assert body["duplicate_of"] == first
    # one field different: not a duplicate
    office.claim(2_500.01, incident="2026-02-11")
    office.claim(2_500.0, incident="2026-02-12")


def test_refused_transitions(office):
    number = office.claim()
    body = refused(
        office(
            ADJ,
            "POST",
            f"/v1/claims/{number}/assessments",
            {"assessed_amount": 100.0, "recommendation": "approve"},
        ),
        409,
        "invalid_state_transition",
    )
    assert body["current_status"] == "filed"
    refused(office(ADJ, "POST", f"/v1/claims/{number}/closure"), 409, "invalid_state_transition")
    refused(
        office(ADJ, "POST", f"/v1/claims/{number}/approval", {"assessment_id": "ASM-000001-1"}),
        404,
        "resource_not_found",
    )
    assert office(ADJ, "POST", f"/v1/claims/{number}/review").status_code == 200
    refused(office(ADJ, "POST", f"/v1/claims/{number}/review"), 409, "invalid_state_transition")
    first = office(
        ADJ,
        "POST",
        f"/v1/claims/{number}/assessments",
        {"assessed_amount": 900.0, "recommendation": "approve"},
    ).json()["assessment_id"]
    second = office(
        ADJ,
        "POST",
        f"/v1/claims/{number}/assessments",
        {"assessed_amount": 950.0, "recommendation": "approve"},
    ).json()["assessment_id"]
    body = refused(
        office(SENIOR, "POST", f"/v1/claims/{number}/approval", {"assessment_id": first}),
        409,
        "invalid_state_transition",
    )
    assert body["current_status"] == "superseded"
    r = office(SENIOR, "POST", f"/v1/claims/{number}/approval", {"assessment_id": second})
    assert r.status_code == 200 and r.json()["approved_amount"] == 950.0
    refused(
        office(SENIOR, "POST", f"/v1/claims/{number}/rejection", {"reason": "late"}),
        409,
        "invalid_state_transition",
    )
    r = office(AGENT, "POST", f"/v1/policies/{office.policy}/cancellation", {"reason": "sold"})
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    refused(
        office(AGENT, "POST", f"/v1/policies/{office.policy}/cancellation", {"reason": "x"}),
        409,
        "invalid_state_transition",
    )


def test_validation_and_existence(office):
    body = refused(
        office(
            AGENT,
            "POST",
            "/v1/claims",
            {"policy_id": office.policy, "incident_date": "20/02/2026", "claimed_amount": -5},
        ),
        400,
        "validation_failed",
    )
    names = {p["name"] for p in body["invalid-params"]}
    assert names == {"claimant", "incident_date", "loss_type", "claimed_amount"}
    r = office.client.post(
        "/v1/claims",
        content=b"{not json",
        headers={"authorization": f"Bearer {office.tokens[AGENT]}"},
    )
    refused(r, 400, "validation_failed")
    body = refused(
        office(
            AGENT,
            "POST",
            "/v1/claims",
            {
                "policy_id": office.policy,
                "claimant": "Ada Berg",
                "incident_date": "2026-02-01",
                "loss_type": "collision",
                "claimed_amount": 100.0,
            },
        ),
        400,
        "validation_failed",
    )
    assert body["invalid-params"][0]["name"] == "loss_type"
    refused(
        office(
            AGENT,
            "POST",
            "/v1/claims",
            {
                "policy_id": "00000000-0000-4000-8000-000000000000",
                "claimant": "X",
                "incident_date": "2026-02-01",
                "loss_type": "fire",
                "claimed_amount": 1.0,
            },
        ),
        404,
        "resource_not_found",
    )
    refused(office(ADJ, "GET", "/v1/claims/CLM-2026-999999"), 404, "resource_not_found")
    refused(office(FIN, "GET", "/v1/payouts/PAY-00000000"), 404, "resource_not_found")


def test_policy_period_and_coverage(office):
    body = refused(
        office(
            AGENT,
            "POST",
            "/v1/claims",
            {
                "policy_id": office.policy,
                "claimant": "Ada Berg",
                "incident_date": "2025-05-20",
                "loss_type": "fire",
                "claimed_amount": 800.0,
            },
        ),
        422,
        "policy_not_in_force",
    )
    assert "2025-06-01" in body["detail"]
    number = office.claim(250_000.0)
    office(ADJ, "POST", f"/v1/claims/{number}/review")
    body = refused(
        office(
            ADJ,
            "POST",
            f"/v1/claims/{number}/assessments",
            {"assessed_amount": 250_000.0, "recommendation": "approve"},
        ),
        422,
        "exceeds_coverage",
    )
    assert body["coverage_limit"] == 200_000.0 and "EUR 200,000.00" in body["detail"]


def test_refusals_are_journaled_with_the_session(office):
    number, assessment = office.assessed(9_000.0)
    office(ADJ2, "POST", f"/v1/claims/{number}/approval", {"assessment_id": assessment})
    entry = office.store.journal[-1]
    assert entry.operation == "approve_claim" and entry.outcome == "refused"
    assert entry.error_code == "approval_limit_exceeded" and entry.status == 403
    assert entry.caller.session_id == "t-1" and entry.caller.user_id == ADJ2
    assert ("claim", number, "approved") in entry.objects


# ---- the driver and its logs ---------------------------------------------------------------


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("claims")
    summary = run_sessions(100, 0, out)
    return out, summary


def _spans(path):
    spans = []
    for line in path.read_text().splitlines():
        data = json.loads(line)
        for resource in data["resourceSpans"]:
            service = {a["key"]: a["value"] for a in resource["resource"]["attributes"]}
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    span["service"] = service["service.name"]["stringValue"]
                    span["attrs"] = {a["key"]: a["value"] for a in span.get("attributes", [])}
                    spans.append(span)
    return spans


def test_every_refusal_kind_appears_in_the_sessions(run):
    out, summary = run
    assert set(summary["refusals_by_code"]) == set(ERRORS)
    assert not [s for s in summary["statuses"] if int(s) >= 500]
    calls = summary["http_calls"]
    refusals = sum(summary["refusals_by_code"].values())
    assert 0.04 * calls < refusals < 0.25 * calls  # mostly ordinary work
    # and the server spans show each code in a problem body, with its status
    seen = {}
    for span in _spans(out / "traces.jsonl"):
        if span["kind"] == 2 and "http.response.body.content" in span["attrs"]:
            body = json.loads(span["attrs"]["http.response.body.content"]["stringValue"])
            if "code" in body and "type" in body:
                seen[body["code"]] = int(span["attrs"]["http.response.status_code"]["intValue"])
    assert seen == {code: status for code, (status, _, _) in ERRORS.items()}
    truth = json.loads((out / "truth.json").read_text())
    assert truth["approval_limits"]["per_role"] == APPROVAL_LIMITS
    assert truth["errors"]["segregation_of_duties"]["status"] == 403
    assert truth["run"]["refusals_by_code"] == summary["refusals_by_code"]


def test_otlp_json_decodes_with_the_protobuf_parser(run):
    out, summary = run
    total = 0
    for line in (out / "traces.jsonl").read_text().splitlines():
        data = json.loads(line)
        # OTLP/JSON: ids are hex; the protobuf JSON mapping wants base64 for bytes
        for resource in data["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    assert len(span["traceId"]) == 32 and len(span["spanId"]) == 16
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
        request = json_format.Parse(json.dumps(data), ExportTraceServiceRequest())
        total += sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
    assert total == summary["spans"] > 0


def test_spans_follow_current_semantic_conventions(run):
    out, _ = run
    spans = _spans(out / "traces.jsonl")
    by_id = {s["spanId"]: s for s in spans}
    servers = [s for s in spans if s["kind"] == 2]
    assert servers and all(s["service"] == "claims-api" for s in servers)
    for span in servers:
        attrs = span["attrs"]
        for key in ("http.request.method", "url.path", "http.route", "http.response.status_code"):
            assert key in attrs, (key, span["name"])
        assert (
            span["name"]
            == f"{attrs['http.request.method']['stringValue']} {attrs['http.route']['stringValue']}"
        )
        assert "session.id" in attrs
        if int(attrs["http.response.status_code"]["intValue"]) != 401:
            assert "user.id" in attrs
            roles = attrs["user.roles"]["arrayValue"]["values"]
            assert roles and all("stringValue" in v for v in roles)
        if attrs["http.request.method"]["stringValue"] == "POST":
            assert "http.request.body.content" in attrs
        assert "http.response.body.content" in attrs
        assert not any(
            k.startswith("enduser.") or k in ("http.method", "http.status_code", "http.target")
            for k in attrs
        )
    tools = [
        s
        for s in spans
        if s["attrs"].get("gen_ai.operation.name", {}).get("stringValue") == "execute_tool"
    ]
    assert tools and all(s["service"] == "claims-copilot" for s in tools)
    failed = 0
    for tool in tools:
        attrs = tool["attrs"]
        for key in (
            "gen_ai.tool.name",
            "gen_ai.tool.call.id",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
            "gen_ai.conversation.id",
        ):
            assert key in attrs
        json.loads(attrs["gen_ai.tool.call.arguments"]["stringValue"])
        result = json.loads(attrs["gen_ai.tool.call.result"]["stringValue"])
        # the tool span wraps an HTTP client span, which the API's server span continues
        clients = [s for s in spans if s.get("parentSpanId") == tool["spanId"]]
        assert len(clients) == 1 and clients[0]["kind"] == 3
        server = [s for s in servers if s.get("parentSpanId") == clients[0]["spanId"]]
        assert len(server) == 1 and server[0]["traceId"] == tool["traceId"]
        assert by_id[tool["parentSpanId"]]["name"].startswith("invoke_agent")
        status = int(server[0]["attrs"]["http.response.status_code"]["intValue"])
        if status >= 400:
            failed += 1
            assert attrs["error.type"]["stringValue"] == result["code"]
            assert tool["status"]["code"] == 2
        else:
            assert "error.type" not in attrs
        assert int(tool["startTimeUnixNano"]) <= int(server[0]["startTimeUnixNano"])
        assert int(server[0]["endTimeUnixNano"]) <= int(tool["endTimeUnixNano"])
    assert failed > 0


def test_ocel_is_well_formed(run):
    out, _ = run
    ocel = json.loads((out / "claims.jsonocel").read_text())
    assert set(ocel) == {"objectTypes", "eventTypes", "objects", "events"}
    object_types = {t["name"]: {a["name"] for a in t["attributes"]} for t in ocel["objectTypes"]}
    event_types = {t["name"]: {a["name"] for a in t["attributes"]} for t in ocel["eventTypes"]}
    assert set(object_types) == {"policy", "claim", "assessment", "payout", "employee"}
    objects = {o["id"]: o for o in ocel["objects"]}
    assert len(objects) == len(ocel["objects"])
    for obj in ocel["objects"]:
        assert obj["type"] in object_types
        for attribute in obj["attributes"]:
            assert attribute["name"] in object_types[obj["type"]]
            datetime.fromisoformat(attribute["time"].replace("Z", "+00:00"))
        for rel in obj["relationships"]:
            assert rel["objectId"] in objects and rel["qualifier"]
    times, codes = [], Counter()
    for event in ocel["events"]:
        assert event["type"] in event_types
        attrs = {a["name"]: a["value"] for a in event["attributes"]}
        assert set(attrs) <= event_types[event["type"]]
        assert attrs["session_id"].startswith("s_") and attrs["outcome"] in ("accepted", "refused")
        for rel in event["relationships"]:
            assert rel["objectId"] in objects and rel["qualifier"]
        assert any(objects[r["objectId"]]["type"] == "employee" for r in event["relationships"])
        if attrs["outcome"] == "refused":
            codes[attrs["error_code"]] += 1
        times.append(event["time"])
    assert times == sorted(times)
    assert set(codes) == set(ERRORS) - {"unauthenticated"}
    claim = next(o for o in ocel["objects"] if o["type"] == "claim")
    assert claim["id"].startswith("CLM-2026-")
    assert [a["value"] for a in claim["attributes"] if a["name"] == "status"][0] == "filed"


def test_xes_has_one_trace_per_claim(run):
    out, _ = run
    root = ET.parse(out / "claims.xes").getroot()
    assert root.tag == f"{XES_NS}log"
    assert {e.get("prefix") for e in root.findall(f"{XES_NS}extension")} >= {
        "concept",
        "time",
        "org",
        "lifecycle",
    }
    ocel = json.loads((out / "claims.jsonocel").read_text())
    claims = {o["id"] for o in ocel["objects"] if o["type"] == "claim"}
    traces = root.findall(f"{XES_NS}trace")
    names = [t.find(f"{XES_NS}string[@key='concept:name']").get("value") for t in traces]
    assert sorted(names) == sorted(claims)
    transitions = Counter()
    for trace in traces:
        events = trace.findall(f"{XES_NS}event")
        assert events
        first = {a.get("key"): a.get("value") for a in events[0]}
        assert first["concept:name"] == "File Claim" and first["lifecycle:transition"] == "complete"
        stamps = []
        for event in events:
            attrs = {a.get("key"): a.get("value") for a in event}
            transitions[attrs["lifecycle:transition"]] += 1
            assert attrs["org:resource"].endswith("@northwind-mutual.example")
            assert attrs["session"].startswith("s_")
            stamps.append(datetime.fromisoformat(attrs["time:timestamp"]))
            if attrs["lifecycle:transition"] == "ate_abort":
                assert attrs["error_code"] in ERRORS
        assert stamps == sorted(stamps)
    assert transitions["complete"] and transitions["ate_abort"]


def test_driver_is_deterministic(tmp_path):
    a = run_sessions(25, 7, tmp_path / "a")
    b = run_sessions(25, 7, tmp_path / "b")
    run_sessions(25, 8, tmp_path / "c")
    assert a == b
    for name in ("traces.jsonl", "claims.jsonocel", "claims.xes", "truth.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert (tmp_path / "a" / "traces.jsonl").read_bytes() != (
        tmp_path / "c" / "traces.jsonl"
    ).read_bytes()


def test_command_line_and_light_import(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "simgym.real.claims",
            "--sessions",
            "3",
            "--seed",
            "1",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["sessions"] == 3 and set(summary["files"]) == {
        "traces.jsonl",
        "claims.jsonocel",
        "claims.xes",
        "truth.json",
    }
    probe = (
        "import sys, simgym; print(any(m.startswith('simgym.real.claims') for m in sys.modules))"
    )
    assert (
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
        ).stdout.strip()
        == "False"
    )
