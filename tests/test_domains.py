import json

import pytest

import simgym
from simgym import Action, ActionError
from simgym.domains.mcp import MCPScenario
from simgym.domains.terminal import TerminalScenario

TERM = simgym.get_domain("terminal")
MCP = simgym.get_domain("mcp")


def test_registry_lists_both_domains():
    assert {"terminal", "mcp"} <= set(simgym.domain_names())


def test_terminal_prompt_and_initial_screen():
    root = TerminalScenario(user="root", hostname="ci", cwd="/srv/app")
    # the first screen as a real terminal's capture shows it: no trailing blank
    assert TERM.initial_observation(root) == "root@ci:/srv/app#"
    dev = TerminalScenario(user="dev", cwd="/home/dev/src")
    assert dev.prompt() == "dev@devbox:~/src$ "


@pytest.mark.parametrize(
    "raw, rendered",
    [
        ("ls -la", '[{"keystrokes": "ls -la\\n", "duration": 1}]'),
        ("C-c", '[{"keystrokes": "C-c", "duration": 1}]'),
        (
            {"name": "bash", "arguments": {"command": "pwd"}},
            '[{"keystrokes": "pwd\\n", "duration": 1}]',
        ),
        (
            [{"keystrokes": "sleep 30\n", "duration": 35}],
            '[{"keystrokes": "sleep 30\\n", "duration": 35}]',
        ),
    ],
)
def test_terminal_actions_render_as_keystroke_batches(raw, rendered):
    scenario = TerminalScenario()
    action = TERM.coerce_action(raw, scenario, 1000)
    assert TERM.render_action(action, scenario) == rendered


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"name": "click", "arguments": {}}, "takes keystrokes"),
        ([{"keystrokes": "ls", "duration": -1}], "duration"),
        ([{"keystrokes": "", "duration": 1}], "empty"),
    ],
)
def test_terminal_rejects_bad_actions(raw, message):
    with pytest.raises(ActionError, match=message):
        TERM.coerce_action(raw, TerminalScenario(), 1000)


def test_terminal_screen_check():
    ls = Action.keys("ls\n")
    assert TERM.check_observation("a b\nuser@h:~$", ls, None) == []
    assert TERM.check_observation(">>> ", ls, None) == []
    assert TERM.check_observation("[sudo] password for dev: ", ls, None) == []
    assert TERM.check_observation("a b c", ls, None)
    # a long wait may leave a program running without a prompt
    assert (
        TERM.check_observation("Downloading 45%", Action.keys("apt install x\n", duration=30), None)
        == []
    )


def test_terminal_play_input():
    assert TERM.parse_input("ls\n", None) == Action.keys("ls\n")
    assert TERM.parse_input("C-c", None) == Action.keys("C-c")


SCENARIO = MCP.scenario(None)


def test_mcp_default_scenario_and_tool_validation():
    ok = MCP.coerce_action(
        {"name": "get_customer", "arguments": {"customer_id": "C-1001"}}, SCENARIO, 1000
    )
    assert json.loads(MCP.render_action(ok, SCENARIO)) == {
        "name": "get_customer",
        "arguments": {"customer_id": "C-1001"},
    }
    with pytest.raises(ActionError, match="unknown tool 'drop_table'.*declares search_customers"):
        MCP.coerce_action({"name": "drop_table", "arguments": {}}, SCENARIO, 1000)
    with pytest.raises(ActionError, match="'customer_id' is a required property"):
        MCP.coerce_action({"name": "get_customer", "arguments": {}}, SCENARIO, 1000)
    with pytest.raises(ActionError, match="customer_id: 5 is not of type 'string'"):
        MCP.coerce_action({"name": "get_customer", "arguments": {"customer_id": 5}}, SCENARIO, 1000)
    with pytest.raises(ActionError, match="takes tool calls"):
        MCP.coerce_action([{"keystrokes": "ls\n"}], SCENARIO, 1000)


def test_mcp_scenario_schema_checks():
    with pytest.raises(simgym.ScenarioError, match="at least one tool"):
        MCP.scenario({"tools": []})
    with pytest.raises(simgym.ScenarioError, match="unique"):
        MCP.scenario({"tools": [{"name": "a"}, {"name": "a"}]})
    with pytest.raises(simgym.ScenarioError):
        MCP.scenario({"tools": [{"name": "a", "parameters": {"type": "nonsense"}}]})
    s = MCP.scenario(
        {
            "tools": [
                {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
            ]
        }
    )
    assert isinstance(s, MCPScenario) and s.tools[0].name == "f"


def test_mcp_observation_checks_by_output_format():
    call = Action.tool_call("get_customer", {"customer_id": "x"})
    assert MCP.check_observation('{"id": "x"}', call, SCENARIO) == []
    assert "not valid JSON" in MCP.check_observation("Customer x", call, SCENARIO)[0]
    env_style = SCENARIO.model_copy(update={"output_format": "mcp"})
    assert MCP.check_observation('{"content": [], "isError": false}', call, env_style) == []
    assert MCP.check_observation('{"id": 1}', call, env_style)
    # the format says whether the call failed: an envelope without the flag is broken
    unflagged = '{"content": [{"type": "text", "text": "ok"}]}'
    assert "isError" in MCP.check_observation(unflagged, call, env_style)[0]
    assert (
        MCP.check_observation(
            "anything", call, SCENARIO.model_copy(update={"output_format": "text"})
        )
        == []
    )


def test_mcp_play_input_forms():
    assert MCP.parse_input('get_customer {"customer_id": "C-1"}', SCENARIO) == Action.tool_call(
        "get_customer", {"customer_id": "C-1"}
    )
    assert MCP.parse_input("get_customer customer_id=C-1 limit=5", SCENARIO) == Action.tool_call(
        "get_customer", {"customer_id": "C-1", "limit": 5}
    )
    assert MCP.parse_input("answer the email is x", SCENARIO) == Action.say("the email is x")


async def test_mcp_episode_final_answer_is_not_simulated():
    calls = []

    def world(messages):
        calls.append(messages)
        return '<predicted_observation>{"id": "C-1001", "email": "ana.lima@example.com"}</predicted_observation>'

    env = simgym.make("mcp", world_model=simgym.FunctionWorldModel(world))
    first = await env.reset("What is Ana's email?")
    assert "customer-records" in first.text and "get_customer" in first.text
    assert '"C-1001"' in env.messages[0]["content"]  # hidden records reach the model
    bad = await env.step({"name": "delete_all", "arguments": {}})
    assert bad.observation.kind == "error" and "unknown tool" in bad.observation.text
    res = await env.step({"name": "get_customer", "arguments": {"customer_id": "C-1001"}})
    assert json.loads(res.observation.text)["email"] == "ana.lima@example.com"
    final = await env.step("ana.lima@example.com")
    assert final.done and len(calls) == 1


def test_terminal_screen_after_exit_needs_no_prompt():
    assert TERM.check_observation("dev@devbox:~$ exit\nexit", Action.keys("exit\n"), None) == []
