"""What a tool declares about its answers (MCP ``outputSchema``, simgym.domains.mcp_output):
kept by ``simgym mcp import`` and by the scenario, and used by grounding to write a
free-running episode's first answers in the server's layout. Checked against a REAL
server built here with the official SDK (a library: a search whose answer wraps its
items with a total, a record with a field its model fills in by default, a list tool
that returns a bare list, which the SDK wraps), learning only from what the simulation
itself served, as a free-running episode does."""

from __future__ import annotations

import copy
import json
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

import simgym
from simgym import Action, ScenarioError
from simgym.core.state import apply_patch
from simgym.domains.mcp_ground import WORDING_GUESSED, ground_mcp
from simgym.real.mcp import format_result
from simgym.real.mcp_import import scenario_from_server

mcp = pytest.importorskip("mcp")
from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

MCP = simgym.get_domain("mcp")
BOOKS = [
    {"id": "B-101", "title": "The Quiet Harbour", "author": "Ines Duarte", "year": 2019,
     "shelf": "A3"},
    {"id": "B-102", "title": "Harbour Lights", "author": "Tom Baker", "year": 2001,
     "shelf": "A3"},
    {"id": "B-103", "title": "Salt and Stone", "author": "Ines Duarte", "year": 2022,
     "shelf": "B1"},
    {"id": "B-104", "title": "Night Trains", "author": "Mara Klein", "year": 2015,
     "shelf": "C2"},
]  # fmt: skip
LOANS = [
    {"id": "L-1", "book_id": "B-101", "member": "m.silva", "due": "2025-03-01"},
    {"id": "L-2", "book_id": "B-103", "member": "j.costa", "due": "2025-03-09"},
    {"id": "L-3", "book_id": "B-101", "member": "a.reis", "due": "2025-04-02"},
]
BookId = Annotated[str, Field(description="A book's id, e.g. B-101.", pattern=r"^B-\d{3}$")]


class BookSummary(BaseModel):
    id: str
    title: str
    author: str


class BookPage(BaseModel):
    books: list[BookSummary]
    total: int


class Book(BookSummary):
    year: int
    shelf: str
    language: str = "en"  # the records hold none: the model's default shows


class Loan(BaseModel):
    id: str
    book_id: str
    member: str
    due: str


def library() -> MCPServer:
    """A real MCP server over copies of BOOKS and LOANS."""
    books, loans = copy.deepcopy(BOOKS), copy.deepcopy(LOANS)
    server = MCPServer("library")

    def book(book_id: str) -> dict[str, Any]:
        found = next((b for b in books if b["id"] == book_id), None)
        if found is None:
            raise ToolError(f"no book with id {book_id}")
        return found

    @server.tool()
    def find_books(
        text: Annotated[str, Field(min_length=1)],
        limit: Annotated[int, Field(ge=1, le=20)] = 5,
    ) -> BookPage:
        """Find books whose title or author contains the text (case-insensitive)."""
        needle = text.strip().lower()
        hits = [b for b in books if needle in b["title"].lower() or needle in b["author"].lower()]
        summaries = [BookSummary(**{k: b[k] for k in ("id", "title", "author")}) for b in hits]
        return BookPage(books=summaries[:limit], total=len(hits))

    @server.tool()
    def get_book(book_id: BookId) -> Book:
        """Fetch one book."""
        return Book(**book(book_id))

    @server.tool()
    def list_loans(book_id: BookId) -> list[Loan]:
        """List a book's loans."""
        book(book_id)
        return [Loan(**loan) for loan in loans if loan["book_id"] == book_id]

    return server


async def real_answers(server: MCPServer, calls: list[dict[str, Any]], fmt: str) -> list[str]:
    answers = []
    async with mcp.Client(server) as client:
        for call in calls:
            result = await client.call_tool(call["name"], call["arguments"])
            parts = [
                p.model_dump(mode="json", by_alias=True, exclude_none=True) for p in result.content
            ]
            answers.append(format_result(parts, result.structured_content, result.is_error, fmt))
    return answers


