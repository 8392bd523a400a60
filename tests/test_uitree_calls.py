"""The shared pieces of the GUI domains: accessibility-tree text and call-syntax actions."""

import pytest

from simgym import Action, ActionError
from simgym.domains._gui import calls, uitree
from simgym.domains._gui.calls import Call, Param, Signature

# -- trees --------------------------------------------------------------------------------

BROWSERGYM_STYLE = (
    "RootWebArea 'Checkout', focused\n"
    "\t[21] navigation ''\n"
    "\t\t[22] link 'Home'\n"
    "\tStaticText 'Total: $12.00'\n"
    "\t[23] textbox 'Email' value='ana@example.com', focused, required\n"
    '\t[24] button "Don\'t save", clickable'
)


def test_parse_reads_ids_roles_names_properties_and_depth():
    tree = uitree.parse_tree(
        "[1] RootWebArea 'Your cart', focused\n"
        "  [12] button 'Checkout' enabled\n"
        "  StaticText 'Total: $31.50'\n"
        "  [7] android.widget.Switch 'Wi-Fi' checkable checked=false bounds=[0,0][1080,200]\n"
        "    [8] push-button 'Save' pos=(10,20) size=(70,34) value='a, b'"
    )
    assert tree.problems == []
    assert tree.ids == ["1", "12", "7", "8"]
    root, button, text, switch, save = tree.nodes
    assert (button.role, button.name, button.props, button.depth) == (
        "button",
        "Checkout",
        {"enabled": True},
        1,
    )
    assert text.id is None and text.name == "Total: $31.50" and text.parent == 0
    assert switch.props == {"checkable": True, "checked": "false", "bounds": "[0,0][1080,200]"}
    assert save.props == {"pos": "(10,20)", "size": "(70,34)", "value": "a, b"}
    assert save.depth == 2 and save.parent == 3
    assert tree.find("12") is button and tree.find("99") is None


def test_browsergym_tabs_commas_and_double_quotes_are_accepted():
    tree = uitree.parse_tree(BROWSERGYM_STYLE)
    assert tree.problems == []
    assert [n.depth for n in tree.nodes] == [0, 1, 2, 1, 1, 1]
    assert tree.nodes[4].props == {"value": "ana@example.com", "focused": True, "required": True}
    assert tree.nodes[5].name == "Don't save"


def test_any_consistent_indent_width_and_an_indented_block_are_accepted():
    assert uitree.tree_problems("[1] a 'x'\n    [2] b 'y'\n        [3] c 'z'\n    [4] d") == []
    assert uitree.tree_problems("    [1] a 'x'\n      [2] b 'y'\n    [3] c 'z'") == []


def test_trailing_text_after_an_id_is_kept_not_judged():
    tree = uitree.parse_tree("[5] link 'Price' $12 (sale)")
    assert tree.problems == [] and tree.nodes[0].extra == "$12 (sale)"


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "no tree nodes"),
        ("The page shows your cart.", "not a tree node: line 1: 'The page shows your cart.'"),
        ("[1] a 'x'\n[1] b 'y'", r"duplicate id [1] (lines 1 and 2)"),
        ("[1] a 'x'\n      [2] b 'y'", "line 2: indented 3 levels below the line above"),
        ("[1] a 'x'\n  [2] b 'y'\n     [3] c 'z'", "line 3: indentation is not a whole number"),
        ("[1] a 'x'\n\t[2] b 'y'\n  [3] c 'z'", "indentation mixes tabs and spaces"),
        ("```\n[1] a 'x'\n```", "line 1: code fence in the tree"),
        ("[1] a 'x'\nURL: https://x.example/", "not a tree node: line 2"),
    ],
)
def test_tree_problems(text, message):
    problems = uitree.tree_problems(text)
    assert any(message in p for p in problems), problems


def test_many_unparsable_lines_are_summarized():
    text = "[1] a 'x'\n" + "\n".join(f"sentence number {i} here." for i in range(6))
    (problem,) = uitree.tree_problems(text)
    assert problem.count("line ") == 3 and problem.endswith("(and 3 more)")


def test_headers_are_split_from_the_tree_with_line_numbers_kept():
    text = (
        "URL: https://a.example/x\nTitle: A\nTabs: [0] A (active) | [1] B\n\n[1] Root 'A'\n  oops !"
    )
    headers, tree = uitree.parse_observation(text)
    assert headers == {
        "url": "https://a.example/x",
        "title": "A",
        "tabs": "[0] A (active) | [1] B",
    }
    assert [n.line for n in tree.nodes] == [5]
    assert tree.problems == ["not a tree node: line 6: 'oops !'"]


