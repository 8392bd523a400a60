"""State grounding of the mcp domain: record tools read and change the hidden ledger."""

from __future__ import annotations

import copy
import json

import pytest

import simgym
from simgym import Action, FunctionWorldModel, ScenarioError
from simgym.domains.mcp_ground import (
    WORDING_GUESSED,
    ground_mcp,
    next_id,
    resolve,
    split_words,
)

MCP = simgym.get_domain("mcp")
NEW_EMAIL = "ana.new@example.com"
OLD_EMAIL = "ana.lima@example.com"


def scenario(**changes):
    return MCP.scenario({**MCP.default_scenario(), **changes})


def ground(sc, name, args=None, state=None):
    state = copy.deepcopy(sc.state) if state is None else state
    return ground_mcp(Action.tool_call(name, args or {}), state, sc)


def applied(state, grounding):
    from simgym.core.state import apply_patch

    return apply_patch(state, grounding.effects)


def tool(name, props, required=()):
    return {
        "name": name,
        "description": "",
        "parameters": {"type": "object", "properties": props, "required": list(required)},
    }


STR = {"type": "string"}
INT = {"type": "integer"}
OBJ = {"type": "object"}


# -- the default scenario -----------------------------------------------------------------


def test_a_read_returns_the_record_exactly():
    sc = scenario()
    g = ground(sc, "get_customer", {"customer_id": "C-1001"})
    record = sc.state["customers"][0]
    assert g.observation == json.dumps(record, ensure_ascii=False)
    assert g.effects is None
    assert any("C-1001" in f and OLD_EMAIL in f for f in g.facts)
    assert "C-1001" in g.expect and OLD_EMAIL in g.expect
    assert g.problems(g.observation) == []


def test_a_missing_id_is_a_not_found_error():
    g = ground(scenario(), "get_customer", {"customer_id": "C-9"})
    assert json.loads(g.observation) == {
        "error": {"code": 404, "message": "customer C-9 not found"}
    }
    # the message is simgym's default wording until the server has shown its own
    assert g.facts == ["no customer with id C-9 exists", WORDING_GUESSED]
    # no record changes; the mark lets the server's error teach its wording
    assert g.effects == {"_style": {"missing": ["get_customer", "customer", "C-9"]}}


def test_an_update_sets_the_field_the_tool_names():
    sc = scenario()
    g = ground(sc, "update_email", {"customer_id": "C-1001", "email": NEW_EMAIL})
    after = {**sc.state["customers"][0], "email": NEW_EMAIL}
    assert g.observation == json.dumps(after, ensure_ascii=False)
    # a merge patch replaces lists whole: the effect carries the whole new collection
    undo = ["update_email", "customers", "id", "C-1001", sc.state["customers"][0], 0]
    assert g.effects == {"customers": [after, sc.state["customers"][1]], "_style": {"undo": undo}}
    assert applied(copy.deepcopy(sc.state), g)["customers"][0]["email"] == NEW_EMAIL
    assert g.expect == ["C-1001", NEW_EMAIL]
    assert g.forbid == [OLD_EMAIL]
    stale = json.dumps(sc.state["customers"][0])
    assert any(OLD_EMAIL in p for p in g.problems(stale))


def test_an_update_of_a_missing_id_changes_nothing():
    g = ground(scenario(), "update_email", {"customer_id": "C-9", "email": NEW_EMAIL})
    assert set(g.effects) == {"_style"} and "404" in g.observation


def silent(sc, tool="search_customers"):
    """The scenario with one tool's descriptions (its own and its arguments') left out."""
    tools = []
    for spec in sc.tools:
        if spec.name == tool:
            props = {
                k: {n: v for n, v in p.items() if n != "description"}
                for k, p in spec.parameters["properties"].items()
            }
            spec = spec.model_copy(
                update={"description": "", "parameters": {**spec.parameters, "properties": props}}
            )
        tools.append(spec)
    return sc.model_copy(update={"tools": tools})


def test_a_search_covers_the_fields_its_description_names():
    # "Find customers by name or email.": the query is looked for in those two fields,
    # ignoring case, so the search is decided; the others cannot be listed
    g = ground(scenario(), "search_customers", {"query": "OKAFOR"})
    assert g.observation is None  # servers shape lists differently
    assert g.expect == ["C-1002"] and g.forbid == ["C-1001"]
    assert g.facts[0].startswith("1 customer matches")
    assert "(search_customers searches name, email, as the tool's description says" in (
        " ".join(g.facts)
    )
    # a description that names no field: a server matches free text its own way (the dev
    # set's finds "+351912077570" in "+351 912 077 570"), so the records without the text
    # are not forbidden, and the facts say which fields it searches is not known
    loose = silent(scenario())
    g = ground(loose, "search_customers", {"query": "OKAFOR"})
    assert g.expect == ["C-1002"] and g.forbid == []
    assert any("which fields search_customers searches is not known" in f for f in g.facts)
    none = ground(loose, "search_customers", {"query": "zzz"})
    assert none.expect == [] and none.forbid == []
    assert none.facts[0].startswith("no customers match")


