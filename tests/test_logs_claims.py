"""The importer on a system it was not tuned to: the insurance claims office
(:mod:`simgym.real.claims`), whose records are keyed by ``claim_number``, ``policy_id``
(a UUID), ``assessment_id`` and ``payout_id``, under ``/v1/`` routes, with RFC 9457
problem answers. What the logs teach is compared with the rules the service implements
(its ``truth.json``): object types and their key fields, life cycles, a twin that holds
state, and a short replay of held-out sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("opentelemetry.sdk")

from simgym.logs.eval import evaluate  # noqa: E402
from simgym.logs.model import ImportReport  # noqa: E402
from simgym.logs.registry import read_logs  # noqa: E402
from simgym.logs.twin import world_scenario  # noqa: E402
from simgym.logs.world import build_world  # noqa: E402
from simgym.real.claims import run_sessions  # noqa: E402
from simgym.worldmodels.function import FunctionWorldModel  # noqa: E402

KEYS = {
    "claim": "claim_number",
    "policy": "policy_id",
    "assessment": "assessment_id",
    "payout": "payout_id",
}


@pytest.fixture(scope="module")
def claims(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("claims")
    run_sessions(60, 0, root / "train")
    run_sessions(24, 7, root / "held")
    return root


def _world(source: Path, out: Path) -> Path:
    report = ImportReport()
    build_world(read_logs([str(source)], report), out, report=report)
    return out


@pytest.fixture(scope="module")
def otlp_world(claims: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _world(claims / "train" / "traces.jsonl", tmp_path_factory.mktemp("otlp"))


def _truth(claims: Path) -> dict:
    return json.loads((claims / "train" / "truth.json").read_text())


def _machines(claims: Path) -> dict[str, tuple[str, set[tuple[str, str]]]]:
    """Each object type's initial status and transitions, as the service implements them."""
    out = {}
    for otype, machine in _truth(claims)["state_machines"].items():
        moves = {
            (src, step["to"]) for step in machine["transitions"].values() for src in step["from"]
        }
        out[otype] = (machine["initial"], moves)
    return out


def _cycles(world: Path) -> dict[str, tuple[set[str], set[tuple[str, str]]]]:
    rules = json.loads((world / "rules.json").read_text())["life_cycles"]
    return {
        otype: (set(c["initial"]), {(t["from"], t["to"]) for t in c["transitions"]})
        for otype, c in rules.items()
    }


def test_objects_keyed_by_any_field(otlp_world: Path):
    types = json.loads((otlp_world / "entities.json").read_text())["types"]
    assert {t: v["key"] for t, v in types.items()} == KEYS
    assert all(v["count"] > 0 for v in types.values())
    manifest = json.loads((otlp_world / "manifest.json").read_text())
    coverage = manifest["coverage"]
    assert not coverage.get("problems"), coverage.get("problems")


def test_otlp_life_cycles_are_the_services(claims: Path, otlp_world: Path):
    learned = _cycles(otlp_world)
    for otype, (initial, moves) in _machines(claims).items():
        seen_initial, seen_moves = learned.get(otype, (set(), set()))
        assert seen_initial == {initial}, otype
        # every transition the log shows is one the service makes; a short run may
        # not show a rare one (an assessment superseded)
        assert seen_moves <= moves, (otype, seen_moves - moves)
    assert learned["claim"][1] == _machines(claims)["claim"][1]


def test_ocel_life_cycles_actors_and_refusals(claims: Path, tmp_path: Path):
    world = _world(claims / "train" / "claims.jsonocel", tmp_path / "ocel")
    learned = _cycles(world)
    for otype, (initial, moves) in _machines(claims).items():
        seen_initial, seen_moves = learned[otype]
        assert initial in seen_initial and seen_moves <= moves, otype
    assert learned["claim"][1] == _machines(claims)["claim"][1]
    coverage = json.loads((world / "manifest.json").read_text())["coverage"]
    # the related employee object is who acted, with the roles it holds
    fields = coverage["fields"]
    assert fields["actor"]["share"] >= 0.95 and fields["role"]["share"] >= 0.95
    behaviour = json.loads((world / "behaviour.json").read_text())["tools"]
    codes = {
        g["answer"]["error"]["code"]
        for rules in behaviour.values()
        for g in rules.get("guards", [])
        if isinstance(g.get("answer"), dict) and isinstance(g["answer"].get("error"), dict)
    }
    assert {"insufficient_role", "self_approval_forbidden"} <= codes
    # OCEL carries no HTTP status: none is made up
    assert all(g.get("status") is None for r in behaviour.values() for g in r.get("guards", []))


