"""Guards over relations: conditions that relate features instead of naming values, how
they are learned from refusals, and how the twin's state feeds them (who did what)."""

from __future__ import annotations

import json

from simgym.domains.mcp_rules import (
    HISTORY,
    Condition,
    Guard,
    ParentEffect,
    ToolRules,
    features,
    history_of,
    matches,
    remember,
    render,
)
from simgym.logs.behaviour import learn, outcome, template
from simgym.logs.relations import allowed_roles, relations, stated_numbers, status_of

# -- conditions as data ---------------------------------------------------------------------


def test_relational_conditions_hold_only_when_both_sides_are_there():
    feats = {"arg.actor": "u-1", "rec.created_by": "u-1", "arg.amount": 0, "rec.flag": False}
    assert Condition(feature="arg.actor", equals="rec.created_by").holds(feats)
    assert not Condition(feature="arg.actor", equals="rec.approved_by").holds(feats)
    assert not Condition(feature="arg.actor", differs="rec.approved_by").holds(feats)
    assert not Condition(feature="arg.actor", differs="rec.created_by").holds(feats)
    # 0 and False are equal in Python, not in a record
    assert not Condition(feature="arg.amount", equals="rec.flag").holds(feats)
    assert Condition(feature="arg.amount", differs="rec.flag").holds(feats)
    limit = Condition(feature="rec.amount", limits={"reviewer": 50000}, limit_by="arg.role")
    assert limit.holds({"rec.amount": 60000, "arg.role": "reviewer"})
    assert not limit.holds({"rec.amount": 50000, "arg.role": "reviewer"})
    # a group with no known bound is not refused: no limit is invented
    assert not limit.holds({"rec.amount": 10**9, "arg.role": "manager"})
    dup = Condition(feature="match.customers", covers=["date_of_birth", "name"])
    assert dup.holds({"match.customers": [["country"], ["date_of_birth", "name", "country"]]})
    assert not dup.holds({"match.customers": [["name", "country"]]})
    assert not dup.holds({})


def test_relations_are_plain_editable_data():
    guard = Guard(
        when=[
            Condition(feature="rec.amount", limits={"reviewer": 5000.0}, limit_by="arg.role"),
            Condition(feature="arg.actor", equals="hist.approve"),
        ],
        status=403,
        answer={"error": {"code": "x", "message": "over {{limit.rec.amount}}"}},
    )
    text = json.dumps(guard.model_dump(mode="json", exclude_defaults=True))
    again = Guard.model_validate(json.loads(text))
    assert again == guard
    feats = {"rec.amount": 7000, "arg.role": "reviewer", "arg.actor": "a", "hist.approve": "a"}
    assert again.holds(feats)
    assert render(again.answer, again.quoted(feats))["error"]["message"] == "over 5000"
    assert [c.text() for c in again.when] == [
        "rec.amount > the limit of its arg.role (reviewer: 5000)",
        "arg.actor = hist.approve",
    ]


# -- what the twin's state gives them ------------------------------------------------------


def test_history_is_kept_per_record_and_never_changed_in_place():
    loan = {"id": "L-1", "amount": 10}
    state: dict = {"loans": [loan], "customers": []}
    first = remember(state, "approve", "u-7", "loans", "L-1")
    assert state.get(HISTORY) is None  # the old state is untouched
    state[HISTORY] = first
    second = remember(state, "disburse", "u-8", "loans", "L-1")
    assert first == {"loans": {"L-1": {"approve": "u-7"}}}
    assert second == {"loans": {"L-1": {"approve": "u-7", "disburse": "u-8"}}}
    state[HISTORY] = second
    feats = features({"loan_id": "L-1", "actor": "u-7"}, loan, state)
    assert feats["hist.approve"] == "u-7" and feats["hist.disburse"] == "u-8"
    assert history_of(state, {"id": "L-1"}) == {}  # another object with that id is not it


