"""Tool worlds without a tool map: what mcp grounding infers from tool names, input
schemas, descriptions and the records (searches over the fields a description names,
lists by a foreign key in the order a description promises, CRUD by a key, the schema's
constraints as the server's own validation errors, email addresses stored the way the
records store them), checked against the REAL records MCP server, and on an inventory
tool set of another shape written here."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pydantic
import pytest

import simgym
import simgym.real.mcp  # noqa: F401  (registers the real-mcp backend)
from simgym import Action, FunctionWorldModel
from simgym.core.state import apply_patch
from simgym.domains import mcp_schema
from simgym.domains.mcp_ground import WORDING_GUESSED, ground_mcp
from simgym.real.mcp import RealMCP
from simgym.real.mcp_import import scenario_from_server
from simgym.real.mcp_servers.records import RecordsStore, build_server

MCP = simgym.get_domain("mcp")
PYDANTIC = pydantic.version.version_short()


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def parsed(text: str, fmt: str) -> Any:
    """An answer as data (the envelope, and the JSON text inside it, parsed)."""
    value = json.loads(text)
    if fmt == "mcp":
        inner = []
        for part in value["content"]:
            try:
                inner.append(json.loads(part["text"]))
            except ValueError:
                inner.append(part["text"])
        return {"content": inner, "isError": value.get("isError", False)}
    return value


def listed_ids(text: str) -> list[str]:
    """The ids of the records a real list answer shows (its one list of objects)."""
    value = parsed(text, "mcp")["content"][0]
    items = next(v for v in value.values() if isinstance(v, list))
    return [item["id"] for item in items]


def replay(scenario: dict[str, Any], actions: list[dict], answers: list[str]) -> list[Any]:
    """The grounding of each call, teacher-forced: the ledger takes each grounding's
    certain effects, then learns from the real answer, as from a model that answered
    right (how ``benchmarks/grounding_devset.py`` replays episodes)."""
    world = MCP.scenario(scenario)
    state = MCP.initial_state(world)
    out = []
    for action, answer in zip(actions, answers, strict=True):
        parsed_action = MCP.validate_action(Action.parse(action), world)
        grounding = ground_mcp(parsed_action, state, world)
        out.append(grounding)
        if grounding is not None and grounding.effects:
            state = apply_patch(state, grounding.effects)
        state = apply_patch(state, MCP.observe(answer, parsed_action, state) or {})
    return out


# -- the real records server, as a user writes its world ----------------------------------


@pytest.fixture(scope="module")
async def records_world(tmp_path_factory) -> dict[str, Any]:
    """The records server's tools as ``simgym mcp import`` lists them, its seed records
    as the state, no tool map; calls that break a schema go to the world as typed."""
    db = tmp_path_factory.mktemp("records") / "records.db"
    scenario = await scenario_from_server(server=build_server(db))
    assert "tool_map" not in scenario or not scenario["tool_map"]
    scenario["state"] = RecordsStore(db).snapshot()
    scenario["simulate_invalid_actions"] = True
    return scenario


RECORDS_CALLS = [
    call("search_customers", query="silva"),  # 0: the first search: its output schema
    call("search_customers", query="NOVAK"),  # 1
    call("search_customers", query="917737"),  # 2: a phone number without its spaces
    call("get_customer", customer_id="C-1011"),  # 3
    call("list_accounts", customer_id="C-1011"),  # 4: by a foreign key
    call("list_tickets", customer_id="C-1011"),  # 5
    call("update_email", customer_id="C-1011", email="Gustavo.Silva@NEW.example.net"),  # 6
    call("get_customer", customer_id="C-1011"),  # 7: read back
    call("search_customers", query="new.example"),  # 8
    call("create_ticket", customer_id="C-1011", subject="Replace a worn card"),  # 9
    call("list_tickets", customer_id="C-1011"),  # 10: oldest first, the new one included
    call("get_customer", customer_id="C-11"),  # 11: breaks the id pattern
    call("update_email", customer_id="C-1011", email="gustavo-at-example"),  # 12
    call("update_email", customer_id="C-1005", email="chloe@@example"),  # 13
    call("get_customer", customer_id="C-1005"),  # 14
    call("create_ticket", customer_id="C-1005", subject="x" * 121),  # 15: maxLength
    call("list_tickets", customer_id="C-1005", status="archived"),  # 16: enum
    call("get_customer", customer_id="C-1099"),  # 17: no such customer
    call("search_customers", query="a", limit=0),  # 18: minimum
    call("get_customer"),  # 19: required
]
# the state decides these whole, laid out as the tools' output schemas say from the first
# call on (12: a refusal the description promises, worded simgym's way until the server
# showed its own)
EXACT = {0, 1, 3, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}
GUESSED_WORDING = {12}


async def test_grounded_answers_equal_the_real_records_server(records_world) -> None:
    env = simgym.make(
        "mcp",
        world_model=RealMCP(seed_from_scenario=True),
        scenario=records_world,
        max_turns=len(RECORDS_CALLS) + 1,
    )
    await env.reset("a support shift")
    real = [(await env.step(action)).observation.text for action in RECORDS_CALLS]
    await env.close()
    groundings = replay(records_world, RECORDS_CALLS, real)

    # every exact answer the grounding computed is the server's, as parsed JSON and as
    # text (the SDK's layout: the output schema's fields in order, indented by two), but
    # for a refusal whose wording simgym guessed (marked so), which is still a refusal;
    # and the calls the state decides whole all got one
    for n, (grounding, answer) in enumerate(zip(groundings, real, strict=True)):
        exact = grounding.observation if grounding is not None else None
        if exact is not None and n in GUESSED_WORDING:
            assert WORDING_GUESSED in grounding.facts
            assert parsed(exact, "mcp")["isError"] is parsed(answer, "mcp")["isError"] is True
        elif exact is not None:
            assert parsed(exact, "mcp") == parsed(answer, "mcp"), (n, exact, answer)
            assert exact == answer, n
    exact = {n for n, g in enumerate(groundings) if g is not None and g.observation is not None}
    assert exact == EXACT

    # the searches find what the server finds, the first one laid out as the tool's output
    # schema says (the wrapper, each item's fields, the total of all matches)
    first = groundings[0]
    assert listed_ids(real[0]) == ["C-1011", "C-1012"] and first.observation == real[0]
    assert "C-1001" in first.forbid and "C-1005" in first.forbid
    assert any(
        "searches name, email, phone, as the tool's description says" in f for f in first.facts
    )
    assert any("search_customers's output schema says its answer" in f for f in first.facts)
    # whether "917737" is in "+351 917 737 072" depends on how the server compares
    # spaces: not decided, the record only a possibility (this server ignores them)
    phone = groundings[2]
    assert phone.observation is None and listed_ids(real[2]) == ["C-1007"]
    assert "C-1007" not in phone.forbid
    assert any("depends on how the server compares the query" in f for f in phone.facts)

    # a list by customer: the server's accounts, not their layout (balance is no field of
    # the records: they hold balance_cents), so the answer stays the model's
    accounts = groundings[4]
    assert accounts.observation is None and accounts.expect == listed_ids(real[4]) == ["A-50022"]

    # the mixed-case email is stored the way every stored email is: in lower case
    updated = parsed(real[6], "mcp")["content"][0]
    assert updated["email"] == "gustavo.silva@new.example.net"
    assert any("stores 'Gustavo.Silva@NEW.example.net' as" in f for f in groundings[6].facts)

    # the new ticket: its id, subject and default priority are known, its status and
    # time are the server's (said so in the facts), and the list afterwards is exact
    ticket = parsed(real[9], "mcp")["content"][0]
    created = groundings[9]
    assert created.observation is None and ticket["id"] == "T-9009" and "T-9009" in created.expect
    assert any("priority takes the schema's default" in f for f in created.facts)
    assert any("fills in created, status" in f for f in created.facts)
    assert listed_ids(real[10]) == ["T-9007", "T-9009"]

    # the schema's refusals are the SDK's validation errors, to the character
    refusal = parsed(real[11], "mcp")
    assert refusal["isError"] is True and "String should match pattern" in refusal["content"][0]
    assert groundings[11].observation == real[11]
    assert any("input validation refuses" in f for f in groundings[11].facts)
    # an email the server's own code refuses (no schema says it, its description does:
    # "it must be valid"): the first time a refusal in simgym's wording, marked; once the
    # server worded such a refusal, the next is exact
    assert any("description says it refuses a malformed email" in f for f in groundings[12].facts)
    assert parsed(real[13], "mcp")["isError"] is True
    assert parsed(real[14], "mcp")["content"][0]["email"] == "chloe.rossi@mail.example.net"


async def test_a_call_that_breaks_the_schema_is_answered_like_the_server_in_an_episode(
    records_world,
) -> None:
    """End to end: a world model that writes nonsense, strict grounding, and the SDK's
    validation error served where the schema decides; without simulate_invalid_actions
    simgym itself rejects the call, as it does in front of the real server."""
    env = simgym.make(
        "mcp",
        world_model=FunctionWorldModel(lambda m: '{"content": [], "isError": false}'),
        scenario=records_world,
        grounding="strict",
        validation_retries=0,
    )
    await env.reset("x")
    bad = await env.step(call("list_tickets", customer_id="C-1001", status="archived"))
    await env.close()
    text = json.loads(bad.observation.text)["content"][0]["text"]
    assert text == (
        "Error executing tool list_tickets: 1 validation error for list_ticketsArguments\n"
        "status\n  Input should be 'open', 'pending' or 'closed' [type=literal_error, "
        "input_value='archived', input_type=str]\n    For further information visit "
        f"https://errors.pydantic.dev/{PYDANTIC}/v/literal_error"
    )
    strict = {**records_world, "simulate_invalid_actions": False}
    env = simgym.make("mcp", world_model=FunctionWorldModel(lambda m: "{}"), scenario=strict)
    await env.reset("x")
    rejected = await env.step(call("get_customer", customer_id="C-11"))
    await env.close()
    assert rejected.observation.kind == "error" and "invalid arguments" in rejected.observation.text


# -- an inventory, shaped otherwise: keyed by sku, orders by item, newest first --------------

SKU = {"type": "string", "pattern": "^SKU-\\d{4}$", "description": "An item's SKU."}
ORDER = {"type": "string", "pattern": "^ORD-\\d{3}$"}
INVENTORY_TOOLS = [
    {
        "name": "find_items",
        "description": "Find items whose name or description contains the text.",
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 1},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
            },
            "required": ["text"],
        },
    },
    {
        "name": "get_item",
        "description": "One item.",
        "parameters": {"type": "object", "properties": {"sku": SKU}, "required": ["sku"]},
    },
    {
        "name": "update_item",
        "description": "Change an item's price or supplier.",
        "parameters": {
            "type": "object",
            "properties": {
                "sku": SKU,
                "price": {"type": "number", "exclusiveMinimum": 0},
                "supplier_email": {"type": "string", "format": "email"},
            },
            "required": ["sku"],
        },
    },
    {
        "name": "add_item",
        "description": "Add an item to the catalogue.",
        "parameters": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 30},
                "price": {"type": "number", "exclusiveMinimum": 0},
                "category": {"type": "string", "enum": ["tools", "garden", "paint"]},
                "stock": {"type": "integer", "minimum": 0, "default": 0},
            },
            "required": ["name", "price", "category"],
        },
    },
    {
        "name": "delete_item",
        "description": "Remove an item for good.",
        "parameters": {"type": "object", "properties": {"sku": SKU}, "required": ["sku"]},
    },
    {
        "name": "list_orders",
        "description": "An item's orders, newest first.",
        "parameters": {
            "type": "object",
            "properties": {"item_sku": SKU},
            "required": ["item_sku"],
        },
    },
    {
        "name": "place_order",
        "description": "Order an item.",
        "parameters": {
            "type": "object",
            "properties": {
                "item_sku": SKU,
                "quantity": {"type": "integer", "minimum": 1, "maximum": 99},
            },
            "required": ["item_sku", "quantity"],
        },
    },
    {
        "name": "get_order",
        "description": "One order.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": ORDER},
            "required": ["order_id"],
        },
    },
]


def supplier(name: str) -> str:
    return f"orders@{name}.example"


ITEMS = [
    {"sku": "SKU-0001", "name": "Cordless Drill", "description": "18V, two batteries",
     "category": "tools", "price": 89.9, "stock": 4, "supplier_email": supplier("voltix")},
    {"sku": "SKU-0002", "name": "Drill Bit Set", "description": "Steel, 12 pieces",
     "category": "tools", "price": 14.5, "stock": 30, "supplier_email": supplier("voltix")},
    {"sku": "SKU-0003", "name": "Garden Hose", "description": "25 m, kink-free",
     "category": "garden", "price": 32.0, "stock": 11, "supplier_email": supplier("greenly")},
    {"sku": "SKU-0004", "name": "Wall Paint", "description": "White matte, 10 L, for drilled walls too",
     "category": "paint", "price": 41.0, "stock": 7, "supplier_email": supplier("colora")},
    {"sku": "SKU-0005", "name": "Paint Roller", "description": "Foam, 18 cm",
     "category": "paint", "price": 6.2, "stock": 0, "supplier_email": supplier("colora")},
]  # fmt: skip
ORDERS = [
    {"order_id": "ORD-101", "item_sku": "SKU-0001", "quantity": 1, "placed": "2025-02-01"},
    {"order_id": "ORD-102", "item_sku": "SKU-0003", "quantity": 2, "placed": "2025-02-03"},
    {"order_id": "ORD-103", "item_sku": "SKU-0001", "quantity": 3, "placed": "2025-03-09"},
    {"order_id": "ORD-104", "item_sku": "SKU-0001", "quantity": 1, "placed": "2025-01-15"},
]


def inventory(fmt: str = "json") -> Any:
    return MCP.scenario(
        {
            "server_name": "inventory",
            "tools": INVENTORY_TOOLS,
            "state": {"items": copy.deepcopy(ITEMS), "orders": copy.deepcopy(ORDERS)},
            "output_format": fmt,
            "simulate_invalid_actions": True,
        }
    )


class Desk:
    """One inventory episode's ledger: each call grounded, its effects applied, and
    what the server answered (where a test gives it) learned."""

    def __init__(self, fmt: str = "json") -> None:
        self.world = inventory(fmt)
        self.state = MCP.initial_state(self.world)

    def __call__(self, tool: str, answer: str | None = None, /, **arguments: Any) -> Any:
        action = MCP.validate_action(Action.tool_call(tool, arguments), self.world)
        grounding = ground_mcp(action, self.state, self.world)
        if grounding is not None and grounding.effects:
            self.state = apply_patch(self.state, grounding.effects)
        shown = answer if answer is not None else (grounding and grounding.observation)
        if shown is not None:
            self.state = apply_patch(self.state, MCP.observe(shown, action, self.state) or {})
        return grounding


def sdk_error(tool: str, field: str, message: str, kind: str, value: str, of: str = "str") -> str:
    """The Python SDK's text for one argument that breaks the schema."""
    return (
        f"Error executing tool {tool}: 1 validation error for {tool}Arguments\n{field}\n"
        f"  {message} [type={kind}, input_value={value}, input_type={of}]\n"
        f"    For further information visit https://errors.pydantic.dev/{PYDANTIC}/v/{kind}"
    )


