"""Sim2real plumbing, end to end and without mocks: the held-out and training sets are
disjoint, and the evaluation loop plays scripted policies on the real records server and
on the embedded world model's twin, with the intervals it reports checked by hand."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest

import simgym
from simgym import FunctionWorldModel
from simgym.agents import ScriptedAgent
from simgym.bench.sim2real import (
    ReaderAgent,
    conditions_table,
    evaluate,
    heldout_tasks,
    newcombe_difference,
    paired_task_bootstrap,
    training_tasks,
    wilson,
)
from simgym.bench.sim2real.evaluate import difference
from simgym.bench.sim2real.tasks import task_line
from simgym.core.errors import SimgymError

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sim2real"


def _values(state: dict[str, Any], table: str, field: str) -> set[str]:
    return {str(row[field]) for row in state[table]}


def test_heldout_and_training_sets_are_disjoint() -> None:
    heldout, training = heldout_tasks(), training_tasks(140)
    held_state = heldout[0].scenario["state"]
    assert not {t.id for t in heldout} & {t.id for t in training}
    assert not {t.instruction for t in heldout} & {t.instruction for t in training}
    for task in training:
        state = task.scenario["state"]
        for table, field in (("customers", "id"), ("customers", "name"), ("customers", "email")):
            assert not _values(state, table, field) & _values(held_state, table, field)
        for table in ("accounts", "tickets"):
            assert not _values(state, table, "id") & _values(held_state, table, "id")
    # deterministic: the committed files are what the generators make
    for name, tasks in (("heldout.jsonl", heldout), ("train.jsonl", training_tasks())):
        lines = (EXAMPLE / "tasks" / name).read_text(encoding="utf-8").splitlines()
        assert lines == [task_line(t) for t in tasks], f"regenerate {name}: run.py --write-tasks"


def test_intervals_match_known_values() -> None:
    # Wilson 95% for 8/10 and 0/10 (Newcombe 1998, table I style values)
    low, high = wilson(8, 10)
    assert math.isclose(low, 0.4902, abs_tol=1e-4) and math.isclose(high, 0.9433, abs_tol=1e-4)
    assert wilson(0, 10)[0] == 0.0 and math.isclose(wilson(0, 10)[1], 0.2775, abs_tol=1e-4)
    # Newcombe's example: 56/70 vs 48/80 -> 0.2000 [0.0524, 0.3339]
    diff, low, high = newcombe_difference(56, 70, 48, 80)
    assert math.isclose(diff, 0.2) and math.isclose(low, 0.0524, abs_tol=1e-4)
    assert math.isclose(high, 0.3339, abs_tol=1e-4)


def test_paired_gap_uses_the_task_as_the_unit() -> None:
    # 20 tasks, 3 samples each: the twin solves every task, reality the first 10 of them
    sim = {f"t{i}": [1, 1, 1] for i in range(20)}
    real = {f"t{i}": [1, 1, 1] if i < 10 else [0, 0, 0] for i in range(20)}
    gap, low, high, tasks = paired_task_bootstrap(sim, real, resamples=4000)
    assert (gap, tasks) == (0.5, 20)
    # a binomial mean of 20 tasks at 0.5 has a standard error of about 0.11
    assert 0.25 < low < 0.35 and 0.65 < high < 0.75
    # episodes counted as independent (60 per side) would claim a narrower interval
    _, n_low, n_high = newcombe_difference(60, 60, 30, 60)
    assert n_high - n_low < high - low
    # tasks only one side ran do not count; no shared task says nothing is known
    assert paired_task_bootstrap(sim, {"other": [1]})[1:] == (-1.0, 1.0, 0)
    same = paired_task_bootstrap(sim, sim)
    assert same[:3] == (0.0, 0.0, 0.0)


def _report(condition: str, real: dict[str, list[int]], tasks: list[str]) -> dict[str, Any]:
    trajectories = [
        (task, won) for task, outcomes in real.items() for won in outcomes
    ]  # (task id, success) per episode
    wins = sum(w for _, w in trajectories)
    cell = {
        "episodes": len(trajectories),
        "successes": wins,
        "success_rate": wins / len(trajectories),
        "ci95": list(wilson(wins, len(trajectories))),
        "per_task": real,
    }
    return {"condition": condition, "tasks": tasks, "backends": {"real": cell}}


def test_the_conditions_table_compares_each_policy_with_the_untrained_one() -> None:
    tasks = [f"t{i}" for i in range(10)]
    untrained = _report("untrained", {t: [0, 0, 0] for t in tasks}, tasks)
    trained = _report(
        "sim-sft", {t: [1, 1, 0] if i < 5 else [0, 0, 0] for i, t in enumerate(tasks)}, tasks
    )
    other = _report("reference", {"t0": [1]}, ["t0"])  # other tasks: no comparison
    diff = difference(trained["backends"]["real"], untrained["backends"]["real"])
    assert diff["difference"] == pytest.approx(10 / 30)
    assert diff["ci95"][0] > 0  # ten successes against none: more than chance
    assert diff["paired"]["tasks"] == 10 and diff["paired"]["difference"] == pytest.approx(1 / 3)
    table = conditions_table([untrained, trained, other]).splitlines()
    assert [line.split("|")[1].strip() for line in table[2:]] == [
        "untrained",
        "sim-sft",
        "reference",
    ]
    assert "+0.33 [" in table[3] and "0.33 [0.19, 0.51]" in table[3]
    assert table[4].split("|")[5].strip() == ""  # not the same tasks: nothing to compare
    assert table[2].split("|")[5].strip() == ""  # the baseline itself
    # against another baseline (run.py --summary --baseline): the signs turn
    table = conditions_table([untrained, trained], baseline="sim-sft").splitlines()
    assert "real minus sim-sft" in table[0]
    assert table[2].split("|")[5].strip().startswith("-0.33 [")
    assert table[3].split("|")[5].strip() == ""


def _wrong(task: Any) -> list[Any]:
    """A plausible but wrong play: the right tool on the right customer, a wrong value."""
    first = task.metadata["solution"][0]
    if task.metadata["kind"] == "email_by_id":
        return [first, {"answer": "someone.else@example.net"}]
    args = {**first["arguments"], "email": "wrong.address@example.net"}
    return [{"name": first["name"], "arguments": args}, {"answer": "Done."}]


@pytest.mark.parametrize("play", ["reference", "wrong"])
def test_the_loop_on_the_real_server_and_the_twin(play: str, tmp_path: Path) -> None:
    # the first two held-out tasks: a lookup by id and an email update by id, which the
    # twin answers from its state, so the episodes need no model call
    tasks = heldout_tasks(2)
    assert [t.metadata["kind"] for t in tasks] == ["email_by_id", "update_by_id"]
    scripts = {t.id: t.metadata["solution"] if play == "reference" else _wrong(t) for t in tasks}
    started = time.perf_counter()
    report = evaluate(
        tasks,
        agent=ScriptedAgent(by_task=scripts),
        condition=play,
        k=1,
        out_dir=tmp_path,
    )
    assert time.perf_counter() - started < 60
    expected = 1 if play == "reference" else 0
    for backend in ("real", "sim"):
        cell = report["backends"][backend]
        assert (cell["episodes"], cell["errors"]) == (2, 0), cell
        assert cell["successes"] == 2 * expected, cell
        assert cell["ci95"] == pytest.approx(list(wilson(2 * expected, 2)))
        assert cell["per_task"] == {t.id: [expected] for t in tasks}
    assert report["gap"]["sim_minus_real"] == 0.0
    assert report["gap"]["ci95"] == pytest.approx(list(newcombe_difference(2, 2, 2, 2)[1:]))
    assert report["gap"]["paired"]["tasks"] == 2
    # the real episodes were checked on the server's database, the twin's on its ledger
    real = [json.loads(line) for line in (tmp_path / "real.jsonl").read_text().splitlines()]
    sim = [json.loads(line) for line in (tmp_path / "sim.jsonl").read_text().splitlines()]
    assert {r["metrics"].get("state_source") for r in real} == {"live"}
    assert {r["world_model"]["backend"] for r in real} == {"real-mcp"}
    assert all(r["metrics"].get("state_source") != "live" for r in sim)
    assert {r["world_model"]["backend"] for r in sim} == {"local"}
    # strict grounding answered every tool call from the twin's state (why this is fast)
    calls = [t for r in sim for t in r["turns"] if (t.get("action") or {}).get("name")]
    assert calls and {t["grounding"]["strict"]["action"] for t in calls} == {"state"}
    written = json.loads((tmp_path / "report.json").read_text())
    assert written["backends"]["real"]["successes"] == 2 * expected


class _Recording(ScriptedAgent):
    """A scripted agent that keeps the views it was started with."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.samples: list[int | None] = []

    async def start(self, view: Any) -> Any:
        self.samples.append(view.sample)
        return await super().start(view)