def test_matches_compare_fields_not_who_calls():
    state = {"customers": [{"id": "c-1", "name": "N", "dob": "1990", "actor": "u", "vip": True}]}
    args = {"name": "N", "dob": "1990", "actor": "u", "role": "op", "vip": True, "email": "e"}
    assert matches(args, state) == {"customers": [(["dob", "name"], "c-1")]}
    assert matches({"name": "N", "email": "x"}, state) == {}  # one field is no duplicate
    feats = features(args, None, state)
    assert feats["match.customers"] == [["dob", "name"]]
    guard = Guard(when=[Condition(feature="match.customers", covers=["dob", "name"])], status=409)
    assert guard.quoted(feats)["match.customers.id"] == "c-1"


def test_a_linked_effect_adds_or_sets():
    add = ParentEffect(collection="accounts", via="account_id", field="balance", source="amount")
    assert add.value({"balance": 100}, {"amount": 50}) == 50
    add.op = "add"
    assert add.value({"balance": 100}, {"amount": 50}) == 150
    assert add.value({"balance": None}, {"amount": 50}) is None  # nothing to add to


# -- learning them --------------------------------------------------------------------------


def _approvals(n: int, start: int) -> list[dict]:
    return [
        {"arg.actor": f"actor-{start + i}", "arg.role": "manager", "rec.created_by": f"actor-{i}"}
        for i in range(n)
    ]


def test_self_approval_is_learned_as_a_relation_not_as_people():
    ok = _approvals(8, 100)
    refused = [
        {"arg.actor": f"actor-{i}", "arg.role": "manager", "rec.created_by": f"actor-{i}"}
        for i in (3, 5)
    ]
    rules = learn(refused, ok, status=403)
    assert rules == [[Condition(feature="arg.actor", equals="rec.created_by")]]
    # it holds for a person the log never showed
    assert rules[0][0].holds({"arg.actor": "someone-new", "rec.created_by": "someone-new"})


def test_limits_per_role_take_the_bound_the_refusals_state():
    ok = [{"rec.amount": a, "arg.role": "reviewer"} for a in (1000, 3000, 4000)]
    ok += [{"rec.amount": a, "arg.role": "manager"} for a in (9000, 12000)]
    refused = [
        {"rec.amount": 6000, "arg.role": "reviewer"},
        {"rec.amount": 30000, "arg.role": "manager"},
    ]
    answers = [
        {"error": {"message": "6000 exceeds the approval limit of 5000"}},
        {"error": {"message": "30000 exceeds the approval limit of 20000"}},
    ]
    said = [stated_numbers(a) for a in answers]
    assert said[0] == {6000.0, 5000.0}
    rules = learn(refused, ok, status=403, said=said)
    cond = rules[0][0]
    assert cond.limits == {"reviewer": 5000.0, "manager": 20000.0}
    assert cond.limit_by == "arg.role"
    # where no refusal states it, the largest amount seen to pass is the bound
    bare = learn(refused, ok, status=403)[0][0]
    assert bare.limits == {"reviewer": 4000.0, "manager": 12000.0}


def test_a_limit_of_a_role_only_ever_refused_among_others_is_that_roles():
    """Callers with several roles: the refusal names the role whose bound applied, so
    the bound is learned per role, and a caller gets the largest of its roles'."""
    ok = [{"rec.amount": a, "arg.role": "clerk"} for a in (1000, 4000)]
    ok += [{"rec.amount": 18000, "arg.role": "audit,senior"}]
    refused = [
        {"rec.amount": 6000, "arg.role": "clerk"},
        {"rec.amount": 30000, "arg.role": "audit,senior"},
        {"rec.amount": 26000, "arg.role": "senior,sales"},
    ]
    answers = [
        {"error": {"message": "6000 exceeds your limit of 5000 (role clerk)"}},
        {"error": {"message": "30000 exceeds your limit of 25000 (role senior)"}},
        {"error": {"message": "26000 exceeds your limit of 25000 (role senior)"}},
    ]
    said = [stated_numbers(a) for a in answers]
    named = [
        {r for r in ("clerk", "senior", "audit", "sales") if f"role {r}" in str(a)} for a in answers
    ]
    cond = learn(refused, ok, status=403, said=said, named=named)[0][0]
    assert cond.limits == {"clerk": 5000.0, "senior": 25000.0}
    assert cond.holds({"rec.amount": 26000, "arg.role": "clerk,senior"})
    assert not cond.holds({"rec.amount": 20000, "arg.role": "clerk,senior"})
    assert not cond.holds({"rec.amount": 10**9, "arg.role": "audit,sales"})  # no bound known