def test_inventory_search_covers_the_fields_its_description_names() -> None:
    desk = Desk()
    # "name or description": the city-less, case-less substring search of both fields;
    # "drill" is in two names and in one description, never in a sku or an email
    found = desk("find_items", text="DRILL")
    assert found.expect == ["SKU-0001", "SKU-0002", "SKU-0004"]
    assert found.forbid == ["SKU-0003", "SKU-0005"]
    assert found.observation is None  # the answer's layout is the server's
    assert "(find_items searches name, description, as the tool's description says" in (
        " ".join(found.facts)
    )
    # a query with spaces around it: a server that does not strip it finds fewer
    padded = desk("find_items", text=" drill ")  # " drill " is in none of the three
    assert padded.observation is None and padded.expect == []
    assert padded.forbid == ["SKU-0003", "SKU-0005"]  # the three are only possible
    assert padded.facts[0].startswith("no items match") and "for certain" in padded.facts[0]
    assert any("depends on how the server compares the query" in f for f in padded.facts)
    # a sentence about what the tool returns names no searched field
    returns = desk.world.tool("find_items").model_copy(
        update={"description": "Find items by name. Returns each item's category and price."}
    )
    from simgym.domains.mcp_ground import resolve

    searched = resolve(returns, {"text": "x"}, desk.state)
    assert searched is not None and searched.search == {"name": "contains"}
    # a category is no searched field; an sku neither
    assert desk("find_items", text="garden").expect == ["SKU-0003"]  # "Garden Hose"
    assert desk("find_items", text="paint").expect == ["SKU-0004", "SKU-0005"]
    assert desk("find_items", text="SKU-0001").expect == []
    # once the server showed its layout (and listed what simgym found), the next is exact
    answer = {"items": [{"sku": "SKU-0003", "name": "Garden Hose", "price": 32.0}], "count": 1}
    desk("find_items", json.dumps(answer), text="hose")
    again = desk("find_items", text="ROLLER")
    assert json.loads(again.observation) == {
        "items": [{"sku": "SKU-0005", "name": "Paint Roller", "price": 6.2}],
        "count": 1,
    }
    # a limit cuts the matches in the records' order
    cut = desk("find_items", text="i", limit=2)
    assert json.loads(cut.observation) == {
        "items": [
            {"sku": "SKU-0001", "name": "Cordless Drill", "price": 89.9},
            {"sku": "SKU-0002", "name": "Drill Bit Set", "price": 14.5},
        ],
        "count": 5,
    }