def test_a_policy_learns_which_sample_it_plays(tmp_path: Path) -> None:
    # the local agent's sample_seeds draws sample n with seeds from (task id, n), so the
    # view must say n, on the real backend too, and the same n on a resumed run
    task = heldout_tasks(1)[0]
    agent = _Recording(by_task={task.id: task.metadata["solution"]})
    report = evaluate([task], agent=agent, k=2, backends=["real"], out_dir=tmp_path)
    assert sorted(agent.samples, key=str) == [0, 1]
    assert report["backends"]["real"]["per_task"] == {task.id: [1, 1]}
    evaluate([task], agent=agent, k=2, backends=["real"], out_dir=tmp_path)  # all done
    assert len(agent.samples) == 2
    # another policy's numbers never mix with these on a resumed run
    other = _Recording(by_task={task.id: [{"answer": "?"}]})
    other.name = "another"
    with pytest.raises(SimgymError, match="another policy"):
        evaluate([task], agent=other, k=2, backends=["real"], out_dir=tmp_path)


def test_a_k1_run_and_a_later_k3_run_in_one_folder_count_each_draw_once(tmp_path: Path) -> None:
    task = heldout_tasks(1)[0]
    agent = _Recording(by_task={task.id: task.metadata["solution"]})
    evaluate([task], agent=agent, k=1, backends=["real"], out_dir=tmp_path)
    report = evaluate([task], agent=agent, k=3, backends=["real"], out_dir=tmp_path)
    # the k=1 episode (no sample) and sample 0 are one draw: 3 episodes, not 4
    assert report["backends"]["real"]["episodes"] == 3
    assert report["backends"]["real"]["per_task"] == {task.id: [1, 1, 1]}


