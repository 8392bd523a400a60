"""``simgym logs eval``: a twin built from training logs, replayed against a separate
held-out log; outcomes compared by status and error code, refusals reported per kind,
the model's share of answers counted, and a world without bodies refused as no twin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simgym.logs.eval import NotATwin, evaluate
from simgym.logs.mask import Masker
from simgym.logs.refusals import KINDS, code_kind, guard_kind, refusal_kind
from simgym.real.backoffice import run_sessions
from simgym.worldmodels.function import FunctionWorldModel


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bank")
    run_sessions(40, 1, root / "train")
    run_sessions(12, 2, root / "held")
    return root


def _model(text: str) -> FunctionWorldModel:
    return FunctionWorldModel(lambda messages: text)


def test_refusal_kinds_from_guards_and_codes():
    assert guard_kind({"when": [{"feature": "rec.status", "not_in": ["draft"]}]}) == "life-cycle"
    assert guard_kind({"when": [{"feature": "arg.role", "in": ["clerk"]}]}) == "permission"
    assert (
        guard_kind({"when": [{"feature": "arg.actor", "equals": "rec.requester"}]})
        == "self-approval"
    )
    step = {"when": [{"feature": "arg.actor", "equals": "hist.order"}]}
    assert guard_kind(step) == "segregation of duties"
    assert guard_kind(step, frozenset({"order"})) == "self-approval"  # the creator again
    limit = {"feature": "rec.amount", "limits": {"clerk": 10.0}, "limit_by": "arg.role"}
    assert guard_kind({"when": [limit]}) == "limit"
    assert guard_kind({"when": [{"feature": "a.x", "differs": "rec.x"}]}) == "match"
    assert guard_kind({"when": [{"feature": "match.orders", "covers": ["a", "b"]}]}) == "duplicate"
    assert guard_kind({"when": [{"feature": "fmt.date", "in": ["99"]}]}) == "validation"
    assert code_kind("approvalLimitExceeded", 403) == "limit"
    assert code_kind("duplicate_invoice", 409) == "duplicate"
    assert code_kind("", 418) == "unknown" and code_kind(None, 403) == "permission"
    # a guard the real code contradicts is the miner's mistake; a code that says
    # nothing leaves the guard's kind
    wrong = {"when": [{"feature": "arg.actor", "equals": "hist.submit"}]}
    assert refusal_kind(wrong, "invalid_transition", 409) == ("life-cycle", "error code")
    assert refusal_kind(wrong, "E17", 409) == ("segregation of duties", "mined guard")
    assert refusal_kind(None, "E17", 418) == ("unknown", "unknown")
    assert set(KINDS) >= {"self-approval", "segregation of duties", "match", "unknown"}


def test_heldout_file_with_state_and_rules(bank: Path, tmp_path: Path):
    report = evaluate(
        [str(bank / "train" / "sessions.jsonl")],
        tmp_path,
        heldout=[str(bank / "held" / "sessions.jsonl")],
        world_model=_model('{"note": "the model wrote this"}'),
    )
    assert report["twin"] and report["heldout"] and report["holdout"] is None
    held = [json.loads(line) for line in (bank / "held" / "sessions.jsonl").open()]
    assert report["calls"] == len(held) and report["sessions"] == len({h["session"] for h in held})
    assert report["train"]["records"] == sum(1 for _ in (bank / "train" / "sessions.jsonl").open())
    # the rules and the state decide nearly everything; the model's answers are the rest
    assert 0 < report["model_answers"] < 0.2 * report["replayed"]
    assert report["model_share"] == round(report["model_answers"] / report["replayed"], 4)
    real_refusals = sum(r["status"] >= 400 for r in held)
    skipped = sum(report["not_replayed"].values())
    assert real_refusals - skipped <= report["refusals"] <= real_refusals
    # how many the twin answers right is the miner's to raise (its own tests); here: a
    # fair share, each counted under one kind
    assert report["refusals_answered"] >= 0.5
    kinds = report["refusals_by_kind"]
    assert {"life-cycle", "permission", "validation"} <= set(kinds)
    assert sum(k["calls"] for k in kinds.values()) == report["refusals"]
    assert report["final_state_agreement"] >= 0.9 and report["final_state_checks"] > 50
    # the model's text is neither the real success's shape nor a refusal: a disagreement
    shapes = [m for m in report["mismatches"] if m.get("twin") == "another shape"]
    assert shapes and report["outcome_agreement"] < 1.0
    saved = json.loads((tmp_path / "eval.json").read_text())
    assert saved["outcome_agreement"] == report["outcome_agreement"]


def test_a_model_that_answers_errors_is_not_a_twins_refusal(bank: Path, tmp_path: Path):
    """Refusals the model writes carry no status: they do not count as answered."""
    good = evaluate(
        [str(bank / "train" / "sessions.jsonl")],
        tmp_path / "good",
        heldout=[str(bank / "held" / "sessions.jsonl")],
        world_model=_model('{"error": {"code": "forbidden"}}'),
        grounding="off",
        max_sessions=4,
    )
    assert good["model_share"] == 1.0
    assert good["refusals_answered"] in (0.0, None)


def test_a_model_error_is_a_miss_and_the_replay_goes_on(bank: Path, tmp_path: Path):
    """A call the world model cannot answer (a prompt over its context) is counted as a
    miss, never as agreement, and the session's later calls are still replayed."""
    from simgym.core.errors import WorldModelError

    def fail(messages):
        raise WorldModelError("prompt does not fit the 4096-token context")

    failed = evaluate(
        [str(bank / "train" / "sessions.jsonl")],
        tmp_path / "failed",
        heldout=[str(bank / "held" / "sessions.jsonl")],
        world_model=FunctionWorldModel(fail),
        grounding="off",
        max_sessions=3,
    )
    assert failed["replayed"] == failed["calls"] > 3  # no session ended at its first call
    assert failed["calls_errored"] == failed["replayed"]
    assert failed["outcome_agreement"] == 0.0
    assert "does not fit" in next(iter(failed["errors"]))


