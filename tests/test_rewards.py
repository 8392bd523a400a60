"""Rewards: each verifier on good, wrong and malformed answers; the rubric judge against
a real llama.cpp server and a faulty one; hybrids; reward specs; a real scored episode."""

from __future__ import annotations

import json

import pytest

import simgym
from simgym import Action, Observation, Task, Trajectory, Turn
from simgym.rewards import (
    Contains,
    ExactMatch,
    HybridReward,
    RegexMatch,
    RewardResult,
    RubricJudge,
    StateCheck,
    TableF1,
    TaskReward,
    TokenF1,
    ToolCallCheck,
    answers_match,
    build_reward,
    normalize_answer,
    parse_table,
    parse_verdict,
    register_reward,
    token_f1,
)
from simgym.rewards._json import resolve_path, split_path
from simgym.rewards.judge import render_episode
from simgym.worlds.generate import generate_world
from simgym.worlds.tasks import generate_tasks
from support import scripted_world


def episode(
    answer: str | None = None,
    *,
    metadata: dict | None = None,
    turns: list[Turn] | None = None,
    final_state: dict | None = None,
    instruction: str = "Answer the question.",
) -> Trajectory:
    """A finished episode built by hand."""
    task = Task(id="t", instruction=instruction, domain="mcp", metadata=metadata or {})
    return Trajectory(
        task=task,
        domain="mcp",
        turns=turns or [],
        answer=answer,
        final_state=final_state,
        initial_observation=Observation(text="ready", kind="initial"),
    )


def call(index: int, name: str, arguments: dict, result: str, error: str | None = None) -> Turn:
    return Turn(
        index=index,
        action=Action.tool_call(name, arguments),
        action_text=json.dumps({"name": name, "arguments": arguments}),
        observation=Observation(text=result, kind="error" if error else "observation"),
        error=error,
    )


async def score(reward, trajectory: Trajectory) -> RewardResult:
    result = await reward.score(trajectory)
    assert 0.0 <= result.value <= 1.0
    assert result.parts, "every result names its parts"
    return result


# -- normalization ----------------------------------------------------------------------


def test_normalization_is_squad_like_but_keeps_numbers_apart():
    assert normalize_answer("  The Eiffel-Tower!  ") == "eiffeltower"
    assert normalize_answer("An apple, a pear") == "apple pear"
    assert normalize_answer("3.5") == "3.5" and normalize_answer("35") == "35"
    assert normalize_answer("1,200 USD") == "1200 usd"
    assert normalize_answer("-2 degrees") == "-2 degrees"
    assert answers_match("3.50", "3.5") and answers_match("$1,200", "1200")
    assert not answers_match("3.5", "35") and not answers_match("-2", "2")
    assert token_f1("the big red dog", "a red dog") == pytest.approx(0.8)
    assert token_f1("", "") == 1.0 and token_f1("", "x") == 0.0


# -- answer match -----------------------------------------------------------------------


async def test_exact_match_good_wrong_and_malformed():
    meta = {"answer": "Ana Lima"}
    good = await score(ExactMatch(), episode("  ana LIMA. ", metadata=meta))
    assert good.value == 1.0 and good.parts == {"exact": 1.0}
    assert good.details["expected"] == ["Ana Lima"] and good.details["got"] == "  ana LIMA. "
    wrong = await score(ExactMatch(), episode("Ana", metadata=meta))
    assert wrong.value == 0.0 and "error" not in wrong.details
    missing = await score(ExactMatch(), episode(None, metadata=meta))
    assert missing.value == 0.0 and "no final answer" in missing.details["error"]
    no_ref = await score(ExactMatch(), episode("Ana"))
    assert no_ref.value == 0.0 and "no reference answer" in no_ref.details["error"]
    # several acceptable answers, from metadata or options; numbers as references
    many = episode("NYC", metadata={"answers": ["New York City", "NYC"]})
    assert (await score(ExactMatch(), many)).value == 1.0
    assert (await score(ExactMatch(answer=42), episode("42.0"))).value == 1.0
    renamed = await score(ExactMatch(answers=["x"], name="city"), episode("x"))
    assert renamed.parts == {"city": 1.0}


