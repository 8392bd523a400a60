"""The real records MCP server, and importing real servers as simulated mcp scenarios."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("mcp.server.mcpserver", reason="needs the mcp SDK 2.x (simgym[mcp])")

from mcp import Client  # noqa: E402
from mcp.server import Server  # noqa: E402
from mcp.types import ListToolsResult, Tool  # noqa: E402

import simgym  # noqa: E402
from conftest import free_port  # noqa: E402
from simgym.real.mcp_import import (  # noqa: E402
    fetch_server_tools,
    scenario_from_server,
    scenario_from_server_sync,
)
from simgym.real.mcp_servers.records import RecordsStore, build_server, seed_rows  # noqa: E402

MCP = simgym.get_domain("mcp")
RECORDS = [sys.executable, "-m", "simgym.real.mcp_servers.records"]
TOOL_NAMES = [
    "search_customers",
    "get_customer",
    "update_email",
    "list_accounts",
    "list_tickets",
    "create_ticket",
]


@pytest.fixture(scope="module")
def http_url(tmp_path_factory):
    """The records server over streamable HTTP on a free loopback port."""
    work = tmp_path_factory.mktemp("records-http")
    port = free_port()
    log = open(work / "server.log", "w")  # closed after the server stops
    proc = subprocess.Popen(
        [*RECORDS, "--db", str(work / "records.db"), "--http", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                log.close()
                raise RuntimeError(
                    "records server did not start:\n" + (work / "server.log").read_text()
                ) from None
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="module")
async def declared(tmp_path_factory):
    """The tools the records server declares, read from the server object itself."""
    server = build_server(tmp_path_factory.mktemp("records-decl") / "records.db")
    return {tool.name: tool for tool in await server.list_tools()}


def _assert_mirrors_records(scenario: dict, declared: dict) -> None:
    assert scenario["server_name"] == "customer-records"
    assert "small bank" in scenario["description"] and "search_customers" in scenario["description"]
    assert [t["name"] for t in scenario["tools"]] == TOOL_NAMES == list(declared)
    for tool in scenario["tools"]:
        assert tool["parameters"] == declared[tool["name"]].input_schema
        assert tool["description"] == declared[tool["name"]].description
    assert scenario["output_format"] == "mcp" and scenario["state"] == {}
    parsed = MCP.scenario(scenario)
    assert parsed.tool("update_email").parameters["required"] == ["customer_id", "email"]


# --- the records server ---------------------------------------------------------------------


def test_records_seed_is_deterministic_and_kept(tmp_path):
    first = RecordsStore(tmp_path / "a.db").snapshot()
    assert first == RecordsStore(tmp_path / "b.db").snapshot()
    assert first != RecordsStore(tmp_path / "c.db", seed=99).snapshot()
    assert len(first["customers"]) == 12 and first["accounts"] and first["tickets"]
    # the first customers are the ones the simulated mcp domain's default scenario shows
    ana = first["customers"][0]
    assert (ana["id"], ana["name"], ana["email"]) == ("C-1001", "Ana Lima", "ana.lima@example.com")
    store = RecordsStore(tmp_path / "a.db")
    store.update_email("C-1001", "ana@example.net")
    reopened = RecordsStore(tmp_path / "a.db").get_customer("C-1001")
    assert reopened.email == "ana@example.net"  # an existing file is never reseeded


async def test_real_server_through_sdk_client(http_url):
    async with Client(http_url) as client:
        result = await client.call_tool("get_customer", {"customer_id": "C-1002"})
        assert not result.is_error
        assert result.structured_content["email"] == "ben@example.org"
        assert json.loads(result.content[0].text) == result.structured_content

        accounts = await client.call_tool("list_accounts", {"customer_id": "C-1001"})
        seeded = [row for row in seed_rows()["accounts"] if row[1] == "C-1001"]
        got = accounts.structured_content["accounts"]
        assert [(a["id"], round(a["balance"] * 100)) for a in got] == [(r[0], r[3]) for r in seeded]

        found = await client.call_tool("search_customers", {"query": "OKAFOR"})
        assert [c["id"] for c in found.structured_content["customers"]] == ["C-1002"]

        changed = await client.call_tool(
            "update_email", {"customer_id": "C-1002", "email": "Ben.Okafor@Example.net"}
        )
        assert (
            not changed.is_error and changed.structured_content["email"] == "ben.okafor@example.net"
        )
        again = await client.call_tool("get_customer", {"customer_id": "C-1002"})
        assert again.structured_content["email"] == "ben.okafor@example.net"

        ticket = await client.call_tool(
            "create_ticket", {"customer_id": "C-1002", "subject": "Card lost", "priority": "high"}
        )
        open_ = await client.call_tool("list_tickets", {"customer_id": "C-1002", "status": "open"})
        assert ticket.structured_content["id"] in [
            t["id"] for t in open_.structured_content["tickets"]
        ]


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("get_customer", {"customer_id": "C-9999"}, "customer C-9999 not found"),
        ("update_email", {"customer_id": "C-1003", "email": "nope"}, "invalid email address"),
        (
            "update_email",
            {"customer_id": "C-1003", "email": "ana.lima@example.com"},
            "already used",
        ),
        ("create_ticket", {"customer_id": "C-1003", "subject": "  "}, "at least 3 characters"),
        ("get_customer", {"customer_id": 1003}, "customer_id"),
    ],
)
async def test_real_server_reports_tool_errors(http_url, name, arguments, message):
    async with Client(http_url) as client:
        result = await client.call_tool(name, arguments)
    assert result.is_error and message in result.content[0].text


# --- importing a real server as a scenario -------------------------------------------------------


async def test_import_over_stdio(tmp_path, declared):
    scenario = await scenario_from_server([*RECORDS, "--db", str(tmp_path / "r.db")])
    _assert_mirrors_records(scenario, declared)


async def test_import_over_http(http_url, declared):
    listing = await fetch_server_tools(url=http_url)
    assert listing.version == "1.0.0" and listing.protocol_version
    assert listing.tools[0]["annotations"]["readOnlyHint"] is True  # wire form kept
    _assert_mirrors_records(await scenario_from_server(url=http_url, timeout=10), declared)


async def test_imported_scenario_drives_a_simulated_episode(http_url):
    scenario = await scenario_from_server(url=http_url)
    async with Client(http_url) as client:  # a real answer, as the world model should imitate it
        real = await client.call_tool("get_customer", {"customer_id": "C-1001"})
    real_text = json.dumps(real.model_dump(mode="json", by_alias=True, exclude_none=True))
    call = simgym.Action.tool_call("get_customer", {"customer_id": "C-1001"})
    assert MCP.check_observation(real_text, call, MCP.scenario(scenario)) == []

    env = simgym.make(
        "mcp",
        world_model=simgym.FunctionWorldModel(
            lambda messages: f"<predicted_observation>{real_text}</predicted_observation>"
        ),
        scenario=scenario,
    )
    first = await env.reset("What is Ana Lima's email address?")
    assert "customer-records" in first.text and "update_email" in first.text
    assert '"pattern"' in env.messages[0]["content"]  # the real schemas reach the world model

    ok = await env.step({"name": "get_customer", "arguments": {"customer_id": "C-1001"}})
    assert ok.observation.kind != "error" and json.loads(ok.observation.text)["isError"] is False
    undeclared = await env.step({"name": "delete_customer", "arguments": {"customer_id": "C-1001"}})
    assert undeclared.observation.kind == "error" and "unknown tool" in undeclared.observation.text
    wrong_type = await env.step({"name": "get_customer", "arguments": {"customer_id": 1001}})
    assert wrong_type.observation.kind == "error"
    assert "invalid arguments" in wrong_type.observation.text
    assert "1001 is not of type 'string'" in wrong_type.observation.text
    bad_id = await env.step({"name": "get_customer", "arguments": {"customer_id": "ana"}})
    assert bad_id.observation.kind == "error"  # the server's id pattern is enforced too
    await env.close()


async def test_import_follows_tools_list_pagination():
    tools = [
        Tool(name=f"tool_{n}", description=f"Tool {n}.", input_schema={"type": "object"})
        for n in range(5)
    ]

    async def list_tools(ctx, params):
        start = int(params.cursor) if params and params.cursor else 0
        following = str(start + 2) if start + 2 < len(tools) else None
        return ListToolsResult(tools=tools[start : start + 2], next_cursor=following)

    server = Server("paged", instructions="Five tools, two a page.", on_list_tools=list_tools)
    scenario = await scenario_from_server(server=server)
    assert [t["name"] for t in scenario["tools"]] == [t.name for t in tools]
    assert (
        scenario["server_name"] == "paged" and scenario["description"] == "Five tools, two a page."
    )


# --- failures give one clear SimgymError -----------------------------------------------------


def test_missing_command_is_reported():
    with pytest.raises(simgym.SimgymError, match="command not found: 'no-such-mcp-server'"):
        scenario_from_server_sync(["no-such-mcp-server", "--db", "x.db"])


async def test_crashing_server_is_reported_with_its_stderr():
    crash = "import sys; sys.stderr.write('fatal: no database configured\\n'); sys.exit(3)"
    with pytest.raises(simgym.SimgymError, match="did it crash") as info:
        await scenario_from_server([sys.executable, "-c", crash])
    assert "fatal: no database configured" in str(info.value)


async def test_silent_server_times_out():
    hang = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(simgym.SimgymError, match="timed out after 1 s"):
        await scenario_from_server(hang, timeout=1)


async def test_unreachable_url_is_reported():
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(simgym.SimgymError, match="could not reach the MCP server at"):
        await scenario_from_server(url=url, timeout=10)


async def test_bad_targets_are_reported(http_url):
    with pytest.raises(simgym.SimgymError, match="exactly one of"):
        await scenario_from_server(["x"], url=http_url)
    with pytest.raises(simgym.SimgymError, match="not an http"):
        await scenario_from_server(url="ftp://127.0.0.1/mcp")
    with pytest.raises(simgym.SimgymError, match="check the endpoint path"):
        await scenario_from_server(url=http_url.replace("/mcp", "/nope"), timeout=10)


# -- sampling records through read-only tools (simgym mcp import --sample-records) --------


def test_sampling_over_stdio_reads_records_and_never_writes(tmp_path):
    from simgym.core.sync import run_sync
    from simgym.real.mcp_import import listing_to_scenario

    db = tmp_path / "records.db"
    before = RecordsStore(db).snapshot()  # creates and seeds the database the server opens
    listing = run_sync(fetch_server_tools([*RECORDS, "--db", str(db)], sample=3))
    sample = listing.sample
    assert sample is not None
    # the annotated writers were never called; every read-only tool was
    called = {c.split("(")[0] for c in sample.calls}
    assert called == {"search_customers", "get_customer", "list_accounts", "list_tickets"}
    assert set(sample.skipped) == {"update_email", "create_ticket"}
    assert RecordsStore(db).snapshot() == before  # nothing changed on the server
    scenario = listing_to_scenario(listing)
    state = scenario["state"]
    assert len(state["customers"]) == 3 and "the server may hold more" in scenario["notes"]
    real = {c["id"]: c for c in before["customers"]}
    for customer in state["customers"]:  # the search's summary, completed by get_customer
        assert customer == {k: real[customer["id"]][k] for k in customer}
        assert set(customer) >= {"id", "name", "email", "phone", "city", "joined"}
    owners = {c["id"] for c in state["customers"]}
    # a customer's accounts keep the customer_id their list was read for
    assert state["accounts"] and all(a["customer_id"] in owners for a in state["accounts"])
    MCP.scenario(scenario)


async def test_the_twin_serves_a_sampled_record_instead_of_inventing_one(tmp_path):
    from simgym import FunctionWorldModel

    db = tmp_path / "records.db"
    scenario = await scenario_from_server([*RECORDS, "--db", str(db)], sample=2)
    customer = scenario["state"]["customers"][1]
    invented = '{"content": [{"type": "text", "text": "{\\"name\\": \\"Invented\\"}"}]}'
    env = simgym.make(
        "mcp",
        world_model=FunctionWorldModel(lambda m: invented),
        scenario=scenario,
        grounding="strict",  # the state decides a read of a record it holds
    )
    await env.reset("look a customer up")
    step = await env.step({"name": "get_customer", "arguments": {"customer_id": customer["id"]}})
    await env.close()
    shown = json.loads(json.loads(step.observation.text)["content"][0]["text"])
    assert shown == RecordsStore(db).get_customer(customer["id"]).model_dump()


async def test_an_id_outside_the_sample_is_not_called_missing(tmp_path):
    from simgym import FunctionWorldModel

    db = tmp_path / "records.db"
    everyone = RecordsStore(db).snapshot()["customers"]
    scenario = await scenario_from_server([*RECORDS, "--db", str(db)], sample=2)
    assert scenario["state"]["_sampled"] == sorted(
        k for k in scenario["state"] if not k.startswith("_")
    )
    held = {c["id"] for c in scenario["state"]["customers"]}
    outside = next(c for c in everyone if c["id"] not in held)  # real, but not sampled
    rendered = '{"content": [{"type": "text", "text": "{\\"name\\": \\"From the model\\"}"}]}'
    env = simgym.make(
        "mcp",
        world_model=FunctionWorldModel(lambda m: rendered),
        scenario=scenario,
        grounding="strict",
    )
    await env.reset("look customers up")
    step = await env.step({"name": "get_customer", "arguments": {"customer_id": outside["id"]}})
    assert "not found" not in step.observation.text.lower()
    assert "From the model" in step.observation.text  # the world model's to answer
    # a search over a sampled collection is not decided from the sample either
    listed = await env.step({"name": "search_customers", "arguments": {"query": "a"}})
    assert "From the model" in listed.observation.text
    await env.close()


async def test_without_annotations_only_tools_named_to_read_are_called():
    from mcp.server.mcpserver import MCPServer

    from simgym.real.mcp_sample import why_not_read_only

    items = {"I-1": "bolt", "I-2": "nut", "I-3": "gear"}
    calls: list[str] = []
    server = MCPServer("stock")

    @server.tool()
    def list_items() -> dict:
        """Every item."""
        calls.append("list_items")
        return {"items": [{"id": k, "name": v} for k, v in items.items()]}

    @server.tool()
    def get_item(item_id: str) -> dict:
        """One item."""
        calls.append("get_item")
        return {"id": item_id, "name": items[item_id], "stock": 7}

    @server.tool()
    def purge_items() -> str:
        """Delete every item."""
        calls.append("purge_items")
        items.clear()
        return "gone"

    @server.tool()
    def get_or_create_item(name: str) -> dict:
        """Find an item by name, making it when missing."""
        calls.append("get_or_create_item")
        return {"id": "I-9", "name": name}

    listing = await fetch_server_tools(server=server, sample=2)
    sample = listing.sample
    assert sample is not None
    assert "purge_items" not in calls and "get_or_create_item" not in calls
    assert len(items) == 3
    assert calls == ["list_items", "get_item", "get_item"]  # N = 2 ids followed
    assert sample.records["items"] == [
        {"id": "I-1", "name": "bolt", "stock": 7},
        {"id": "I-2", "name": "nut", "stock": 7},
    ]
    assert "does not start with" in sample.skipped["purge_items"]
    # an annotated tool is trusted only on readOnlyHint: true, whatever its name says
    assert why_not_read_only({"name": "list_x", "annotations": {"title": "x"}}) is not None
    assert why_not_read_only({"name": "sync", "annotations": {"readOnlyHint": True}}) is None
    assert why_not_read_only({"name": "listAndDeleteJobs"}) is not None
    assert why_not_read_only({"name": "searchOrders"}) is None


def test_cli_samples_on_request_and_says_when_a_twin_has_no_records(tmp_path):
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "simgym", *args],
            capture_output=True,
            text=True,
            timeout=300,
        )

    server = f"{sys.executable} -m simgym.real.mcp_servers.records --db {tmp_path / 'r.db'}"
    bare, sampled = tmp_path / "bare.yaml", tmp_path / "sampled.yaml"
    done = cli("mcp", "import", "--command", server, "--out", str(bare))
    assert done.returncode == 0, done.stderr
    assert "the twin has no records" in done.stderr
    done = cli("mcp", "import", "--command", server, "--out", str(sampled), "--sample-records", "2")
    assert done.returncode == 0, done.stderr
    assert "the twin holds 5 records (2 customers, 2 accounts, 1 tickets)" in done.stderr
    assert "a sample: an id outside it is the world model's to answer" in done.stderr
    shown = cli("mcp", "show", str(bare))
    assert shown.returncode == 0, shown.stderr
    assert "the twin has no records" in shown.stdout
    assert "get_customer  (reads only)" in shown.stdout and "update_email\n" in shown.stdout
    shown = cli("mcp", "show", str(sampled))
    assert "the twin holds 5 records" in shown.stdout
    bad = cli("mcp", "import", "--command", server, "--out", str(bare), "--sample-records", "-1")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