def free_running(scenario: dict[str, Any], calls: list[dict[str, Any]]) -> list[Any]:
    """Each call's grounding, the ledger learning only from what the simulation served
    (the exact answer, else nothing), as in a free-running episode."""
    world = MCP.scenario(scenario)
    state = MCP.initial_state(world)
    out = []
    for call in calls:
        action = MCP.validate_action(Action.parse(call), world)
        grounding = ground_mcp(action, state, world)
        out.append(grounding)
        if grounding is not None and grounding.effects:
            state = apply_patch(state, grounding.effects)
        if grounding is not None and grounding.observation is not None:
            state = apply_patch(state, MCP.observe(grounding.observation, action, state) or {})
    return out


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


CALLS = [
    call("find_books", text="harbour"),  # 0: the wrapper, each item's fields, the total
    call("find_books", text="INES", limit=1),  # 1: a limit cuts the items, not the total
    call("get_book", book_id="B-104"),  # 2: the schema's fields in order, a default filled
    call("list_loans", book_id="B-101"),  # 3: a bare list: one text item per loan
    call("list_loans", book_id="B-104"),  # 4: none: no text item at all
    call("find_books", text="zzz"),  # 5: nothing found
]


@pytest.fixture
async def world() -> dict[str, Any]:
    scenario = await scenario_from_server(server=library())
    scenario["state"] = {"books": copy.deepcopy(BOOKS), "loans": copy.deepcopy(LOANS)}
    return scenario


async def test_import_keeps_what_the_server_declares_about_its_answers(world) -> None:
    tools = {t["name"]: t for t in world["tools"]}
    page = tools["find_books"]["output_schema"]
    assert page["title"] == "BookPage" and list(page["properties"]) == ["books", "total"]
    assert tools["list_loans"]["output_schema"]["title"] == "list_loansOutput"  # the SDK's wrap
    scenario = MCP.scenario(world, strict=True)
    assert scenario.tool("get_book").output_schema == tools["get_book"]["output_schema"]
    # a scenario dumps and loads again as it was; a tool without one dumps as before
    again = MCP.scenario(json.loads(scenario.model_dump_json()), strict=True)
    assert again.tool("get_book").output_schema == scenario.tool("get_book").output_schema
    plain = MCP.scenario({"tools": [{"name": "ping", "parameters": {"type": "object"}}]})
    assert plain.tools[0].model_dump() == {
        "name": "ping", "description": "", "parameters": {"type": "object"}
    }  # fmt: skip


def test_the_scenario_reads_the_mcp_wire_form_and_refuses_typos() -> None:
    wire = {
        "name": "get_book",
        "inputSchema": {"type": "object", "properties": {"book_id": {"type": "string"}}},
        "outputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
        "annotations": {"readOnlyHint": True},
        "_meta": {"x": 1},
    }
    tool = MCP.scenario({"tools": [wire]}, strict=True).tools[0]
    assert tool.output_schema == wire["outputSchema"] and tool.annotations == {"readOnlyHint": True}
    assert (
        "outputSchema" not in tool.to_mcp() and tool.to_mcp()["inputSchema"] == wire["inputSchema"]
    )
    with pytest.raises(ScenarioError, match="outputSchmea"):
        MCP.scenario({"tools": [{"name": "x", "outputSchmea": {}}]}, strict=True)
    with pytest.raises(ScenarioError, match="invalid output schema"):
        MCP.scenario({"tools": [{"name": "x", "output_schema": {"type": 7}}]})


@pytest.mark.parametrize("fmt", ["mcp", "json", "text"])
async def test_first_answers_are_the_servers_from_its_output_schemas(world, fmt) -> None:
    world["output_format"] = fmt
    real = await real_answers(library(), CALLS, fmt)
    groundings = free_running(world, CALLS)
    for n, (grounding, answer) in enumerate(zip(groundings, real, strict=True)):
        assert grounding is not None and grounding.observation == answer, (n, answer)
    if fmt == "mcp":
        loans = json.loads(real[3])["content"]
        assert [json.loads(part["text"])["id"] for part in loans] == ["L-1", "L-3"]
        assert json.loads(real[4])["content"] == []
        assert json.loads(json.loads(real[2])["content"][0]["text"])["language"] == "en"