def test_matches_between_linked_records_and_duplicates_are_learned():
    ok = [
        {"arg.amount": a, "rec.amount": a, "rec.customer_id": c, "accounts.customer_id": c}
        for a, c in ((100, "c1"), (250, "c2"), (300, "c3"), (450, "c4"))
    ]
    wrong_amount = [
        {"arg.amount": 90, "rec.amount": 100, "rec.customer_id": "c1", "accounts.customer_id": "c1"}
    ]
    wrong_account = [
        {
            "arg.amount": 100,
            "rec.amount": 100,
            "rec.customer_id": "c1",
            "accounts.customer_id": "c9",
        }
    ]
    keys = sorted(ok[0])
    found = relations(wrong_amount, ok, keys)
    assert Condition(feature="arg.amount", differs="rec.amount") in found
    assert learn(wrong_account, ok, status=409) == [
        [Condition(feature="accounts.customer_id", differs="rec.customer_id")]
    ]
    made = [{"arg.name": f"n{i}", "match.customers": [["country", "name"]]} for i in range(3)]
    fresh = [{"arg.name": f"m{i}"} for i in range(5)]
    assert learn(made, fresh, status=409) == [
        [Condition(feature="match.customers", covers=["country", "name"])]
    ]


def test_allowed_roles_come_from_the_refusal():
    answers = [{"error": {"details": {"allowed_roles": ["reviewer", "manager"], "x": ["a"]}}}]
    assert allowed_roles(answers, {"reviewer"}, {"operator"}) == ["manager", "reviewer"]
    # a list naming a refused role is not the allowed set
    assert allowed_roles(answers, {"reviewer"}, {"manager"}) is None
    assert allowed_roles([{"error": {"message": "no"}}], set(), {"operator"}) is None


def test_a_status_comes_from_the_log_or_the_error_body_never_a_guess():
    assert status_of({"status": 409, "response": {"error": {"status": 400}}}) == 409
    genai = {"status": None, "error": True, "response": {"error": {"code": "dup", "status": 409}}}
    assert status_of(genai) == 409 and outcome(genai) == "409:dup"
    assert status_of({"response": {"statusCode": "422"}}) == 422
    bare = {"error": True, "response": {"error": {"code": "dup"}}}
    assert status_of(bare) is None and outcome(bare) == "error:dup"
    assert ToolRules(guards=[Guard(when=[], status=None)]).guards[0].status is None


def test_templates_quote_amounts_and_limits_in_text():
    answer = {"error": {"message": "amount 120000 exceeds the approval limit of 50000"}}
    feats = {"rec.amount": 120000, "limit.rec.amount": 50000, "arg.term": 12}
    made = template(answer, feats)
    assert made["error"]["message"] == (
        "amount {{rec.amount}} exceeds the approval limit of {{limit.rec.amount}}"
    )
    again = render(made, {"rec.amount": 250000, "limit.rec.amount": 200000})
    assert again["error"]["message"] == "amount 250000 exceeds the approval limit of 200000"


def _ticket_log(path, with_status: int) -> None:
    """Tickets closed, then closed again: the second close is refused, and only the first
    ``with_status`` of those refusals carry a status in the log."""
    lines = []
    for i in range(12):
        who = {"session": f"s{i}", "actor": f"u{i}", "role": "clerk", "method": "POST"}
        ticket = {"id": f"T-{i}", "title": f"t{i}", "amount": 10 * i}
        lines.append(
            {
                **who,
                "route": "/tickets",
                "path": "/tickets",
                "request": {"title": f"t{i}"},
                "status": 201,
                "response": {**ticket, "state": "open"},
            }
        )
        close = {**who, "route": "/tickets/{ticket_id}/close", "path": f"/tickets/T-{i}/close"}
        lines.append(
            {**close, "request": None, "status": 200, "response": {**ticket, "state": "closed"}}
        )
        refused = {
            **close,
            "request": None,
            "response": {"error": {"code": "already_closed", "message": f"T-{i} closed"}},
        }
        if i < with_status:
            refused["status"] = 409
        lines.append(refused)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_refusal_logged_without_status_takes_its_codes_status_or_none(tmp_path):
    from simgym.logs import ImportReport, build_world, read_logs

    for with_status, expected in ((3, 409), (0, None)):
        log = tmp_path / f"calls{with_status}.jsonl"
        _ticket_log(log, with_status)
        report = ImportReport()
        out = tmp_path / f"w{with_status}"
        build_world(read_logs([str(log)], report), out, report=report)
        tools = json.loads((out / "behaviour.json").read_text())["tools"]
        guards = tools["post_tickets_ticket_id_close"]["guards"]
        # one kind of refusal, all twelve of them, never an invented 500
        assert [(g["status"], g["support"]) for g in guards] == [(expected, 12)], guards
        assert guards[0]["when"] == [{"feature": "rec.state", "not_in": ["open"]}]


