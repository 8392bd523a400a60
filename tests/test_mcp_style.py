"""Exact mcp answers in the server's own layout (simgym.domains.mcp_style), and no
certainty where a server may refuse or rewrite a value (mcp_ground.value_doubts)."""

from __future__ import annotations

import json
from pathlib import Path

from simgym.core.domain import get_domain
from simgym.core.state import merge_patch
from simgym.core.trajectories import read_trajectories
from simgym.core.types import Action, ToolSpec
from simgym.domains import mcp_style
from simgym.domains.mcp_ground import WORDING_GUESSED

DEVSET = Path(__file__).resolve().parent.parent / "devset" / "trajectories.jsonl"
MCP = get_domain("mcp")


def result_text(observation: str, scenario) -> str:
    if scenario.output_format == "mcp":
        return json.loads(observation)["content"][0]["text"]
    return observation


def envelope(text: str, error: bool = False) -> str:
    return json.dumps({"content": [{"type": "text", "text": text}], "isError": error})


def failed(observation: str) -> bool:
    """Whether an answer is an error (an MCP envelope's flag, a json error object)."""
    value = json.loads(observation)
    return value.get("isError") is True or set(value) == {"error"}


def replayed_calls():
    """Each recorded mcp tool call of the dev set, with what grounding made of it, the
    ledger it was grounded against and the real answer. Afterwards the ledger takes the
    grounding's effects and what the real answer showed, as in a live episode."""
    for trajectory in read_trajectories(DEVSET):
        if trajectory.domain != "mcp":
            continue
        scenario = MCP.scenario_model.model_validate(trajectory.scenario)
        ledger = MCP.initial_state(scenario)
        for turn in trajectory.turns:
            if turn.action.kind != "tool_call":
                continue
            grounding = MCP.ground(turn.action, ledger, scenario)
            real = turn.observation.text.strip()
            yield turn.action, grounding, real, ledger
            if grounding is not None and grounding.effects:
                ledger = merge_patch(ledger, grounding.effects)
            ledger = merge_patch(ledger, MCP.observe(real, turn.action, ledger) or {})


def test_recorded_server_answers_are_met_once_its_layout_was_seen():
    """Replays the dev set's mcp episodes (the bundled records server, for real): once
    the server has shown how it writes records and errors, every exact answer simgym
    computes equals the server's, and refused or rewritten updates are not claimed."""
    exact = agreed = guessed = 0
    for _, grounding, real, ledger in replayed_calls():
        style = ledger.get(mcp_style.STYLE, {})
        if grounding is not None and grounding.observation is not None:
            if WORDING_GUESSED in grounding.facts:
                # a refusal the tool's description promises, in simgym's wording until
                # the server showed its own: the server refused it too
                guessed += 1
                assert failed(real) and failed(grounding.observation)
                continue
            exact += 1
            agreed += grounding.observation == real
            if style.get("order") and "error_prefix" in style:
                assert grounding.observation == real
    assert exact >= 20 and agreed >= exact - 3 and guessed >= 1


def test_layout_is_learned_from_answers():
    state = {"customers": [{"id": "C-1", "name": "Ana", "tier": "gold", "city": "Porto"}]}
    shown = json.dumps({"customers": [{"id": "C-1", "city": "Porto", "name": "Ana"}]}, indent=2)
    action = Action.tool_call("search_customers", {"query": "ana"})
    state = merge_patch(state, mcp_style.observe_mcp(envelope(shown), action, state))
    assert state["_style"] == {"indent": 2, "order": {"customers": ["id", "city", "name"]}}
    record = mcp_style.arrange(state["customers"][0], "customers", state)
    assert list(record) == ["id", "city", "name", "tier"]
    assert mcp_style.dumps(record, state).startswith('{\n  "id": "C-1",\n  "city"')
    failed = envelope("Error executing tool get_customer: customer C-9 not found", True)
    patch = mcp_style.observe_mcp(failed, Action.tool_call("get_customer", {}), state)
    state = merge_patch(state, patch)
    assert mcp_style.error_text("x", "list_accounts", state) == (
        "Error executing tool list_accounts: x"
    )
    # prose answers teach nothing
    assert mcp_style.observe_mcp(envelope("done"), action, state) is None