async def test_token_f1_and_contains():
    meta = {"answer": "the quick brown fox"}
    assert (await score(TokenF1(), episode("quick brown fox", metadata=meta))).value == 1.0
    partial = await score(TokenF1(), episode("a quick red fox jumps", metadata=meta))
    assert partial.value == pytest.approx(2 * (2 / 4) * (2 / 3) / (2 / 4 + 2 / 3))
    assert (await score(TokenF1(), episode("nothing alike", metadata=meta))).value == 0.0
    assert "error" in (await score(TokenF1(), episode(None, metadata=meta))).details
    contains = Contains(answer="Ana Lima")
    assert (await score(contains, episode("The customer is Ana Lima."))).value == 1.0
    assert (await score(contains, episode("The customer is Ana Limas."))).value == 0.0
    assert (await score(contains, episode(""))).value == 0.0
    assert "no final answer" in (await score(contains, episode(None))).details["error"]


async def test_regex_search_fullmatch_target_and_bad_patterns():
    meta = {"pattern": r"\d{4}-\d{2}-\d{2}"}
    assert (
        await score(RegexMatch(), episode("It shipped on 2029-03-01.", metadata=meta))
    ).value == 1.0
    full = RegexMatch(mode="fullmatch")
    assert (await score(full, episode(" 2029-03-01 ", metadata=meta))).value == 1.0
    wrong = await score(full, episode("on 2029-03-01", metadata=meta))
    assert wrong.value == 0.0 and wrong.details["matched"] is None
    assert (await score(RegexMatch(pattern="ok", ignore_case=True), episode("OK"))).value == 1.0
    # the final observation as the target
    turns = [call(1, "status", {}, '{"status": "shipped"}')]
    shipped = RegexMatch(pattern=r'"status": "shipped"', target="final_observation")
    assert (await score(shipped, episode(None, turns=turns))).value == 1.0
    # malformed: bad pattern in options raises now; in task data it scores 0 with why
    with pytest.raises(simgym.SimgymError, match="invalid pattern"):
        RegexMatch(pattern="(unclosed")
    bad = await score(RegexMatch(), episode("x", metadata={"pattern": "(unclosed"}))
    assert bad.value == 0.0 and "invalid pattern" in bad.details["error"]
    assert (
        "no final answer"
        in (await score(RegexMatch(), episode(None, metadata=meta))).details["error"]
    )
    with pytest.raises(simgym.SimgymError, match="mode must be one of"):
        RegexMatch(pattern="x", mode="match")


# -- state predicates -------------------------------------------------------------------

STATE = {
    "customers": [
        {"id": "C-1", "name": "Ana", "email": "ana@x.io", "tags": ["vip"]},
        {"id": "C-2", "name": "Bo", "email": "bo@x.io", "tags": []},
    ],
    "orders": {"O-7": {"customer": "C-1", "total": 450, "status": "shipped"}},
    "a/b": {"~k": 1},
}


def test_paths_json_pointer_and_dotted():
    assert resolve_path(STATE, split_path("/customers/1/email")) == "bo@x.io"
    assert resolve_path(STATE, split_path("customers.0.tags.0")) == "vip"
    assert resolve_path(STATE, split_path("/a~1b/~0k")) == 1
    assert resolve_path(STATE, split_path("")) is STATE
    for missing in ("/customers/2", "/customers/01", "/customers/-", "/orders/O-7/total/x"):
        assert resolve_path(STATE, split_path(missing)) is not STATE
        assert resolve_path(STATE, split_path(missing)).__class__ is object
    with pytest.raises(simgym.SimgymError, match="JSON Pointer"):
        split_path("/a~2")
    with pytest.raises(simgym.SimgymError, match="empty key"):
        split_path("customers..name")


