"""The consistency benchmark: probe generation, rule scoring, full runs with rule-based
world models (one that keeps facts, one that forgets, one that only sees recent turns),
resume, and the CLI on the embedded model."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import simgym
from simgym.bench.consistency import (
    MODES,
    OPS,
    PROBE_DOMAINS,
    corrected_totals,
    generate_probes,
    ledger_agrees,
    mode_totals,
    plan_runs,
    report_table,
    run_consistency,
    run_probe,
    score_observation,
    summarize,
)
from simgym.bench.store import RowWriter, read_rows
from simgym.core import contract
from simgym.core.errors import SimgymError

DOMAINS = list(PROBE_DOMAINS)
PROMPT = "user@devbox:~$"

# -- probes -----------------------------------------------------------------------------


def test_probes_are_deterministic_by_seed_and_differ_across_seeds():
    a = generate_probes(DOMAINS, gaps=[5, 20], probes=3, seed=7)
    b = generate_probes(DOMAINS, gaps=[5, 20], probes=3, seed=7)
    c = generate_probes(DOMAINS, gaps=[5, 20], probes=3, seed=8)
    assert a == b
    assert [p.current for p in a] != [p.current for p in c]
    assert len(a) == 3 * 2 * 3
    assert {p.key("state") for p in a} == {p.key("state") for p in b}
    assert len({p.key("history") for p in a}) == len(a)


@pytest.mark.parametrize("domain", DOMAINS)
def test_probe_facts_follow_their_operation(domain):
    probes = generate_probes([domain], gaps=[5], probes=6, seed=3)
    start = DOMAINS.index(domain)  # each domain starts the cycle at another op
    assert [p.op for p in probes] == [OPS[(i + start) % 3] for i in range(6)]
    for probe in probes:
        roles = [s.role for s in probe.steps]
        # turn 1 scripted, the change at turn k=2, n-1 fillers, the look at turn k+n
        assert roles == ["setup", "mutate"] + ["filler"] * (probe.gap - 1) + ["probe"]
        assert probe.probe_turn == len(probe.steps) == probe.mutation_turn + probe.gap
        assert [s.scripted is None for s in probe.steps].count(True) == 2
        mutation = json.dumps(probe.steps[1].action)
        if probe.op == "create":
            assert probe.current and probe.previous is None and probe.current in mutation
            assert probe.fact not in json.dumps(probe.steps[0].action)  # nothing to create
        elif probe.op == "change":
            assert probe.current and probe.previous and probe.current != probe.previous
            assert probe.previous in json.dumps(probe.steps[0].action)
            assert probe.current in mutation
        else:
            assert probe.current is None and probe.previous in json.dumps(probe.steps[0].action)
            assert probe.previous not in mutation
        assert re.fullmatch(r"[a-z]+-\d{4}", probe.current or probe.previous)
        # fillers never mention the fact
        for step in probe.steps[2:-1]:
            assert probe.fact not in json.dumps(step.action)
            assert step.scripted.patch == {}
        assert probe.fact in json.dumps(probe.steps[-1].action)


def test_bad_generator_input_is_a_clear_error():
    with pytest.raises(SimgymError, match="no consistency probes for web"):
        generate_probes(["web"])
    with pytest.raises(SimgymError, match="gaps"):
        generate_probes(["terminal"], gaps=[0])
    with pytest.raises(SimgymError, match="probes"):
        generate_probes(["terminal"], probes=0)
    with pytest.raises(SimgymError, match="at least one domain"):
        generate_probes([], gaps=[5])
    # repeats are ignored, not run twice
    assert len(generate_probes(["mcp", "mcp"], gaps=[5, 5], probes=1)) == 1


# -- scoring ----------------------------------------------------------------------------


def one(domain: str, op: str):
    return next(p for p in generate_probes([domain], gaps=[5], probes=3, seed=1) if p.op == op)


def test_scoring_a_changed_file():
    probe = one("terminal", "change")
    new, old = probe.current, probe.previous
    good = f"{PROMPT} cat {probe.fact}\n{new}\n{PROMPT}"
    assert score_observation(probe, good).passed
    stale = score_observation(probe, f"{old}\n{PROMPT}")
    assert not stale.passed and old in stale.reason
    both = score_observation(probe, f"{old}\n{new}")
    assert not both.passed and "alongside" in both.reason
    gone = score_observation(probe, f"cat: {probe.fact}: No such file or directory")
    assert not gone.passed and "reported missing" in gone.reason
    other = score_observation(probe, "something else")
    assert not other.passed and "not shown" in other.reason
    longer = score_observation(probe, f"{new}0\n{PROMPT}")  # a different token
    assert not longer.passed and "not shown" in longer.reason


def test_scoring_a_deleted_record_and_missing_observations():
    probe = one("mcp", "delete")
    ok = score_observation(probe, '{"error": {"code": 404, "message": "record not found"}}')
    assert ok.passed
    back = score_observation(probe, json.dumps({"id": probe.fact, "value": probe.previous}))
    assert not back.passed and "came back" in back.reason
    assert score_observation(probe, json.dumps({"id": probe.fact, "status": "deleted"})).passed
    silent = score_observation(probe, "{}")
    assert not silent.passed and "no not-found" in silent.reason
    assert score_observation(probe, "", None).reason == "no observation: empty"
    failed = score_observation(probe, None, "server down")
    assert not failed.passed and "server down" in failed.reason


def test_scoring_a_created_swe_file():
    probe = one("swe", "create")
    assert score_observation(probe, f"     1  {probe.current}").passed
    contradicted = score_observation(probe, f"     1  {probe.current}\nError: file not found")
    assert not contradicted.passed and "also a not-found" in contradicted.reason


def test_ledger_check_finds_facts_by_path_tail():
    probe = one("terminal", "create")
    name = probe.fact.rsplit("/", 1)[-1]
    assert ledger_agrees(probe, {"files": {probe.fact: probe.current + "\n"}})
    assert ledger_agrees(probe, {"files": {name: probe.current}})  # a relative path
    assert not ledger_agrees(probe, {"files": {}})
    assert ledger_agrees(probe, None) is None
    deleted = one("mcp", "delete")
    assert ledger_agrees(deleted, {"records": {}})
    assert not ledger_agrees(deleted, {"records": {deleted.fact: {"value": deleted.previous}}})


def test_one_probe_per_cell_covers_every_op_across_domains():
    probes = generate_probes(DOMAINS, gaps=[5], probes=1, seed=0)
    assert sorted(p.op for p in probes) == sorted(OPS)


# -- rule-based world models ------------------------------------------------------------

_STATE = re.compile(r"\*\*Current State:\*\*\n```json\n(.*?)\n```", re.DOTALL)


def _facts_from(messages, window: int | None) -> dict:
    """What the model knows: the state block when it is shown, else the actions in the
    history (only the last ``window`` messages, for a model with a short memory)."""
    found = _STATE.search(messages[-1]["content"])
    if found:
        state = json.loads(found.group(1))
        records = state.get("records")
        if isinstance(records, list):  # the mcp probes keep a list of records
            return {r["id"]: {k: v for k, v in r.items() if k != "id"} for r in records}
        return dict(state.get("files") or records or {})
    facts: dict = {}
    history = messages[1:-1] if window is None else messages[1:-1][-window:]
    for message in history:
        if message["role"] == "user":
            _apply(facts, contract.action_text_of(message["content"]))
    return facts


def _apply(facts: dict, action_text: str) -> tuple[str, dict] | None:
    """Simulate one action on ``facts``: ``(observation, merge patch)``, or None when the
    action is not one of the probe actions."""
    action = json.loads(action_text)
    if isinstance(action, list):  # terminal keystrokes
        typed = action[0]["keystrokes"].strip()
        if m := re.fullmatch(r'echo "(.*)" > (\S+)', typed):
            facts[m[2]] = m[1] + "\n"
            return f"{PROMPT} {typed}\n{PROMPT}", {"files": {m[2]: m[1] + "\n"}}
        if m := re.fullmatch(r"rm (\S+)", typed):
            facts.pop(m[1], None)
            return f"{PROMPT} {typed}\n{PROMPT}", {"files": {m[1]: None}}
        if m := re.fullmatch(r"cat (\S+probe\S+)", typed):
            shown = facts.get(m[1], f"cat: {m[1]}: No such file or directory\n")
            return f"{PROMPT} {typed}\n{shown}{PROMPT}", {}
        return None
    name, args = action["name"], action["arguments"]

    def records() -> dict:  # a merge patch replaces a list whole
        return {"records": [{"id": k, **v} for k, v in facts.items()]}

    if name in ("create_record", "update_record"):
        facts[args["id"]] = {"value": args["value"]}
        return json.dumps({"id": args["id"], **facts[args["id"]]}), records()
    if name == "delete_record":
        facts.pop(args["id"], None)
        return json.dumps({"deleted": args["id"]}), records()
    if name == "get_record" and args["id"] != "R-0001":
        if args["id"] in facts:
            return json.dumps({"id": args["id"], **facts[args["id"]]}), {}
        missing = {"code": 404, "message": f"record {args['id']} not found"}
        return json.dumps({"error": missing}), {}
    if name == "write_file":
        facts[args["path"]] = args["content"]
        return f"Created {args['path']} (1 lines)", {"files": {args["path"]: args["content"]}}
    if name == "edit_file":
        text = facts.get(args["path"], "").replace(args["old_str"], args["new_str"])
        facts[args["path"]] = text
        return f"Edited {args['path']}\n     1  {text.strip()}", {"files": {args["path"]: text}}
    if name == "bash" and (m := re.fullmatch(r"rm (\S+)", args["command"])):
        facts.pop(m[1], None)
        return "[exit code: 0]", {"files": {m[1]: None}}
    if name == "read_file" and "probe" in args["path"]:
        if args["path"] in facts:
            return f"     1  {facts[args['path']].strip()}", {}
        return f"Error: file not found: {args['path']}", {}
    return None


def rule_world(*, window: int | None = None, forget: bool = False, name: str = "rules"):
    """A world model that simulates the probe actions by rule. ``forget``: it knows
    nothing but the newest action (and writes no state updates)."""

    def world(messages):
        facts = {} if forget else _facts_from(messages, window)
        simulated = _apply(facts, contract.action_text_of(messages[-1]["content"]))
        assert simulated is not None, "scripted turns never reach the model under test"
        observation, patch = simulated
        raw = f"<predicted_observation>\n{observation}\n</predicted_observation>"
        if "<state_update>" in messages[0]["content"] and not forget:
            raw += f"<state_update>{json.dumps(patch)}</state_update>"
        return raw

    return simgym.FunctionWorldModel(world, name=name)


def pairs_for(gaps, probes=3, modes=MODES):
    pairs, _ = plan_runs(
        generate_probes(DOMAINS, gaps=gaps, probes=probes, seed=5), modes, None, {}
    )
    return pairs


async def test_a_world_that_keeps_facts_passes_everything_in_both_modes():
    rows = await run_consistency(pairs_for([5, 20]), rule_world())
    assert len(rows) == 3 * 2 * 3 * 2
    failed = [(r["key"], r["reason"]) for r in rows if not r["passed"]]
    assert failed == []
    assert all(r["scripted_problems"] == [] for r in rows)
    assert all(r["status"] == "ok" and r["error"] is None for r in rows)
    # the hidden state is kept only in state mode, and there it is right
    assert {r["ledger_ok"] for r in rows if r["mode"] == "state"} == {True}
    assert {r["ledger_ok"] for r in rows if r["mode"] == "history"} == {None}
    assert {r["model_calls"] for r in rows} == {2}
    cells = summarize(rows)
    assert len(cells) == 3 * 2 * 2 and all(c.rate == 1.0 for c in cells)
    assert mode_totals(cells) == {"history": (18, 18), "state": (18, 18)}


async def test_a_forgetful_world_fails_what_it_should_remember():
    rows = await run_consistency(pairs_for([5]), rule_world(forget=True))
    for row in rows:
        # it reports every fact missing: right only for the deleted ones
        assert row["passed"] == (row["op"] == "delete"), (row["key"], row["reason"])
        if row["mode"] == "state":
            assert row["ledger_ok"] is False  # it never wrote a patch
            assert "no <state_update>" in row["mutation"]["state_error"]
    assert mode_totals(summarize(rows)) == {"history": (3, 9), "state": (3, 9)}


async def test_state_mode_keeps_what_a_short_history_window_loses():
    # Remembers only the last 6 messages (3 turns): a gap of 20 loses the change in history
    # mode; in state mode the ledger carries it.
    world = rule_world(window=6)
    rows = await run_consistency(pairs_for([2, 20], modes=MODES), world)
    by = {(r["gap"], r["mode"]): [] for r in rows}
    for r in rows:
        by[(r["gap"], r["mode"])].append(r["passed"])
    assert all(by[(2, "history")]) and all(by[(2, "state")]) and all(by[(20, "state")])
    # change and create forgotten after 20 turns; a delete of a forgotten file still reads
    # as missing (the setup turn is forgotten too)
    assert by[(20, "history")].count(False) == 6


async def test_looks_of_a_group_are_asked_one_after_another():
    calls: list[str] = []
    keeper = rule_world()

    async def world(messages):
        calls.append(contract.action_text_of(messages[-1]["content"]))
        return (await keeper.predict(messages)).raw

    pairs = pairs_for([5, 20], probes=2)  # 3 domains x 2 modes x 2 gaps, 2 probes each
    rows = await run_consistency(pairs, simgym.FunctionWorldModel(world), concurrency=1)
    assert len(rows) == len(pairs) == 24 and len(calls) == 48
    # per group (domain, mode, gap), in plan order: both changes, then both looks
    expected = []
    for i in range(0, len(pairs), 2):
        group = [p for p, *_ in pairs[i : i + 2]]
        assert len({(p.domain, p.gap) for p in group}) == 1
        expected += [s.action for p in group for s in p.steps if s.role == "mutate"]
        expected += [p.steps[-1].action for p in group]
    assert [_plain(c) for c in calls] == expected


def _plain(action_text: str):
    """An action as the probes write it: a terminal's command line, else the tool call."""
    action = json.loads(action_text)
    return action[0]["keystrokes"].strip() if isinstance(action, list) else action