def test_xes_sessions_cases_and_refusals(claims: Path, tmp_path: Path):
    """One trace per claim, its events in working sessions named by an attribute: the
    sessions are those, the trace a case with its attributes for state, and a refusal
    (an aborted activity) answers with its error code and no made-up status."""
    world = _world(claims / "train" / "claims.xes", tmp_path / "xes")
    manifest = json.loads((world / "manifest.json").read_text())
    assert manifest["counts"]["sessions"] > manifest["counts"]["entities"]  # not per trace
    assert manifest["counts"]["sessions"] <= _truth(claims)["run"]["sessions"]
    coverage = manifest["coverage"]
    assert coverage["twin"] and coverage["fields"]["role"]["share"] >= 0.95
    scenario = world_scenario(world)
    assert scenario["state"]["cases"]
    ops = {t: b["op"] for t, b in scenario["tool_map"].items()}
    assert ops["file_claim"] == "create" and ops["approve_claim"] == "update"
    behaviour = json.loads((world / "behaviour.json").read_text())["tools"]
    codes = {
        g["answer"]["error"]["code"]
        for rules in behaviour.values()
        for g in rules.get("guards", [])
        if isinstance(g.get("answer"), dict) and isinstance(g["answer"].get("error"), dict)
    }
    assert "insufficient_role" in codes
    assert (world / "tasks.jsonl").read_text().strip()


def test_twin_holds_collections_and_binds_routes(otlp_world: Path):
    scenario = world_scenario(otlp_world)
    state = scenario["state"]
    for collection in ("claims", "policies", "assessments", "payouts"):
        assert state[collection], collection
    assert state["_keys"] == {
        "claims": "claim_number",
        "policies": "policy_id",
        "assessments": "assessment_id",
        "payouts": "payout_id",
    }
    tools = scenario["tool_map"]
    get = tools["get_v1_claims_claim_number"]
    assert (get["op"], get["collection"], get["id_arg"], get["key"]) == (
        "get",
        "claims",
        "claim_number",
        "claim_number",
    )
    assert tools["post_v1_claims"]["op"] == "create"
    # a record of another collection made under a claim
    nested = tools["post_v1_claims_claim_number_assessments"]
    assert (nested["op"], nested["collection"]) == ("create", "assessments")
    assert tools["post_v1_claims_claim_number_approval"]["op"] == "update"


def test_relational_rules_are_mined(otlp_world: Path):
    tools = json.loads((otlp_world / "behaviour.json").read_text())["tools"]

    def conditions(tool: str, code: str) -> list[dict]:
        return [
            c
            for g in tools[tool]["guards"]
            if isinstance(g.get("answer"), dict) and g["answer"].get("code") == code
            for c in g["when"]
        ]

    approval = "post_v1_claims_claim_number_approval"
    assert any(
        c.get("equals") and c["feature"] == "arg.actor"
        for c in conditions(approval, "self_approval_forbidden")
    )
    assert any(
        c.get("equals") == "claims.approved_by"
        for c in conditions("post_v1_payouts", "segregation_of_duties")
    )
    assert any(
        c["feature"] == "rec.status" or c["feature"].endswith(".status")
        for c in conditions(approval, "invalid_state_transition")
    )
    assert any(c["feature"] == "arg.role" for c in conditions(approval, "insufficient_role"))
    # a duplicate of a claim an earlier session filed, over the fields the two share
    assert any(
        "policy_id" in (c.get("covers") or [])
        for c in conditions("post_v1_claims", "duplicate_claim")
    )
    # a date outside the linked policy's term: a relation between two records' fields
    assert {"feature": "arg.incident_date", "under": "policies.effective_from"} in conditions(
        "post_v1_claims", "policy_not_in_force"
    )
    # effects on linked records, seen when the record shows again in a later session:
    # a payout makes its claim "paid"; an approval takes the assessment's amount
    paid = tools["post_v1_payouts"]["parents"]
    assert {"field": "status", "op": "value", "constant": "paid"}.items() <= next(
        p for p in paid if p["field"] == "status"
    ).items()
    assert tools[approval]["copies"]["approved_amount"] == "assessments.assessed_amount"
    # validation from the field the refusal names (RFC 9457 invalid-params)
    assert {"feature": "has.claimant", "in": [None]} in conditions(
        "post_v1_claims", "validation_failed"
    )


