"""Tasks from every log format that has sessions: the bank demo's sessions written as
OTLP spans, OCEL 2.0 (JSON and SQLite), XES, HAR and flat JSON lines each import into a
world whose ``tasks.jsonl`` holds checkable tasks, and a task's plan played in the twin
makes the records its checks look for."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from simgym.agents.plan import PlanAgent
from simgym.logs import ImportReport, build_world, read_logs
from simgym.logs.tasks import check_task, read_tasks, scoped_scenario
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
}


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bank")
    run_sessions(14, 3, root)
    return root


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