async def test_state_checks_pass_fail_and_partial_credit():
    checks = [
        {"path": "/customers/1/email", "equals": "bo@x.io"},
        {"path": "orders.O-7.total", "equals": 450.0},
        {"path": "/orders/O-7/status", "not_equals": "pending"},
        {"path": "/customers/0/tags", "contains": "vip"},
        {"path": "/customers/0/email", "contains": "@x.io"},
        {"path": "/orders", "contains": "O-7"},
        {"path": "/customers", "record": {"name": "Ana", "email": "ana@x.io"}},
        {"path": "/orders", "record": {"customer": "C-2"}, "exists": False},
        {"path": "/customers/0/phone", "exists": False},
        {"path": "/customers/0/name"},
    ]
    good = await score(StateCheck(checks=checks), episode(final_state=STATE))
    assert good.value == 1.0 and good.details["passed"] == len(checks)
    wrong = [
        {"path": "/customers/1/email", "equals": "bo@new.io"},
        {"path": "/customers", "record": {"name": "Cy"}},
        {"path": "/orders", "record": {"customer": "C-1"}, "exists": False},
        {"path": "/customers/0/tags", "contains": "new"},
        {"path": "/orders/O-7/total", "equals": "450"},  # strict: a string is not a number
    ]
    bad = await score(
        StateCheck(checks=checks[:5] + wrong, mode="fraction"), episode(final_state=STATE)
    )
    assert bad.value == pytest.approx(5 / 10)
    failed = [c for c in bad.details["checks"] if not c["passed"]]
    assert [c["check"] for c in failed] == wrong
    assert failed[0]["got"] == "bo@x.io"  # what was there, next to what was expected
    strict_all = await score(StateCheck(checks=wrong[:1]), episode(final_state=STATE))
    assert strict_all.value == 0.0
    loose = StateCheck(path="/orders/O-7/total", equals="450", loose=True)
    assert (await score(loose, episode(final_state=STATE))).value == 1.0


async def test_state_checks_malformed_inputs():
    no_state = await score(StateCheck(path="/x"), episode())
    assert no_state.value == 0.0 and "no final state" in no_state.details["error"]
    missing_collection = await score(
        StateCheck(path="/nope", record={"a": 1}, exists=False), episode(final_state=STATE)
    )
    assert missing_collection.value == 0.0
    assert "no list or object" in missing_collection.details["checks"][0]["why"]
    for spec, message in [
        ({"path": "/x", "equal": 1}, "unknown key"),
        ({"equals": 1}, "needs 'path'"),
        ({"path": "/x", "equals": 1, "contains": 1}, "not both"),
        ({"path": "/x", "equals": 1, "exists": False}, "goes with 'record' only"),
        ({"path": "/x", "record": "a"}, "object of fields"),
    ]:
        with pytest.raises(simgym.SimgymError, match=message):
            StateCheck(checks=[spec])
    with pytest.raises(simgym.SimgymError, match="non-empty list"):
        StateCheck(checks=[])
    # checks from task data: good, and malformed (scored 0 with why, not raised)
    meta = {"state_checks": [{"path": "/orders/O-7/status", "equals": "shipped"}]}
    assert (await score(StateCheck(), episode(metadata=meta, final_state=STATE))).value == 1.0
    broken = await score(
        StateCheck(), episode(metadata={"state_checks": [{"pth": "/x"}]}, final_state=STATE)
    )
    assert broken.value == 0.0 and "bad metadata 'state_checks'" in broken.details["error"]
    none = await score(StateCheck(), episode(final_state=STATE))
    assert "no checks" in none.details["error"]


async def test_state_checks_over_the_final_observation():
    reward = StateCheck(source="final_observation", path="/order/status", equals="shipped")
    as_json = [call(1, "get_order", {"id": "O-7"}, '{"order": {"status": "shipped"}}')]
    assert (await score(reward, episode(turns=as_json))).value == 1.0
    fenced = [call(1, "get_order", {}, '```json\n{"order": {"status": "lost"}}\n```')]
    assert (await score(reward, episode(turns=fenced))).value == 0.0
    text = [call(1, "get_order", {}, "Order O-7 has shipped")]
    not_json = await score(reward, episode(turns=text))
    assert not_json.value == 0.0 and "not JSON" in not_json.details["error"]
    built = build_reward(
        {"type": "observation_state", "path": "/order/status", "equals": "shipped"}
    )
    assert (await score(built, episode(turns=as_json))).parts == {"observation_state": 1.0}


