import pytest

from simgym import Action, ActionError, KeyPress, Task, ToolSpec, Trajectory

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def test_toolspec_converts_between_forms():
    tool = ToolSpec(name="search", description="find", parameters=SCHEMA)
    openai_form = tool.to_openai()
    assert openai_form == {
        "type": "function",
        "function": {"name": "search", "description": "find", "parameters": SCHEMA},
    }
    assert tool.to_mcp()["inputSchema"] == SCHEMA
    for form in (openai_form, tool.to_mcp(), tool.to_plain()):
        assert ToolSpec.from_any(form) == tool


@pytest.mark.parametrize(
    "raw, expected",
    [
        ({"name": "f", "arguments": {"a": 1}}, Action.tool_call("f", {"a": 1})),
        ({"name": "f", "arguments": '{"a": 1}'}, Action.tool_call("f", {"a": 1})),
        ({"type": "function", "function": {"name": "f", "arguments": "{}"}}, Action.tool_call("f")),
        (
            [{"keystrokes": "ls\n", "duration": 2}],
            Action.keys(KeyPress(keystrokes="ls\n", duration=2)),
        ),
        ({"keystrokes": "C-c"}, Action.keys("C-c")),
        ("free words", Action.say("free words")),
        ('{"name": "g"}', Action.tool_call("g")),
        ({"kind": "text", "text": "hi"}, Action.say("hi")),
    ],
)
def test_action_parse_accepts_common_forms(raw, expected):
    assert Action.parse(raw) == expected


@pytest.mark.parametrize(
    "raw, message",
    [
        ('{"name": "f", ', "does not parse"),
        ({"name": "f", "arguments": "{bad"}, "not valid JSON"),
        ({"name": "f", "arguments": [1]}, "must be an object"),
        ([], "empty list"),
        ({"what": 1}, "cannot tell"),
        (42, "cannot read"),
    ],
)
def test_action_parse_rejects_malformed_input(raw, message):
    with pytest.raises(ActionError, match=message):
        Action.parse(raw)


def test_trajectory_round_trips_through_json():
    t = Trajectory(task=Task(instruction="x"), domain="terminal")
    assert Trajectory.model_validate_json(t.model_dump_json()) == t
    assert t.schema_version == 1


def test_androidworld_and_osworld_json_actions_parse():
    assert Action.parse({"action_type": "click", "index": 5}) == Action.tool_call(
        "click", {"index": 5}
    )
    assert Action.parse(
        {"action_type": "CLICK", "parameters": {"x": 1, "y": 2}}
    ) == Action.tool_call("CLICK", {"x": 1, "y": 2})