def test_the_mcp_format_wraps_results_in_an_envelope():
    sc = scenario(output_format="mcp")
    g = ground(sc, "get_customer", {"customer_id": "C-1002"})
    envelope = json.loads(g.observation)
    assert envelope["isError"] is False
    assert json.loads(envelope["content"][0]["text"]) == sc.state["customers"][1]
    err = json.loads(ground(sc, "get_customer", {"customer_id": "C-9"}).observation)
    assert err == {"content": [{"type": "text", "text": "customer C-9 not found"}], "isError": True}
    up = ground(sc, "update_email", {"customer_id": "C-1001", "email": 'a"b@example.com'})
    assert all(text in up.observation for text in up.expect)  # escaped twice, as shown
    assert 'a\\\\\\"b@example.com' in up.expect


def test_the_text_format_has_no_exact_observation_only_checks():
    sc = scenario(output_format="text")
    g = ground(sc, "update_email", {"customer_id": "C-1001", "email": NEW_EMAIL})
    assert g.observation is None and g.effects is not None
    assert g.expect == ["C-1001", NEW_EMAIL] and g.forbid == [OLD_EMAIL]
    missing = ground(sc, "get_customer", {"customer_id": "C-9"})
    assert missing.observation is None and missing.expect == ["C-9"]


def test_the_final_answer_and_unknown_tools_are_not_grounded():
    sc = scenario()
    assert ground_mcp(Action.say("done"), copy.deepcopy(sc.state), sc) is None
    assert ground(sc, "nuke", {}) is None


# -- an imported server: the real records server's tools ----------------------------------

CUSTOMER_ID = {
    "description": "Customer id, e.g. C-1001.",
    "pattern": "^C-\\d{4}$",
    "title": "Customer Id",
    "type": "string",
}
RECORDS_TOOLS = [
    tool(
        "search_customers",
        {
            "query": {"description": "Part of a name, email or phone.", "type": "string"},
            "limit": {"default": 10, "maximum": 50, "minimum": 1, "type": "integer"},
        },
        ["query"],
    ),
    tool("get_customer", {"customer_id": CUSTOMER_ID}, ["customer_id"]),
    tool(
        "update_email",
        {"customer_id": CUSTOMER_ID, "email": {"maxLength": 254, "type": "string"}},
        ["customer_id", "email"],
    ),
    tool("list_accounts", {"customer_id": CUSTOMER_ID}, ["customer_id"]),
    tool(
        "list_tickets",
        {
            "customer_id": CUSTOMER_ID,
            "status": {
                "anyOf": [
                    {"enum": ["open", "pending", "closed"], "type": "string"},
                    {"type": "null"},
                ],
                "default": None,
            },
        },
        ["customer_id"],
    ),
    tool(
        "create_ticket",
        {
            "customer_id": CUSTOMER_ID,
            "subject": {"maxLength": 120, "type": "string"},
            "priority": {"default": "normal", "enum": ["low", "normal", "high"], "type": "string"},
        },
        ["customer_id", "subject"],
    ),
]
RECORDS_STATE = {
    "customers": [
        {"id": "C-1001", "name": "Ana Lima", "email": OLD_EMAIL, "city": "Porto", "tier": "gold"},
        {"id": "C-1002", "name": "Ben Okafor", "email": "ben@example.org", "city": "Porto"},
        {"id": "C-1003", "name": "Jonas Tanaka", "email": "jonas@example.com", "city": "Faro"},
    ],
    "accounts": [
        {"id": "A-50001", "customer_id": "C-1001", "kind": "checking", "balance_cents": 1974417},
        {"id": "A-50002", "customer_id": "C-1001", "kind": "savings", "balance_cents": 699421},
        {"id": "A-50003", "customer_id": "C-1002", "kind": "checking", "balance_cents": 56892},
    ],
    "tickets": [
        {"id": "T-9001", "customer_id": "C-1001", "subject": "Card declined", "status": "open"},
        {"id": "T-9002", "customer_id": "C-1003", "subject": "Locked out", "status": "closed"},
        {"id": "T-9003", "customer_id": "C-1001", "subject": "New card", "status": "closed"},
    ],
}


def records_scenario(fmt="mcp", **changes):
    return MCP.scenario(
        {
            "server_name": "customer-records",
            "tools": RECORDS_TOOLS,
            "state": copy.deepcopy(RECORDS_STATE),
            "output_format": fmt,
            **changes,
        }
    )


def test_imported_tools_find_their_collections_among_several():
    sc = records_scenario()
    seen = {}
    for name, args in [
        ("get_customer", {"customer_id": "C-1001"}),
        ("update_email", {"customer_id": "C-1001", "email": "x@example.com"}),
        ("list_accounts", {"customer_id": "C-1001"}),
        ("list_tickets", {"customer_id": "C-1001", "status": "open"}),
        ("create_ticket", {"customer_id": "C-1002", "subject": "Lost card"}),
        ("search_customers", {"query": "porto"}),
    ]:
        call = resolve(sc.tool(name), args, sc.state)
        seen[name] = (call.op, call.collection, call.sure)
    assert seen == {
        "get_customer": ("get", "customers", True),
        "update_email": ("update", "customers", True),
        "list_accounts": ("list", "accounts", True),
        "list_tickets": ("list", "tickets", True),
        "create_ticket": ("create", "tickets", True),
        "search_customers": ("list", "customers", True),
    }


