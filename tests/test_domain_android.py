"""The android domain: element actions, AndroidWorld JSON, view hierarchies, replay."""

import glob

import pytest

import simgym
import simgym.domains.android as android
from simgym import Action, ActionError
from simgym.rollout.scripted import load_specs, run_episode
from support import scripted_world

ANDROID = simgym.get_domain("android")
SCENARIO = ANDROID.scenario(None)
EXAMPLES = sorted(glob.glob("examples/android/*.yaml"))


def coerce(raw):
    return ANDROID.coerce_action(raw, SCENARIO, 4000)


@pytest.mark.parametrize(
    "raw, rendered",
    [
        ("tap('7')", "tap('7')"),
        ("tap(7)", "tap('7')"),
        ("long_press(id='7')", "long_press('7')"),
        ("type('5', 'hello there')", "type('5', 'hello there')"),
        ("swipe('up')", "swipe('up')"),
        ("swipe('left', '3')", "swipe('left', id='3')"),
        ("back()", "back()"),
        ("home()", "home()"),
        ("enter()", "enter()"),
        ("open_app('Clock')", "open_app('Clock')"),
        ("wait()", "wait()"),
        ({"name": "tap", "arguments": {"id": 4}}, "tap('4')"),
        # AndroidWorld's action types, as tool calls
        ({"name": "click", "arguments": {"index": 5}}, "tap('5')"),
        ({"name": "long_press", "arguments": {"index": 5}}, "long_press('5')"),
        ({"name": "input_text", "arguments": {"index": 8, "text": "hi"}}, "type('8', 'hi')"),
        ({"name": "scroll", "arguments": {"direction": "down"}}, "swipe('up')"),
        (
            {"name": "scroll", "arguments": {"direction": "left", "index": 3}},
            "swipe('right', id='3')",
        ),
        ({"name": "navigate_back", "arguments": {}}, "back()"),
        ({"name": "navigate_home", "arguments": {}}, "home()"),
        ({"name": "keyboard_enter", "arguments": {}}, "enter()"),
        ({"name": "open_app", "arguments": {"app_name": "Clock"}}, "open_app('Clock')"),
    ],
)
def test_actions_render_in_call_syntax(raw, rendered):
    action = coerce(raw)
    assert action.kind == "tool_call" and not ANDROID.is_final(action)
    assert ANDROID.render_action(action, SCENARIO) == rendered
    assert coerce(rendered) == action


@pytest.mark.parametrize(
    "raw, rendered, answer",
    [
        ("finish()", "finish()", ""),
        (
            "finish('The alarm is set for 6:30 AM.')",
            "finish('The alarm is set for 6:30 AM.')",
            "The alarm is set for 6:30 AM.",
        ),
        ("finish(status='infeasible')", "finish(status='infeasible')", ""),
        ({"name": "status", "arguments": {"goal_status": "complete"}}, "finish()", ""),
        ({"name": "answer", "arguments": {"text": "42"}}, "finish('42')", "42"),
    ],
)
def test_finish_is_final_and_not_simulated(raw, rendered, answer):
    action = coerce(raw)
    assert action.kind == "text" and action.name == "finish" and action.text == answer
    assert ANDROID.is_final(action)
    assert ANDROID.render_action(action, SCENARIO) == rendered
    assert coerce(action) == action


def test_androidworld_json_actions():
    assert android.from_androidworld({"action_type": "click", "index": 5}) == Action.tool_call(
        "tap", {"id": "5"}
    )
    assert android.from_androidworld(
        {"action_type": "scroll", "direction": "up", "index": 2}
    ) == Action.tool_call("swipe", {"direction": "down", "id": "2"})
    assert android.from_androidworld({"action_type": "wait"}) == Action.tool_call("wait", {})
    with pytest.raises(ActionError, match='needs "action_type"'):
        android.from_androidworld({"index": 5})
    with pytest.raises(ActionError, match="unknown AndroidWorld action type 'zoom'"):
        android.from_androidworld({"action_type": "zoom"})