def test_inventory_lists_orders_by_item_newest_first() -> None:
    desk = Desk()
    orders = desk("list_orders", item_sku="SKU-0001")
    assert orders.expect == ["ORD-103", "ORD-101", "ORD-104"]  # by placed, newest first
    assert orders.forbid == ["ORD-102"]
    assert any("by placed, newest first, as its description says" in f for f in orders.facts)
    shown = [
        {"order_id": i, "quantity": q} for i, q in [("ORD-103", 3), ("ORD-101", 1), ("ORD-104", 1)]
    ]
    desk("list_orders", json.dumps({"item_sku": "SKU-0001", "orders": shown}), item_sku="SKU-0001")
    garden = desk("list_orders", item_sku="SKU-0003")
    assert json.loads(garden.observation) == {
        "item_sku": "SKU-0003",
        "orders": [{"order_id": "ORD-102", "quantity": 2}],
    }
    assert desk("get_order", order_id="ORD-104").observation == json.dumps(ORDERS[3])


def test_inventory_crud_by_sku_in_the_records_field_order() -> None:
    desk = Desk()
    # the key is the records' one unique field: sku
    assert json.loads(desk("get_item", sku="SKU-0002").observation) == ITEMS[1]
    # an email the schema declares a format of: stored as its records are (lower case)
    changed = desk("update_item", sku="SKU-0002", supplier_email="Sales@Bitworks.Example")
    after = {**ITEMS[1], "supplier_email": "sales@bitworks.example"}
    assert changed.observation == json.dumps(after)  # the records' field order
    assert json.loads(desk("get_item", sku="SKU-0002").observation) == after
    # a new item: the next sku in the pattern, the schema's default stock, fields in the
    # records' order; what the server alone knows (description, supplier) marked as such
    made = desk("add_item", name="Angle Grinder", category="tools", price=59.0)
    record = {
        "sku": "SKU-0006",
        "name": "Angle Grinder",
        "category": "tools",
        "price": 59.0,
        "stock": 0,
    }
    assert made.effects["items"][-1] == record
    assert list(made.effects["items"][-1]) == list(record)
    assert made.observation is None
    assert any("fills in description, supplier_email" in f for f in made.facts)
    assert any("stock takes the schema's default 0" in f for f in made.facts)
    # a delete, then the read back: not found, and gone from searches
    gone = desk("delete_item", sku="SKU-0005")
    assert [i["sku"] for i in gone.effects["items"]] == [
        "SKU-0001",
        "SKU-0002",
        "SKU-0003",
        "SKU-0004",
        "SKU-0006",
    ]
    assert json.loads(desk("get_item", sku="SKU-0005").observation) == {
        "error": {"code": 404, "message": "item SKU-0005 not found"}
    }
    roller = desk("find_items", text="roller")
    assert roller.expect == [] and "SKU-0005" in roller.forbid