def test_observation_problems_require_headers_and_flag_stray_tags():
    good = "App: Settings\n[1] android.widget.FrameLayout ''"
    assert uitree.observation_problems(good, [("App", "Activity")]) == []
    assert uitree.observation_problems("Activity: x/.Y\n[1] a", [("App", "Activity")]) == []
    assert uitree.observation_problems("[1] a 'x'", [("App", "Activity")]) == [
        "no 'App:' line before the tree"
    ]
    assert "stray </think> tag" in uitree.observation_problems(good + "\n</think>", [("App",)])


# -- calls --------------------------------------------------------------------------------

TABLE = calls.make_table(
    Signature("click", (Param("bid", id=True), Param("button", default="left", style="kw"))),
    Signature("fill", (Param("bid", id=True), Param("value"))),
    Signature("scroll", (Param("dx", "number"), Param("dy", "number"))),
    Signature("noop", (Param("wait_ms", "number", default=1000, style="kw"),)),
    Signature("pick", (Param("bid", id=True), Param("options", "string|array"))),
    Signature("tab", (Param("index", "integer"),)),
    Signature("move", (Param("x", "number", default=None), Param("y", "number", default=None))),
    Signature(
        "hotkey",
        (Param("interval", "number", default=0.0, style="kwonly"),),
        varargs=Param("keys", "array"),
        module="pyautogui",
    ),
    Signature("sleep", (Param("secs", "number"),), module="time"),
    Signature("say", (Param("text"),)),
)


@pytest.mark.parametrize(
    "code, call",
    [
        ("click('12')", Call("click", {"bid": "12"})),
        ("click(bid='12')", Call("click", {"bid": "12"})),
        ("click(12)", Call("click", {"bid": "12"})),
        ("click('12', button='left')", Call("click", {"bid": "12"})),  # default left out
        ("click('12', 'right')", Call("click", {"bid": "12", "button": "right"})),
        ("fill('3', \"it's\")", Call("fill", {"bid": "3", "value": "it's"})),
        ("scroll(0, -250.5)", Call("scroll", {"dx": 0, "dy": -250.5})),
        ("noop()", Call("noop", {})),
        ("noop(1000.0)", Call("noop", {})),
        ("pick('4', ('a', 'b'))", Call("pick", {"bid": "4", "options": ["a", "b"]})),
        ("tab(2.0)", Call("tab", {"index": 2})),
        ("move(None, None)", Call("move", {})),
        ("pyautogui.hotkey('ctrl', 's')", Call("hotkey", {"keys": ["ctrl", "s"]})),
        ("hotkey('a', interval=0.5)", Call("hotkey", {"keys": ["a"], "interval": 0.5})),
        ("```python\nclick('1')\n```", Call("click", {"bid": "1"})),
    ],
)
def test_parse_calls_normalizes(code, call):
    assert calls.parse_calls(code, TABLE) == [call]


def test_several_calls_imports_and_comments():
    code = "import pyautogui, time\n# save\npyautogui.hotkey('ctrl', 's')\ntime.sleep(1)"
    assert calls.parse_calls(code, TABLE, max_calls=5) == [
        Call("hotkey", {"keys": ["ctrl", "s"]}),
        Call("sleep", {"secs": 1}),
    ]


@pytest.mark.parametrize(
    "code, message",
    [
        ("", "empty action; write e.g. click('1')"),
        ("clik('1')", "unknown action 'clik'; allowed: click, fill"),
        ("click(", "not a valid call: '(' was never closed (line 1); write e.g. click('1')"),
        ("x = 1", "line 1: only calls are allowed, not `x = 1`"),
        ("import os", "only calls are allowed, not `import os`"),
        ("click('1')\nclick('2')", "one action per step, got 2 calls"),
        ("click(bid)", "click(): arguments must be literals (strings, numbers, lists), not `bid`"),
        ("click(*ids)", "click(): *arguments are not allowed"),
        ("click(**kw)", "click(): **arguments are not allowed"),
        ("click()", "click() is missing the argument 'bid'"),
        ("click('1', bid='2')", "click() got two values for argument 'bid'"),
        ("click('1', x=2)", "click() has no argument 'x'; it takes bid, button"),
        ("click('1', 'left', 'extra')", "click() takes at most 2 positional argument(s), got 3"),
        ("fill('1', 5)", "fill(): argument 'value' must be a string, got int 5"),
        ("tab(True)", "tab(): argument 'index' must be an integer, got bool True"),
        ("tab(1.5)", "must be an integer, got float 1.5"),
        ("scroll('a', 1)", "argument 'dx' must be a number, got str 'a'"),
        ("scroll(1e999, 1)", "argument 'dx' must be a number, got float inf"),
        ("pick('1', [1])", "argument 'options' must be a string or a list of strings"),
        ("hotkey()", "hotkey() is missing the argument 'keys'"),
        ("page.click('1')", "page.click() is not allowed; call click()"),
        ("os.sleep(1)", "os.sleep() is not allowed; call time.sleep()"),
        ("a.b.click('1')", "cannot call `a.b.click`"),
        ("click('1')()", "cannot call `click('1')`"),
    ],
)
def test_parse_calls_errors(code, message):
    with pytest.raises(ActionError) as info:
        calls.parse_calls(code, TABLE, hint="click('1')")
    assert message in str(info.value)