# -- tool calls -------------------------------------------------------------------------

TURNS = [
    call(1, "search", {"query": "ana", "limit": 5}, "[...]"),
    call(2, "update_customer", {"id": "C-1", "changes": {"email": "a@y.io"}}, "ok"),
    call(3, "delete_customer", {"id": "C-2"}, "not allowed", error="action rejected"),
    call(4, "search", {"query": "bo"}, "[...]"),
]


async def test_tool_call_checks():
    ran = episode("done", turns=TURNS)
    good = ToolCallCheck(
        checks=[
            {"tool": "update_customer", "arguments": {"id": "C-1", "changes": {"email": "a@y.io"}}},
            {"tool": "search", "min_count": 2, "max_count": 3},
            {"tool": "search", "arguments": {"query": "ana"}, "count": 1},
            {"tool": "delete_customer", "called": False},  # the rejected call does not count
            {"tool": "export_all", "called": False},
        ]
    )
    result = await score(good, ran)
    assert result.value == 1.0, result.details
    wrong = await score(ToolCallCheck(tool="update_customer", arguments={"id": "C-2"}), ran)
    assert wrong.value == 0.0
    assert wrong.details["checks"][0]["calls"] == [TURNS[1].action.arguments]
    attempts = ToolCallCheck(tool="delete_customer", called=False, count_failed=True)
    assert (await score(attempts, ran)).value == 0.0
    too_many = await score(ToolCallCheck(tool="search", max_count=1), ran)
    assert too_many.value == 0.0 and too_many.details["checks"][0]["count"] == 2
    partial = ToolCallCheck(checks=[{"tool": "search"}, {"tool": "nope"}], mode="fraction")
    assert (await score(partial, ran)).value == 0.5
    assert (await score(ToolCallCheck(tool="search"), episode("x"))).value == 0.0  # no turns
    for spec, message in [
        ({"name": "x"}, "unknown key"),
        ({"tool": ""}, "tool name"),
        ({"tool": "x", "min_count": -1}, "integer >= 0"),
        ({"tool": "x", "called": False, "min_count": 1}, "takes no counts"),
        ({"tool": "x", "min_count": 3, "max_count": 2}, "min > max"),
        ({"tool": "x", "count": True}, "integer >= 0"),
        ({"tool": "x", "count": 1, "max_count": 2}, "not both"),
        ({"tool": "x", "arguments": ["a"]}, "must be an object"),
    ]:
        with pytest.raises(simgym.SimgymError, match=message):
            ToolCallCheck(checks=[spec])
    from_task = episode(turns=TURNS, metadata={"tool_checks": [{"tool": "search", "count": 2}]})
    assert (await score(ToolCallCheck(), from_task)).value == 1.0
    bad_task = episode(turns=TURNS, metadata={"tool_checks": "search"})
    assert "bad metadata" in (await score(ToolCallCheck(), bad_task)).details["error"]


# -- tables -----------------------------------------------------------------------------

TABLE = [
    {"Name": "Alpha", "Price": "1,200", "Launch": "2029-01-05"},
    {"Name": "Beta", "Price": "950", "Launch": "2029-02-11"},
    {"Name": "Gamma", "Price": "700", "Launch": "2029-03-20"},
]
TABLE_META = {"table": TABLE, "key_columns": ["Name"]}


def markdown(rows: list[list[str]], header=("Name", "Price", "Launch")) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