async def test_probe_prompt_stays_small_in_state_mode():
    probe = generate_probes(["terminal"], gaps=[50], probes=1, seed=2)[0]
    history = await run_probe(probe, "history", rule_world())
    state = await run_probe(probe, "state", rule_world())
    assert history["passed"] and state["passed"]
    assert state["probe"]["request_chars"] < history["probe"]["request_chars"] / 2


async def test_rows_are_written_and_a_rerun_resumes(tmp_path):
    out = tmp_path / "consistency.jsonl"
    probes = generate_probes(["mcp"], gaps=[5], probes=2, seed=1)
    run = {"seed": 1, "world_model": {"backend": "function"}}
    todo, done = plan_runs(probes, ["state"], out, run)
    assert len(todo) == 2 and done == {}
    with RowWriter(out) as writer:
        await run_consistency(todo[:1], rule_world(), run=run, writer=writer)
    todo, done = plan_runs(probes, ["state"], out, run)
    assert [p.key(m, g) for p, m, g in todo] == ["mcp/state/n5/p1"]
    assert list(done) == ["mcp/state/n5/p0"]
    rows, bad = read_rows(out)
    assert bad == 0 and rows[0]["run"] == run and rows[0]["passed"]
    with pytest.raises(SimgymError, match="other settings"):
        plan_runs(probes, ["state"], out, {**run, "seed": 2})
    todo, done = plan_runs(probes, ["state"], out, {**run, "seed": 2}, restart=True)
    assert len(todo) == 2 and done == {} and out.read_text() == ""
    with pytest.raises(SimgymError, match="modes"):
        plan_runs(probes, ["full"], None, run)
    with pytest.raises(SimgymError, match="not none"):
        plan_runs(probes, [], None, run)