def test_who_did_what_to_a_linked_record_separates_duties():
    """The one who ordered may not pay the order's invoice: a step on another record."""
    state: dict = {
        "orders": [{"id": "PO-1", "total": 90}],
        "invoices": [{"id": "INV-1", "order_id": "PO-1", "total": 90}],
    }
    state[HISTORY] = remember(state, "create_order", "buyer-1", "orders", "PO-1")
    invoice = state["invoices"][0]
    feats = features({"invoice_id": "INV-1", "actor": "buyer-1"}, invoice, state)
    assert feats["hist.orders.create_order"] == "buyer-1"
    assert "hist.create_order" not in feats  # the invoice's own history is empty
    refused = [
        {"arg.actor": f"b{i}", "hist.orders.create_order": f"b{i}", "rec.status": "open"}
        for i in range(3)
    ]
    paid = [
        {"arg.actor": f"p{i}", "hist.orders.create_order": f"b{i}", "rec.status": "open"}
        for i in range(6)
    ]
    assert learn(refused, paid, status=403) == [
        [Condition(feature="arg.actor", equals="hist.orders.create_order")]
    ]


def test_inspect_shows_each_guard_with_its_kind_and_refuses_a_broken_one(tmp_path):
    import typer
    from typer.testing import CliRunner

    from simgym.cli.logs import logs_app
    from simgym.logs import ImportReport, build_world, read_logs

    app = typer.Typer()
    app.add_typer(logs_app, name="logs")
    log = tmp_path / "calls.jsonl"
    _ticket_log(log, 12)
    report = ImportReport()
    build_world(read_logs([str(log)], report), tmp_path / "w", report=report)
    shown = CliRunner().invoke(
        app, ["logs", "inspect", str(tmp_path / "w")], env={"COLUMNS": "200"}
    )
    assert shown.exit_code == 0, shown.output
    line = next(x for x in shown.output.splitlines() if "already_closed" in x)
    assert "life-cycle" in line and "409" in line and "rec.state not in ['open']" in line
    path = tmp_path / "w" / "behaviour.json"
    data = json.loads(path.read_text())
    data["tools"]["post_tickets_ticket_id_close"]["guards"][0]["when"][0]["equal"] = "x"
    path.write_text(json.dumps(data))
    broken = CliRunner().invoke(app, ["logs", "inspect", str(tmp_path / "w")])
    assert broken.exit_code != 0
    assert "post_tickets_ticket_id_close" in broken.output and "malformed" in broken.output


def test_fields_that_hold_people_are_read_by_relation_only():
    from simgym.logs.behaviour import person_features

    def call(actor: str, approver: str, kind: str) -> tuple[dict, str, None]:
        return ({"arg.actor": actor, "arg.approver": approver, "arg.qty": 2}, kind, None)

    examples = {
        "approve": [call("ann", "bob", "ok"), call("cy", "dee", "ok"), call("bob", "ann", "ok")]
        + [call("eve", "eve", "403:self"), call("cy", "cy", "403:self")]
    }
    persons = person_features(examples)
    assert persons == {"arg.actor", "arg.approver"}
    pos = [f for f, k, _ in examples["approve"] if k != "ok"]
    neg = [f for f, k, _ in examples["approve"] if k == "ok"]
    assert learn(pos, neg, status=403, persons=persons) == [
        [Condition(feature="arg.actor", equals="arg.approver")]
    ]
    # a refusal only people's names would explain is not learned as a list of them
    names = [{"arg.approver": n, "arg.qty": 2} for n in ("eve", "cy") * 3]
    others = [{"arg.approver": n, "arg.qty": 2} for n in ("ann", "bob", "dee") * 3]
    assert learn(names, others, status=403) != []
    assert learn(names, others, status=403, persons=persons) == []


