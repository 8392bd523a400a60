"""The twin: a business world from the back-office's logs, served as an mcp scenario."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import simgym
from simgym.cli import app
from simgym.cli.options import world_scenario_option
from simgym.core.errors import SimgymError
from simgym.logs import ImportReport, build_world, read_logs
from simgym.logs.twin import WorldError, binding_for, tool_name, world_scenario
from simgym.real.backoffice import run_sessions
from simgym.worldmodels.function import FunctionWorldModel


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("twin")
    run_sessions(8, 0, root / "logs")
    report = ImportReport()
    records = read_logs([str(root / "logs" / "traces.otlp.jsonl")], report)
    build_world(records, root / "world", report=report)
    return root / "world"


@pytest.fixture(scope="module")
def scenario(world_dir: Path) -> dict:
    return world_scenario(world_dir)


def test_tool_names_read_method_and_route():
    op = {"method": "POST", "route": "/loans/{loan_id}/approve"}
    assert tool_name(op) == "post_loans_loan_id_approve"
    assert tool_name({"method": "GET", "route": "/loans"}) == "get_loans"


def test_bindings_follow_method_and_route():
    cols = {"loans": [{"id": "loan-1"}], "kyc": [{"id": "kyc-1", "customer_id": "c"}]}
    assert binding_for({"method": "GET", "route": "/loans/{loan_id}"}, cols, []) == {
        "op": "get",
        "collection": "loans",
        "id_arg": "loan_id",
        "key": "id",
    }
    assert binding_for({"method": "GET", "route": "/loans"}, cols, [])["op"] == "list"
    assert binding_for({"method": "POST", "route": "/loans"}, cols, [])["op"] == "create"
    approve = binding_for({"method": "POST", "route": "/loans/{loan_id}/approve"}, cols, ["role"])
    assert approve["op"] == "update" and approve["id_arg"] == "loan_id"
    assert approve["context"] == ["role"]
    assert binding_for({"method": "DELETE", "route": "/loans/{loan_id}"}, cols, [])["op"] == (
        "delete"
    )
    assert binding_for({"method": "POST", "route": "/kyc/{customer_id}"}, cols, [])["op"] == (
        "create"
    )
    assert binding_for({"method": "GET", "route": "/audit"}, cols, []) == {"op": "none"}


def test_world_becomes_a_valid_mcp_scenario(scenario: dict, world_dir: Path):
    model = simgym.get_domain("mcp").scenario(scenario)
    names = {t.name for t in model.tools}
    assert {"get_loans_loan_id", "post_loans", "post_loans_loan_id_approve"} <= names
    assert "get_nowhere" not in names  # only 404s: not a route of the service
    entities = json.loads((world_dir / "entities.json").read_text())
    assert {k: len(v) for k, v in scenario["state"].items()} == {
        {"account": "accounts", "customer": "customers", "kyc": "kyc", "loan": "loans"}[t]: len(
            v["records"]
        )
        for t, v in entities["types"].items()
    }
    get = model.tool("get_loans_loan_id")
    assert get.parameters["required"] == ["loan_id"]
    assert "role" in get.parameters["properties"]  # the logs had roles
    assert scenario["tool_map"]["get_loans_loan_id"]["op"] == "get"
    assert scenario["tool_map"]["post_loans_loan_id_approve"]["op"] == "update"
    assert "statuses" in model.tool("post_loans").description
    assert "loan life cycle" in model.description


async def test_strict_grounding_serves_a_record_from_state(scenario: dict):
    loan = scenario["state"]["loans"][0]

    def wrong(messages):
        return '<predicted_observation>{"id": "nope"}</predicted_observation>'

    env = simgym.make(
        "mcp", world_model=FunctionWorldModel(wrong), scenario=scenario, grounding="strict"
    )
    await env.reset()
    result = await env.step(
        {"name": "get_loans_loan_id", "arguments": {"loan_id": loan["id"], "role": "operator"}}
    )
    assert json.loads(result.observation.text) == loan


def test_not_a_world_is_a_clear_error(tmp_path: Path):
    with pytest.raises(WorldError, match="not a business world"):
        world_scenario(tmp_path)
    with pytest.raises(WorldError, match="not found"):
        world_scenario(tmp_path / "missing")


def test_the_cli_helper(world_dir: Path, tmp_path: Path):
    assert world_scenario_option(None, "terminal") is None
    assert world_scenario_option(world_dir, "mcp")["tool_map"]
    with pytest.raises(SimgymError, match="mcp"):
        world_scenario_option(world_dir, "terminal")
    with pytest.raises(SimgymError, match="not a business world"):
        world_scenario_option(tmp_path, "mcp")


def test_play_and_run_take_world(tmp_path: Path):
    runner = CliRunner()
    for command in ("play", "run"):
        assert "--world" in runner.invoke(app, [command, "--help"]).output
    result = runner.invoke(app, ["play", "mcp", "--world", str(tmp_path)], input="")
    assert result.exit_code != 0 and "not a business world" in result.output
    result = runner.invoke(app, ["play", "terminal", "--world", str(tmp_path)], input="")
    assert result.exit_code != 0 and "mcp" in result.output


async def record(scenario: dict, recorded: Path) -> dict:
    """One episode in the twin (a get of the first loan), written for the replay backend."""
    loan = scenario["state"]["loans"][0]
    env = simgym.make(
        "mcp",
        world_model=FunctionWorldModel(lambda messages: "{}"),
        scenario=scenario,
        grounding="strict",
        writer=simgym.TrajectoryWriter(recorded),
    )
    await env.reset()
    await env.step({"name": "get_loans_loan_id", "arguments": {"loan_id": loan["id"]}})
    await env.step({"kind": "text", "text": "done"})
    return loan


async def test_play_serves_the_world(scenario: dict, world_dir: Path, tmp_path: Path):
    """play mcp --world DIR: an episode recorded in the twin replays through the CLI."""
    recorded = tmp_path / "recorded.jsonl"
    loan = await record(scenario, recorded)
    args = ["play", "mcp", "--world", str(world_dir), "-w", "replay", "--replay", str(recorded)]
    result = CliRunner().invoke(app, args, input=f"get_loans_loan_id loan_id={loan['id']}\n")
    assert result.exit_code == 0, result.output
    assert "post_loans_loan_id_approve" in result.output  # the tools, on connecting
    assert loan["customer_id"] in result.output and loan["created_at"] in result.output


def test_run_plays_tasks_in_the_world(scenario: dict, world_dir: Path, tmp_path: Path):
    recorded, out, tasks = tmp_path / "recorded.jsonl", tmp_path / "out.jsonl", tmp_path / "t.jsonl"
    loan = asyncio.run(record(scenario, recorded))  # run starts its own event loop
    call = {"name": "get_loans_loan_id", "arguments": {"loan_id": loan["id"]}}
    task = {"id": "t1", "domain": "mcp", "actions": [call, {"kind": "text", "text": "done"}]}
    tasks.write_text(json.dumps(task) + "\n")
    args = ["run", str(tasks), "--world", str(world_dir), "--out", str(out)]
    args += ["-w", "replay", "--replay", str(recorded), "--grounding", "strict"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (trajectory,) = simgym.read_trajectories(out)
    assert json.loads(trajectory.turns[0].observation.text) == loan
    tasks.write_text(json.dumps({**task, "domain": "terminal"}) + "\n")
    result = CliRunner().invoke(app, args)
    assert result.exit_code != 0 and "mcp" in result.output
