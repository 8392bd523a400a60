"""Tasks from every log format that has sessions: the bank demo's sessions written as
OTLP spans, OCEL 2.0 (JSON and SQLite), XES, HAR, flat JSON lines and MCP JSON-RPC lines
(its calls as tools/call requests and results) each import into a world whose
``tasks.jsonl`` holds checkable tasks, and a task's plan played in the twin makes the
records its checks look for."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from simgym.agents.plan import PlanAgent
from simgym.logs import ImportReport, build_world, read_logs
from simgym.logs.tasks import check_task, read_tasks, scoped_scenario
from simgym.logs.tool_objects import tool_objects, tool_type
from simgym.logs.twin import world_scenario
from simgym.real.backoffice import run_sessions
from simgym.worldmodels.function import FunctionWorldModel

FILES = {
    "otlp": "traces.otlp.jsonl",
    "ocel": "ocel.json",
    "ocel-sqlite": "ocel.sqlite",
    "xes": "events.xes",
    "har": "client.har",
    "jsonl": "sessions.jsonl",
    "mcp": "mcp.jsonl",
}


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bank")
    run_sessions(14, 3, root)
    _as_mcp(root / "sessions.jsonl", root / "mcp.jsonl")
    return root


def _as_mcp(flat: Path, out: Path) -> None:
    """The bank's calls as an MCP server's log: one tool per operation, the route's
    parameters and the body as arguments, the answer as the result's text."""
    lines = []
    for n, line in enumerate(flat.read_text().splitlines()):
        row = json.loads(line)
        body = row.get("request")
        arguments = dict(body) if isinstance(body, dict) else {}
        route = [s for s in row["route"].split("/") if s]
        path = [s for s in row["path"].split("?")[0].split("/") if s]
        for part, value in zip(route, path, strict=False):
            if part.startswith("{"):
                arguments[part.strip("{}")] = value
        call = {"name": row["operation"], "arguments": arguments}
        result = {
            "content": [{"type": "text", "text": json.dumps(row["response"])}],
            "isError": row["status"] >= 400,
        }
        for message in (
            {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": call},
            {"jsonrpc": "2.0", "id": n, "result": result},
        ):
            lines.append({"time": row["time"], "session": row["session"], "message": message})
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_objects_of_a_tool_call():
    assert tool_type("create_customer") == "customer" and tool_type("run_kyc") == "kyc"
    assert tool_type("getLoanById") == "loan" and tool_type("list") is None
    made = tool_objects("open_account", {"customer_id": "c-1"}, {"id": "a-9", "x": 1}, False)
    assert [(o.type, o.id, o.qualifier, o.state) for o in made] == [
        ("customer", "c-1", None, None),
        ("account", "a-9", "created", {"id": "a-9", "x": 1}),
    ]
    acted = tool_objects("approve_loan", {"loan_id": "L-2"}, {"id": "L-2", "status": "ok"}, False)
    assert [(o.type, o.id, o.qualifier, o.state) for o in acted] == [
        ("loan", "L-2", None, {"id": "L-2", "status": "ok"})
    ]
    read = tool_objects("get_loan", {"id": "L-3"}, {"id": "L-3"}, False)
    assert [(o.type, o.qualifier) for o in read] == [("loan", None)]
    found = tool_objects("search_loans", {"q": "x"}, {"id": "L-4"}, False)
    assert [o.qualifier for o in found] == [None]  # a read makes nothing
    refused = tool_objects("approve_loan", {"loan_id": "L-2"}, {"id": "L-2"}, True)
    assert [(o.id, o.state) for o in refused] == [("L-2", None)]


def _world(logs: Path, fmt: str, out: Path) -> Path:
    report = ImportReport()
    build_world(read_logs([str(logs / FILES[fmt])], report), out, report=report)
    return out


def _creating_sessions(world: Path) -> set[str]:
    """Sessions with a successful call that touched an object nobody touched before."""
    seen: set[str] = set()
    found = set()
    for line in (world / "sessions.jsonl").read_text().splitlines():
        session = json.loads(line)
        for record in session["records"]:
            ok = not record["error"] and (record["status"] or 0) < 400
            for obj in record["objects"]:
                key = (obj["type"], obj["id"])
                if ok and key not in seen and obj["type"] != "case":
                    found.add(session["session"])
                seen.add(key)
    return found


def _echo(messages):
    return "{}"


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_every_format_yields_tasks_the_twin_can_play(logs: Path, fmt: str, tmp_path: Path):
    world = _world(logs, fmt, tmp_path / fmt)
    tasks = read_tasks(world / "tasks.jsonl")
    manifest = json.loads((world / "manifest.json").read_text())
    assert manifest["counts"]["tasks"] == len(tasks)
    creating = _creating_sessions(world)
    # most sessions that made something become tasks (a few made only records of a
    # type the twin holds no collection for)
    assert len(tasks) >= 0.8 * len(creating) > 0, (len(tasks), len(creating))
    for task in tasks:
        checks = task.metadata["checks"]
        assert checks and all(c["new"] for c in checks)
        labels = [s["creates"] for s in task.metadata["plan"] if "creates" in s]
        assert labels == [c["ref"] for c in checks]
        for step in task.metadata["plan"]:
            # the id the real system gave a record is never part of the request
            if "creates" in step:
                assert step["logged_id"] not in json.dumps(step["arguments"])
    assert any(c["expect"] for t in tasks for c in t.metadata["checks"])

    from simgym.rollout.runner import arollout

    played = tasks[:3]
    full = world_scenario(world)
    for task in played:
        task.scenario = scoped_scenario(full, task, keep=2)
    agent = PlanAgent(by_task={t.id: t.metadata["plan"] for t in played})
    done = asyncio.run(
        arollout(
            played,
            agent=agent,
            world_model=FunctionWorldModel(_echo),
            env_options={"grounding": "strict"},
            concurrency=1,
        )
    )
    for trajectory in done:
        assert not any(t.error for t in trajectory.turns)
        _, details = check_task(
            trajectory.task, trajectory.final_state, trajectory.scenario["state"]
        )
        assert details and all(d["found"] for d in details), (fmt, details)