def test_a_duplicate_of_a_record_an_earlier_session_filed_is_learned(tmp_path):
    """Sessions read in the order they began (their names sort the other way), each
    finding the records earlier ones filed: a person filed again in a later session is
    refused as a duplicate, over the fields the two agree on."""
    from simgym.logs import ImportReport, build_world, read_logs

    lines = []
    for i in range(12):
        who = {"session": f"s{99 - i}", "actor": f"u{i}", "role": "clerk", "method": "POST"}
        person = {"name": f"p{i}", "birth": f"19{50 + i}-01-01", "city": f"c{i}"}
        call = {**who, "route": "/people", "path": "/people", "time": 1000.0 + 10 * i}
        lines.append(
            {**call, "request": person, "status": 201, "response": {"id": f"P-{i}", **person}}
        )
        if i:  # the person an earlier session filed, from another city
            again = {**person, "name": f"p{i - 1}", "birth": f"19{49 + i}-01-01"}
            lines.append(
                {
                    **call,
                    "time": call["time"] + 1,
                    "request": again,
                    "status": 409,
                    "response": {"error": {"code": "duplicate", "message": "filed before"}},
                }
            )
    log = tmp_path / "calls.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = ImportReport()
    build_world(read_logs([str(log)], report), tmp_path / "w", report=report)
    tools = json.loads((tmp_path / "w" / "behaviour.json").read_text())["tools"]
    guards = tools["post_people"]["guards"]
    assert [(g["status"], g["support"]) for g in guards] == [(409, 11)], guards
    assert guards[0]["when"] == [{"feature": "match.people", "covers": ["birth", "name"]}], guards


def test_validation_rules_come_from_the_field_a_refusal_names():
    """RFC 9457 invalid-params name the field: a rule over that field, from what the
    successful calls gave it (missing, a format, a value among few); the field's name
    is no person's, so masking keeps it."""
    from simgym.logs.behaviour import _field_guards, invalid_param
    from simgym.logs.mask import Masker

    def problem(name: str, reason: str) -> dict:
        return {
            "status": 400,
            "code": "validation_failed",
            "invalid-params": [{"name": name, "reason": reason}],
        }

    masked = Masker("k").value(problem("holder", "is required"))
    assert invalid_param(masked) == ("holder", "is required")
    assert Masker("k").value({"name": "Ada Lovelace"})["name"] != "Ada Lovelace"
    ok = [
        {"has.day": True, "fmt.day": "9999-99-99", "arg.kind": k, "has.kind": True}
        for k in ("a", "b") * 4
    ]
    refused = [
        ({"has.kind": True, "arg.kind": "a"}, problem("day", "is required")),
        (
            {"has.day": True, "fmt.day": "99/99/9999", "arg.kind": "b"},
            problem("day", "must be a date"),
        ),
        (
            {"has.day": True, "fmt.day": "9999-99-99", "arg.kind": "c", "has.kind": True},
            problem("kind", "must be one of a, b"),
        ),
        ({"has.day": True, "fmt.day": "9999-99-99"}, {"code": "validation_failed"}),
    ]
    guards, left = _field_guards(refused, ok, 400)
    assert [g.when[0].model_dump(exclude_none=True, by_alias=True) for g in guards] == [
        {"feature": "has.day", "in": [None]},
        {"feature": "fmt.day", "not_in": ["9999-99-99"]},
        {"feature": "arg.kind", "not_in": ["a", "b"]},
    ]
    assert left == refused[3:]


# -- relations between two records' fields, allowed values per group, ignored duplicates --


