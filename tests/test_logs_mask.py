"""Masking of imported logs: one pseudonym per identity wherever it appears (actor
fields, person fields of bodies, error messages), so the links rules depend on survive,
and the pseudonyms follow the key given to ``logs import --mask-key``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simgym.logs.mask import Masker, key_kind
from simgym.logs.model import LogRecord, ObjectRef

PEOPLE = ("alice.k", "bob-7", "carol@corp.test")


def _request(actor: str, requester: str, approver: str | None = None) -> LogRecord:
    body = {"id": "PR-1", "requester": requester, "amount": 900, "status": "submitted"}
    if approver:
        body["approver"] = approver
    return LogRecord(
        session=f"s-{actor}",
        operation="/requests",
        method="POST",
        actor=actor,
        role="buyer",
        arguments={"requester": requester, "buyer": requester, "amount": 900},
        status=201,
        response=body,
        objects=[ObjectRef("request", "PR-1", "created", dict(body))],
    )


def test_person_fields_are_actors():
    for key in ("requester", "approver", "approver_id", "buyer", "requested_by", "userId"):
        assert key_kind(key) == "actor", key
    for key in ("amount", "status", "username", "customer_id", "buyer_name"):
        assert key_kind(key) != "actor", key


def test_actor_and_requester_keep_their_link():
    masker = Masker("k")
    own = masker.record(_request("alice.k", "alice.k"))
    other = masker.record(_request("bob-7", "alice.k", approver="bob-7"))
    assert own.actor == own.arguments["requester"] == own.response["requester"]
    assert own.objects[0].state["requester"] == own.actor
    assert own.actor != "alice.k" and own.actor.startswith("actor-")
    # a different person stays different, and one person is one pseudonym in both records
    assert other.actor != other.arguments["requester"] == own.actor
    assert other.response["approver"] == other.actor


def test_actor_ids_inside_messages_and_other_fields():
    masker = Masker("k")
    masker.record(_request("bob-7", "bob-7"))
    refused = LogRecord(
        session="s9",
        operation="/requests/{id}/approve",
        method="POST",
        actor="alice.k",
        role="approver",
        arguments={"note": "for bob-7", "decided": "alice.k"},
        status=409,
        response={
            "error": {
                "code": "self_approval",
                "message": "alice.k may not approve a request alice.k raised; ask bob-7.",
            }
        },
    )
    masked = masker.record(refused)
    alice, bob = masked.actor, masker.pseudonym("actor", "bob-7")
    message = masked.response["error"]["message"]
    assert message == f"{alice} may not approve a request {alice} raised; ask {bob}."
    assert masked.arguments == {"note": f"for {bob}", "decided": alice}
    # a longer word that merely contains an actor id is not an actor
    text = masker.text("bob-77 and xbob-7 and bob-7")
    assert text == f"bob-77 and xbob-7 and {bob}"


def test_a_short_actor_id_is_not_masked_in_other_values():
    masker = Masker("k")
    masked = masker.record(
        LogRecord(session="s", operation="/x", actor="7", arguments={"term": "7", "user": "7"})
    )
    assert masked.actor == masker.pseudonym("actor", "7") == masked.arguments["user"]
    assert masked.arguments["term"] == "7"  # a value, not the actor


def test_an_email_actor_keeps_the_email_pseudonym():
    masker = Masker("k")
    masked = masker.record(_request("carol@corp.test", "carol@corp.test"))
    assert masked.actor == masked.arguments["requester"]
    assert masked.actor.endswith("@example.com") and "carol" not in json.dumps(masked.to_json())


def test_keys_change_pseudonyms_and_an_empty_key_is_refused():
    assert Masker("a").record(_request("bob-7", "bob-7")).actor == Masker("a").actor("bob-7")
    assert Masker("a").actor("bob-7") != Masker("b").actor("bob-7")
    with pytest.raises(ValueError, match="mask key"):
        Masker("")


def _log(path: Path) -> Path:
    rows = []
    for i, (actor, requester) in enumerate(
        [("alice.k", "alice.k"), ("bob-7", "alice.k"), ("carol@corp.test", "bob-7")]
    ):
        rows.append(
            {
                "session": f"s{i}",
                "time": f"2026-01-0{i + 1}T10:00:00Z",
                "actor": actor,
                "role": "buyer",
                "method": "POST",
                "route": "/requests",
                "path": "/requests",
                "request": {"requester": requester, "amount": 100 + i},
                "status": 201,
                "response": {"id": f"PR-{i}", "requester": requester, "status": "draft"},
            }
        )
        rows.append(
            {
                "session": f"s{i}",
                "time": f"2026-01-0{i + 1}T10:01:00Z",
                "actor": actor,
                "role": "buyer",
                "method": "POST",
                "route": "/requests/{request_id}/approve",
                "path": f"/requests/PR-{i}/approve",
                "status": 409,
                "response": {
                    "error": {"code": "self_approval", "message": f"{actor} raised PR-{i}"}
                },
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _import(log: Path, out: Path, *key: str) -> list[dict]:
    from simgym.cli.main import app

    args = ["logs", "import", str(log), "--out", str(out), *key]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    text = "".join(p.read_text() for p in out.iterdir() if p.suffix in (".json", ".jsonl"))
    for person in PEOPLE:
        assert person not in text, person  # no actor id left in clear anywhere
    lines = (out / "sessions.jsonl").read_text().splitlines()
    return [r for line in lines for r in json.loads(line)["records"]]


def test_mask_key_through_the_import_command(tmp_path: Path):
    log = _log(tmp_path / "log.jsonl")
    one = _import(log, tmp_path / "one", "--mask-key", "K1")
    again = _import(log, tmp_path / "again", "--mask-key", "K1")
    other = _import(log, tmp_path / "other", "--mask-key", "K2")
    default = _import(log, tmp_path / "default")
    actors = [[r["actor"] for r in run] for run in (one, again, other, default)]
    assert actors[0] == actors[1]
    assert len(set(actors[0])) == 3  # three people, three pseudonyms
    assert not set(actors[0]) & set(actors[2]) and not set(actors[0]) & set(actors[3])
    assert actors[0][0] == Masker("K1").actor("alice.k")
    for run in (one, other):
        create, refusal = run[0], run[1]
        assert (
            create["actor"] == create["arguments"]["requester"] == create["response"]["requester"]
        )
        assert refusal["response"]["error"]["message"] == f"{refusal['actor']} raised PR-0"