def test_a_list_filters_on_foreign_keys_and_fields():
    sc = records_scenario()
    accounts = ground(sc, "list_accounts", {"customer_id": "C-1001"})
    assert accounts.expect == ["A-50001", "A-50002"] and accounts.forbid == ["A-50003"]
    tickets = ground(sc, "list_tickets", {"customer_id": "C-1001", "status": "closed"})
    assert tickets.expect == ["T-9003"] and set(tickets.forbid) == {"T-9001", "T-9002"}
    nobody = ground(sc, "list_accounts", {"customer_id": "C-1999"})
    assert "no customer with id C-1999 exists" in nobody.facts


def test_a_search_keeps_to_the_schema_default_limit():
    sc = records_scenario()
    many = ground(sc, "search_customers", {"query": "o"})  # all three match
    assert many.expect == ["C-1001", "C-1002", "C-1003"]
    capped = ground(sc, "search_customers", {"query": "o", "limit": 2})
    # the description names the fields it searches: the first two in the records' order
    assert capped.expect == ["C-1001", "C-1002"] and capped.forbid == []
    loose = ground(silent(sc), "search_customers", {"query": "o", "limit": 2})
    assert loose.expect == []  # else which two a server shows is its own business
    assert loose.forbid == []


def test_a_create_follows_the_id_pattern_and_appends_the_record():
    sc = records_scenario()
    g = ground(sc, "create_ticket", {"customer_id": "C-1002", "subject": "Lost card"})
    new = {"id": "T-9004", "customer_id": "C-1002", "subject": "Lost card"}
    assert g.effects["tickets"] == [*RECORDS_STATE["tickets"], new]
    assert g.observation is None  # the server fills in status and more
    # ... so the ledger notes which of its fields only the server knows yet
    filled = sorted(set(RECORDS_STATE["tickets"][0]) - set(new))
    assert g.effects["_partial"] == {"tickets": {"T-9004": filled}}
    assert "T-9004" in g.expect and "Lost card" in g.expect
    assert any("status" in f and "itself" in f for f in g.facts)


def test_a_create_for_a_missing_parent_changes_nothing():
    """The customer a create requires does not exist: refused the way the server refuses
    an unknown customer (inferred from the required argument), and nothing is created."""
    g = ground(records_scenario(), "create_ticket", {"customer_id": "C-1999", "subject": "Hi"})
    assert g.effects == {"_style": {"missing": ["create_ticket", "customer", "C-1999"]}}
    assert json.loads(g.observation) == {
        "content": [{"type": "text", "text": "customer C-1999 not found"}],
        "isError": True,
    }
    assert g.facts[0] == "no customer with id C-1999 exists"
    assert "inferred from its input schema" in g.facts[1] and g.facts[2] == WORDING_GUESSED


def test_next_id_follows_the_collection_pattern():
    assert next_id(["C-1001", "C-1002"]) == "C-1003"
    assert next_id(["INV-0009", "INV-0010"]) == "INV-0011"
    assert next_id([3, 7]) == 8
    assert next_id(["C-1", "T-2"]) is None  # two patterns: do not guess
    assert next_id(["a1b2-c3", "zz"]) is None
    assert next_id([]) is None


# -- other naming styles and operations -----------------------------------------------------


def shop(fmt="json", **changes):
    tools = [
        tool("getCategory", {"categoryId": INT}, ["categoryId"]),
        tool("listCategories", {}),
        tool("addCategory", {"name": STR}, ["name"]),
        tool("renameCategory", {"categoryId": INT, "to": STR}, ["categoryId", "to"]),
        tool("update_category", {"id": INT, "fields": OBJ}, ["id", "fields"]),
        tool("delete_category", {"id": INT}, ["id"]),
        tool("get_category_stats", {"id": INT}, ["id"]),
        tool("remove_label", {"id": INT}, ["id"]),
        tool("get_or_create_category", {"name": STR}, ["name"]),
        tool("archive_everything", {"id": INT}),
    ]
    state = {
        "categories": [
            {"id": 1, "name": "Garden", "label": "outdoor"},
            {"id": 2, "name": "Kitchen", "label": "indoor"},
        ]
    }
    return MCP.scenario({"tools": tools, "state": state, "output_format": fmt, **changes})


def test_camel_case_plural_and_integer_ids():
    sc = shop()
    assert split_words("getCategoryByID") == ["get", "category", "by", "id"]
    g = ground(sc, "getCategory", {"categoryId": 2})
    assert json.loads(g.observation) == {"id": 2, "name": "Kitchen", "label": "indoor"}
    listed = ground(sc, "listCategories")
    assert listed.facts[0].startswith("2 categories match")
    created = ground(sc, "addCategory", {"name": "Toys"})
    assert created.effects["categories"][-1] == {"id": 3, "name": "Toys"}


def test_rename_and_an_object_of_changes():
    sc = shop()
    renamed = ground(sc, "renameCategory", {"categoryId": 1, "to": "Yard"})
    assert json.loads(renamed.observation)["name"] == "Yard"
    assert renamed.forbid == ["Garden"]
    changed = ground(sc, "update_category", {"id": 2, "fields": {"label": "home"}})
    assert changed.effects["categories"][1] == {"id": 2, "name": "Kitchen", "label": "home"}
    unknown = ground(sc, "update_category", {"id": 2, "fields": {"colour": "red"}})
    assert unknown.effects is None and unknown.observation is None  # not a field: unsure