def test_choices_are_checked():
    table = calls.make_table(Signature("go", (Param("way", choices=("up", "down")),)))
    with pytest.raises(ActionError, match="go\\(\\): way='left' is not one of 'up', 'down'"):
        calls.parse_calls("go('left')", table)


@pytest.mark.parametrize(
    "call, text",
    [
        (Call("click", {"bid": "12"}), "click('12')"),
        (Call("click", {"bid": "12", "button": "right"}), "click('12', button='right')"),
        (Call("fill", {"bid": "3", "value": "it's"}), "fill('3', \"it's\")"),
        (Call("noop", {"wait_ms": 500}), "noop(wait_ms=500)"),
        (Call("pick", {"bid": "4", "options": ["a", "b"]}), "pick('4', ['a', 'b'])"),
        (Call("move", {"y": 5}), "move(y=5)"),
        (
            Call("hotkey", {"keys": ["ctrl", "s"], "interval": 0.1}),
            "pyautogui.hotkey('ctrl', 's', interval=0.1)",
        ),
        (Call("sleep", {"secs": 0.5}), "time.sleep(0.5)"),
    ],
)
def test_render_call_round_trips(call, text):
    assert calls.render_call(call, TABLE) == text
    assert calls.parse_calls(text, TABLE) == [call]


def test_tool_call_arguments_are_checked_like_code():
    assert calls.call_from_tool("click", {"bid": 7}, TABLE) == Call("click", {"bid": "7"})
    assert calls.call_from_tool("pyautogui.hotkey", {"keys": ["a"]}, TABLE) == Call(
        "hotkey", {"keys": ["a"]}
    )
    with pytest.raises(ActionError, match="unknown action 'drag'"):
        calls.call_from_tool("drag", {}, TABLE)
    with pytest.raises(ActionError, match="fill\\(\\) is missing the argument 'value'"):
        calls.call_from_tool("fill", {"bid": "1"}, TABLE)


@pytest.mark.parametrize(
    "line, call",
    [
        ("click 12", Call("click", {"bid": "12"})),
        ("click 12 button=right", Call("click", {"bid": "12", "button": "right"})),
        ("fill 3 hello there", Call("fill", {"bid": "3", "value": "hello there"})),
        ('fill 3 "two  spaces"', Call("fill", {"bid": "3", "value": "two  spaces"})),
        ("say it's done", Call("say", {"text": "it's done"})),
        ("scroll 0 -300", Call("scroll", {"dx": 0, "dy": -300})),
        ("noop wait_ms=250.5", Call("noop", {"wait_ms": 250.5})),
        ("hotkey ctrl shift t", Call("hotkey", {"keys": ["ctrl", "shift", "t"]})),
        ("tab 1", Call("tab", {"index": 1})),
    ],
)
def test_short_forms(line, call):
    assert calls.parse_short(line, TABLE) == call


def test_short_form_errors_name_the_problem():
    with pytest.raises(ActionError, match="unknown action 'jump'"):
        calls.parse_short("jump 3", TABLE)
    with pytest.raises(ActionError, match="'index' must be an integer, got str 'first'"):
        calls.parse_short("tab first", TABLE)


def test_final_calls_become_text_actions_that_keep_their_call():
    action = calls.to_action(Call("say", {"text": "42"}), {"say": "text"})
    assert action == Action(kind="text", text="42", name="say", arguments={"text": "42"})
    assert calls.to_action(Call("click", {"bid": "1"})) == Action.tool_call("click", {"bid": "1"})


def test_tool_specs_describe_the_table_as_json_schema():
    specs = {s.name: s.parameters for s in calls.tool_specs(TABLE)}
    assert specs["click"]["required"] == ["bid"]
    assert specs["click"]["properties"]["button"] == {"type": "string", "default": "left"}
    assert specs["hotkey"]["properties"]["keys"] == {"type": "array", "items": {"type": "string"}}
    assert specs["pick"]["properties"]["options"]["anyOf"][0] == {"type": "string"}
    assert specs["hotkey"]["required"] == ["keys"]


@pytest.mark.parametrize(
    "line, code",
    [
        ("click('3')", True),
        ("pyautogui.hotkey('ctrl', 's')", True),
        ("go_back ()", True),
        ("import pyautogui", True),
        ("```\nclick('1')\n```", True),
        ("click 3", False),
        ("fill 3 call me (after 5)", False),
        ("answer it costs $5 (with tax)", False),
    ],
)
def test_typed_code_is_told_from_short_forms(line, code):
    assert calls.looks_like_call(line) is code