def test_exact_get_uses_the_learned_layout():
    scenario = MCP.scenario_model.model_validate(MCP.default_scenario())
    state = MCP.initial_state(scenario)
    collection, records = next((k, v) for k, v in state.items() if isinstance(v, list) and v)
    record = records[0]
    order = list(reversed(list(record)))
    state["_style"] = {"indent": 2, "order": {collection: order}}
    tool = next(t.name for t in scenario.tools if t.name.startswith("get_"))
    arg = next(iter(next(t for t in scenario.tools if t.name == tool).parameters["properties"]))
    grounding = MCP.ground(Action.tool_call(tool, {arg: record["id"]}), state, scenario)
    text = result_text(grounding.observation, scenario)
    assert list(json.loads(text)) == order and text.startswith("{\n  ")


def _customers_scenario():
    customers = [
        {"id": f"C-{i}", "name": n, "email": f"{n.lower()}@example.com"}
        for i, n in enumerate(["Ana", "Ben", "Caro", "Dev"], start=1)
    ]
    tools = [
        {
            "name": "update_email",
            "description": "Change a customer's email.",
            "parameters": {
                "type": "object",
                "properties": {"customer_id": {"type": "string"}, "email": {"type": "string"}},
                "required": ["customer_id", "email"],
            },
        }
    ]
    scenario = MCP.scenario_model.model_validate(
        {"server_name": "crm", "tools": tools, "state": {"customers": customers}}
    )
    return scenario, MCP.initial_state(scenario)


def test_a_value_the_server_may_refuse_or_rewrite_is_not_claimed():
    scenario, state = _customers_scenario()

    def update(email):
        action = Action.tool_call("update_email", {"customer_id": "C-2", "email": email})
        return MCP.ground(action, state, scenario)

    taken = update("ana@example.com")
    assert taken.observation is None
    assert taken.effects["_partial"] == {"customers": {"C-2": ["email"]}}  # not changed
    assert any("C-1 already has email" in fact for fact in taken.facts)
    assert "not a well-formed" in update("ben@example").facts[-1]
    assert "lower case" in update("Ben@Example.com").facts[-1]
    fine = update("ben.new@example.com")
    assert fine.effects["customers"][1]["email"] == "ben.new@example.com"
    assert fine.observation is not None


def _ticket_desk():
    tickets = [
        {"id": "T-1", "customer_id": "C-1", "subject": "a", "status": "open"},
        {"id": "T-2", "customer_id": "C-2", "subject": "b", "status": "closed"},
        {"id": "T-3", "customer_id": "C-1", "subject": "c", "status": "closed"},
    ]
    param = {"type": "object", "properties": {"customer_id": {"type": "string"}}}
    tools = [
        {"name": "list_tickets", "description": "A customer's tickets.", "parameters": param},
        {
            "name": "create_ticket",
            "description": "Open a ticket.",
            "parameters": {
                "type": "object",
                "properties": {"customer_id": {"type": "string"}, "subject": {"type": "string"}},
            },
        },
    ]
    scenario = MCP.scenario_model.model_validate(
        {"server_name": "desk", "tools": tools, "state": {"tickets": tickets}}
    )
    return scenario, MCP.initial_state(scenario)


def step(scenario, state, name, arguments, answer):
    """One turn as the environment plays it: ground, its effects, then observe."""
    action = Action.tool_call(name, arguments)
    grounding = MCP.ground(action, state, scenario)
    if grounding is not None and grounding.effects:
        state = merge_patch(state, grounding.effects)
    return grounding, merge_patch(state, MCP.observe(answer, action, state) or {})