async def test_refusals_the_schemas_make_certain(world) -> None:
    """An unknown book of the right shape: the lookup's not-found error, in simgym's
    wording (marked) until the server shows its own, then in the server's, for another
    tool too; a list by a book that does not exist is refused the same way (the tool
    requires the book it is about)."""
    calls = [
        call("list_loans", book_id="B-999"),
        call("get_book", book_id="B-998"),
        call("list_loans", book_id="B-997"),
    ]
    real = await real_answers(library(), calls, "mcp")
    world_ = MCP.scenario(world)
    state = MCP.initial_state(world_)
    first = ground_mcp(Action.parse(calls[0]), state, world_)
    assert json.loads(first.observation)["isError"] is True
    assert WORDING_GUESSED in first.facts and any("requires book_id" in f for f in first.facts)
    assert json.loads(first.observation)["content"][0]["text"] == (
        "Error executing tool list_loans: book B-999 not found"
    )  # the server says "no book with id B-999": learned from its answer
    state = apply_patch(state, first.effects)
    state = apply_patch(state, MCP.observe(real[0], Action.parse(calls[0]), state) or {})
    for n in (1, 2):
        grounding = ground_mcp(Action.parse(calls[n]), state, world_)
        assert grounding.observation == real[n] and WORDING_GUESSED not in grounding.facts
        state = apply_patch(state, grounding.effects or {})


def test_a_record_the_server_completes_leaves_other_lists_known() -> None:
    """A ticket whose status only the server knows may be in a list filtered by status
    of its own customer, but not in another customer's list."""
    tools = [
        {"name": "create_ticket", "parameters": {"type": "object", "properties": {
            "customer_id": {"type": "string"}, "subject": {"type": "string"}},
            "required": ["customer_id", "subject"]}},
        {"name": "list_tickets", "parameters": {"type": "object", "properties": {
            "customer_id": {"type": "string"}, "status": {"type": "string"}},
            "required": ["customer_id"]}},
    ]  # fmt: skip
    state = {
        "customers": [{"id": "C-1"}, {"id": "C-2"}],
        "tickets": [
            {"id": "T-1", "customer_id": "C-1", "subject": "a", "status": "open"},
            {"id": "T-2", "customer_id": "C-2", "subject": "b", "status": "closed"},
        ],
    }
    world = MCP.scenario({"tools": tools, "state": state})
    ledger = MCP.initial_state(world)
    made = ground_mcp(Action.tool_call("create_ticket", {"customer_id": "C-1", "subject": "c"}),
                      ledger, world)  # fmt: skip
    ledger = apply_patch(ledger, made.effects)
    mine = ground_mcp(Action.tool_call("list_tickets", {"customer_id": "C-1", "status": "open"}),
                      ledger, world)  # fmt: skip
    other = ground_mcp(Action.tool_call("list_tickets", {"customer_id": "C-2"}), ledger, world)
    learned = {"_style": {"lists": {"list_tickets": {
        "shape": {"tickets": "{items}"}, "fields": ["id", "status"]}}}}  # fmt: skip
    ledger = apply_patch(ledger, learned)
    mine = ground_mcp(Action.tool_call("list_tickets", {"customer_id": "C-1", "status": "open"}),
                      ledger, world)  # fmt: skip
    other = ground_mcp(Action.tool_call("list_tickets", {"customer_id": "C-2"}), ledger, world)
    assert mine.observation is None  # the new ticket may be open
    assert json.loads(other.observation) == {"tickets": [{"id": "T-2", "status": "closed"}]}