@pytest.mark.parametrize(
    "raw, message",
    [
        ("tap()", "tap() is missing the argument 'id'"),
        ("tap('')", "tap(): id is empty"),
        ("type('5')", "type() is missing the argument 'text'"),
        (
            "swipe('sideways')",
            "swipe(): direction='sideways' is not one of 'up', 'down', 'left', 'right'",
        ),
        ("open_app('')", "open_app(): name is empty"),
        ("tap('1'); back()", "one action per step, got 2 calls"),
        ("click('4')", "unknown action 'click'; allowed: tap, long_press, type"),
        ("finish(status='maybe')", "status='maybe' is not one of 'complete', 'infeasible'"),
        ("The Wi-Fi is on", "or finish('...')"),
        ({"name": "click", "arguments": {"x": 100, "y": 200}}, "click needs an element index"),
        ({"name": "input_text", "arguments": {"text": "hi"}}, "input_text needs the index"),
        ({"name": "click", "arguments": {"index": 5, "extra": 1}}, "does not take ['extra']"),
        (
            {"name": "swipe", "arguments": {"direction": "up", "speed": 2}},
            "swipe() has no argument 'speed'",
        ),
        ([{"keystrokes": "ls\n"}], "the phone takes actions like tap('7'), not keystrokes"),
    ],
)
def test_bad_actions_are_rejected_with_a_reason(raw, message):
    with pytest.raises(ActionError) as info:
        coerce(raw)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "line, rendered",
    [
        ("tap 7", "tap('7')"),
        ("tap('7')", "tap('7')"),
        ("type 5 see you at 7", "type('5', 'see you at 7')"),
        ("swipe up", "swipe('up')"),
        ("swipe up id=3", "swipe('up', id='3')"),
        ("back", "back()"),
        ("open_app Clock", "open_app('Clock')"),
        ("finish it's on", 'finish("it\'s on")'),
        ('{"action_type": "click", "index": 5}', "tap('5')"),
        ('{"action_type": "input_text", "text": "hi", "index": 3}', "type('3', 'hi')"),
        ('{"name": "home", "arguments": {}}', "home()"),
    ],
)
def test_play_input(line, rendered):
    action = coerce(ANDROID.parse_input(line, SCENARIO))
    assert ANDROID.render_action(action, SCENARIO) == rendered


GOOD_SCREEN = (
    "App: Settings\n"
    "Activity: com.android.settings/.SubSettings\n"
    "[1] android.widget.FrameLayout ''\n"
    "  [10] android.widget.TextView 'Internet'\n"
    "  [11] android.widget.LinearLayout 'Wi-Fi' clickable\n"
    "    [12] android.widget.Switch 'Wi-Fi' checkable checked=true clickable\n"
    "  [13] android.widget.LinearLayout 'Lindenweg 4' clickable\n"
    "    android.widget.TextView 'Connected'"
)


@pytest.mark.parametrize(
    "text",
    [
        GOOD_SCREEN,
        # uiautomator-style bounds, a toast, and only an Activity line
        "Activity: com.google.android.deskclock/.DeskClock\n"
        "[1] android.widget.FrameLayout '' bounds=[0,0][1080,2400]\n"
        "  [2] android.widget.Toast 'Alarm set for 10 hours and 5 minutes from now.'",
    ],
)
def test_well_formed_screens_pass_the_check(text):
    assert ANDROID.check_observation(text, Action.tool_call("tap", {"id": "1"}), SCENARIO) == []


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[1] android.widget.FrameLayout ''", "no 'App:' line before the tree"),
        ("App: Settings\nWi-Fi is now on.", "not a tree node: line 2"),
        ("App: Settings", "no tree nodes"),
        ("App: Settings\n[1] a ''\n  [1] b ''", "duplicate id [1]"),
        ("App: Settings\n[1] a ''\n      [2] b ''", "indented 3 levels"),
        (GOOD_SCREEN + "\n<think>", "stray <think> tag"),
    ],
)
def test_broken_screens_fail_the_check(text, problem):
    problems = ANDROID.check_observation(text, Action.tool_call("tap", {"id": "1"}), SCENARIO)
    assert any(problem in p for p in problems), problems


def test_scenario_and_prompt():
    assert ANDROID.initial_observation(SCENARIO).startswith(
        "App: Settings\nActivity: com.android.settings/.Settings\n[1] android.widget.FrameLayout"
    )
    prompt = ANDROID.system_prompt(SCENARIO)
    assert "Android phone (Pixel 6)" in prompt and "Device: Pixel 6, Android 13" in prompt
    assert "Lindenweg 4" in prompt and "'Network & internet' clickable" in prompt
    with pytest.raises(simgym.ScenarioError, match="screen tree is malformed"):
        ANDROID.scenario({"screen": "the settings app"})
    assert {t.name for t in android.TOOLS} >= {"tap", "type", "swipe", "finish"}


@pytest.mark.parametrize("path", EXAMPLES)
async def test_examples_validate_and_run(path):
    (spec,) = load_specs([path])
    assert spec.task.domain == "android" and 3 <= len(spec.actions) <= 5
    env = simgym.make(
        "android", world_model=simgym.FunctionWorldModel(scripted_world([GOOD_SCREEN] * 5))
    )
    trajectory = await run_episode(env, spec)
    assert [t.observation.kind for t in trajectory.turns if t.observation.kind == "error"] == []
    assert len(trajectory.turns) == len(spec.actions)
    assert ANDROID.check_observation(trajectory.initial_observation.text, None, env.scenario) == []