def test_order_relations_compare_numbers_and_dates_never_a_missing_side():
    within = Condition(feature="arg.incident_date", under="policies.effective_from")
    assert within.holds(
        {"arg.incident_date": "2025-07-30", "policies.effective_from": "2025-08-19"}
    )
    assert not within.holds(
        {"arg.incident_date": "2025-08-19", "policies.effective_from": "2025-08-19"}
    )
    assert not within.holds({"arg.incident_date": "2025-07-30"})  # the policy is unknown
    # a date against a time stamp compares the day; text that is no date never orders
    assert within.holds(
        {"arg.incident_date": "2025-07-30", "policies.effective_from": "2025-08-19T09:00:00Z"}
    )
    assert not within.holds({"arg.incident_date": "soon", "policies.effective_from": "later"})
    over = Condition(feature="arg.amount", over="policies.coverage_limit")
    assert over.holds({"arg.amount": 6735.9, "policies.coverage_limit": 6000.0})
    assert not over.holds({"arg.amount": 6000, "policies.coverage_limit": 6000.0})
    assert not over.holds({"arg.amount": True, "policies.coverage_limit": 0})
    assert "arg.amount > policies.coverage_limit" == over.text()


def test_a_bound_on_a_linked_record_is_learned_though_some_records_were_never_shown():
    """An amount over the linked policy's coverage: learned as a relation between the
    two fields, not as the amounts the log showed; a refusal whose policy the log never
    showed is left unexplained rather than fitted with a rule of its own values."""
    ok = [
        {"arg.amount": a, "policies.coverage_limit": c, "arg.notes": n}
        for a, c, n in ((500.0, 6000.0, "x"), (9000.0, 14000.0, "y"), (70.0, 8000.0, "x")) * 3
    ]
    refused = [
        {"arg.amount": a, "policies.coverage_limit": c, "arg.notes": n}
        for a, c, n in ((6735.9, 6000.0, "x"), (14984.27, 14000.0, "y"), (8100.0, 8000.0, "z"))
    ]
    refused.append({"arg.amount": 13732.22, "arg.notes": "z"})  # no policy known
    rules = learn(refused, ok, status=422)
    assert rules == [[Condition(feature="arg.amount", over="policies.coverage_limit")]]
    # the rule holds for amounts and limits the log never showed
    assert Guard(when=rules[0], status=422).holds(
        {"arg.amount": 10**6, "policies.coverage_limit": 999_999}
    )


def test_features_follow_a_linked_records_link():
    """An assessment names its claim; the claim names its policy: the policy's fields
    are features too (a second hop), and the record the call names is not its own link."""
    state = {
        "claims": [{"claim_number": "CLM-1", "policy_id": "p-1", "status": "under_review"}],
        "policies": [{"id": "p-1", "coverage_limit": 6000.0}],
        "assessments": [],
        "_keys": {"claims": "claim_number"},
    }
    feats = features({"claim_number": "CLM-1", "assessed_amount": 7000.0}, None, state)
    assert feats["claims.status"] == "under_review"
    assert feats["policies.exists"] is True and feats["policies.coverage_limit"] == 6000.0
    assert Condition(feature="arg.assessed_amount", over="policies.coverage_limit").holds(feats)


def test_a_duplicate_ignores_the_records_in_states_successes_found():
    """A claim filed again is refused, unless the earlier one was rejected: learned as a
    duplicate over the shared fields except records in the state the successes matched."""

    def call(status: str, n: int) -> dict:
        record = {"id": f"c{n}", "status": status, "assessor": None, "policy_id": "p"}
        return {
            "arg.policy_id": "p",
            "match.claims": [["amount", "incident_date", "policy_id"]],
            "matched.claims": [f"c{n}"],
            "matchrec.claims": [record],
        }

    refused = [call(s, i) for i, s in enumerate(("filed", "approved", "under_review", "filed"))]
    ok = [call("rejected", 10 + i) for i in range(3)] + [{"arg.policy_id": "q"}] * 4
    rules = learn(refused, ok, status=409)
    assert rules == [
        [
            Condition(
                feature="match.claims",
                covers=["amount", "incident_date", "policy_id"],
                unless={"status": ["rejected"]},
            )
        ]
    ]
    guard = Guard(when=rules[0], status=409, answer={"duplicate_of": "{{match.claims.id}}"})
    again = call("filed", 7)
    assert guard.holds(again)
    assert render(guard.answer, guard.quoted(again)) == {"duplicate_of": "c7"}
    assert not guard.holds(call("rejected", 8))
    assert "status not in ['rejected']" in rules[0][0].text()