def test_short_heldout_eval(claims: Path, tmp_path: Path):
    """Rules and state answer held-out sessions of another run of the system; the model
    (here a stub that never refuses) only what they leave."""
    report = evaluate(
        [str(claims / "train" / "traces.jsonl")],
        tmp_path,
        heldout=[str(claims / "held" / "traces.jsonl")],
        world_model=FunctionWorldModel(lambda messages: '{"note": "the model wrote this"}'),
    )
    assert report["twin"] and report["replayed"] > 50
    # measured at 60 training and 24 held-out sessions (seeds 0 and 7), the stub model:
    # outcome 0.88, refusals answered 0.38 (13: 60 training sessions show too few of
    # most kinds; at 300 the same rules answer 9 in 10), final state 0.936 of 1617 field
    # checks, model share 0.06, no call errored; the floors sit just under the numbers
    assert report["outcome_agreement"] >= 0.85
    assert report["refusals_answered"] >= 0.35 and report["refusals"] >= 8
    assert report["final_state_agreement"] >= 0.9 and report["final_state_checks"] > 500
    assert report["model_share"] <= 0.1
    assert report["calls_errored"] == 0


def test_keys_of_any_name_in_one_call():
    """The rules a single call is read by, without the demo."""
    from simgym.logs.model import key_type, route_objects
    from simgym.logs.twin import list_answer

    assert [key_type(n) for n in ("policy_id", "claim_number", "orderId", "id", "payee_iban")] == [
        "policy",
        "claim",
        "order",
        None,
        None,
    ]
    # the answer holding the parameter's value is the object's state; linked keys link
    answer = {"claim_number": "C-1", "policy_id": "p-9", "status": "approved"}
    found = route_objects(
        "/v1/claims/{claim_number}/approval",
        "/v1/claims/C-1/approval",
        answer,
        method="POST",
        arguments={"assessment_id": "A-1"},
    )
    assert [(o.type, o.id, o.qualifier, o.state is not None) for o in found] == [
        ("claim", "C-1", None, True),
        ("policy", "p-9", "linked", False),
        ("assessment", "A-1", "linked", False),
    ]
    # a POST to a nested collection made a record of its type; records inside answers
    made = route_objects(
        "/v1/claims/{claim_number}/notes",
        "/v1/claims/C-1/notes",
        {"note_id": "N-1", "claim_number": "C-1", "tags": [{"tag_id": "T-1", "x": 1}]},
        method="POST",
    )
    assert ("note", "N-1", "created") in [(o.type, o.id, o.qualifier) for o in made]
    assert ("tag", "T-1", "embedded") in [(o.type, o.id, o.qualifier) for o in made]
    # a page of records with the same fields has a layout
    item = {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b"]}
    page = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": item}, "total": {"type": "integer"}},
        "required": ["items", "total"],
    }
    op = {"responses": {"200": page}}
    assert list_answer(op, [{"b": 1, "a": 2}]) == {
        "shape": {"items": "{items}", "total": "{count}"},
        "fields": ["b", "a"],
    }
    mixed = {**item, "required": ["a"]}
    page["properties"]["items"]["items"] = mixed
    assert list_answer(op, []) is None  # nothing to say which fields an item shows
    # items showing what each record has: the records whole
    assert list_answer(op, [{"a": 1, "b": 2}])["fields"] == ["*"]