def test_there_are_at_least_five_examples():
    assert len(EXAMPLES) >= 5


WIFI_SCREENS = [
    "App: Settings\nActivity: com.android.settings/.SubSettings\n"
    "[1] android.widget.FrameLayout ''\n"
    "  [8] android.widget.ImageButton 'Navigate up' clickable\n"
    "  [9] android.widget.TextView 'Network & internet'\n"
    "  [10] androidx.recyclerview.widget.RecyclerView '' scrollable\n"
    "    [12] android.widget.LinearLayout 'Internet' clickable\n"
    "      android.widget.TextView 'Off'\n"
    "    [13] android.widget.LinearLayout 'Calls & SMS' clickable\n"
    "    [14] android.widget.LinearLayout 'SIMs' clickable\n"
    "    [15] android.widget.LinearLayout 'Airplane mode' clickable\n"
    "      [16] android.widget.Switch 'Airplane mode' checkable checked=false clickable",
    "App: Settings\nActivity: com.android.settings/.SubSettings\n"
    "[1] android.widget.FrameLayout ''\n"
    "  [8] android.widget.ImageButton 'Navigate up' clickable\n"
    "  [18] android.widget.TextView 'Internet'\n"
    "  [19] android.widget.LinearLayout 'Wi-Fi' clickable\n"
    "    [20] android.widget.Switch 'Wi-Fi' checkable checked=false clickable\n"
    "  android.widget.TextView 'To see available networks, turn Wi-Fi on.'",
    "App: Settings\nActivity: com.android.settings/.SubSettings\n"
    "[1] android.widget.FrameLayout ''\n"
    "  [8] android.widget.ImageButton 'Navigate up' clickable\n"
    "  [18] android.widget.TextView 'Internet'\n"
    "  [19] android.widget.LinearLayout 'Wi-Fi' clickable\n"
    "    [20] android.widget.Switch 'Wi-Fi' checkable checked=true clickable\n"
    "  [21] android.widget.LinearLayout 'Lindenweg 4' clickable\n"
    "    android.widget.TextView 'Connecting...'",
    "App: Settings\nActivity: com.android.settings/.SubSettings\n"
    "[1] android.widget.FrameLayout ''\n"
    "  [8] android.widget.ImageButton 'Navigate up' clickable\n"
    "  [18] android.widget.TextView 'Internet'\n"
    "  [19] android.widget.LinearLayout 'Wi-Fi' clickable\n"
    "    [20] android.widget.Switch 'Wi-Fi' checkable checked=true clickable\n"
    "  [21] android.widget.LinearLayout 'Lindenweg 4' clickable\n"
    "    android.widget.TextView 'Connected'",
]


async def test_recorded_episode_replays_exactly(tmp_path):
    (spec,) = load_specs(["examples/android/wifi_on.yaml"])
    path = tmp_path / "android.jsonl"
    with simgym.TrajectoryWriter(path) as writer:
        env = simgym.make(
            "android",
            world_model=simgym.FunctionWorldModel(scripted_world(WIFI_SCREENS)),
            writer=writer,
        )
        recorded = await run_episode(env, spec)
    assert recorded.done and [t.format_problems for t in recorded.turns] == [[]] * 5

    replay_env = simgym.make("android", world_model="replay", trajectories=str(path))
    replayed = await run_episode(replay_env, spec)
    assert [t.observation.text for t in replayed.turns] == [
        t.observation.text for t in recorded.turns
    ]
    assert [t.observation.text for t in replayed.turns[:4]] == WIFI_SCREENS
    assert replayed.done and replayed.turns[-1].action.name == "finish"
    for turn in replayed.turns[:4]:
        assert (
            ANDROID.check_observation(turn.observation.text, turn.action, replay_env.scenario) == []
        )


async def test_embedded_model_simulates_two_turns():
    env = simgym.make(
        "android",
        world_model="local",
        max_tokens=48,
        seed=5,
        validation_retries=0,
        render_known=True,
    )
    first = await env.reset("Turn on Wi-Fi")
    assert first.text.startswith("App: Settings")
    for action in ("tap('4')", {"name": "navigate_back", "arguments": {}}):
        result = await env.step(action)
        assert result.observation.kind == "observation" and result.observation.text.strip()
    turns = env.trajectory.turns
    assert [t.action_text for t in turns] == ["tap('4')", "back()"]
    assert all(t.usage.prompt_tokens > 100 and t.usage.completion_tokens > 0 for t in turns)
    await env.close()
