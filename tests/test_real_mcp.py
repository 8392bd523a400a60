"""The real MCP backend: episodes against the bundled customer-records server over stdio,
recorded; state persists within an episode and never leaks into the next; results come
back in every output format the mcp domain knows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import simgym
import simgym.real.mcp  # noqa: F401  (registers the real-mcp backend)
from simgym.real.mcp import RealMCP, format_result, parse_call
from simgym.real.mcp_import import scenario_from_server
from simgym.real.mcp_servers.records import build_server

MCP = simgym.get_domain("mcp")


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@pytest.fixture(scope="module")
async def records_scenario(tmp_path_factory) -> dict[str, Any]:
    """The records server's own tool list, read in-process (fast), as an mcp scenario."""
    db = tmp_path_factory.mktemp("listing") / "records.db"
    return await scenario_from_server(server=build_server(db))


def observations_ok(trajectory: simgym.Trajectory, scenario: Any) -> None:
    world = MCP.scenario(scenario)
    for turn in trajectory.turns:
        assert turn.error is None, turn.error
        assert MCP.check_observation(turn.observation.text, turn.action, world) == []


async def test_envelope_episode_recorded_state_persists_and_does_not_leak(
    tmp_path: Path, records_scenario: dict[str, Any]
) -> None:
    out = tmp_path / "real-mcp.jsonl"
    executor = RealMCP()
    actions = [
        call("search_customers", query="ana"),
        call("update_email", customer_id="C-1001", email="ana.new@example.net"),
        call("get_customer", customer_id="C-1001"),
        call("get_customer", customer_id="C-9999"),
        call("create_ticket", customer_id="C-1001", subject="Card blocked at an ATM"),
    ]
    with simgym.TrajectoryWriter(out) as writer:
        env = simgym.make("mcp", world_model=executor, scenario=records_scenario, writer=writer)
        first = await env.reset("Move Ana Lima to her new email address")
        assert "update_email" in first.text
        results = [await env.step(action) for action in actions]
        await env.close(None)

        envelopes = [json.loads(r.observation.text) for r in results]
        assert envelopes[0]["isError"] is False
        assert "ana.lima@example.com" in envelopes[0]["content"][0]["text"]
        assert json.loads(envelopes[2]["content"][0]["text"])["email"] == "ana.new@example.net"
        assert envelopes[3]["isError"] is True
        assert "C-9999 not found" in envelopes[3]["content"][0]["text"]
        ticket = json.loads(envelopes[4]["content"][0]["text"])
        assert ticket["status"] == "open"

        # A second episode on the same executor starts from a fresh database.
        await env.reset("Look Ana up again")
        again = await env.step(call("get_customer", customer_id="C-1001"))
        tickets = await env.step(call("list_tickets", customer_id="C-1001"))
        await env.close(None)
    record = json.loads(json.loads(again.observation.text)["content"][0]["text"])
    assert record["email"] == "ana.lima@example.com"
    listed = json.loads(json.loads(tickets.observation.text)["content"][0]["text"])
    assert ticket["id"] not in {t["id"] for t in listed["tickets"]}
    assert executor.client is None  # the session was closed with the episode

    recorded = list(simgym.read_trajectories(out))
    assert [len(t.turns) for t in recorded] == [5, 2]
    assert recorded[0].world_model["backend"] == "real-mcp"
    for trajectory in recorded:
        observations_ok(trajectory, records_scenario)


async def test_json_and_text_formats_with_the_default_scenario() -> None:
    env = simgym.make("mcp", world_model="real-mcp")  # default scenario: output_format json
    await env.reset("Change Ben's email")
    good = await env.step(call("update_email", customer_id="C-1002", email="ben@example.com"))
    bad = await env.step(call("update_email", customer_id="C-1002", email="not-an-email"))
    await env.close(None)
    assert json.loads(good.observation.text)["email"] == "ben@example.com"
    assert "invalid email" in json.loads(bad.observation.text)["error"]["message"]
    observations_ok(env.trajectory, env.scenario)

    text_scenario = {**MCP.default_scenario(), "output_format": "text"}
    env = simgym.make("mcp", world_model="real-mcp", scenario=text_scenario)
    await env.reset("Find Ben")
    found = await env.step(call("search_customers", query="okafor"))
    await env.close(None)
    assert "Ben Okafor" in found.observation.text
    observations_ok(env.trajectory, text_scenario)


def test_sync_environment_and_an_undeclared_tool(records_scenario: dict[str, Any]) -> None:
    # reset and step run as separate tasks through SyncEnv; the session must survive that.
    scenario = {**records_scenario, "simulate_invalid_actions": True}
    with simgym.make("mcp", world_model="real-mcp", scenario=scenario).sync() as env:
        env.reset("Try a tool the server does not have")
        result = env.step(call("delete_all_customers"))
        listed = env.step(call("list_accounts", customer_id="C-1001"))
    envelope = json.loads(result.observation.text)
    assert envelope["isError"] is True
    assert "delete_all_customers" in envelope["content"][0]["text"]
    assert json.loads(listed.observation.text)["isError"] is False
    assert MCP.check_observation(result.observation.text, None, MCP.scenario(scenario)) == []


async def test_connection_failures_are_clear() -> None:
    with pytest.raises(simgym.SimgymError, match="not found"):
        await RealMCP(command="no-such-mcp-server --stdio").start_episode(
            MCP.default_scenario(), simgym.Task(id="t", domain="mcp", instruction="x")
        )
    with pytest.raises(simgym.SimgymError, match="not both"):
        RealMCP(command="x", url="http://127.0.0.1:1/mcp")


def test_parse_call_and_format_result() -> None:
    assert parse_call('{"name": "get_customer", "arguments": {"customer_id": "C-1001"}}') == (
        "get_customer",
        {"customer_id": "C-1001"},
    )
    assert parse_call('{"name": "ping"}') == ("ping", {})
    assert "invalid JSON" in str(parse_call("get_customer C-1001"))
    assert "arguments must be" in str(parse_call('{"name": "x", "arguments": [1]}'))
    parts = [{"type": "text", "text": '{"a": 1}'}]
    assert json.loads(format_result(parts, None, False, "mcp")) == {
        "content": parts,
        "isError": False,
    }
    assert json.loads(format_result(parts, {"a": 2}, False, "json")) == {"a": 2}
    assert json.loads(format_result(parts, None, False, "json")) == {"a": 1}
    plain = [{"type": "text", "text": "pong"}]
    assert json.loads(format_result(plain, None, False, "json")) == {"result": "pong"}
    assert json.loads(format_result(plain, None, True, "json")) == {"error": {"message": "pong"}}
    assert format_result(plain, None, True, "text") == "Error: pong"