def test_a_delete_is_remembered_so_the_record_cannot_come_back():
    sc = shop(output_format="text")
    state = copy.deepcopy(sc.state)
    deleted = ground(sc, "delete_category", {"id": 1}, state)
    assert deleted.observation is None and deleted.expect == ["1"]
    state = applied(state, deleted)
    assert [c["id"] for c in state["categories"]] == [2]
    assert state["_deleted"]["categories"]["1"]["name"] == "Garden"
    again = ground(sc, "getCategory", {"categoryId": 1}, state)
    assert "Garden" in again.forbid and "outdoor" in again.forbid
    assert any("deleted earlier" in f for f in again.facts)
    listed = ground(sc, "listCategories", {}, state)
    assert listed.expect == ["2"] and listed.forbid == []  # "1" is too short to check
    created = ground(sc, "addCategory", {"name": "Toys"}, state)
    assert created.effects["categories"][-1]["id"] == 3  # ids are never reused


def test_a_deleted_string_id_is_forbidden_in_later_lists():
    sc = scenario()
    state = applied(copy.deepcopy(sc.state), _delete_ana(sc))
    listed = ground(sc, "search_customers", {"query": "e"}, state)
    assert "C-1001" in listed.forbid and listed.expect == ["C-1002"]


def _delete_ana(sc):
    binding = {"delete_customer": {"op": "delete"}}
    tools = [*sc.tools, tool("delete_customer", {"id": STR}, ["id"])]
    bound = MCP.scenario({**sc.model_dump(), "tools": tools, "tool_map": binding})
    return ground(bound, "delete_customer", {"id": "C-1001"})


def test_unsure_calls_get_facts_but_no_effects_or_exact_answer():
    sc = shop()
    stats = ground(sc, "get_category_stats", {"id": 1})  # returns stats, not the record
    assert stats.observation is None and stats.effects is None and not stats.expect
    assert "Garden" in stats.facts[0]
    label = ground(sc, "remove_label", {"id": 1})  # clears a field, deletes no record
    assert label.effects is None and label.observation is None
    both = ground(sc, "get_or_create_category", {"name": "Toys"})  # two verbs: not guessed
    assert both.effects is None and both.observation is None and not both.expect
    assert both.facts == [
        "what get_or_create_category reads or changes is not known from the records (simgym "
        "could not read it as a lookup, list, create, update or delete): the server decides"
    ]
    odd = ground(sc, "archive_everything", {"id": 2})  # no verb: the record it names
    assert odd.effects is None and odd.facts[0] == (
        'category 2: {"id": 2, "name": "Kitchen", "label": "indoor"}'
    )
    assert odd.facts[1].startswith("what archive_everything reads or changes is not known")


def test_cancel_on_records_with_a_status_is_not_taken_for_a_delete():
    tools = [tool("cancel_order", {"order_id": STR}, ["order_id"])]
    state = {"orders": [{"id": "O-1", "status": "placed"}]}
    sc = MCP.scenario({"tools": tools, "state": state})
    g = ground(sc, "cancel_order", {"order_id": "O-1"})
    assert g.effects is None and g.observation is None
    plain = MCP.scenario({"tools": tools, "state": {"orders": [{"id": "O-1"}]}})
    assert ground(plain, "cancel_order", {"order_id": "O-1"}).effects == {
        "orders": [],
        "_deleted": {"orders": {"O-1": {"id": "O-1"}}},
        "_style": {"undo": ["cancel_order", "orders", "id", "O-1", {"id": "O-1"}, 0]},
    }


# -- a declared search and answer layout ---------------------------------------------------

# the records server's own search: name and email contain the query, the phone too with
# every space left out (it finds "+351912077570" in "+351 912 077 570")
SEARCH = {"name": "contains", "email": "contains", "phone": "contains_ignoring_spaces"}
LAYOUT = {"shape": {"customers": "{items}", "total": "{count}"}, "fields": ["id", "name", "email"]}
PHONES = ("+351 912 077 570", "+351 913 100 200", "+351 912 555 000")


def searching(fmt="json", **binding):
    """The records scenario with phones, its search_customers bound as ``binding`` says
    (by default: the declared search and layout)."""
    state = copy.deepcopy(RECORDS_STATE)
    for customer, phone in zip(state["customers"], PHONES, strict=True):
        customer["phone"] = phone
    entry = {"op": "list", "collection": "customers", "search": SEARCH, "answer": LAYOUT}
    entry = {k: v for k, v in {**entry, **binding}.items() if v is not None}
    return records_scenario(fmt, state=state, tool_map={"search_customers": entry})


def found(sc, query, **args):
    """The ids and the total of a declared search's exact answer."""
    g = ground(sc, "search_customers", {"query": query, **args})
    assert g.observation is not None, g.facts
    value = json.loads(g.observation)
    return [c["id"] for c in value["customers"]], value["total"]