def test_inventory_schema_constraints_are_refused_like_the_sdk() -> None:
    desk = Desk()

    def refused(tool: str, /, **arguments: Any) -> str:
        grounding = desk(tool, **arguments)
        assert grounding.effects is None
        assert any("input validation refuses" in f for f in grounding.facts)
        return json.loads(grounding.observation)["error"]["message"]

    pattern = "String should match pattern '^SKU-\\d{4}$'"
    assert refused("get_item", sku="SKU-12") == sdk_error(
        "get_item", "sku", pattern, "string_pattern_mismatch", "'SKU-12'"
    )
    assert refused("get_item") == sdk_error(
        "get_item", "sku", "Field required", "missing", "{}", "dict"
    )
    assert refused("place_order", item_sku="SKU-0001", quantity=0) == sdk_error(
        "place_order", "quantity", "Input should be greater than or equal to 1",
        "greater_than_equal", "0", "int",
    )  # fmt: skip
    assert refused("place_order", item_sku="SKU-0001", quantity="three") == sdk_error(
        "place_order", "quantity",
        "Input should be a valid integer, unable to parse string as an integer",
        "int_parsing", "'three'",
    )  # fmt: skip
    assert refused("add_item", name="Rake", price=9.5, category="yard") == sdk_error(
        "add_item", "category", "Input should be 'tools', 'garden' or 'paint'",
        "literal_error", "'yard'",
    )  # fmt: skip
    assert refused("add_item", name="R" * 31, price=9.5, category="garden").startswith(
        "Error executing tool add_item: 1 validation error for add_itemArguments\nname\n"
        "  String should have at most 30 characters [type=string_too_long"
    )
    assert refused("update_item", sku="SKU-0001", price=0).startswith(
        "Error executing tool update_item: 1 validation error for update_itemArguments\n"
        "price\n  Input should be greater than 0 [type=greater_than"
    )
    email = refused("update_item", sku="SKU-0001", supplier_email="voltix.example")
    assert email.startswith(
        "Error executing tool update_item: 1 validation error for update_itemArguments\n"
        "supplier_email\n  value is not a valid email address: "
    )
    # nothing changed: the item reads as before
    assert json.loads(desk("get_item", sku="SKU-0001").observation) == ITEMS[0]
    # a number given as text is what pydantic makes of it, as the server receives it
    assert desk("place_order", item_sku="SKU-0001", quantity="2").effects["orders"][-1] == {
        "order_id": "ORD-105", "item_sku": "SKU-0001", "quantity": 2
    }  # fmt: skip
    # in the mcp format, the refusal is an error envelope with the same text
    envelope = Desk("mcp")("get_item", sku="SKU-12").observation
    assert json.loads(envelope) == {
        "content": [{"type": "text", "text": sdk_error(
            "get_item", "sku", pattern, "string_pattern_mismatch", "'SKU-12'"
        )}],
        "isError": True,
    }  # fmt: skip


