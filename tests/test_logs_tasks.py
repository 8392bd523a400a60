"""What an import builds besides the world's description: the experience store of the
logged transitions, SFT rows for the twin's world model, and tasks mined from sessions
(checked in the twin's ledger and, with other ids, as a real service would hold them)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

import simgym
from simgym.agents.plan import PlanAgent, created_id, fill
from simgym.cli.options import grounding_options
from simgym.core.contract import CLOSE_TAG, OPEN_TAG
from simgym.core.types import Action
from simgym.experience import ExperienceStore, IndexReport, open_store, read_file
from simgym.logs import ImportReport, build_world, read_logs
from simgym.logs.artifacts import HISTORY
from simgym.logs.steps import open_twin
from simgym.logs.tasks import check_task, read_tasks, scoped_scenario
from simgym.logs.twin import world_scenario
from simgym.real.backoffice import run_sessions
from simgym.rewards import build_reward
from simgym.rewards._records import check_records
from simgym.worldmodels.function import FunctionWorldModel


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tasks")
    run_sessions(12, 0, root / "logs")
    report = ImportReport()
    records = read_logs([str(root / "logs" / "sessions.jsonl")], report)
    build_world(records, root / "world", report=report)
    return root / "world"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _sessions(world_dir: Path) -> dict[str, list[dict]]:
    return {s["session"]: s["records"] for s in _lines(world_dir / "sessions.jsonl")}


# -- experience -------------------------------------------------------------------------


def test_experience_is_the_twins_transitions(world_dir: Path):
    rows = _lines(world_dir / "experience.jsonl")
    manifest = json.loads((world_dir / "manifest.json").read_text())
    assert manifest["counts"]["transitions"] == len(rows) > 50
    assert {"experience.jsonl", "experience.db", "sft.jsonl", "tasks.jsonl"} <= set(
        manifest["files"]
    )
    sessions = _sessions(world_dir)
    mcp = simgym.get_domain("mcp")
    scenario = mcp.scenario(world_scenario(world_dir))
    for row in rows:
        assert set(row) == {"domain", "action", "observation", "source"} and row["domain"] == "mcp"
        session, index = re.fullmatch(r"sessions\.jsonl:(.+)#(\d+)", row["source"]).groups()
        record = sessions[session][int(index)]
        # the action reads exactly as the twin renders the call, and the tool takes it
        action = Action.parse(row["action"])
        assert mcp.render_action(action, scenario) == row["action"]
        assert scenario.tool(action.name) is not None
        assert json.loads(row["observation"]) == record["response"]
    # exactly the records the twin can replay (not a body that is not an object, nor a
    # route it lacks)
    replayed = {r["source"] for r in rows}
    steps = [s for _, found in open_twin(world_dir).steps() for s in found]
    assert len(steps) == sum(len(r) for r in sessions.values())
    assert replayed == {s.source for s in steps if s.call is not None}
    # simgym's experience reader takes the file as it is
    report = IndexReport()
    read = list(read_file(world_dir / "experience.jsonl", report))
    assert [(t.domain, t.action, t.observation, t.source) for t in read] == [
        (r["domain"], r["action"], r["observation"], r["source"]) for r in rows
    ]
    assert report.malformed == 0 and not report.skipped


def test_the_world_store_answers_a_similar_call(world_dir: Path, tmp_path: Path):
    rows = _lines(world_dir / "experience.jsonl")
    logged = next(r for r in rows if '"post_loans_loan_id_reject"' in r["action"])
    call = json.loads(logged["action"])
    call["arguments"]["actor"] = "someone-else"  # same call, another clerk
    asked = json.dumps(call)
    built = ExperienceStore(tmp_path / "store.db")
    assert built.add_file(world_dir / "experience.jsonl").added == len(
        {(r["action"], r["observation"]) for r in rows}
    )
    for store in (built, open_store(world_dir / "experience.db", readonly=True)):
        best = store.similar("mcp", asked, k=3)[0]
        assert json.loads(best.action)["name"] == "post_loans_loan_id_reject"
        assert json.loads(best.action)["arguments"]["loan_id"] == call["arguments"]["loan_id"]
        assert best.observation == logged["observation"]
        assert best.source == logged["source"]


def test_world_brings_its_store_when_grounding_is_on(world_dir: Path, tmp_path: Path):
    # the options hold the opened store (SimEnv takes a store, not a path)
    own = world_dir / "experience.db"
    assert grounding_options(None, None, world_dir)["experience"].path == own
    assert grounding_options("strict", None, world_dir)["experience"].path == own
    assert "experience" not in grounding_options("off", None, world_dir)
    other = tmp_path / "other.db"
    ExperienceStore(other).close()
    assert grounding_options(None, other, world_dir)["experience"].path == other


# -- SFT rows ---------------------------------------------------------------------------


def test_sft_rows_train_the_twin(world_dir: Path):
    rows = _lines(world_dir / "sft.jsonl")
    experience = {r["source"]: r for r in _lines(world_dir / "experience.jsonl")}
    assert [r["source"] for r in rows] == list(experience)
    mcp = simgym.get_domain("mcp")
    system = mcp.system_prompt(mcp.scenario(world_scenario(world_dir)))
    tasks = {t.id: t for t in read_tasks(world_dir / "tasks.jsonl")}
    for row in rows:
        messages = row["messages"]
        assert messages[0] == {"role": "system", "content": system}
        roles = [m["role"] for m in messages[1:]]
        assert roles == ["user", "assistant"] * (len(roles) // 2)
        assert len(messages) <= 2 * HISTORY + 3  # history capped
        seen = experience[row["source"]]
        assert messages[-2]["content"].endswith("**Action:**\n" + seen["action"])
        assert messages[-1]["content"] == f"{OPEN_TAG}\n{seen['observation']}\n{CLOSE_TAG}"
    first = next(r for r in rows if r["source"].endswith("#0") and "### Turn 1" in str(r))
    session = first["source"].split(":")[1].split("#")[0]
    if session in tasks:  # the task's instruction leads the session, as in a run
        assert f"**Task:** {tasks[session].instruction}" in first["messages"][1]["content"]


# -- tasks ------------------------------------------------------------------------------


def test_tasks_come_from_sessions_that_changed_something(world_dir: Path):
    tasks = read_tasks(world_dir / "tasks.jsonl")
    sessions = _sessions(world_dir)
    assert tasks and {t.id for t in tasks} <= set(sessions)
    for session, records in sessions.items():
        created = any(
            o.get("qualifier") == "created" and (r["status"] or 0) < 400
            for r in records
            for o in r["objects"]
        )
        assert (session in {t.id for t in tasks}) == created
    for task in tasks:
        assert task.domain == "mcp" and task.instruction.startswith("As ")
        assert task.metadata["reward"] == {"type": "records"}
        roles = {s["arguments"].get("role") for s in task.metadata["plan"]}
        assert set(task.metadata["roles"]) == roles - {None}
        labels = [s["creates"] for s in task.metadata["plan"] if "creates" in s]
        assert labels == [c["ref"] for c in task.metadata["checks"]]
        # a placeholder is used only after the step that creates it
        made: set[str] = set()
        for step in task.metadata["plan"]:
            for value in re.findall(r'"\$([\w.]+)"', json.dumps(step["arguments"])):
                assert value in made
            made |= {step["creates"]} if "creates" in step else set()


def _approved(world_dir: Path):
    for task in read_tasks(world_dir / "tasks.jsonl"):
        for check in task.metadata["checks"]:
            if check["collection"] == "loans" and check["expect"].get("status") == "approved":
                return task, check
    pytest.skip("no approved loan in these sessions")


def test_an_approved_loan_task(world_dir: Path):
    task, check = _approved(world_dir)
    assert "approve the new loan" in task.instruction
    assert "In the end" in task.instruction and "status approved" in task.instruction
    assert {"amount", "term_months", "purpose"} <= set(check["match"])
    assert check["match"]["customer_id"] == "$customers.0"
    steps = [s["name"] for s in task.metadata["plan"]]
    assert steps.index("post_loans") < steps.index("post_loans_loan_id_approve")
    approve = task.metadata["plan"][steps.index("post_loans_loan_id_approve")]
    assert approve["arguments"]["loan_id"] == "$loans.0"
    assert approve["arguments"]["role"] in ("reviewer", "manager")


def _final_records(world_dir: Path, task, renumber: int) -> dict[str, list[dict]]:
    """The session's logged final records, as a service numbering ids from ``renumber``
    would hold them (ids assigned by the system differ; the rest is the same)."""
    new_ids: dict[str, str] = {}
    latest: dict[str, tuple[str, dict]] = {}
    collections = {"customer": "customers", "account": "accounts", "loan": "loans", "kyc": "kyc"}
    for record in _sessions(world_dir)[task.id]:
        if (record["status"] or 0) >= 400:
            continue
        for obj in record["objects"]:
            if isinstance(obj.get("state"), dict):
                latest[obj["id"]] = (collections[obj["type"]], obj["state"])
    for n, old in enumerate(latest):
        new_ids[old] = f"x-{renumber + n}"
    state: dict[str, list[dict]] = {}
    for collection, record in latest.values():
        moved = {k: new_ids.get(v, v) if isinstance(v, str) else v for k, v in record.items()}
        state.setdefault(collection, []).append(moved)
    return state


def test_check_task_on_a_service_with_other_ids(world_dir: Path):
    task, check = _approved(world_dir)
    final = _final_records(world_dir, task, 500)
    passed, details = check_task(task, final)
    assert passed, details
    assert all(d["found"] and d["id"].startswith("x-") for d in details)
    # the same records already there before the run are not the task's doing
    assert not check_task(task, final, before=final)[0]
    # a loan left under review fails, and says which check
    for loan in final["loans"]:
        loan["status"] = "under_review"
    passed, details = check_task(task.model_dump(), final)
    loans = next(d for d in details if d["collection"] == "loans")
    assert not passed and loans["found"] and loans["got"] == {"status": "under_review"}


def test_check_records_refs_and_distinct_records():
    state = {
        "customers": [{"id": 1, "name": "A"}, {"id": 2, "name": "A"}],
        "loans": [{"id": 9, "customer_id": 2, "amount": 5, "status": "approved"}],
    }
    checks = [
        {"ref": "customers.0", "collection": "customers", "match": {"name": "A"}},
        {"ref": "customers.1", "collection": "customers", "match": {"name": "A"}},
        {"collection": "loans", "match": {"customer_id": "$customers.1", "amount": 5.0}},
    ]
    passed, details = check_records(checks, state)
    assert passed and [d["id"] for d in details] == [1, 2, 9]
    first = {"collection": "loans", "match": {"customer_id": "$customers.0", "amount": 5}}
    passed, details = check_records([checks[0], first], state)  # customer 1 has no loan
    assert not passed and details[1]["why"] == "no record matches"
    assert not check_records(checks[:1] + checks[2:], state)[0]  # customers.1 never bound
    before = {"customers": [{"id": 1, "name": "A"}]}
    passed, details = check_records([checks[0], first], state, before)
    assert passed and details[0]["id"] == 2
    assert not check_records([{"collection": "x", "match": {"a": "$nope"}}], state)[0]


# -- the plan agent in the twin ---------------------------------------------------------


def test_created_ids_and_placeholders():
    assert created_id('{"id": "loan-31", "status": "draft"}') == "loan-31"
    assert created_id('{"error": {"code": 409}}', "loan-5") is None
    envelope = {"content": [{"type": "text", "text": '{"loan": {"id": 7}}'}], "isError": False}
    assert created_id(json.dumps(envelope)) == 7
    assert created_id("Created loan loan-44 (draft).", "loan-5") == "loan-44"
    assert created_id('{"id": "loan-3", "status": "draft"', "loan-5") == "loan-3"  # mended
    bound = {"loans.0": "loan-31"}
    assert fill({"loan_id": "$loans.0", "x": ["$loans.0", "$kyc.0"]}, bound) == {
        "loan_id": "loan-31",
        "x": ["loan-31", "$kyc.0"],
    }


def _echo_facts(messages: list[dict]) -> str:
    """A stand-in world model: a create answers the record the facts say it makes (the
    ledger's own), anything else an empty object (strict mode puts exact answers)."""
    found = re.search(r"this call creates \w+ (\S+): (\{.*\})", messages[-1]["content"])
    return f"{OPEN_TAG}\n{found.group(2) if found else '{}'}\n{CLOSE_TAG}"


def test_plan_agent_runs_tasks_in_the_twin(world_dir: Path):
    from simgym.rollout.runner import arollout

    tasks = read_tasks(world_dir / "tasks.jsonl")[:3]
    full = world_scenario(world_dir)
    for task in tasks:
        task.scenario = scoped_scenario(full, task, keep=2)
        assert sum(map(len, task.scenario["state"].values())) <= 4 * 2 + 4
    agent = PlanAgent(by_task={t.id: t.metadata["plan"] for t in tasks})
    done = asyncio.run(
        arollout(
            tasks,
            agent=agent,
            world_model=FunctionWorldModel(_echo_facts),
            env_options={
                "grounding": "strict",
                "experience": open_store(world_dir / "experience.db", readonly=True),
            },
            concurrency=1,
        )
    )
    assert len(done) == len(tasks)
    for trajectory in done:
        plan = trajectory.task.metadata["plan"]
        assert [t.action.name for t in trajectory.turns] == [s["name"] for s in plan]
        assert not any(t.error for t in trajectory.turns)
        # every record the session made is made again, found by its logged values
        passed, details = check_task(
            trajectory.task, trajectory.final_state, trajectory.scenario["state"]
        )
        assert all(d["found"] for d in details), details
        # the reward the task names scores the same checks
        reward = asyncio.run(build_reward(trajectory.task.metadata["reward"]).score(trajectory))
        assert reward.value == float(passed)
        assert reward.details["total"] == len(details)
        # placeholders became the ids the twin assigned, never the logged ones
        sent = json.dumps([t.action.arguments for t in trajectory.turns])
        assert "$" not in sent
        assert trajectory.turns[0].grounding and "experience" in json.dumps(
            [t.grounding for t in trajectory.turns]
        )


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["plan", "local"])
def test_mined_task_with_the_embedded_model(world_dir: Path, agent: str):
    """One mined task in the twin with the embedded world model (its context raised to
    hold the tools: the twin's prompt is ~4.4k tokens even with no records), the plan
    agent or the embedded model as the agent; scored with check_task. Minutes on CPU."""
    from simgym.rollout.runner import arollout

    tasks = read_tasks(world_dir / "tasks.jsonl")
    task = min(tasks, key=lambda t: len(t.metadata["plan"]))
    task.scenario = scoped_scenario(world_scenario(world_dir), task, keep=1)
    options = {"by_task": {task.id: task.metadata["plan"]}} if agent == "plan" else {}
    if agent == "local":
        options = {"n_ctx": 8192}
    (trajectory,) = asyncio.run(
        arollout(
            [task],
            agent=agent,
            agent_options=options,
            world_model="local",
            world_model_options={"n_ctx": 8192},
            env_options={"experience": str(world_dir / "experience.db")},
            max_turns=len(task.metadata["plan"]) + 2,
        )
    )
    passed, details = check_task(task, trajectory.final_state, trajectory.scenario["state"])
    print(agent, task.id, passed, json.dumps(details))
    assert trajectory.turns and not any(t.error_type == "world_model" for t in trajectory.turns)
    if agent == "plan":
        assert details[0]["found"], details