def test_a_declared_search_is_answered_exactly():
    sc = searching()
    g = ground(sc, "search_customers", {"query": "LIMA"})
    ana = {"id": "C-1001", "name": "Ana Lima", "email": OLD_EMAIL}
    assert g.observation == json.dumps({"customers": [ana], "total": 1})
    # decided whole, like a plain filter: the other customers cannot be listed
    assert g.expect == [] and g.forbid == ["C-1002", "C-1003"]
    assert g.facts[0] == (
        '1 customer matches (name contains "LIMA" (ignoring case) or email contains "LIMA" '
        '(ignoring case) or phone contains "LIMA" (ignoring case and spaces)):'
    )
    assert found(sc, "  lIm") == (["C-1001"], 1)  # a part of a name, stripped
    assert found(sc, "example.com") == (["C-1001", "C-1003"], 2)  # a part of an email
    assert found(sc, "porto") == ([], 0)  # the city is no field of the search
    # a phone number written without its spaces, or with other spaces than the record's
    assert found(sc, "+351912077570") == (["C-1001"], 1)
    assert found(sc, "912 5550 00") == (["C-1003"], 1)
    assert found(sc, "+351 91") == (["C-1001", "C-1002", "C-1003"], 3)
    nothing = ground(sc, "search_customers", {"query": "zzz"})
    assert json.loads(nothing.observation) == {"customers": [], "total": 0}
    assert nothing.forbid == ["C-1001", "C-1002", "C-1003"]


def test_a_limit_cuts_a_declared_search_in_the_collection_order():
    sc = searching()
    # every email has an "o" (.com, .org): three match, the first two are shown
    g = ground(sc, "search_customers", {"query": "o", "limit": 2})
    assert [c["id"] for c in json.loads(g.observation)["customers"]] == ["C-1001", "C-1002"]
    assert json.loads(g.observation)["total"] == 3
    assert "the answer lists the first 2 of them, in this order" in g.facts
    assert found(sc, "o", limit=3) == (["C-1001", "C-1002", "C-1003"], 3)
    # the schema's default limit (10) cuts nothing here
    assert found(sc, "o") == (["C-1001", "C-1002", "C-1003"], 3)
    # the mcp format wraps the same answer in its envelope
    envelope = json.loads(ground(searching("mcp"), "search_customers", {"query": "o"}).observation)
    assert envelope["isError"] is False
    assert json.loads(envelope["content"][0]["text"])["total"] == 3


def test_without_a_declared_search_the_state_does_not_decide_it():
    # the same call matched the server's own way: facts and expectations, no answer
    sc = silent(searching(search=None, answer=None))  # nor does its description say
    g = ground(sc, "search_customers", {"query": "porto"})  # any field, the city too
    assert g.observation is None and g.expect == ["C-1001", "C-1002"] and g.forbid == []
    assert g.reshape is None  # nor is the layout known before the server showed one
    # with only the layout declared, the model's list is put into it from the first answer
    shaped = silent(searching(search=None))
    g = ground(shaped, "search_customers", {"query": "okafor"})
    assert g.observation is None
    guess = {"results": [{"id": "C-1002", "email": "b@x"}, {"id": "C-77"}], "count": 5}
    ben = {"id": "C-1002", "name": "Ben Okafor", "email": "ben@example.org"}
    assert json.loads(g.reshape(json.dumps(guess))) == {"customers": [ben], "total": 1}


def test_the_declared_layout_answers_first_and_a_learned_one_wins_later():
    from simgym.domains.mcp_style import observe_mcp

    sc = searching()
    state = copy.deepcopy(sc.state)
    first = ground(sc, "search_customers", {"query": "okafor"}, state)
    ben = {"id": "C-1002", "name": "Ben Okafor", "email": "ben@example.org"}
    assert json.loads(first.observation) == {"customers": [ben], "total": 1}
    # the server answers in a layout of its own: it echoes the query and counts as "n"
    state = applied(state, first)
    action = Action.tool_call("search_customers", {"query": "okafor"})
    server = {"matches": [{"id": "C-1002", "name": "Ben Okafor"}], "query": "okafor", "n": 1}
    state = applied(state, type(first)(effects=observe_mcp(json.dumps(server), action, state)))
    later = ground(sc, "search_customers", {"query": "lima"}, state)
    shown = {"matches": [{"id": "C-1001", "name": "Ana Lima"}], "query": "lima", "n": 1}
    assert json.loads(later.observation) == shown
    # an empty answer teaches no fields: the declared ones fill in
    empty = copy.deepcopy(sc.state)
    g = ground(sc, "search_customers", {"query": "zzz"}, empty)
    empty = applied(empty, g)
    action = Action.tool_call("search_customers", {"query": "zzz"})
    nothing = json.dumps({"hits": [], "of": 0})
    empty = applied(empty, type(g)(effects=observe_mcp(nothing, action, empty)))
    again = ground(sc, "search_customers", {"query": "okafor"}, empty)
    assert json.loads(again.observation) == {"hits": [ben], "of": 1}


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        ({"answer": {"shape": {"customers": "{count}"}, "fields": ["id"]}}, "exactly one"),
        ({"answer": {"shape": ["{items}"], "fields": ["id"]}}, "must be '{items}' or an"),
        ({"answer": {"shape": {"c": "{items}", "t": "{total}"}, "fields": ["id"]}}, "{count}"),
        ({"answer": {"shape": {"c": "{items}", "q": {"x": 1}}, "fields": ["id"]}}, "constant"),
        ({"answer": {"shape": "{items}", "fields": []}}, "non-empty list"),
        ({"answer": {"shape": "{items}", "fields": ["id", "id"]}}, "distinct"),
        ({"answer": {"shape": "{items}", "fields": ["id", 7]}}, "valid string"),
        ({"answer": {"shape": "{items}", "fields": "id"}}, "valid list"),
        ({"answer": {"shape": "{items}", "fields": ["id", "nmae"]}}, r"\['nmae'\]"),
        ({"answer": {"shape": {"c": "{items}", "q": "{arg:qq}"}, "fields": ["id"]}}, "'qq'"),
        ({"search": {"name": "fuzzy"}}, "contains_ignoring_spaces"),
        ({"search": {"phon": "contains"}}, r"\['phon'\]"),
        ({"search": {}}, "at least one field"),
        ({"op": "get"}, "not op 'get'"),
    ],
)
def test_bad_search_and_answer_declarations_are_refused(binding, message):
    with pytest.raises(ScenarioError, match=message):
        searching(**binding)