async def test_a_failing_world_model_is_recorded_not_raised():
    def broken(messages):
        raise simgym.WorldModelError("the server is gone")

    probe = generate_probes(["swe"], gaps=[5], probes=1, seed=1)[0]
    row = await run_probe(probe, "history", simgym.FunctionWorldModel(broken))
    assert row["status"] == "error" and not row["passed"]
    assert "the server is gone" in row["reason"] and "turn 2" in row["reason"]


async def test_an_empty_answer_is_the_models_failure_not_a_run_error():
    probe = generate_probes(["terminal"], gaps=[5], probes=1, seed=1)[0]
    row = await run_probe(probe, "state", simgym.FunctionWorldModel(lambda messages: ""))
    assert row["status"] == "ok" and row["error"] is None and not row["passed"]
    assert row["reason"].startswith("no observation: world model returned no observation")


# -- grounding as a dimension -----------------------------------------------------------

GROUNDED = DOMAINS  # every probed domain's grounding computes the look exactly


def runs_for(domains, gaps, groundings, probes=3, modes=MODES):
    runs, _ = plan_runs(
        generate_probes(domains, gaps=gaps, probes=probes, seed=5),
        modes,
        None,
        {},
        groundings=groundings,
    )
    return runs


async def test_each_probe_runs_in_each_mode_and_grounding_with_its_own_key():
    runs = runs_for(DOMAINS, [5, 20], ["off", "strict"])
    assert len(runs) == 3 * 2 * 3 * 2 * 2
    rows = await run_consistency(runs, rule_world())
    keys = [r["key"] for r in rows]
    assert len(set(keys)) == len(rows)
    assert {r["grounding"] for r in rows} == {"off", "strict"}
    assert "terminal/history/n5/p0" in keys and "terminal/history+strict/n5/p0" in keys
    # a world that keeps facts passes everything; its own answers are accepted as they are
    assert [(r["key"], r["reason"]) for r in rows if not r["passed"]] == []
    assert all(r["model_passed"] for r in rows)
    strict = [r for r in rows if r["grounding"] == "strict" and r["domain"] in GROUNDED]
    assert {r["probe"]["strict"] for r in strict} == {"accepted"}
    assert all(r["probe"]["facts"] > 0 for r in strict)
    assert {r["probe"]["strict"] for r in rows if r["grounding"] == "off"} == {None}
    cells = summarize(rows)
    assert len(cells) == 3 * 2 * 2 * 2
    assert [(c.mode, c.grounding) for c in cells[:4]] == [
        ("history", "off"),
        ("history", "strict"),
        ("state", "off"),
        ("state", "strict"),
    ]
    assert mode_totals(cells) == {
        "history": (18, 18),
        "history+strict": (18, 18),
        "state": (18, 18),
        "state+strict": (18, 18),
    }
    assert corrected_totals(cells) == {"history+strict": 0, "state+strict": 0}