async def test_table_f1_perfect_partial_and_json():
    perfect = markdown(
        [
            ["gamma", "700", "2029-03-20"],
            ["Alpha", "1200", "2029-01-05"],
            ["Beta", "950.0", "2029-02-11"],
        ],
        header=("name", "PRICE", "Launch"),
    )
    good = await score(
        TableF1(), episode("Here it is:\n\n" + perfect + "\n\nDone.", metadata=TABLE_META)
    )
    assert good.value == 1.0 and good.details["row_f1"] == 1.0, good.details
    # one wrong cell (Beta price), Gamma missing, an extra row Delta
    partial = markdown(
        [
            ["Alpha", "1200", "2029-01-05"],
            ["Beta", "999", "2029-02-11"],
            ["Delta", "1", "2029-04-01"],
        ]
    )
    item = await score(TableF1(), episode(partial, metadata=TABLE_META))
    # cells: 9 predicted, 9 reference, 5 correct (Alpha 3, Beta 2)
    assert item.value == pytest.approx(5 / 9)
    assert item.details["item_precision"] == pytest.approx(5 / 9)
    # rows: 3 predicted, 3 reference, 1 correct
    assert item.details["row_f1"] == pytest.approx(1 / 3)
    assert item.details["missing_rows"] == [{"Name": "Gamma"}]
    assert item.details["unmatched_rows"] == [{"Name": "Delta"}]
    row = await score(TableF1(level="row"), episode(partial, metadata=TABLE_META))
    assert row.value == pytest.approx(1 / 3)
    as_json = json.dumps([{"Name": "Alpha", "Price": 1200, "Launch": "2029-01-05", "Note": "x"}])
    js = await score(TableF1(), episode(f"```json\n{as_json}\n```", metadata=TABLE_META))
    assert js.details["item_precision"] == 1.0 and js.details["item_recall"] == pytest.approx(3 / 9)
    assert js.details["extra_columns"] == ["Note"]
    # a missing column lowers recall only; a duplicate row is not matched twice
    dup = markdown([["Alpha", "1200"], ["Alpha", "1200"]], header=("Name", "Price"))
    twice = await score(TableF1(), episode(dup, metadata=TABLE_META))
    assert twice.details["missing_columns"] == ["Launch"]
    assert twice.details["item_precision"] == pytest.approx(2 / 4)
    assert twice.details["item_recall"] == pytest.approx(2 / 9)


async def test_table_f1_malformed_answers_and_references():
    for answer, message in [
        ("Alpha costs 1200.", "no markdown table"),
        ("[1, 2, 3]", "not of row objects"),
        (markdown([["1200"]], header=("Price",)), "key column"),
        (markdown([["a", "b"]], header=("Name", "Name")), "repeats a column"),
    ]:
        result = await score(TableF1(), episode(answer, metadata=TABLE_META))
        assert result.value == 0.0 and message in result.details["error"], result.details
    assert (
        "no final answer"
        in (await score(TableF1(), episode(None, metadata=TABLE_META))).details["error"]
    )
    assert "no reference table" in (await score(TableF1(), episode("x"))).details["error"]
    bad_keys = {"table": TABLE, "key_columns": ["Model"]}
    assert (
        "key columns" in (await score(TableF1(), episode("x", metadata=bad_keys))).details["error"]
    )
    # short rows are padded and noted; a markdown reference works; key defaults to column 1
    ragged = markdown([["Alpha", "1200"]])
    noted = await score(
        TableF1(table=markdown([["Alpha", "1,200", "2029-01-05"]])), episode(ragged)
    )
    assert noted.details["notes"] == ["row 1 has 2 cells for 3 columns"]
    assert noted.details["item_recall"] == pytest.approx(2 / 3)


def test_parse_table_reads_escaped_bars_and_rows_under_a_key():
    rows, notes = parse_table("| a | b |\n|:--|--:|\n| x \\| y | 2 |\n\nafter")
    assert rows == [{"a": "x | y", "b": "2"}] and notes == []
    rows, _ = parse_table('{"rows": [{"a": 1, "b": null}]}')
    assert rows == [{"a": "1", "b": ""}]


async def test_generated_table_and_lookup_tasks_score_their_own_answers():
    """Issue 7's world tasks carry their reward spec; their reference answers score 1."""
    world = generate_world("bank", 7)
    tasks = generate_tasks(world, 12, domain="search", seed=1)
    kinds = set()
    for task in tasks:
        kinds.add(task.metadata["kind"])
        traj = Trajectory(task=task, domain="search", answer=task.metadata["answer"])
        result = await score(TaskReward(), traj)
        assert result.value == 1.0, (task.metadata["kind"], result.details)
    assert "table" in kinds