def test_every_kind_of_task_is_solved_on_the_real_server_from_what_it_shows(
    tmp_path: Path,
) -> None:
    # one task of each kind from both sets, played by the reader: the reference plans,
    # with every id and answer read from the real server's observations, pass the checks
    tasks = heldout_tasks(7) + training_tasks(7)
    report = evaluate(tasks, agent=ReaderAgent(tasks), k=1, backends=["real"], out_dir=tmp_path)
    real = report["backends"]["real"]
    assert (real["successes"], real["errors"]) == (14, 0), real["per_task"]
    assert set(real["by_kind"]) == {t.metadata["kind"] for t in tasks}
    assert report["policy"] == {"name": "reader"}


def _garbage(messages: list[dict[str, Any]]) -> str:
    """A world model that renders nothing useful: what the twin shows came from its state."""
    return '<predicted_observation>{"query": {"type": "string"}}</predicted_observation>'


async def _replay(env: Any, task: Any, calls: list[dict[str, Any]]) -> list[Any]:
    await env.reset(task)
    try:
        return [json.loads((await env.step(call)).observation.text) for call in calls]
    finally:
        await env.close(None)


async def test_the_twin_searches_as_the_real_server_does() -> None:
    from simgym.real.mcp import RealMCP

    task = heldout_tasks(1)[0]
    people = {c["id"]: c for c in task.scenario["state"]["customers"]}
    phone = people["C-1005"]["phone"]  # "+351 91x xxx xxx"
    queries = [
        {"query": "ana"},  # two names and an email
        {"query": "  TANAKA "},  # stripped, any case
        {"query": "example.org"},  # a part of the emails only
        {"query": phone.replace(" ", "")},  # a phone without its spaces
        {"query": phone[:8] + " " + phone[8:].replace(" ", "")},  # with other spaces
        {"query": "zzz"},
        {"query": "o", "limit": 2},  # a limit cuts the list, the total counts all
        {"query": "a", "limit": 50},
        {"query": "Lisbon"},  # a city: no field the server searches
    ]
    calls = [{"name": "search_customers", "arguments": a} for a in queries]
    # an update the twin decides, then a search that must find the new address
    new_email = {"customer_id": "C-1004", "email": "new.one@inbox.example.org"}
    calls += [
        {"name": "update_email", "arguments": new_email},
        {"name": "search_customers", "arguments": {"query": "inbox.example"}},
    ]
    real_env = simgym.make(
        "mcp", world_model=RealMCP(seed_from_scenario=True), scenario=task.scenario
    )
    real = await _replay(real_env, task, calls)
    twin_env = simgym.make(
        "mcp",
        world_model=FunctionWorldModel(_garbage),
        scenario=task.scenario,
        grounding="strict",
        render_known=False,
    )
    twin = await _replay(twin_env, task, calls)
    assert twin_env.trajectory is not None
    actions = [t.grounding["strict"]["action"] for t in twin_env.trajectory.turns]
    assert actions == ["state"] * len(calls)  # no answer needed the world model
    for call, want, got in zip(calls, real, twin, strict=True):
        if call["name"] != "search_customers":
            continue
        ids = [c["id"] for c in got["customers"]]
        assert ids == [c["id"] for c in want["customers"]], call
        assert got["total"] == want["total"], call
        assert got == want, call  # the same summaries, field for field
    # the replay covered what it meant to: several matches, none, and a cut list
    totals = [r["total"] for r in real if "total" in r]
    assert totals[0] >= 2 and totals[3] == 1 and totals[5] == 0
    assert len(real[6]["customers"]) == 2 < real[6]["total"]
    assert [c["id"] for c in real[-1]["customers"]] == ["C-1004"]