def test_no_bodies_is_no_twin(tmp_path: Path):
    rows = [
        {
            "session": f"s{i}",
            "method": "POST",
            "route": "/orders",
            "path": "/orders",
            "status": 201 if i % 3 else 409,
        }
        for i in range(12)
    ]
    log = tmp_path / "bare.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(NotATwin, match="not a twin"):
        evaluate([str(log)], tmp_path / "out", heldout=[str(log)], world_model=_model("{}"))
    saved = json.loads((tmp_path / "out" / "eval.json").read_text())
    assert saved["twin"] is False and saved["problems"]

    from simgym.cli.main import app

    result = CliRunner().invoke(
        app, ["logs", "eval", str(log), "--heldout", str(log), "--out", str(tmp_path / "cli")]
    )
    assert result.exit_code == 1 and "not a twin" in result.output


def test_cli_heldout_json_and_mask_key(bank: Path, tmp_path: Path):
    from simgym.cli.main import app

    train, held = bank / "train" / "sessions.jsonl", bank / "held" / "sessions.jsonl"
    runs = {}
    for name, key in (("a", "K1"), ("b", "K1"), ("c", "K2")):
        args = ["logs", "eval", str(train), "--heldout", str(held), "--out", str(tmp_path / name)]
        args += ["--mask-key", key, "--max-sessions", "3", "--world-model", "local", "--json"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        runs[name] = json.loads(result.stdout)  # progress goes to stderr
        # not a terminal: plain progress lines, the first and the last
        assert "held-out sessions 0/3 (0%)" in result.stderr, result.stderr
        assert "held-out sessions 3/3 (100%)" in result.stderr, result.stderr
    assert runs["a"]["sessions"] == 3 and runs["a"]["heldout"] == [str(held)]
    assert "K1" not in json.dumps(runs["a"])  # the key itself is never written out

    def actors(name: str) -> set[str]:
        lines = (tmp_path / name / "world" / "sessions.jsonl").read_text().splitlines()
        return {r["actor"] for line in lines for r in json.loads(line)["records"] if r["actor"]}

    assert actors("a") == actors("b") and not actors("a") & actors("c")
    assert Masker("K1").actor("alice") in actors("a")

    table = CliRunner().invoke(
        app,
        ["logs", "eval", str(train), "--heldout", str(held), "--out", str(tmp_path / "t")]
        + ["--max-sessions", "3", "--world-model", "local"],
        env={"COLUMNS": "200"},
    )
    assert table.exit_code == 0, table.output
    for words in ("outcome agreement", "right status and code", "model's share", "final-state"):
        assert words in table.output