# -- rubric judge -----------------------------------------------------------------------


def test_parse_verdict_forms():
    v = parse_verdict(
        'Sure. {"criteria": [{"id": 1, "score": 8}, {"id": 2, "score": 4}], "score": 9}', 2
    )
    assert v["score"] == 6.0 and v["value"] == 0.6  # per-criterion mean wins over overall
    assert parse_verdict('{"score": "7/10", "reason": "ok"}')["value"] == 0.7
    assert parse_verdict('<think>score: 1</think>{"score": 12}')["value"] == 1.0  # clamped
    assert parse_verdict("Overall **Score:** 3/5")["value"] == 0.6
    assert parse_verdict('{"criteria": [{"score": 2}]}', 3)["score"] == 2.0
    assert parse_verdict('{"score": -4}')["value"] == 0.0
    with pytest.raises(ValueError, match="no JSON verdict"):
        parse_verdict('{"verdict": "good"} great work')


def test_judge_transcript_fits_its_budget_and_keeps_the_end():
    turns = [call(i, "read", {"page": i}, f"page {i} " + "x" * 900) for i in range(1, 41)]
    traj = episode("done", turns=turns)
    text = render_episode(traj, max_chars=6000, observation_chars=400)
    assert len(text) <= 6000
    assert "### Start" in text and "### Step 40" in text and "### Step 2\n" not in text
    assert "step(s) left out" in text and "characters cut" in text  # 900-char pages clipped
    whole = render_episode(traj, max_chars=10**6, observation_chars=10**4)
    assert all(f"### Step {i}\n" in whole for i in range(1, 41))
    tiny = render_episode(traj, max_chars=300, observation_chars=10**4)
    assert "### Step 40" in tiny and len(tiny) < 1200