def test_a_value_allowed_per_group_comes_from_the_successes_of_that_group():
    """A loss type the policy's product does not cover: the values each product's
    successful calls gave, not a list of values refused."""
    from simgym.logs.behaviour import _field_guards

    covers = {"home": ("fire", "storm"), "motor": ("theft", "collision")}
    ok = [
        {"arg.loss_type": t, "policies.product": p, "has.loss_type": True, "arg.n": i}
        for i, (p, types) in enumerate(covers.items())
        for t in types * 3
    ]
    problem = {
        "status": 400,
        "code": "validation_failed",
        "invalid-params": [{"name": "loss_type", "reason": "is not covered by a home policy"}],
    }
    refused = [
        ({"arg.loss_type": t, "policies.product": "home", "has.loss_type": True}, problem)
        for t in ("theft", "collision")
    ]
    guards, left = _field_guards(refused, ok, 400)
    assert not left and len(guards) == 1
    cond = guards[0].when[0]
    # every product the successes show well, though only home's refusals were logged
    assert cond.allowed == {"home": ["fire", "storm"], "motor": ["collision", "theft"]}
    assert cond.allowed_by == "policies.product"
    assert cond.holds({"arg.loss_type": "theft", "policies.product": "home"})
    assert cond.holds({"arg.loss_type": "fire", "policies.product": "motor"})
    assert not cond.holds({"arg.loss_type": "storm", "policies.product": "home"})
    assert not cond.holds({"arg.loss_type": "fire", "policies.product": "travel"})  # unknown
    # amounts are no category: no list of allowed amounts per group
    amounts = [{"arg.amount": 10.0 + i, "arg.role": r} for i, r in enumerate("ab" * 6)]
    assert (
        _field_guards(
            [
                (
                    {"arg.amount": 99.5, "arg.role": "a"},
                    {**problem, "invalid-params": [{"name": "amount", "reason": "too high"}]},
                )
            ],
            amounts,
            400,
        )[0]
        == []
    )


def test_a_sub_resource_of_another_record_reads_as_not_there():
    """Approving claim CLM-1 with an assessment of claim CLM-2: the assessment is not
    one of CLM-1's (REST nesting), so it reads as missing; a key named ``id`` (every
    record has one) scopes nothing."""
    state = {
        "claims": [{"claim_number": "CLM-1"}, {"claim_number": "CLM-2"}],
        "assessments": [
            {"assessment_id": "A-1", "claim_number": "CLM-1", "status": "current"},
            {"assessment_id": "A-2", "claim_number": "CLM-2", "status": "accepted"},
        ],
        "_keys": {"claims": "claim_number", "assessments": "assessment_id"},
    }
    claim = state["claims"][0]
    mine = features({"claim_number": "CLM-1", "assessment_id": "A-1"}, claim, state)
    assert mine["assessments.exists"] is True and mine["assessments.status"] == "current"
    theirs = features({"claim_number": "CLM-1", "assessment_id": "A-2"}, claim, state)
    assert theirs["assessments.exists"] is False and "assessments.status" not in theirs
    plain = {
        "loans": [{"id": "L1", "account_id": "a1"}],
        "accounts": [{"id": "a1", "customer_id": "c1"}],
    }
    feats = features({"id": "L1", "account_id": "a1"}, plain["loans"][0], plain)
    assert feats["accounts.exists"] is True and feats["accounts.customer_id"] == "c1"


def test_a_linked_record_takes_one_value_and_an_update_copies_a_linked_field():
    from simgym.domains.mcp_rules import new_values

    paid = ParentEffect(
        collection="claims",
        via="claim_number",
        field="status",
        source="claim_number",
        op="value",
        constant="paid",
    )
    assert paid.value({"status": "approved"}, {"claim_number": "CLM-1"}) == "paid"
    again = ParentEffect.model_validate(json.loads(json.dumps(paid.model_dump(mode="json"))))
    assert again == paid
    rules = ToolRules(copies={"approved_amount": "assessments.assessed_amount", "by": "actor"})
    feats = {"assessments.assessed_amount": 812.5}
    assert new_values(rules, feats, {"actor": "u1"}) == {"approved_amount": 812.5, "by": "u1"}
    assert new_values(rules, {}, {"actor": "u1"}) == {"by": "u1"}  # nothing to copy: unset