def test_a_search_needs_a_query_argument():
    tools = [tool("list_customers", {"city": STR})]
    state = copy.deepcopy(RECORDS_STATE)
    binding = {"op": "list", "collection": "customers", "search": {"name": "contains"}}
    with pytest.raises(ScenarioError, match="takes no query argument"):
        MCP.scenario({"tools": tools, "state": state, "tool_map": {"list_customers": binding}})


# -- explicit bindings ---------------------------------------------------------------------


def crm(tool_map=None):
    tools = [
        tool("crm_pull", {"cust": STR}, ["cust"]),
        tool("crm_push", {"cust": STR, "mail": STR}, ["cust", "mail"]),
    ]
    data = {"tools": tools, "state": copy.deepcopy(MCP.default_scenario()["state"])}
    return MCP.scenario({**data, "tool_map": tool_map or {}})


def test_a_tool_map_binds_tools_whose_names_say_nothing():
    plain = crm()
    pulled = ground(plain, "crm_pull", {"cust": "C-1002"})
    assert pulled.observation is None and "C-1002" in pulled.facts[0]  # facts only
    assert ground(plain, "crm_push", {"cust": "C-1001", "mail": NEW_EMAIL}).effects is None

    bound = crm(
        {
            "crm_pull": {"op": "get", "collection": "customers", "id_arg": "cust"},
            "crm_push": {"op": "update", "id_arg": "cust", "fields": {"mail": "email"}},
        }
    )
    pulled = ground(bound, "crm_pull", {"cust": "C-1002"})
    assert json.loads(pulled.observation)["name"] == "Ben Okafor"
    pushed = ground(bound, "crm_push", {"cust": "C-1001", "mail": NEW_EMAIL})
    assert pushed.effects["customers"][0]["email"] == NEW_EMAIL


def test_a_tool_map_can_turn_grounding_off_for_one_tool():
    sc = scenario(tool_map={"get_customer": {"op": "none"}})
    assert ground(sc, "get_customer", {"customer_id": "C-1001"}) is None


def test_a_tool_map_is_checked_against_tools_and_state():
    with pytest.raises(ScenarioError, match="not a declared tool"):
        scenario(tool_map={"nope": {"op": "get"}})
    with pytest.raises(ScenarioError, match="not a list of records"):
        scenario(tool_map={"get_customer": {"op": "get", "collection": "people"}})
    with pytest.raises(ScenarioError):
        scenario(tool_map={"get_customer": {"op": "fetch"}})


# -- a real records server agrees ------------------------------------------------------------


def test_grounded_results_agree_with_the_real_records_server(tmp_path):
    pytest.importorskip("mcp.server.mcpserver", reason="needs the mcp SDK 2.x (simgym[mcp])")
    from simgym.real.mcp_servers.records import RecordsStore

    store = RecordsStore(tmp_path / "records.db")
    sc = records_scenario("json", state=store.snapshot())
    state = copy.deepcopy(sc.state)
    got = ground(sc, "get_customer", {"customer_id": "C-1003"}, state)
    assert json.loads(got.observation) == store.get_customer("C-1003").model_dump()
    args = {"customer_id": "C-1003", "email": "new.one@example.com"}
    updated = ground(sc, "update_email", args, state)
    assert json.loads(updated.observation) == store.update_email(**args).model_dump()
    state = applied(state, updated)
    created = ground(sc, "create_ticket", {"customer_id": "C-1003", "subject": "Hi there"}, state)
    ticket = store.create_ticket("C-1003", "Hi there")
    assert created.effects["tickets"][-1]["id"] == ticket.id
    listed = ground(sc, "list_accounts", {"customer_id": "C-1002"}, state)
    assert listed.expect == [a.id for a in store.list_accounts("C-1002").accounts]
    found = ground(sc, "search_customers", {"query": "okafor"}, state)
    assert found.expect == [c.id for c in store.search_customers("okafor").customers]