@pytest.mark.parametrize("grounding", ["facts", "strict"])
async def test_scripted_turns_agree_with_what_grounding_computes(grounding):
    # Setup and filler turns are scripted; grounding applies their certain effects too.
    # Strict mode must accept every scripted observation as it is, and the ledger it
    # keeps must hold the fact right at the look in both context modes.
    rows = await run_consistency(runs_for(DOMAINS, [2, 5], [grounding]), rule_world())
    assert [r["scripted_strict"] for r in rows] == [[]] * len(rows)
    assert [r["scripted_problems"] for r in rows] == [[]] * len(rows)
    assert all(r["passed"] for r in rows)
    for row in rows:
        effects = row["domain"] in GROUNDED
        if row["mode"] == "state" or effects:
            assert row["ledger_ok"] is True, row["key"]
        else:  # history mode, a domain without grounding: no ledger is kept
            assert row["ledger_ok"] is None, row["key"]


async def test_strict_mode_corrects_a_forgetful_world_and_says_so():
    runs = runs_for(GROUNDED, [5], ["off", "strict"])
    rows = await run_consistency(runs, rule_world(forget=True))
    for row in rows:
        if row["grounding"] == "off":
            assert row["passed"] == (row["op"] == "delete"), row["key"]
            continue
        # the look is still the model's (it says "missing"); simgym corrects it
        assert row["model_passed"] == (row["op"] == "delete"), row["key"]
        assert row["passed"], (row["key"], row["reason"])
        expected = "accepted" if row["op"] == "delete" else "corrected"
        assert row["probe"]["strict"] == expected, row["key"]
        if expected == "corrected":  # what the model wrote is kept beside the correction
            assert (
                "No such file" in row["probe"]["model_answers"][-1]
                or "not found" in (row["probe"]["model_answers"][-1])
            )
        # simgym applied the change itself, whatever the model's patch
        assert row["ledger_ok"] is True
    cells = summarize(rows)
    # three domains, one probe each of create, change, delete: the two that exist are
    # corrected in each domain
    assert corrected_totals(cells) == {"history+strict": 6, "state+strict": 6}
    off, strict = mode_totals(cells)["history"], mode_totals(cells)["history+strict"]
    assert off == (3, 9) and strict == (9, 9)