def test_a_list_tools_shape_is_learned_once_the_server_agrees_and_then_exact():
    scenario, state = _ticket_desk()
    first = {
        "customer_id": "C-1",
        "tickets": [{"id": "T-1", "subject": "a"}, {"id": "T-3", "subject": "c"}],
    }
    grounding, state = step(
        scenario, state, "list_tickets", {"customer_id": "C-1"}, envelope(json.dumps(first))
    )
    assert grounding.observation is None  # nothing learned yet
    assert state["_style"]["lists"]["list_tickets"]["fields"] == ["id", "subject"]
    assert "pending" not in state["_style"]
    grounding, state = step(scenario, state, "list_tickets", {"customer_id": "C-2"}, envelope("{}"))
    assert json.loads(result_text(grounding.observation, scenario)) == {
        "customer_id": "C-2",
        "tickets": [{"id": "T-2", "subject": "b"}],
    }


def test_a_server_that_lists_other_records_teaches_no_shape():
    scenario, state = _ticket_desk()
    other = {"tickets": [{"id": "T-1", "subject": "a"}]}  # the server hides closed tickets
    _, state = step(
        scenario, state, "list_tickets", {"customer_id": "C-1"}, envelope(json.dumps(other))
    )
    assert "list_tickets" not in state["_style"].get("lists", {})
    grounding, _ = step(scenario, state, "list_tickets", {"customer_id": "C-1"}, envelope("{}"))
    assert grounding.observation is None


def test_a_created_records_server_fields_come_from_its_answer():
    scenario, state = _ticket_desk()
    made = {"id": "T-4", "customer_id": "C-2", "subject": "d", "status": "open"}
    grounding, state = step(
        scenario,
        state,
        "create_ticket",
        {"customer_id": "C-2", "subject": "d"},
        envelope("not json"),
    )
    assert state["_partial"] == {"tickets": {"T-4": ["status"]}}  # the server sets status
    _, state = step(
        scenario,
        state,
        "create_ticket",
        {"customer_id": "C-2", "subject": "e"},
        envelope(json.dumps(made)),
    )
    assert state["tickets"][3] == made and "T-4" not in state["_partial"].get("tickets", {})


def test_a_refused_update_changed_nothing():
    scenario, state = _customers_scenario()
    args = {"customer_id": "C-2", "email": "ana@example.com"}  # taken by C-1
    refused = envelope("Error executing tool update_email: email already used", True)
    _, state = step(scenario, state, "update_email", args, refused)
    assert not mcp_style.partial(state, "customers", "C-2")
    get = Action.tool_call("update_email", {"customer_id": "C-2", "email": "b.2@example.com"})
    assert MCP.ground(get, state, scenario).observation is not None  # known again
    # a doubted update the server accepted shows the record: its fields come from there
    args = {"customer_id": "C-3", "email": "Caro@Example.com"}
    shown = {"id": "C-3", "name": "Caro", "email": "caro@example.com"}
    _, state = step(scenario, state, "update_email", args, envelope(json.dumps(shown)))
    assert state["customers"][2]["email"] == "caro@example.com"
    assert not mcp_style.partial(state, "customers", "C-3")