# -- in an environment ---------------------------------------------------------------------

SESSION = [
    {"name": "get_customer", "arguments": {"customer_id": "C-1001"}},
    {"name": "update_email", "arguments": {"customer_id": "C-1001", "email": NEW_EMAIL}},
    {"name": "get_customer", "arguments": {"customer_id": "C-1001"}},
]
STALE = {"id": "C-1001", "name": "Ana Lima", "email": OLD_EMAIL, "tier": "gold"}


class WrongWorld:
    """A world model that always answers with made-up, stale data, and keeps what it saw."""

    def __init__(self):
        self.seen = []

    def __call__(self, messages):
        self.seen.append(messages[-1]["content"])
        last = messages[-1]["content"]
        if "update_email" in last.split("**Action:**")[-1]:
            answer = {"ok": True}
        else:
            answer = {**STALE, "phone": "+1 555 0100", "secret_note": "vip"}
        return f"<predicted_observation>{json.dumps(answer)}</predicted_observation>"


async def run_session(grounding, fmt="json"):
    world = WrongWorld()
    env = simgym.make(
        "mcp",
        world_model=FunctionWorldModel(world),
        scenario=scenario(output_format=fmt),
        grounding=grounding,
    )
    await env.reset("change Ana's email")
    results = [await env.step(action) for action in SESSION]
    return env, world, results


async def test_strict_grounding_corrects_a_wrong_world_model():
    env, world, results = await run_session("strict")
    last = json.loads(results[-1].observation.text)
    assert last == {**STALE, "email": NEW_EMAIL}
    assert env.state["customers"][0]["email"] == NEW_EMAIL
    turns = env.trajectory.turns
    assert [t.grounding["strict"]["action"] for t in turns] == ["corrected"] * 3
    assert turns[1].grounding["effects"]["customers"][0]["email"] == NEW_EMAIL
    assert any(NEW_EMAIL in p for p in turns[2].grounding["strict"]["problems"])
    assert turns[2].grounding["strict"]["first"] != results[-1].observation.text
    # the world model was told the facts before each action; an exact answer needs no re-ask
    assert len(world.seen) == 3 and all("**Facts:**" in text for text in world.seen)
    assert NEW_EMAIL in world.seen[-1]


async def test_strict_text_grounding_asks_again_and_keeps_the_ledger_right():
    env, world, results = await run_session("strict", fmt="text")
    turns = env.trajectory.turns
    # the first read shows every true value (and more: a text check cannot tell)
    assert [t.grounding["strict"]["action"] for t in turns] == ["accepted"] + ["unresolved"] * 2
    assert any(NEW_EMAIL in p for p in turns[2].grounding["strict"]["left"])
    assert len(world.seen) == 5 and "Your last answer disagreed" in world.seen[-1]
    assert env.state["customers"][0]["email"] == NEW_EMAIL  # effects do not need the model


async def test_strict_grounding_accepts_a_right_answer():
    def right(messages):
        return f"<predicted_observation>{json.dumps(STALE)}</predicted_observation>"

    env = simgym.make("mcp", world_model=FunctionWorldModel(right), grounding="strict")
    await env.reset()
    await env.step(SESSION[0])
    assert env.trajectory.turns[0].grounding["strict"] == {"problems": [], "action": "accepted"}


async def test_with_grounding_off_nothing_changes():
    env, world, results = await run_session("off")
    assert json.loads(results[-1].observation.text)["email"] == OLD_EMAIL  # the model's word
    assert json.loads(results[1].observation.text) == {"ok": True}
    assert env.state == MCP.default_scenario()["state"]
    assert all(t.grounding is None for t in env.trajectory.turns)
    assert not any("**Facts:**" in text for text in world.seen)


async def test_the_agent_sees_only_what_the_server_would_return():
    env, world, results = await run_session("strict", fmt="mcp")
    other = MCP.default_scenario()["state"]["customers"][1]
    for result, action in zip(results, SESSION, strict=True):
        text = result.observation.text
        envelope = json.loads(text)
        record = json.loads(envelope["content"][0]["text"])
        assert set(record) == {"id", "name", "email", "tier"}  # that one record, nothing else
        assert record["id"] == action["arguments"]["customer_id"]
        for hidden in ("**Facts:**", "Facts", other["id"], other["name"], "secret_note", "phone"):
            assert hidden not in text
        assert set(result.info) <= {"episode_id", "turn", "latency_s", "attempts"}
        assert not result.observation.metadata
    assert OLD_EMAIL not in results[-1].observation.text
    missing = await env.step({"name": "get_customer", "arguments": {"customer_id": "C-1002x"}})
    assert "Ben" not in missing.observation.text and "C-1001" not in missing.observation.text
    tools = [t.name for t in MCP.agent_tools(env.scenario)]
    assert tools == ["search_customers", "get_customer", "update_email"]


async def test_the_embedded_model_reads_back_the_new_email():
    env = simgym.make("mcp", world_model="local", max_tokens=160, seed=7)
    assert env.grounding == "strict"
    await env.reset("Change Ana Lima's email address, then check it")
    first = await env.step(SESSION[0])
    assert OLD_EMAIL in first.observation.text
    await env.step(SESSION[1])
    last = await env.step(SESSION[2])
    assert NEW_EMAIL in last.observation.text and OLD_EMAIL not in last.observation.text
    assert env.state["customers"][0]["email"] == NEW_EMAIL
    assert all(t.grounding["strict"]["action"] != "unresolved" for t in env.trajectory.turns)


