"""The twin enforces the business rules mined from the logs, with the system's answers.

A run of the demo back office is imported; the mined ``behaviour.json`` must hold the
service's life cycle, permissions and effects, and the twin (the normal engine, strict
grounding) must refuse what the real service refused with the real service's answer.
The last test replays held-out sessions (``simgym logs eval``) on the embedded model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("opentelemetry.sdk")

import simgym  # noqa: E402
from simgym.core.types import Action  # noqa: E402
from simgym.domains.mcp_rules import (  # noqa: E402
    Condition,
    DecisionList,
    Guard,
    ToolRules,
    features,
    render,
)
from simgym.logs import ImportReport, build_world, read_logs  # noqa: E402
from simgym.logs.behaviour import learn, template  # noqa: E402
from simgym.logs.eval import evaluate, held_out  # noqa: E402
from simgym.logs.twin import world_scenario  # noqa: E402
from simgym.real.backoffice import run_sessions  # noqa: E402
from simgym.worldmodels.function import FunctionWorldModel  # noqa: E402


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("behaviour")
    run_sessions(40, 3, root / "logs")
    return root / "logs"


@pytest.fixture(scope="module")
def world(logs: Path) -> Path:
    report = ImportReport()
    out = logs.parent / "world"
    build_world(read_logs([str(logs / "sessions.jsonl")], report), out, report=report)
    return out


@pytest.fixture(scope="module")
def behaviour(world: Path) -> dict[str, Any]:
    return json.loads((world / "behaviour.json").read_text())["tools"]


def _guard(rules: dict[str, Any], code: str) -> dict[str, Any]:
    found = [
        g
        for g in rules.get("guards", [])
        if (g.get("answer") or {}).get("error", {}).get("code") == code
    ]
    assert found, f"no guard answers {code}: {rules.get('guards')}"
    return found[0]


# -- the rules, as data -----------------------------------------------------------------


def test_conditions_read_features_and_none_for_missing():
    feats = features({"role": "auditor", "amount": 70000}, {"id": "L-1", "status": "draft"}, {})
    assert Condition(feature="arg.role", **{"in": ["auditor"]}).holds(feats)
    assert Condition(feature="rec.status", not_in=["under_review"]).holds(feats)
    assert Condition(feature="arg.amount", above=50000).holds(feats)
    assert not Condition(feature="arg.amount", below=1000).holds(feats)
    assert Condition(feature="arg.reason", **{"in": [None]}).holds(feats)  # not given
    assert feats["fmt.role"] == "a" and feats["type.amount"] == "int"


def test_features_follow_references_to_related_records():
    state = {"customers": [{"id": "c-1", "kyc_status": "failed", "documents": ["id_card"]}]}
    feats = features({"loan_id": "L-1"}, {"id": "L-1", "customer_id": "c-1"}, state)
    assert feats["customers.kyc_status"] == "failed"
    assert feats["customers.documents~id_card"] is True
    assert feats["customers.exists"] is True


def test_templates_put_the_calls_values_back():
    answer = {"error": {"code": "x", "message": "cannot approve L-9 in status draft", "n": 7}}
    feats = {"arg.loan_id": "L-9", "rec.status": "draft", "rec.amount": 7}
    made = template(answer, feats)
    assert made["error"]["message"] == "cannot approve {{arg.loan_id}} in status {{rec.status}}"
    assert made["error"]["n"] == "{{rec.amount}}"
    again = render(made, {"arg.loan_id": "L-2", "rec.status": "approved", "rec.amount": 3})
    assert again == {
        "error": {"code": "x", "message": "cannot approve L-2 in status approved", "n": 3}
    }


def test_learning_finds_the_separating_condition_and_ignores_identities():
    ok = [
        {"arg.role": "reviewer", "arg.actor": f"a{i}", "rec.status": "under_review"}
        for i in range(6)
    ]
    bad = [
        {"arg.role": "reviewer", "arg.actor": "a1", "rec.status": s} for s in ("draft", "approved")
    ]
    rules = learn(bad, ok, status=409)
    assert [[c.feature for c in r] for r in rules] == [["rec.status"]]
    assert rules[0][0].not_in == ["under_review"]


def test_decision_lists_pick_the_first_rule_that_holds():
    decision = DecisionList(
        default="passed",
        rules=[([Condition(feature="customers.country", **{"in": ["SY"]})], "failed")],
    )
    assert decision.value({"customers.country": "SY"}) == "failed"
    assert decision.value({"customers.country": "DE"}) == "passed"
    assert ToolRules(guards=[Guard(when=[], status=403)]).guards[0].holds({})


# -- what mining finds in the demo service's logs ------------------------------------------


def test_mined_life_cycle_and_permissions(behaviour: dict[str, Any]):
    approve = behaviour["post_loans_loan_id_approve"]
    assert approve["sets"] == {"status": "approved"}
    cycle = _guard(approve, "invalid_transition")
    assert cycle["status"] == 409
    assert cycle["when"] == [{"feature": "rec.status", "not_in": ["under_review"]}]
    assert "{{rec.status}}" in cycle["answer"]["error"]["message"]
    forbidden = _guard(behaviour["post_loans_loan_id_review"], "forbidden")
    assert forbidden["status"] == 403
    # the roles the refusal says are allowed, not the roles the log saw refused
    assert forbidden["when"] == [{"feature": "arg.role", "not_in": ["reviewer"]}]
    submit = behaviour["post_loans_loan_id_submit"]
    assert submit["sets"] == {"status": "submitted"}
    kyc = _guard(submit, "kyc_required")
    assert any(c["feature"] == "customers.kyc_status" for c in kyc["when"])


def test_mined_effects_of_creates(behaviour: dict[str, Any]):
    loan = behaviour["post_loans"]
    assert loan["sets"]["status"] == "draft"
    assert loan["copies"]["created_by"] == "actor"
    assert set(loan["stamps"]) == {"created_at", "updated_at"}
    kyc = behaviour["post_kyc_customer_id"]
    assert {
        "collection": "customers",
        "via": "customer_id",
        "field": "kyc_status",
        "source": "result",
    } in kyc["parents"]
    assert "result" in kyc["values"]


def test_mined_rules_relate_people_and_records_instead_of_naming_them(
    behaviour: dict[str, Any],
):
    approve = behaviour["post_loans_loan_id_approve"]
    assert _guard(approve, "four_eyes")["when"] == [
        {"feature": "arg.actor", "equals": "rec.created_by"}
    ]
    limit = _guard(approve, "approval_limit_exceeded")
    # the manager's bound is never the largest amount a manager approved in the log:
    # it is read from the refusals, which state it
    assert limit["when"] == [
        {
            "feature": "rec.amount",
            "limits": {"reviewer": 50000.0, "manager": 200000.0},
            "limit_by": "arg.role",
        }
    ]
    assert "{{limit.rec.amount}}" in limit["answer"]["error"]["message"]
    disburse = behaviour["post_loans_loan_id_disburse"]
    assert _guard(disburse, "segregation_of_duties")["when"] == [
        {"feature": "arg.actor", "equals": "hist.post_loans_loan_id_approve"}
    ]
    assert _guard(disburse, "amount_mismatch")["when"] == [
        {"feature": "arg.amount", "differs": "rec.amount"}
    ]
    assert _guard(disburse, "account_mismatch")["when"] == [
        {"feature": "accounts.customer_id", "differs": "rec.customer_id"}
    ]
    assert _guard(disburse, "invalid_transition")["when"] == [
        {"feature": "rec.status", "not_in": ["approved"]}
    ]
    assert {
        "collection": "accounts",
        "via": "account_id",
        "field": "balance",
        "source": "amount",
        "op": "add",
    } in disburse["parents"]
    duplicate = _guard(behaviour["post_customers"], "duplicate_customer")
    assert duplicate["when"] == [
        {"feature": "match.customers", "covers": ["country", "date_of_birth", "name"]}
    ]
    assert duplicate["status"] == 409
    # no guard anywhere names a person: who acts is only ever compared
    for tool, rules in behaviour.items():
        for guard in rules.get("guards", []):
            for cond in guard["when"]:
                named = cond.get("in") or cond.get("not_in") or []
                assert not any(str(v).startswith("actor-") for v in named), (tool, cond)
                assert cond["feature"] != "arg.actor" or "equals" in cond, (tool, cond)


# -- the twin enforces them -----------------------------------------------------------------


async def test_the_twin_refuses_with_the_real_answer_and_moves_the_life_cycle(world: Path):
    scenario = world_scenario(world)
    unreachable = FunctionWorldModel(lambda messages: '{"unexpected": true}')
    env = simgym.make("mcp", unreachable, scenario=scenario, grounding="strict")
    await env.reset()
    operator = {"actor": "actor-x", "role": "operator"}
    customer = {
        "name": "Person-aaaaaa",
        "email": "user-aaaaaa@example.com",
        "date_of_birth": "1980-01-02",
        "country": "DE",
        "documents": ["id_card", "proof_of_address"],
        **operator,
    }
    made = json.loads(
        (await env.step(Action.tool_call("post_customers", customer))).observation.text
    )
    assert made["kyc_status"] == "pending" and made["created_by"] == "actor-x"
    cid = made["id"]
    loan = {"customer_id": cid, "amount": 20000, "term_months": 24, "purpose": "car", **operator}
    made = json.loads((await env.step(Action.tool_call("post_loans", loan))).observation.text)
    assert made["status"] == "draft"
    lid = made["id"]
    refused = await env.step(
        Action.tool_call(
            "post_loans_loan_id_approve", {"loan_id": lid, "actor": "m", "role": "manager"}
        )
    )
    body = json.loads(refused.observation.text)
    assert body["error"]["code"] == "invalid_transition"
    assert body["error"]["message"] == "cannot approve a loan application in status draft"
    assert body["error"]["details"]["object_id"] == lid
    # KYC not passed yet: the submit is refused as the service refuses it
    body = json.loads(
        (
            await env.step(
                Action.tool_call("post_loans_loan_id_submit", {"loan_id": lid, **operator})
            )
        ).observation.text
    )
    assert body["error"]["code"] == "kyc_required"
    check = json.loads(
        (
            await env.step(
                Action.tool_call("post_kyc_customer_id", {"customer_id": cid, **operator})
            )
        ).observation.text
    )
    assert check["result"] == "passed"
    assert next(c for c in env.state["customers"] if c["id"] == cid)["kyc_status"] == "passed"
    moved = json.loads(
        (
            await env.step(
                Action.tool_call("post_loans_loan_id_submit", {"loan_id": lid, **operator})
            )
        ).observation.text
    )
    assert moved["status"] == "submitted"
    body = json.loads(
        (
            await env.step(
                Action.tool_call("post_loans_loan_id_review", {"loan_id": lid, **operator})
            )
        ).observation.text
    )
    assert body["error"]["code"] == "forbidden"
    assert next(r for r in env.state["loans"] if r["id"] == lid)["status"] == "submitted"


async def test_the_twin_enforces_relations_for_people_it_never_saw(world: Path):
    env = simgym.make(
        "mcp",
        FunctionWorldModel(lambda messages: '{"unexpected": true}'),
        scenario=world_scenario(world),
        grounding="strict",
    )
    await env.reset()

    async def call(tool: str, who: tuple[str, str], **args: Any) -> dict[str, Any]:
        actor, role = who
        step = await env.step(Action.tool_call(tool, {**args, "actor": actor, "role": role}))
        return json.loads(step.observation.text)

    clerk, boss, other_boss = ("clerk-1", "operator"), ("boss-1", "manager"), ("boss-2", "manager")
    reviewer = ("rev-1", "reviewer")
    person = {"name": "Person-x1", "date_of_birth": "1970-01-01", "country": "DE"}
    docs = ["id_card", "proof_of_address"]
    first = await call("post_customers", clerk, **person, email="a@x.org", documents=docs)
    again = await call("post_customers", clerk, **person, email="b@x.org", documents=docs)
    assert again["error"]["code"] == "duplicate_customer"
    assert again["error"]["details"]["existing_id"] == first["id"]
    second = await call(
        "post_customers", clerk, **{**person, "country": "FR"}, email="c@x.org", documents=docs
    )
    assert second["id"] != first["id"]
    accounts = []
    for customer in (first["id"], second["id"]):
        assert (await call("post_kyc_customer_id", clerk, customer_id=customer))["result"] == (
            "passed"
        )
        made = await call(
            "post_accounts",
            clerk,
            customer_id=customer,
            account_type="checking",
            currency="EUR",
            opening_deposit=500,
        )
        accounts.append(made["id"])
    loan = await call(
        "post_loans",
        boss,
        customer_id=first["id"],
        account_id=accounts[0],
        amount=120000,
        term_months=60,
        purpose="home",
    )
    lid = loan["id"]
    await call("post_loans_loan_id_submit", boss, loan_id=lid)
    await call("post_loans_loan_id_review", reviewer, loan_id=lid)
    refused = await call("post_loans_loan_id_approve", reviewer, loan_id=lid)
    assert refused["error"]["code"] == "approval_limit_exceeded"
    assert "limit of 50000 for role reviewer" in refused["error"]["message"]
    own = await call("post_loans_loan_id_approve", boss, loan_id=lid)
    assert own["error"]["code"] == "four_eyes"
    assert (await call("post_loans_loan_id_approve", other_boss, loan_id=lid))["status"] == (
        "approved"
    )
    pay = {"loan_id": lid, "account_id": accounts[0], "amount": 120000}
    sod = await call("post_loans_loan_id_disburse", other_boss, **pay)
    assert sod["error"]["code"] == "segregation_of_duties"
    wrong = await call("post_loans_loan_id_disburse", clerk, **{**pay, "account_id": accounts[1]})
    assert wrong["error"]["code"] == "account_mismatch"
    short = await call("post_loans_loan_id_disburse", clerk, **{**pay, "amount": 12000})
    assert short["error"]["code"] == "amount_mismatch"
    # the one who ordered it may pay it: only the approver may not
    paid = await call("post_loans_loan_id_disburse", boss, **pay)
    assert paid["status"] == "disbursed"
    account = next(a for a in env.state["accounts"] if a["id"] == accounts[0])
    assert account["balance"] == 120500
    twice = await call("post_loans_loan_id_disburse", clerk, **pay)
    assert twice["error"]["code"] == "invalid_transition"


# -- fidelity on held-out sessions ----------------------------------------------------------


def test_the_split_is_stable_and_keyed():
    names = [f"s-{i}" for i in range(400)]
    picked = [n for n in names if held_out(n, 0.25, 0)]
    assert picked == [n for n in names if held_out(n, 0.25, 0)]
    assert picked != [n for n in names if held_out(n, 0.25, 1)]
    assert 60 < len(picked) < 140


def test_eval_on_held_out_sessions_with_the_embedded_model(logs: Path, tmp_path: Path):
    report = evaluate(
        [str(logs / "sessions.jsonl")], tmp_path, holdout=0.25, seed=0, max_sessions=4
    )
    assert report["sessions"] == 4 and report["replayed"] > 10
    assert report["json_validity"] >= 0.9
    assert report["violations"] == 0 or report["violations_answered"] == 1.0
    assert report["final_state_agreement"] >= 0.9
    saved = json.loads((tmp_path / "eval.json").read_text())
    assert saved["outcome_agreement"] == report["outcome_agreement"]


def test_observed_failures_become_a_perturbation_plan(tmp_path: Path):
    from simgym.logs.faults import FAULTS_FILE
    from simgym.perturb.plan import load_perturbations

    lines = []
    for i in range(20):
        status = 503 if i % 5 == 0 else 429 if i % 10 == 1 else 200
        body = {"error": "down"} if status >= 400 else {"id": f"T-{i}", "state": "open"}
        lines.append(
            {
                "session": f"s{i}",
                "method": "GET",
                "route": "/tickets/{ticket_id}",
                "path": f"/tickets/T-{i}",
                "status": status,
                "response": body,
            }
        )
    log = tmp_path / "calls.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = ImportReport()
    build_world(read_logs([str(log)], report), tmp_path / "w", report=report)
    plan = load_perturbations(tmp_path / "w" / FAULTS_FILE)
    by_kind = {r.fault: r for r in plan.rules}
    assert by_kind["server_error"].probability == 0.2
    assert by_kind["server_error"].params == {"status": 503}
    assert by_kind["rate_limit"].probability == 0.1
    assert by_kind["server_error"].tools == ["get_tickets_ticket_id"]
