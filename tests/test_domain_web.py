"""The web domain: BrowserGym-style actions, page trees, examples, replay."""

import glob

import pytest

import simgym
import simgym.domains.web as web
from simgym import Action, ActionError
from simgym.rollout.scripted import load_specs, run_episode
from support import scripted_world

WEB = simgym.get_domain("web")
SCENARIO = WEB.scenario(None)
EXAMPLES = sorted(glob.glob("examples/web/*.yaml"))


def coerce(raw):
    return WEB.coerce_action(raw, SCENARIO, 4000)


@pytest.mark.parametrize(
    "raw, rendered",
    [
        ("click('12')", "click('12')"),
        ("click(12)", "click('12')"),
        ('click("12", button="right")', "click('12', button='right')"),
        ({"name": "click", "arguments": {"bid": "12"}}, "click('12')"),
        (
            {"function": {"name": "fill", "arguments": '{"bid": "31", "value": "ana"}'}},
            "fill('31', 'ana')",
        ),
        ("select_option('8', ['Blue', 'Red'])", "select_option('8', ['Blue', 'Red'])"),
        ("press('31', 'Control+a')", "press('31', 'Control+a')"),
        ("scroll(0, 400)", "scroll(0, 400)"),
        ("goto('https://docs.example/a?b=1')", "goto('https://docs.example/a?b=1')"),
        ("go_back()", "go_back()"),
        ("tab_focus(1)", "tab_focus(1)"),
        ("noop()", "noop()"),
        ("noop(wait_ms=1000)", "noop()"),
        ("noop(250)", "noop(wait_ms=250)"),
        ("```\nnew_tab()\n```", "new_tab()"),
    ],
)
def test_actions_render_in_call_syntax(raw, rendered):
    action = coerce(raw)
    assert action.kind == "tool_call" and not WEB.is_final(action)
    assert WEB.render_action(action, SCENARIO) == rendered
    assert coerce(rendered) == action  # the rendered text reads back as the same action


def test_messages_to_the_user_are_final_and_keep_their_call():
    action = coerce("send_msg_to_user('The total is $34.50')")
    assert action == Action(
        kind="text",
        text="The total is $34.50",
        name="send_msg_to_user",
        arguments={"text": "The total is $34.50"},
    )
    assert WEB.is_final(action)
    assert WEB.render_action(action, SCENARIO) == "send_msg_to_user('The total is $34.50')"
    assert coerce(action) == action
    infeasible = coerce({"name": "report_infeasible", "arguments": {"reason": "no stock"}})
    assert WEB.is_final(infeasible) and infeasible.text == "no stock"


@pytest.mark.parametrize(
    "raw, message",
    [
        ("clik('12')", "unknown action 'clik'; allowed: click, dblclick"),
        ("click()", "click() is missing the argument 'bid'"),
        ("fill('31')", "fill() is missing the argument 'value'"),
        ("click('1'); click('2')", "one action per step, got 2 calls"),
        ("click(bid)", "arguments must be literals"),
        (
            "click('1', button='top')",
            "click(): button='top' is not one of 'left', 'middle', 'right'",
        ),
        ("click('1', modifiers=['Ctrl'])", "modifiers='Ctrl' is not one of 'Alt', 'Control'"),
        ("goto('example.com')", "goto() needs an absolute URL such as https://example.com"),
        ("tab_focus(-1)", "tab_focus(): index must be 0 or more"),
        ("tab_focus('first')", "argument 'index' must be an integer, got str 'first'"),
        ("noop(-5)", "noop(): wait_ms must be 0 or more"),
        ("press('3', '')", "press(): key_comb is empty"),
        ("click('')", "click(): bid is empty"),
        ("page.click('1')", "page.click() is not allowed; call click()"),
        ("The total is $5", "or send_msg_to_user('...') to answer"),
        ({"name": "click", "arguments": {"bid": "1", "x": 5}}, "click() has no argument 'x'"),
        ([{"keystrokes": "ls\n"}], "the browser takes actions like click('12'), not keystrokes"),
    ],
)
def test_bad_actions_are_rejected_with_a_reason(raw, message):
    with pytest.raises(ActionError) as info:
        coerce(raw)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "line, rendered",
    [
        ("click 12", "click('12')"),
        ("click('12')", "click('12')"),
        ("fill 31 ana@example.com", "fill('31', 'ana@example.com')"),
        ("fill 31 Mira Okoye", "fill('31', 'Mira Okoye')"),
        ("fill 31 call me (after 5)", "fill('31', 'call me (after 5)')"),
        ("press 31 Enter", "press('31', 'Enter')"),
        ("goto https://harborbooks.example/", "goto('https://harborbooks.example/')"),
        ("scroll 0 300", "scroll(0, 300)"),
        ("tab_focus 1", "tab_focus(1)"),
        ("go_back", "go_back()"),
        ("answer It's $34.50", 'send_msg_to_user("It\'s $34.50")'),
        ('{"name": "hover", "arguments": {"bid": "4"}}', "hover('4')"),
    ],
)
def test_play_input(line, rendered):
    action = coerce(WEB.parse_input(line, SCENARIO))
    assert WEB.render_action(action, SCENARIO) == rendered


