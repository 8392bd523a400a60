"""real-http: a business world's twin run against the real service its logs came from (the
back office on loopback), and the twin served as an MCP server (simgym serve --mcp --world)."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp
import pytest
from mcp import StdioServerParameters
from typer.testing import CliRunner

import simgym
from simgym.cli import app
from simgym.core.errors import SimgymError
from simgym.logs import ImportReport, build_world, read_logs
from simgym.logs.twin import world_scenario
from simgym.real.backoffice import Bank, create_app, run_sessions
from simgym.real.backoffice.driver import _Server
from simgym.real.http import RealHTTP

ROOT = Path(__file__).resolve().parent.parent
OPERATOR = {"actor": "op-1", "role": "operator"}
ANA = {
    "name": "Ana Lima",
    "email": "ana@example.com",
    "date_of_birth": "1990-01-02",
    "country": "PT",
    "documents": ["id_card"],
}


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("http-world")
    run_sessions(20, 0, root / "logs")  # enough sessions that every operation appears
    report = ImportReport()
    build_world(read_logs([str(root / "logs" / "traces.otlp.jsonl")], report), root / "world")
    return root / "world"


@pytest.fixture(scope="module")
def scenario(world_dir: Path) -> dict[str, Any]:
    return world_scenario(world_dir)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real back office on a loopback port, a fresh database."""
    bank = Bank(str(tmp_path_factory.mktemp("bank") / "bank.db"))
    with _Server(create_app(bank)) as base_url:
        yield base_url
    bank.close()


def call(tool: str, /, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments}


def test_the_twin_scenario_carries_each_tools_route(scenario: dict[str, Any]) -> None:
    route = scenario["routes"]["post_loans_loan_id_approve"]
    assert route == {
        "method": "POST",
        "route": "/loans/{loan_id}/approve",
        "headers": {"actor": "X-Actor", "role": "X-Role"},
    }
    assert set(scenario["routes"]) == {t["name"] for t in scenario["tools"]}
    model = simgym.get_domain("mcp").scenario(scenario)
    assert model.routes["get_loans"].method == "GET"
    with pytest.raises(SimgymError, match="routes name tools"):
        simgym.get_domain("mcp").scenario({**scenario, "routes": {"nope": route}})


async def test_tool_calls_are_the_services_own_answers(
    scenario: dict[str, Any], service: str
) -> None:
    backend = RealHTTP(service, timeout=10)
    env = simgym.make("mcp", world_model=backend, scenario=scenario)
    await env.reset("open an account for a new customer")
    created = await env.step(call("post_customers", **ANA, **OPERATOR))
    assert created.observation.metadata == {"status": 201, "method": "POST", "path": "/customers"}
    customer = json.loads(created.observation.text)
    assert customer["name"] == "Ana Lima" and customer["kyc_status"] == "pending"
    cid = customer["id"]

    got = await env.step(call("get_customers_customer_id", customer_id=cid, **OPERATOR))
    assert got.observation.metadata["status"] == 200
    direct = httpx.get(f"{service}/customers/{cid}", headers={"X-Actor": "a", "X-Role": "auditor"})
    assert got.observation.text == direct.text  # byte for byte what the service says

    # the wrong role: the service refuses, and says so in its own words
    audit = await env.step(call("get_audit", **OPERATOR))
    assert audit.observation.metadata["status"] == 403
    assert json.loads(audit.observation.text)["error"]["code"] == "forbidden"

    # a life-cycle violation: no account before KYC
    account = await env.step(
        call("post_accounts", customer_id=cid, account_type="checking", currency="EUR", **OPERATOR)
    )
    assert account.observation.metadata["status"] == 409
    assert json.loads(account.observation.text)["error"]["code"] == "kyc_required"

    # a GET's arguments go as the query string
    loans = await env.step(call("get_loans", status="approved", customer_id=cid, **OPERATOR))
    assert loans.observation.metadata["path"].startswith("/loans?")
    assert json.loads(loans.observation.text)["loans"] == []
    await env.close(None)

    # every request of the episode carried its session id and its caller
    trail = httpx.get(f"{service}/audit", headers={"X-Actor": "au-1", "X-Role": "auditor"})
    mine = [e for e in trail.json()["entries"] if e["session"] == backend.session_id]
    # (reads are not audited; refusals are)
    assert [e["operation"] for e in mine] == ["create_customer", "get_audit", "open_account"]
    assert {e["actor"] for e in mine} == {"op-1"}
    episode = env.trajectory
    assert episode is not None and episode.world_model["backend"] == "real-http"
    assert [t.observation.metadata["status"] for t in episode.turns] == [201, 200, 403, 409, 200]


async def test_calls_that_cannot_be_sent_get_a_clear_error_and_the_episode_goes_on(
    scenario: dict[str, Any], service: str
) -> None:
    backend = RealHTTP(service, timeout=10)
    await backend.start_episode(scenario, simgym.Task(domain="mcp"))
    try:
        unknown = await backend.run_turn(json.dumps(call("drop_tables")))
        assert json.loads(unknown.observation)["error"]["code"] == "unknown_tool"
        assert unknown.metadata == {"status": None, "error": "unknown_tool"}
        missing = await backend.run_turn(json.dumps(call("get_loans_loan_id", **OPERATOR)))
        assert "loan_id" in json.loads(missing.observation)["error"]["message"]
        assert missing.metadata["error"] == "missing_path_parameter"
        garbled = await backend.run_turn("get_loans please")
        assert json.loads(garbled.observation)["error"]["code"] == "bad_call"
        # an id with a slash stays one path segment; the service answers 404 for it
        odd = await backend.run_turn(
            json.dumps(call("get_loans_loan_id", loan_id="a/b", **OPERATOR))
        )
        assert odd.metadata["path"] == "/loans/a%2Fb" and odd.metadata["status"] == 404
        fine = await backend.run_turn(json.dumps(call("get_loans", **OPERATOR)))
        assert fine.metadata["status"] == 200  # the episode went on
    finally:
        await backend.end_episode()