def test_the_reader_solves_a_name_based_task_in_the_twin(tmp_path: Path) -> None:
    # phone_by_name: search by name, read the id, fetch the record, answer its phone; the
    # twin answers the search from its records, so the reader finds the right customer
    task = next(t for t in training_tasks(7) if t.metadata["kind"] == "phone_by_name")
    report = evaluate([task], agent=ReaderAgent([task]), k=1, backends=["sim"], out_dir=tmp_path)
    sim = report["backends"]["sim"]
    assert (sim["successes"], sim["errors"]) == (1, 0), sim
    episode = json.loads((tmp_path / "sim.jsonl").read_text().splitlines()[0])
    calls = [t for t in episode["turns"] if (t.get("action") or {}).get("name")]
    assert [t["action"]["name"] for t in calls] == ["search_customers", "get_customer"]
    # both answers came from the twin's state, none from the world model's rendering
    assert {t["grounding"]["strict"]["action"] for t in calls} == {"state"}
    found = json.loads(calls[0]["observation"]["text"])
    assert found["total"] == 1 and found["customers"][0]["name"] in task.instruction


async def test_the_twin_writes_records_as_the_real_server_does() -> None:
    """A record's first showing in an episode, byte for byte: the twin lays out fields in
    the server's answer order (a policy trained on another order stumbles on the real
    one), and a created ticket differs in its timestamp only."""
    from simgym.real.mcp import RealMCP

    task = training_tasks(1)[0]
    cid = task.scenario["state"]["customers"][2]["id"]
    calls = [
        {"name": "get_customer", "arguments": {"customer_id": cid}},
        {
            "name": "update_email",
            "arguments": {"customer_id": cid, "email": "x.y@post.example.net"},
        },
        {"name": "create_ticket", "arguments": {"customer_id": cid, "subject": "Lost card"}},
    ]

    async def texts(env: Any) -> list[str]:
        await env.reset(task)
        try:
            return [(await env.step(call)).observation.text for call in calls]
        finally:
            await env.close(None)

    real = await texts(
        simgym.make("mcp", world_model=RealMCP(seed_from_scenario=True), scenario=task.scenario)
    )
    twin = await texts(
        simgym.make(
            "mcp",
            world_model=FunctionWorldModel(_garbage),
            scenario=task.scenario,
            grounding="strict",
            render_known=False,
        )
    )
    assert twin[:2] == real[:2]
    ticket_real, ticket_twin = json.loads(real[2]), json.loads(twin[2])
    assert list(ticket_twin) == list(ticket_real)
    assert {**ticket_twin, "created": None} == {**ticket_real, "created": None}