def test_a_refusal_seen_once_is_worded_the_servers_way_the_next_time():
    """An update refused for a taken or a malformed value teaches the server's wording:
    the next update refused for the same reason gets it with its own values put in (the
    value, the record holding it, the record changed); another reason stays unclaimed."""
    scenario, state = _customers_scenario()
    scenario = scenario.model_copy(update={"output_format": "mcp"})
    prefix = "Error executing tool update_email: "
    taken = envelope(f"{prefix}email ana@example.com is already used by customer C-1", True)
    _, state = step(
        scenario, state, "update_email", {"customer_id": "C-2", "email": "ana@example.com"}, taken
    )
    again, _ = step(
        scenario, state, "update_email", {"customer_id": "C-4", "email": "caro@example.com"}, ""
    )
    said = f"{prefix}email caro@example.com is already used by customer C-3"
    assert again.observation == envelope(said, True) and not again.effects
    # a malformed address is another reason: not known until the server refuses one
    bad = {"customer_id": "C-2", "email": "ben at example"}
    unsure, _ = step(scenario, state, "update_email", bad, "")
    assert unsure.observation is None and unsure.effects["_partial"]
    invalid = envelope(f"{prefix}invalid email address 'ben at example'", True)
    _, state = step(scenario, state, "update_email", bad, invalid)
    other = {"customer_id": "C-3", "email": "caro@example"}
    refused, _ = step(scenario, state, "update_email", other, "")
    assert refused.observation == envelope(f"{prefix}invalid email address 'caro@example'", True)
    # an address only in mixed case was never refused: the server may take it
    mixed = {"customer_id": "C-3", "email": "Caro.New@Example.com"}
    assert step(scenario, state, "update_email", mixed, "")[0].observation is None


def test_json_errors_take_the_fields_the_servers_errors_showed():
    scenario, state = _customers_scenario()
    scenario = scenario.model_copy(update={"output_format": "json"})
    missing = Action.tool_call("update_email", {"customer_id": "C-9", "email": "x@example.com"})
    assert '"code"' in MCP.ground(missing, state, scenario).observation  # nothing seen yet
    error = {"error": {"message": "Error executing tool update_email: email taken"}}
    args = {"customer_id": "C-2", "email": "ana@example.com"}
    _, state = step(scenario, state, "update_email", args, json.dumps(error))
    shown = json.loads(MCP.ground(missing, state, scenario).observation)
    assert shown == {
        "error": {"message": "Error executing tool update_email: customer C-9 not found"}
    }
    # a message that does not name the refused value teaches no wording
    again = MCP.ground(
        Action.tool_call("update_email", {"customer_id": "C-4", "email": "ana@example.com"}),
        state,
        scenario,
    )
    assert again.observation is None


def test_strict_checks_agree_with_every_real_answer_once_the_layout_was_seen():
    """Replays the dev set's mcp episodes: what strict mode would check each real answer
    against (its exact form, what it must and must not show) never calls the real answer
    wrong once the server has shown how it writes records and errors. Before that only
    the layout of a first answer and a create refused for a rule no schema states (a
    subject too short) may differ; the refused create changes nothing in the ledger."""
    wrong = 0
    for action, grounding, real, ledger in replayed_calls():
        style = ledger.get(mcp_style.STYLE, {})
        if grounding is not None and grounding.problems(real):
            if WORDING_GUESSED in grounding.facts:  # the refusal is right, its words guessed
                assert failed(real)
                continue
            wrong += 1
            assert not (style.get("order") and "error_prefix" in style), action
    assert wrong <= 3