async def test_no_answer_is_an_error_observation_not_a_lost_episode(
    scenario: dict[str, Any],
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    env = simgym.make("mcp", world_model=RealHTTP(f"http://127.0.0.1:{port}"), scenario=scenario)
    await env.reset("x")
    refused = await env.step(call("get_loans", **OPERATOR))
    assert json.loads(refused.observation.text)["error"]["code"] == "connection_failed"
    assert str(port) not in refused.observation.text  # the URL stays in the metadata
    assert not refused.done and not refused.truncated
    await env.close(None)

    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        env = simgym.make("mcp", world_model=RealHTTP(url, timeout=0.3), scenario=scenario)
        await env.reset("x")
        slow = await env.step(call("get_loans", **OPERATOR))
        assert json.loads(slow.observation.text)["error"]["code"] == "timeout"
        assert slow.observation.metadata["status"] is None and not slow.truncated
        await env.close(None)


async def test_serve_backoffice_gives_each_episode_a_fresh_service(
    scenario: dict[str, Any],
) -> None:
    backend = RealHTTP(serve_backoffice=True)
    env = simgym.make("mcp", world_model=backend, scenario=scenario)
    await env.reset("first")
    created = await env.step(call("post_customers", **ANA, **OPERATOR))
    cid = json.loads(created.observation.text)["id"]
    await env.close(None)
    await env.reset("second")
    again = await env.step(call("get_customers_customer_id", customer_id=cid, **OPERATOR))
    assert again.observation.metadata["status"] == 404  # the first episode's bank is gone
    await env.close(None)
    await backend.aclose()


def test_bad_configuration_is_refused_early(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SIMGYM_REAL_HTTP_URL", raising=False)
    with pytest.raises(SimgymError, match="--base-url"):
        RealHTTP()
    with pytest.raises(SimgymError, match="http://"):
        RealHTTP("127.0.0.1:8000")
    monkeypatch.setenv("SIMGYM_REAL_HTTP_URL", "http://127.0.0.1:9")
    assert simgym.world_model("real-http").base_url == "http://127.0.0.1:9"


async def test_a_scenario_without_routes_is_refused(service: str) -> None:
    env = simgym.make("mcp", world_model=RealHTTP(service))
    with pytest.raises(SimgymError, match="no routes"):
        await env.reset("x")


def test_play_on_the_real_service_from_the_command_line(world_dir: Path, service: str) -> None:
    result = CliRunner().invoke(
        app,
        ["play", "mcp", "--world", str(world_dir), "-w", "real-http", "--base-url", service],
        input="get_audit actor=op-1 role=operator\nget_loans actor=au-1 role=auditor\n:quit\n",
    )
    assert result.exit_code == 0, result.output
    assert "may not get_audit" in result.output and '"loans"' in result.output
    refused = CliRunner().invoke(app, ["play", "mcp", "--serve-backoffice"], input=":quit\n")
    assert refused.exit_code != 0 and "--world-model real-http" in refused.output


# -- the twin as an MCP server ------------------------------------------------------------


async def test_serve_world_offers_its_operations_over_mcp(
    world_dir: Path, scenario: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "episodes.jsonl"
    args = ["-m", "simgym.cli.serve", "--mcp", "--world", str(world_dir), "--out", str(out)]
    # the server imports this checkout's simgym, as the test does
    params = StdioServerParameters(
        command=sys.executable, args=args, cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src")}
    )
    customer = scenario["state"]["customers"][0]
    async with mcp.Client(params, read_timeout_seconds=60) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert list(listed) == [*(t["name"] for t in scenario["tools"]), "submit_answer"]
        get = listed["get_customers_customer_id"]
        assert get.input_schema["required"] == ["customer_id"]
        assert "A business system rebuilt from its operation logs" in (client.instructions or "")
        # a known record: the grounded engine answers it from the world's state
        found = await client.call_tool(
            "get_customers_customer_id", {"customer_id": customer["id"], **OPERATOR}
        )
        assert not found.is_error
        assert json.loads(found.content[0].text) == customer
        missing = await client.call_tool("get_customers_customer_id", {})
        assert missing.is_error and "customer_id" in missing.content[0].text
        await client.call_tool("submit_answer", {"answer": "done"})
    [episode] = list(simgym.read_trajectories(out))
    assert episode.scenario["server_name"] == world_dir.name and episode.answer == "done"


def test_mined_tasks_pass_on_the_twin_and_on_the_real_service(world_dir: Path, tmp_path: Path):
    """The plan agent follows a mined task's logged calls; the records reward checks the
    twin's ledger, and on the real service the records its answers showed."""
    tasks = [json.loads(line) for line in (world_dir / "tasks.jsonl").read_text().splitlines()]
    assert tasks, "the import mined no task"
    one = tmp_path / "tasks.jsonl"
    one.write_text(json.dumps(tasks[0]) + "\n")
    runner = CliRunner()
    scores = {}
    for name, extra in (("twin", []), ("real", ["-w", "real-http", "--serve-backoffice"])):
        out = tmp_path / f"{name}.jsonl"
        args = ["run", str(one), "--world", str(world_dir), "--agent", "plan", "-o", str(out)]
        result = runner.invoke(app, [*args, *extra])
        assert result.exit_code == 0, result.output
        episode = json.loads(out.read_text().splitlines()[0])
        scores[name] = episode["metrics"]["reward_details"]
    assert scores["real"]["passed"] == scores["real"]["total"] > 0
    assert scores["twin"]["passed"] == scores["twin"]["total"]