def test_judge_needs_a_server_and_reads_env_defaults(monkeypatch):
    monkeypatch.delenv("SIMGYM_JUDGE_BASE_URL", raising=False)
    with pytest.raises(simgym.SimgymError, match="SIMGYM_JUDGE_BASE_URL"):
        RubricJudge()
    monkeypatch.setenv("SIMGYM_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("SIMGYM_JUDGE_MODEL", "grader")
    judge = build_reward("judge")
    assert judge.describe()["base_url"] == "http://127.0.0.1:9/v1"
    assert judge.describe()["model"] == "grader"
    with pytest.raises(simgym.SimgymError, match="rubric"):
        RubricJudge(rubric=[""])


def judged_episode(rubric) -> Trajectory:
    return episode(
        "Ana's email is now a@y.io.",
        metadata={"rubric": rubric},
        turns=TURNS[:2],
        instruction="Change Ana's email to a@y.io and confirm.",
    )


async def test_judge_scores_an_episode_on_a_real_server(llama_server):
    judge = RubricJudge(llama_server, max_tokens=96, max_retries=0)
    traj = judged_episode(["The email was changed.", "The answer confirms the change."])
    result = await score(judge, traj)
    assert isinstance(result.details["raw"], str) and result.details["raw"]
    assert result.details["rubric_source"] == "task" and len(result.details["rubric"]) == 2
    assert result.parts == {"judge": result.value}
    if "error" in result.details:  # a 135M model may write no score; then it was asked twice
        assert result.value == 0.0 and result.details["attempts"] == 2
    else:
        assert result.value == pytest.approx(result.details["score"] / 10)
    # JSON mode (grammar-constrained on llama.cpp) and a default rubric from the answer
    strict = RubricJudge(llama_server, max_tokens=96, max_retries=0, json_mode=True, attempts=1)
    plain = episode("a@y.io", metadata={"answer": "a@y.io"}, turns=TURNS[:2])
    result = await score(strict, plain)
    assert result.details["rubric_source"] == "default"
    assert "a@y.io" in result.details["rubric"][1]
    json.loads(result.details["raw"])  # JSON mode gives JSON, whatever it says
    await judge.aclose()
    await strict.aclose()


async def test_judge_failures_score_zero_with_the_error(fault_server):
    base, hits = fault_server
    traj = judged_episode("The email was changed.")
    for mode, message in [("500", "HTTP 500"), ("garbage", "not JSON")]:
        judge = RubricJudge(f"{base}/{mode}", max_retries=0)
        result = await score(judge, traj)
        assert result.value == 0.0 and message in result.details["error"], result.details
        await judge.aclose()
    before = hits["ok"]
    judge = RubricJudge(f"{base}/ok", max_retries=0)
    unreadable = await score(judge, traj)
    assert unreadable.value == 0.0 and "unreadable verdict" in unreadable.details["error"]
    assert hits["ok"] - before == 2  # asked once more, then gave up
    assert unreadable.details["raws"] == ["ok", "ok"] and unreadable.details["attempts"] == 2
    bad_rubric = await score(judge, judged_episode(42))
    assert "bad metadata 'rubric'" in bad_rubric.details["error"]
    assert hits["ok"] - before == 2  # a bad rubric is not sent to the judge
    await judge.aclose()


# -- hybrid and specs -------------------------------------------------------------------


class Boom:
    name = "boom"

    async def score(self, trajectory):
        raise RuntimeError("kaput")


async def test_hybrid_weights_names_details_and_broken_parts():
    traj = episode("Ana", metadata={"answer": "Ana Lima"}, turns=TURNS)
    hybrid = HybridReward(
        [(TokenF1(), 3.0), (ExactMatch(), 1.0), (ExactMatch(answer="Ana"), 1.0), (Boom(), 1.0)]
    )
    result = await score(hybrid, traj)
    f1 = token_f1("Ana", "Ana Lima")
    assert result.value == pytest.approx((3 * f1 + 0 + 1 + 0) / 6)
    assert result.parts == {"f1": pytest.approx(f1), "exact": 0.0, "exact_2": 1.0, "boom": 0.0}
    assert result.details["exact_2"]["weight"] == 1.0
    assert result.details["exact"]["details"]["expected"] == ["Ana Lima"]
    assert "kaput" in result.details["boom"]["details"]["error"]
    for parts, message in [
        ([], "at least one"),
        ([(ExactMatch(), -1)], ">= 0"),
        ([(ExactMatch(), 0)], "add up to 0"),
    ]:
        with pytest.raises(simgym.SimgymError, match=message):
            HybridReward(parts)


async def test_build_reward_specs(monkeypatch):
    traj = episode("Ana", metadata={"answer": "Ana"}, turns=TURNS)
    assert isinstance(build_reward("em"), ExactMatch)
    assert (await score(build_reward({"type": "contains", "answer": "an"}), traj)).value == 0.0
    listed = build_reward(["exact", {"type": "tool_call", "tool": "search", "weight": 3}])
    assert isinstance(listed, HybridReward)
    assert (await score(listed, traj)).parts == {"exact": 1.0, "tool_call": 1.0}
    nested = build_reward(
        {
            "type": "hybrid",
            "name": "mix",
            "parts": [
                {"type": "exact", "weight": 0.7},
                {
                    "type": "hybrid",
                    "parts": ["f1", {"type": "regex", "pattern": "zzz"}],
                    "weight": 0.3,
                },
            ],
        }
    )
    result = await score(nested, traj)
    assert nested.name == "mix" and result.value == pytest.approx(0.7 + 0.3 * 0.5)
    assert result.details["hybrid"]["parts"] == {"f1": 1.0, "regex": 0.0}
    for spec, message in [
        ("nope", "unknown reward type 'nope'"),
        ({"answer": "x"}, "needs a 'type'"),
        ({"type": "exact", "answr": "x"}, "bad options for reward 'exact'"),
        ({"type": "hybrid"}, "needs 'parts'"),
        ({"type": "hybrid", "parts": ["exact"], "mode": "max"}, "takes 'parts' and 'name'"),
        ({"type": "hybrid", "parts": [{"type": "exact", "weight": "high"}]}, "must be a number"),
        (3, "a reward spec is"),
    ]:
        with pytest.raises(simgym.SimgymError, match=message):
            build_reward(spec)
    boom = Boom()
    assert build_reward(boom) is boom

    from simgym.rewards import registry

    # registered for this test only: the registry outlives it in the process
    monkeypatch.setattr(registry, "_FACTORIES", dict(registry._FACTORIES))
    register_reward("always_half", lambda **o: _Half(**o))
    assert (await score(build_reward({"type": "always_half", "name": "h"}), traj)).parts == {
        "h": 0.5
    }
    with pytest.raises(simgym.SimgymError, match="cannot register"):
        register_reward("hybrid", _Half)


class _Half:
    def __init__(self, name: str = "half") -> None:
        self.name = name

    async def score(self, trajectory):
        return RewardResult(value=0.5, parts={self.name: 0.5})


async def test_task_reward_reads_each_tasks_own_spec():
    reward = build_reward(None)
    assert isinstance(reward, TaskReward)
    by_spec = episode("Ana", metadata={"reward": {"type": "f1", "answer": "Ana Lima"}})
    assert (await score(reward, by_spec)).parts == {"f1": pytest.approx(2 / 3)}
    by_answer = await score(reward, episode("ana", metadata={"answer": "Ana"}))
    assert by_answer.value == 1.0 and by_answer.parts == {"exact": 1.0}
    nothing = await score(reward, episode("Ana"))
    assert nothing.value == 0.0 and "no reward defined" in nothing.details["error"]
    for bad in ({"type": "telepathy"}, "task"):
        result = await score(reward, episode("Ana", metadata={"reward": bad}))
        assert result.value == 0.0 and "bad metadata 'reward'" in result.details["error"]
    # a state task as world_tasks writes it
    update = {
        "reward": {"type": "state", "checks": [{"path": "/orders/O-7/status", "equals": "lost"}]}
    }
    assert (await score(reward, episode(metadata=update, final_state=STATE))).value == 0.0


# -- a real episode ---------------------------------------------------------------------

SCENARIO = {
    "server_name": "shop",
    "tools": [
        {
            "name": "get_order",
            "description": "Fetch one order by id.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        }
    ],
    "state": {"orders": {"O-7": {"status": "shipped", "total": 450}}},
}


async def test_a_real_mcp_episode_is_scored():
    world = simgym.FunctionWorldModel(
        scripted_world(['{"order_id": "O-7", "status": "shipped", "total": 450}'])
    )
    env = simgym.make("mcp", world_model=world, scenario=SCENARIO)
    task = Task(
        id="order",
        domain="mcp",
        instruction="What is the status of order O-7?",
        metadata={"answer": "shipped"},
    )
    await env.reset(task)
    await env.step({"name": "get_order", "arguments": {}})  # rejected: order_id is required
    await env.step({"name": "get_order", "arguments": {"order_id": "O-7"}})
    await env.finish("It has shipped.")
    traj = env.trajectory
    assert traj.turns[0].error and traj.answer == "It has shipped."
    reward = build_reward(
        [
            {"type": "f1", "weight": 2},
            "contains",
            {
                "type": "tool_call",
                "tool": "get_order",
                "count": 1,
                "arguments": {"order_id": "O-7"},
            },
            {"type": "tool_call", "tool": "get_order", "count": 2, "count_failed": True},
            {"type": "regex", "pattern": '"status": "shipped"', "target": "final_observation"},
            {"type": "observation_state", "path": "/total", "equals": 450},
        ]
    )
    result = await score(reward, traj)
    f1 = token_f1("It has shipped.", "shipped")
    assert result.parts == {
        "f1": pytest.approx(f1),
        "contains": 1.0,
        "tool_call": 1.0,
        "tool_call_2": 1.0,  # the rejected attempt counts when asked to
        "regex": 1.0,
        "observation_state": 1.0,
    }
    assert result.value == pytest.approx((2 * f1 + 5) / 7)
    assert result.details["tool_call"]["details"]["checks"][0]["failed_calls"] == 1
    # the task's own reward (exact match on metadata["answer"]) fails this wordy answer
    assert (await score(build_reward(None), traj)).details["expected"] == ["shipped"]