def test_play_input_errors():
    with pytest.raises(ActionError, match="unknown action 'clack'"):
        WEB.parse_input("clack 3", SCENARIO)


GOOD_PAGE = (
    "URL: https://harborbooks.example/checkout\n"
    "Title: Checkout - Harbor Books\n"
    "[20] RootWebArea 'Checkout - Harbor Books', focused\n"
    "  [21] heading 'Shipping address'\n"
    "  [23] textbox 'Street address' value='14 Quay Street', focused, required\n"
    "  StaticText 'Total: $34.50'\n"
    "  [29] button 'Place order'"
)


@pytest.mark.parametrize(
    "text",
    [
        GOOD_PAGE,
        # BrowserGym's own layout: tabs for indentation, id-less text nodes, a tab list
        "URL: about:blank\nTabs: [0] Cart (active) | [1] New tab\n\nRootWebArea '', focused\n"
        "\t[5] link 'Home'\n\tStaticText 'Nothing here'",
        # the browser refused the action; the page is unchanged
        "URL: https://harborbooks.example/cart\nTitle: Cart\nError: no element with id '42'\n"
        "[1] RootWebArea 'Cart', focused\n  [10] button 'Checkout'",
    ],
)
def test_well_formed_pages_pass_the_check(text):
    assert WEB.check_observation(text, Action.tool_call("click", {"bid": "1"}), SCENARIO) == []


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[1] RootWebArea 'Cart'", "no 'URL:' line before the tree"),
        ("URL: harborbooks cart\n[1] RootWebArea 'Cart'", "does not hold an absolute URL"),
        ("URL: https://a.example/\nThe cart page now shows two books.", "not a tree node: line 2"),
        ("URL: https://a.example/\n", "no tree nodes"),
        ("URL: https://a.example/\n[1] Root 'x'\n  [2] a 'y'\n  [2] b 'z'", "duplicate id [2]"),
        ("URL: https://a.example/\n[1] Root 'x'\n      [2] a 'y'", "indented 3 levels"),
        (GOOD_PAGE + "\n</predicted_observation>", "stray </predicted_observation> tag"),
    ],
)
def test_broken_pages_fail_the_check(text, problem):
    problems = WEB.check_observation(text, Action.tool_call("click", {"bid": "1"}), SCENARIO)
    assert any(problem in p for p in problems), problems


def test_scenario_schema_and_prompt():
    assert WEB.initial_observation(SCENARIO).startswith(
        "URL: https://harborbooks.example/cart\nTitle: Your cart - Harbor Books\n[1] RootWebArea"
    )
    prompt = WEB.system_prompt(SCENARIO)
    assert "Harbor Books" in prompt and "[10] button 'Checkout'" in prompt
    assert "https://harborbooks.example/checkout" in prompt and "mira@example.com" in prompt
    assert "URL: https://harborbooks.example/cart" in prompt  # demonstrations use this site
    assert "$" + "origin" not in prompt and "$" + "environment" not in prompt
    with pytest.raises(simgym.ScenarioError, match="not an absolute URL"):
        WEB.scenario({"start_url": "shop.example", "page": "[1] RootWebArea 'x'"})
    with pytest.raises(simgym.ScenarioError, match="first page's tree is malformed"):
        WEB.scenario({"page": "a page with a cart"})
    assert {t.name for t in web.TOOLS} >= {"click", "fill", "goto", "send_msg_to_user"}