async def test_grounding_is_explicit_whatever_the_backend_defaults_to():
    world = rule_world()
    world.default_grounding = "strict"  # as the embedded model has it
    probe = generate_probes(["terminal"], gaps=[2], probes=1, seed=1)[0]
    off = await run_probe(probe, "history", world)
    assert off["grounding"] == "off" and off["probe"]["strict"] is None
    on = await run_probe(probe, "history", world, grounding="strict")
    assert on["key"] == "terminal/history+strict/n2/p0" and on["probe"]["strict"] == "accepted"
    with pytest.raises(SimgymError, match="grounding must be"):
        await run_probe(probe, "history", world, grounding="loose")
    with pytest.raises(SimgymError, match="grounding must be"):
        plan_runs([probe], ["history"], None, {}, groundings=["loose"])


async def test_rows_written_before_grounding_resume_as_off(tmp_path):
    out = tmp_path / "old.jsonl"
    probes = generate_probes(["terminal"], gaps=[2], probes=2, seed=1)
    run = {"seed": 1}
    rows = await run_consistency([(p, "history") for p in probes], rule_world(), run=run)
    with out.open("w") as f:
        for row in rows:
            row.pop("grounding")  # as written before grounding existed
            f.write(json.dumps(row) + "\n")
    todo, done = plan_runs(probes, ["history"], out, run, groundings=["off", "strict"])
    assert sorted(done) == ["terminal/history/n2/p0", "terminal/history/n2/p1"]
    assert [(p.index, m, g) for p, m, g in todo] == [
        (0, "history", "strict"),
        (1, "history", "strict"),
    ]
    cells = summarize(list(done.values()))
    assert [(c.grounding, c.passed, c.total) for c in cells] == [("off", 2, 2)]