# -- broken JSON: a real tool server never sends it ----------------------------------------

BROKEN_ENVELOPE = '{"content": [{"type": "text", "text": "no match for {\\"q\\": 1}"}}'
BROKEN_RECORDS = '{"customers": [{"id": "C-1009", "name": "Zed",'


def broken(text):
    return lambda messages: f"<predicted_observation>{text}</predicted_observation>"


@pytest.mark.parametrize(("fmt", "text"), [("mcp", BROKEN_ENVELOPE), ("json", BROKEN_RECORDS)])
async def test_strict_mends_broken_json_and_records_what_the_model_wrote(fmt, text):
    call = {"name": "search_customers", "arguments": {"query": "Zed"}}
    env = simgym.make(
        "mcp",
        world_model=FunctionWorldModel(broken(text)),
        scenario=scenario(output_format=fmt),
        grounding="strict",
        validation_retries=0,
    )
    await env.reset()
    result = await env.step(call)
    value = json.loads(result.observation.text)  # valid now
    turn = env.trajectory.turns[0]
    assert turn.grounding["strict"]["repaired"] == text
    assert turn.format_problems == []
    if fmt == "mcp":
        assert value["isError"] is False
        assert value["content"][0]["text"] == 'no match for {"q": 1}'
    else:
        assert value == {"customers": [{"id": "C-1009", "name": "Zed"}]}


async def test_strict_gives_an_envelope_its_missing_is_error_flag():
    """An envelope the model left without ``isError`` gets the flag the MCP spec gives
    an absent one (false); the content is kept as the model wrote it."""
    unflagged = '{"content": [{"type": "text", "text": "no customer named Zed"}]}'
    env = simgym.make(
        "mcp",
        world_model=FunctionWorldModel(broken(unflagged)),
        scenario=scenario(output_format="mcp"),
        grounding="strict",
        validation_retries=0,
    )
    await env.reset()
    result = await env.step({"name": "search_customers", "arguments": {"query": "Zed"}})
    assert json.loads(result.observation.text) == {**json.loads(unflagged), "isError": False}
    turn = env.trajectory.turns[0]
    assert turn.grounding["strict"]["repaired"] == unflagged and turn.format_problems == []


@pytest.mark.parametrize("grounding", ["facts", "strict"])
async def test_strict_puts_a_search_answer_in_the_shape_the_server_showed(grounding):
    """Once the server showed how a search answers (a wrapper, a count, the fields of an
    item), strict mode rewrites a later answer the state does not decide (a free-text
    search) into that shape; the records it lists stay the model's choice."""
    answers = [
        {"customers": [{"id": "C-1001", "name": "Ana Lima"}], "total": 1},  # as a server would
        {"results": [{"id": "C-1002", "email": "ben@x"}, {"id": "C-77"}], "count": 7},  # a guess
    ]

    def world(messages):
        return f"<predicted_observation>{json.dumps(answers.pop(0))}</predicted_observation>"

    env = simgym.make(
        "mcp",
        world_model=FunctionWorldModel(world),
        grounding=grounding,
        validation_retries=0,
        scenario=silent(scenario()),  # a search whose description names no field
    )
    await env.reset()
    await env.step({"name": "search_customers", "arguments": {"query": "Lima"}})
    result = await env.step({"name": "search_customers", "arguments": {"query": "okafor"}})
    shown = json.loads(result.observation.text)
    if grounding == "facts":
        assert shown["count"] == 7 and len(shown["results"]) == 2
        return
    assert shown == {"customers": [{"id": "C-1002", "name": "Ben Okafor"}], "total": 1}
    assert json.loads(env.trajectory.turns[1].grounding["strict"]["reshaped"])["count"] == 7


@pytest.mark.parametrize("grounding", ["off", "facts"])
async def test_only_strict_mode_mends(grounding):
    env = simgym.make(
        "mcp",
        world_model=FunctionWorldModel(broken(BROKEN_RECORDS)),
        grounding=grounding,
        validation_retries=0,
    )
    await env.reset()
    result = await env.step({"name": "search_customers", "arguments": {"query": "Zed"}})
    assert result.observation.text == BROKEN_RECORDS
    assert env.trajectory.turns[0].format_problems


async def test_an_answer_asked_again_is_mended_too():
    """A list's expectations fail, the model is asked again and answers broken JSON
    again: what is kept is the second answer, mended."""
    env = simgym.make(
        "mcp",
        world_model=FunctionWorldModel(broken(BROKEN_RECORDS)),
        grounding="strict",
        validation_retries=0,
    )
    await env.reset()
    await env.step({"name": "search_customers", "arguments": {"query": "Lima"}})
    turn = env.trajectory.turns[0]
    assert turn.grounding["strict"]["action"] == "unresolved"
    assert turn.grounding["strict"]["repaired"] == BROKEN_RECORDS
    assert json.loads(turn.observation.text) and turn.format_problems == []