def test_an_update_the_description_says_is_refused() -> None:
    tools = [
        {
            "name": "update_email",
            "description": "Change a user's email; it must be valid and not used by another user.",
            "parameters": {"type": "object", "properties": {
                "user_id": {"type": "string"}, "email": {"type": "string"}},
                "required": ["user_id", "email"]},
        },
    ]  # fmt: skip
    users = [{"id": f"U-{n}", "email": f"u{n}@example.org"} for n in range(1, 6)]
    world = MCP.scenario({"tools": tools, "state": {"users": users}, "output_format": "mcp"})
    ledger = MCP.initial_state(world)
    taken = ground_mcp(Action.tool_call("update_email", {"user_id": "U-1", "email": "u2@example.org"}),
                       ledger, world)  # fmt: skip
    assert json.loads(taken.observation)["isError"] is True and WORDING_GUESSED in taken.facts
    bad = ground_mcp(Action.tool_call("update_email", {"user_id": "U-1", "email": "nope"}),
                     ledger, world)  # fmt: skip
    assert json.loads(bad.observation) == {
        "content": [{"type": "text", "text": "invalid email 'nope'"}], "isError": True
    }  # fmt: skip
    # served, its wording is learned back from simgym's own answer: still a guess
    action = Action.tool_call("update_email", {"user_id": "U-1", "email": "nope"})
    ledger = apply_patch(ledger, bad.effects)
    ledger = apply_patch(ledger, MCP.observe(bad.observation, action, ledger) or {})
    again = ground_mcp(Action.tool_call("update_email", {"user_id": "U-2", "email": "no pe"}),
                       ledger, world)  # fmt: skip
    assert json.loads(again.observation)["content"][0]["text"] == "invalid email 'no pe'"
    assert WORDING_GUESSED in again.facts
    # a description that promises nothing leaves the refusal the server's to say
    silent = world.model_copy(update={"tools": [world.tools[0].model_copy(
        update={"description": "Change a user's email."})]})  # fmt: skip
    maybe = ground_mcp(Action.tool_call("update_email", {"user_id": "U-1", "email": "nope"}),
                       MCP.initial_state(world), silent)  # fmt: skip
    assert maybe.observation is None and any("may refuse" in f for f in maybe.facts)


async def test_a_create_is_written_whole_from_what_the_server_likely_fills_in(tmp_path) -> None:
    """The records server's create_ticket answers with the new ticket (its output schema);
    the ticket's status and time are the server's. Its description ("Open a new support
    ticket") and the records (every ticket's created is a UTC time) make them likely:
    the model's answer, whatever it says, is rewritten with them (not served as exact),
    and the lists that follow know the ticket whole."""
    from simgym import FunctionWorldModel
    from simgym.real.mcp_servers.records import RecordsStore, build_server

    db = tmp_path / "records.db"
    scenario = await scenario_from_server(server=build_server(db))
    scenario["state"] = RecordsStore(db).snapshot()
    nonsense = '{"content": [{"type": "text", "text": "customer not found"}], "isError": false}'
    env = simgym.make(
        "mcp", world_model=FunctionWorldModel(lambda m: nonsense), scenario=scenario,
        grounding="strict",
    )  # fmt: skip
    await env.reset("x")
    made = await env.step(call("create_ticket", customer_id="C-1003", subject="Statement copy"))
    closed = await env.step(call("list_tickets", customer_id="C-1003", status="closed"))
    listed = await env.step(call("list_tickets", customer_id="C-1003"))
    await env.close()
    ticket = json.loads(json.loads(made.observation.text)["content"][0]["text"])
    assert list(ticket) == ["id", "customer_id", "subject", "status", "priority", "created"]
    assert ticket["id"] == "T-9009" and ticket["status"] == "open"
    assert ticket["priority"] == "normal" and ticket["created"].endswith("Z")
    turn = env.trajectory.turns[0]
    assert turn.grounding["strict"]["action"] == "reshaped" and not turn.grounding.get("exact")
    assert any("not certain: status is likely 'open'" in f for f in turn.grounding["facts"])
    assert json.loads(json.loads(closed.observation.text)["content"][0]["text"])["tickets"] == []
    assert json.loads(json.loads(listed.observation.text)["content"][0]["text"])["tickets"] == [
        ticket
    ]