def test_report_table_shows_grounding_beside_off_and_fits_80_columns():
    from rich.console import Console

    rows = []
    for grounding, passed, strict in (("off", False, None), ("strict", True, "corrected")):
        rows.append(
            {
                "domain": "terminal",
                "gap": 5,
                "mode": "history",
                "grounding": grounding,
                "op": "change",
                "passed": passed,
                "status": "ok",
                "ledger_ok": None,
                "probe": {"strict": strict, "prompt_tokens": 900, "request_chars": 3000},
            }
        )
    console = Console(width=80, record=True)
    console.print(report_table(summarize(rows)))
    text = console.export_text()
    assert re.search(r"terminal\s+5\s+history\s+off\s+0/1\s+0%\s+-", text)
    assert re.search(r"terminal\s+5\s+history\s+strict\s+1/1\s+100%\s+1\s", text)
    assert max(len(line) for line in text.splitlines()) <= 80


# -- the CLI on the embedded model --------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess:
    cli = Path(sys.executable).parent / "simgym"
    command = [str(cli), "bench", "consistency", "--world-model", "local", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=1800)


def table_rows(stdout: str) -> set[tuple[str, str, str, str]]:
    """(domain, n, mode, grounding) of each row of the printed table."""
    found = re.findall(
        r"^\s*(\w+)\s+(\d+)\s+(history|state)\s+(off|facts|strict)\s+\d+/\d+\s", stdout, re.M
    )
    return set(found)


@pytest.mark.slow  # 1-3 minutes on the shared 2-core machine (loads the embedded model)
def test_cli_runs_a_small_set_on_the_embedded_model(tmp_path, model_path):
    out, report = tmp_path / "rows.jsonl", tmp_path / "report.json"
    small = ("--quick", "--domains", "mcp", "--gaps", "2", "--probes", "1", "--out", str(out))
    done = run_cli(*small, "--grounding", "off", "--json", str(report))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "World-state consistency" in done.stdout
    assert table_rows(done.stdout) == {("mcp", "2", "history", "off"), ("mcp", "2", "state", "off")}
    rows, bad = read_rows(out)
    assert bad == 0 and len(rows) == 2
    assert all(r["probe"]["prompt_tokens"] > 0 for r in rows if r["status"] == "ok")
    cells = json.loads(report.read_text())["cells"]
    assert sorted((c["mode"], c["grounding"]) for c in cells) == [
        ("history", "off"),
        ("state", "off"),
    ]
    # the default compares grounding off with strict: only the strict runs are new
    again = run_cli(*small)
    assert again.returncode == 0 and "resuming: 2 rows" in again.stderr
    assert "2 probe episodes" in again.stderr and len(read_rows(out)[0]) == 4
    assert {g for *_, g in table_rows(again.stdout)} == {"off", "strict"}


def test_cli_rejects_bad_options(model_path):
    done = run_cli("--gaps", "5,x")
    assert done.returncode == 2 and "--gaps must be a comma list" in done.stderr
    done = run_cli("--domains", "terminal,web")
    assert done.returncode == 2 and "no consistency probes for web" in done.stderr
    done = run_cli("--grounding", "off,loose")
    assert done.returncode == 2 and "grounding must be" in done.stderr


@pytest.mark.slow
def test_cli_quick_run_on_the_embedded_model_prints_the_table(tmp_path, model_path):
    out = tmp_path / "rows.jsonl"
    done = run_cli("--quick", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    expected = {(d, "5", m, g) for d in DOMAINS for m in MODES for g in ("off", "strict")}
    assert table_rows(done.stdout) == expected
    assert re.search(r"overall: history \d+/3 .*history\+strict \d+/3", done.stdout)
    rows, bad = read_rows(out)
    assert bad == 0 and len(rows) == 12 and sorted({r["op"] for r in rows}) == sorted(OPS)