def test_a_server_that_words_errors_otherwise_keeps_only_the_refusal() -> None:
    """Once the episode showed that this server's errors are not the SDK's, a call that
    breaks the schema is still refused for certain, but its wording is the model's."""
    desk = Desk("mcp")
    other = json.dumps(
        {
            "content": [{"type": "text", "text": "E_NOTFOUND: get_item: no SKU-0009"}],
            "isError": True,
        }
    )
    desk("get_item", other, sku="SKU-0009")
    refusal = desk("get_item", sku="SKU-9")
    assert refusal.observation is None and refusal.expect == ['"isError": true']
    assert any("input validation refuses" in f for f in refusal.facts)


def test_what_cannot_be_inferred_stays_the_models_and_is_marked() -> None:
    world = inventory()
    state = MCP.initial_state(world)
    tools = [
        *INVENTORY_TOOLS,
        {
            "name": "restock_or_discontinue",
            "description": "Decide an item's future.",
            "parameters": {"type": "object", "properties": {"sku": SKU}},
        },
        {
            "name": "search_items",
            "description": "Full-text search.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    ]
    world = world.model_copy(update={"tools": [simgym.ToolSpec.from_any(t) for t in tools]})
    odd = ground_mcp(Action.tool_call("restock_or_discontinue", {"sku": "SKU-0001"}), state, world)
    assert odd.effects is None and odd.observation is None
    assert odd.facts[0].startswith('item SKU-0001: {"sku": "SKU-0001"')
    assert "what restock_or_discontinue reads or changes is not known" in odd.facts[-1]
    # a search whose description names no field: which records it lists is the server's
    loose = ground_mcp(Action.tool_call("search_items", {"q": "drill"}), state, world)
    assert loose.observation is None and loose.forbid == []
    assert loose.expect == ["SKU-0001", "SKU-0002", "SKU-0004"]  # each holds "drill"
    assert any("which fields search_items searches is not known" in f for f in loose.facts)


def test_schema_checks_cover_the_sdk_subset_and_fall_back_to_jsonschema() -> None:
    tool = simgym.ToolSpec.from_any(
        {
            "name": "nested",
            "parameters": {
                "type": "object",
                "properties": {
                    "filter": {"type": "object", "properties": {"a": {"type": "string"}}}
                },
                "required": ["filter"],
            },
        }
    )
    verdict = mcp_schema.check(tool, {})
    assert verdict.refused and verdict.message is None  # refused, the wording unknown
    assert verdict.reasons == ["arguments: 'filter' is a required property"]
    assert not mcp_schema.check(tool, {"filter": {"a": "x"}}).refused
    assert not mcp_schema.sdk_built(tool)


@pytest.mark.parametrize("path", sorted(Path("devset/episodes/mcp").glob("*.yaml")))
def test_the_dev_set_scenarios_still_load(path: Path) -> None:
    import yaml

    episode = yaml.safe_load(path.read_text())
    MCP.scenario(episode["scenario"])


async def test_a_held_clock_stamps_the_real_ticket_and_the_twins_alike(records_world) -> None:
    """With the scenario's clock the real server runs held at it (libfaketime), so a new
    ticket's creation time is the clock, and the twin fills in the same moment."""
    scenario = {**records_world, "clock": "2026-03-02T10:15:00"}
    calls = [
        call("create_ticket", customer_id="C-1011", subject="Replace a worn card"),
        call("list_tickets", customer_id="C-1011"),
        call("search_customers", query="%"),  # "contains": a percent sign, no wildcard
        call("search_customers", query="_"),
    ]
    env = simgym.make("mcp", world_model=RealMCP(seed_from_scenario=True), scenario=scenario)
    await env.reset("a support shift")
    real = [(await env.step(action)).observation.text for action in calls]
    await env.close()
    ticket = parsed(real[0], "mcp")["content"][0]
    assert ticket["created"] == "2026-03-02T10:15:00Z"
    assert parsed(real[1], "mcp")["content"][0]["tickets"][-1]["created"] == ticket["created"]
    assert [parsed(r, "mcp")["content"][0]["total"] for r in real[2:]] == [0, 0]

    groundings = replay(scenario, calls, real)
    # the model's rendering of the new ticket, wrong in its time: the twin's reshape
    # writes the held clock's moment, as the server did
    rendered = real[0].replace("2026-03-02T10:15:00Z", "2024-01-01T00:00:00Z")
    assert groundings[0].reshape is not None
    assert parsed(groundings[0].reshape(rendered), "mcp") == parsed(real[0], "mcp")
    assert groundings[1].observation == real[1]
    # the server's search is "contains", yet another server could read % and _ as SQL
    # wildcards: the twin does not decide these, it names both readings
    for n in (2, 3):
        assert groundings[n].observation is None, n