def test_a_call_the_server_refused_changed_nothing():
    """A create, update or delete that grounding applied as certain is taken back when
    the server answers it with an error (a rule simgym cannot see refused it)."""
    scenario, state = _ticket_desk()
    before = json.loads(json.dumps(state))
    error = envelope("Error executing tool create_ticket: subject must have at least 3", True)
    made, after = step(
        scenario, state, "create_ticket", {"customer_id": "C-2", "subject": "e"}, error
    )
    assert made.effects["tickets"][-1]["id"] == "T-4"
    assert after["tickets"] == before["tickets"] and not mcp_style.partial(after, "tickets", "T-4")
    again = MCP.ground(
        Action.tool_call("create_ticket", {"customer_id": "C-2", "subject": "long enough"}),
        after,
        scenario,
    )
    assert again.effects["tickets"][-1]["id"] == "T-4"  # the refused one took no id
    # the text format says an error in words first, the way simgym's real backend does
    text = scenario.model_copy(update={"output_format": "text"})
    _, after = step(
        text, state, "create_ticket", {"customer_id": "C-2", "subject": "e"}, "Error: no"
    )
    assert after["tickets"] == before["tickets"]
    # an update and a delete go back, the record in its place and no tombstone left
    scenario, state = _customers_scenario()
    delete = {
        "name": "delete_customer",
        "description": "Remove a customer.",
        "parameters": {"type": "object", "properties": {"customer_id": {"type": "string"}}},
    }
    tools = [*scenario.tools, ToolSpec.from_any(delete)]
    scenario = scenario.model_copy(update={"tools": tools})
    before = json.loads(json.dumps(state))
    refused = envelope("Error executing tool update_email: mailbox does not exist", True)
    args = {"customer_id": "C-2", "email": "ben.new@example.com"}
    changed, after = step(scenario, state, "update_email", args, refused)
    assert changed.effects["customers"][1]["email"] == "ben.new@example.com"
    assert after["customers"] == before["customers"]
    refused = envelope("Error executing tool delete_customer: customer has open tickets", True)
    gone, after = step(scenario, after, "delete_customer", {"customer_id": "C-2"}, refused)
    assert len(gone.effects["customers"]) == 3
    assert after["customers"] == before["customers"] and not after["_deleted"]["customers"]


def test_a_real_list_answer_is_already_in_the_shape_it_taught():
    """Replays the dev set's mcp episodes: reshaping each real list answer that grounding
    does not decide whole (free-text searches, records the server completed) into the
    shape the server showed earlier changes nothing in it."""
    reshaped = 0
    for action, grounding, real, _ in replayed_calls():
        if grounding is not None and grounding.reshape is not None:
            reshaped += 1
            assert grounding.reshape(real) in (None, real), action
    # the dev set's searches are decided now (the tool's description names the fields it
    # searches) and answered exactly once their layout was seen; what is left: the lists
    # of records the server completed itself, and the searches that depend on how the
    # server compares spaces
    assert reshaped >= 3


def test_a_list_answer_is_reshaped_around_what_the_ledger_knows():
    scenario, state = _ticket_desk()
    scenario = scenario.model_copy(update={"output_format": "mcp"})
    taught = {
        "customer_id": "C-1",
        "tickets": [{"id": "T-1", "subject": "a"}, {"id": "T-3", "subject": "c"}],
    }
    _, state = step(
        scenario, state, "list_tickets", {"customer_id": "C-1"}, envelope(json.dumps(taught))
    )
    # a created ticket whose status the server fills in: the list is no longer exact
    _, state = step(scenario, state, "create_ticket", {"customer_id": "C-2", "subject": "d"}, "")
    grounding, _ = step(scenario, state, "list_tickets", {"customer_id": "C-2"}, "")
    assert grounding.observation is None and grounding.reshape is not None
    guess = {"items": [{"id": "T-2", "status": "x"}, {"id": "T-4", "subject": "d?"}, {"id": "T-9"}]}
    shown = json.loads(result_text(grounding.reshape(envelope(json.dumps(guess))), scenario))
    # the known ticket shows its learned fields, the one the server completed stays as
    # the model wrote it, and T-9, which does not exist, is not listed
    assert shown == {
        "customer_id": "C-2",
        "tickets": [{"id": "T-2", "subject": "b"}, {"id": "T-4", "subject": "d?"}],
    }
    assert grounding.reshape(envelope("Error executing tool list_tickets: no", True)) is None


def test_a_message_naming_a_short_id_teaches_no_wording():
    """A record id of one or two characters in a message may be any number there."""
    state = {"customers": [{"id": "7", "email": "a@example.com"}], "_style": {}}
    doubt = ["update_email", "customers", "7", [["email", "malformed", "a@b", None]]]
    state["_style"]["doubt"] = doubt
    refused = envelope("Error executing tool update_email: 'a@b' needs 7 more characters", True)
    patch = mcp_style.observe_mcp(refused, Action.tool_call("update_email", {}), state)
    assert "refusals" not in merge_patch(state, patch)["_style"]