@pytest.mark.parametrize("path", EXAMPLES)
async def test_examples_validate_and_run(path):
    (spec,) = load_specs([path])
    assert spec.task.domain == "web" and 3 <= len(spec.actions) <= 5
    env = simgym.make("web", world_model=simgym.FunctionWorldModel(scripted_world([GOOD_PAGE] * 5)))
    trajectory = await run_episode(env, spec)
    assert [t.observation.kind for t in trajectory.turns if t.observation.kind == "error"] == []
    assert len(trajectory.turns) == len(spec.actions)
    assert WEB.check_observation(trajectory.initial_observation.text, None, env.scenario) == []


def test_there_are_at_least_five_examples():
    assert len(EXAMPLES) >= 5


LOGIN_PAGES = [
    "URL: https://mail.tidepost.example/login\nTitle: Sign in - Tidepost Mail\n"
    "[1] RootWebArea 'Sign in - Tidepost Mail', focused\n"
    "  [2] heading 'Sign in to Tidepost'\n"
    "  [3] textbox 'Username' value='jon.berg', focused, required\n"
    "  [4] textbox 'Password' required\n"
    "  [5] checkbox 'Keep me signed in' checked=false\n"
    "  [6] button 'Sign in'\n"
    "  [7] link 'Forgot password?'",
    "URL: https://mail.tidepost.example/login\nTitle: Sign in - Tidepost Mail\n"
    "[1] RootWebArea 'Sign in - Tidepost Mail', focused\n"
    "  [2] heading 'Sign in to Tidepost'\n"
    "  [3] textbox 'Username' value='jon.berg', required\n"
    "  [4] textbox 'Password' value='•••••••••', focused, required\n"
    "  [5] checkbox 'Keep me signed in' checked=false\n"
    "  [6] button 'Sign in'\n"
    "  [7] link 'Forgot password?'",
    "URL: https://mail.tidepost.example/login?error=1\nTitle: Sign in - Tidepost Mail\n"
    "[1] RootWebArea 'Sign in - Tidepost Mail', focused\n"
    "  [2] heading 'Sign in to Tidepost'\n"
    "  [8] alert 'Wrong username or password.', live=assertive\n"
    "  [3] textbox 'Username' value='jon.berg', required\n"
    "  [4] textbox 'Password' focused, required\n"
    "  [5] checkbox 'Keep me signed in' checked=false\n"
    "  [6] button 'Sign in'\n"
    "  [7] link 'Forgot password?'",
]


async def test_recorded_episode_replays_exactly(tmp_path):
    (spec,) = load_specs(["examples/web/login_wrong_password.yaml"])
    path = tmp_path / "web.jsonl"
    with simgym.TrajectoryWriter(path) as writer:
        env = simgym.make(
            "web", world_model=simgym.FunctionWorldModel(scripted_world(LOGIN_PAGES)), writer=writer
        )
        recorded = await run_episode(env, spec)
    assert recorded.done and [t.format_problems for t in recorded.turns] == [[]] * 4

    replay_env = simgym.make("web", world_model="replay", trajectories=str(path))
    replayed = await run_episode(replay_env, spec)
    assert [t.observation.text for t in replayed.turns] == [
        t.observation.text for t in recorded.turns
    ]
    assert [t.observation.text for t in replayed.turns[:3]] == LOGIN_PAGES
    assert replayed.turns[-1].observation.metadata == {"final_answer": True}
    for turn in replayed.turns[:3]:
        assert WEB.check_observation(turn.observation.text, turn.action, replay_env.scenario) == []


async def test_embedded_model_simulates_two_turns():
    env = simgym.make(
        "web", world_model="local", max_tokens=48, seed=5, validation_retries=0, render_known=True
    )
    first = await env.reset("Check out the cart")
    assert first.text.startswith("URL: https://harborbooks.example/cart")
    for action in ("click('10')", "fill('3', 'lighthouse')"):
        result = await env.step(action)
        assert result.observation.kind == "observation" and result.observation.text.strip()
    turns = env.trajectory.turns
    assert [t.action_text for t in turns] == ["click('10')", "fill('3', 'lighthouse')"]
    assert all(t.usage.prompt_tokens > 100 and t.usage.completion_tokens > 0 for t in turns)
    await env.close()
