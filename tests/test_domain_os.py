"""The os domain: pyautogui code, desktop trees, examples, replay."""

import glob

import pytest

import simgym
import simgym.domains.os as desktop
from simgym import Action, ActionError
from simgym.rollout.scripted import load_specs, run_episode
from support import scripted_world

OS = simgym.get_domain("os")
SCENARIO = OS.scenario(None)
EXAMPLES = sorted(glob.glob("examples/os/*.yaml"))


def coerce(raw):
    return OS.coerce_action(raw, SCENARIO, 4000)


@pytest.mark.parametrize(
    "raw, rendered",
    [
        ("pyautogui.click(512, 300)", "pyautogui.click(512, 300)"),
        ("click(512, 300)", "pyautogui.click(512, 300)"),
        ("pyautogui.click(x=512, y=300, clicks=1, button='left')", "pyautogui.click(512, 300)"),
        ("pyautogui.click(10, 20, button='right')", "pyautogui.click(10, 20, button='right')"),
        ("pyautogui.click()", "pyautogui.click()"),
        ("pyautogui.doubleClick(400, 500)", "pyautogui.doubleClick(400, 500)"),
        ("pyautogui.moveTo(100, 200, duration=0.5)", "pyautogui.moveTo(100, 200, duration=0.5)"),
        ("pyautogui.dragTo(800, 600)", "pyautogui.dragTo(800, 600)"),
        ("pyautogui.write('hello\\n')", "pyautogui.write('hello\\n')"),
        ("pyautogui.typewrite(['a', 'enter'])", "pyautogui.typewrite(['a', 'enter'])"),
        ("pyautogui.press('Enter')", "pyautogui.press('Enter')"),
        ("pyautogui.press('tab', presses=3)", "pyautogui.press('tab', presses=3)"),
        ("pyautogui.hotkey('ctrl', 'shift', 't')", "pyautogui.hotkey('ctrl', 'shift', 't')"),
        ("pyautogui.scroll(-5)", "pyautogui.scroll(-5)"),
        ("pyautogui.keyDown('shift')", "pyautogui.keyDown('shift')"),
        ("time.sleep(2)", "time.sleep(2)"),
        ({"name": "click", "arguments": {"x": 5, "y": 6}}, "pyautogui.click(5, 6)"),
        (
            {"name": "CLICK", "arguments": {"x": 5, "y": 6, "num_clicks": 2}},
            "pyautogui.click(5, 6, clicks=2)",
        ),
        ({"name": "TYPING", "arguments": {"text": "hi"}}, "pyautogui.write('hi')"),
        ({"name": "HOTKEY", "arguments": {"keys": ["ctrl", "c"]}}, "pyautogui.hotkey('ctrl', 'c')"),
        ({"name": "SCROLL", "arguments": {"dx": 0, "dy": -3}}, "pyautogui.scroll(-3)"),
        ("WAIT", "WAIT"),
        ({"name": "WAIT", "arguments": {}}, "WAIT"),
    ],
)
def test_single_actions_render_as_pyautogui_code(raw, rendered):
    action = coerce(raw)
    assert action.kind == "tool_call" and not OS.is_final(action)
    assert OS.render_action(action, SCENARIO) == rendered
    assert coerce(rendered) == action


def test_several_statements_become_one_sequence():
    code = (
        "```python\nimport pyautogui\nimport time\n"
        "pyautogui.hotkey('ctrl', 'a')  # select all\n"
        "time.sleep(0.5)\npyautogui.write('report-2024.odt')\npyautogui.press('enter')\n```"
    )
    action = coerce(code)
    assert action == Action.tool_call(
        "sequence",
        {
            "steps": [
                {"name": "hotkey", "arguments": {"keys": ["ctrl", "a"]}},
                {"name": "sleep", "arguments": {"secs": 0.5}},
                {"name": "write", "arguments": {"message": "report-2024.odt"}},
                {"name": "press", "arguments": {"keys": "enter"}},
            ]
        },
    )
    rendered = OS.render_action(action, SCENARIO)
    assert rendered == (
        "pyautogui.hotkey('ctrl', 'a')\ntime.sleep(0.5)\n"
        "pyautogui.write('report-2024.odt')\npyautogui.press('enter')"
    )
    assert coerce(rendered) == action and coerce(action) == action
    # computer_13's SCROLL with both deltas is two calls
    both = coerce({"name": "SCROLL", "arguments": {"dx": 2, "dy": -1}})
    assert OS.render_action(both, SCENARIO) == "pyautogui.scroll(-1)\npyautogui.hscroll(2)"


@pytest.mark.parametrize(
    "raw, name",
    [
        ("DONE", "DONE"),
        ("done", "DONE"),
        ("FAIL", "FAIL"),
        ({"name": "DONE", "arguments": {}}, "DONE"),
    ],
)
def test_done_and_fail_are_final(raw, name):
    action = coerce(raw)
    assert action == Action(kind="text", text=name, name=name) and OS.is_final(action)
    assert OS.render_action(action, SCENARIO) == name


@pytest.mark.parametrize(
    "raw, message",
    [
        ("pyautogui.click(2000, 300)", "click(): (2000, 300) is outside the 1920x1080 screen"),
        ("pyautogui.click(-1, 5)", "is outside the 1920x1080 screen"),
        ("pyautogui.click(x=5)", "click(): give both x and y, or neither"),
        ("pyautogui.moveTo(5)", "moveTo() is missing the argument 'y'"),
        ("pyautogui.press('control')", "press(): 'control' is not a pyautogui key name"),
        ("pyautogui.hotkey('ctrl', 'sss')", "hotkey(): 'sss' is not a pyautogui key name"),
        ("pyautogui.hotkey()", "hotkey() is missing the argument 'keys'"),
        ("pyautogui.click(1, 2, button='left2')", "button='left2' is not one of"),
        ("time.sleep(-1)", "sleep(): secs must not be negative"),
        ("time.sleep(3600)", "sleep(): at most 300 seconds"),
        ("import os\nos.system('rm -rf ~')", "only calls are allowed, not `import os`"),
        ("os.system('ls')", "unknown action 'os.system'"),
        ("subprocess.run(['ls'])", "unknown action 'subprocess.run'"),
        ("print(pyautogui.position())", "unknown action 'print'"),
        ("x, y = pyautogui.position()", "only calls are allowed"),
        ("for _ in range(3):\n    pyautogui.press('tab')", "only calls are allowed"),
        ("pyautogui.write(open('/etc/passwd').read())", "arguments must be literals"),
        ("\n".join(["pyautogui.press('a')"] * 31), "at most 30 calls per step, got 31"),
        ({"name": "CLICK", "arguments": {"x": 5}}, "click(): give both x and y, or neither"),
        ({"name": "SCROLL", "arguments": {}}, "SCROLL needs a non-zero dx or dy"),
        ({"name": "sequence", "arguments": {"steps": []}}, 'a sequence needs "steps"'),
        ({"name": "launch", "arguments": {}}, "unknown action 'launch'"),
        (
            [{"keystrokes": "ls\n"}],
            "the desktop takes pyautogui code such as pyautogui.click(512, 300)",
        ),
    ],
)
def test_bad_actions_are_rejected_with_a_reason(raw, message):
    with pytest.raises(ActionError) as info:
        coerce(raw)
    assert message in str(info.value)


def test_screen_size_bounds_clicks():
    small = OS.scenario({**OS.default_scenario(), "screen": "1280x720"})
    with pytest.raises(ActionError, match="outside the 1280x720 screen"):
        OS.coerce_action("pyautogui.click(1300, 10)", small, 1000)
    with pytest.raises(simgym.ScenarioError, match="WIDTHxHEIGHT"):
        OS.scenario({**OS.default_scenario(), "screen": "big"})
    with pytest.raises(simgym.ScenarioError, match="desktop tree is malformed"):
        OS.scenario({**OS.default_scenario(), "tree": "a desktop with an editor"})


@pytest.mark.parametrize(
    "line, rendered",
    [
        ("click 512 300", "pyautogui.click(512, 300)"),
        ("click 512 300 button=right", "pyautogui.click(512, 300, button='right')"),
        ("hotkey ctrl s", "pyautogui.hotkey('ctrl', 's')"),
        ("write hello world", "pyautogui.write('hello world')"),
        ("press enter", "pyautogui.press('enter')"),
        ("scroll -3", "pyautogui.scroll(-3)"),
        (
            "pyautogui.click(5, 5); pyautogui.press('f2')",
            "pyautogui.click(5, 5)\npyautogui.press('f2')",
        ),
        ("WAIT", "WAIT"),
        ("done", "DONE"),
        ('{"name": "moveTo", "arguments": {"x": 1, "y": 2}}', "pyautogui.moveTo(1, 2)"),
    ],
)
def test_play_input(line, rendered):
    assert OS.render_action(coerce(OS.parse_input(line, SCENARIO)), SCENARIO) == rendered


GOOD_DESKTOP = (
    "Focused window: Rename File\n"
    "[3] application 'Files'\n"
    "  [4] frame 'Documents - Files' active pos=(160,90) size=(1200,760)\n"
    "    [12] table-cell 'draft final v2.odt' selected pos=(360,186) size=(1000,36)\n"
    "  [40] dialog 'Rename File' focused pos=(560,300) size=(420,140)\n"
    "    [41] text 'draft final v2.odt' editable focused selection=(0,14) pos=(580,340) size=(380,34)\n"
    "    [42] push-button 'Rename' pos=(860,390) size=(100,34)"
)


@pytest.mark.parametrize(
    "text",
    [
        GOOD_DESKTOP,
        "Active window: Terminal\n\n[1] application 'gnome-terminal-server'\n"
        "    [2] frame 'lea@studio:~' active\n"
        "        [4] terminal 'lea@studio:~$ df -h ~\\nFilesystem Size Used Avail' focused",
    ],
)
def test_well_formed_desktops_pass_the_check(text):
    assert OS.check_observation(text, Action.tool_call("click", {"x": 1, "y": 1}), SCENARIO) == []


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[1] application 'Files'", "no 'Focused window:' line before the tree"),
        ("Focused window: Files\nThe file was renamed.", "not a tree node: line 2"),
        ("Focused window: Files", "no tree nodes"),
        ("Focused window: Files\n[1] application 'a'\n  [1] frame 'b'", "duplicate id [1]"),
        ("Focused window: Files\n[1] application 'a'\n      [2] frame 'b'", "indented 3 levels"),
        ("Focused window: Files\n```\n[1] application 'a'\n```", "code fence in the tree"),
    ],
)
def test_broken_desktops_fail_the_check(text, problem):
    problems = OS.check_observation(text, Action.tool_call("click", {"x": 1, "y": 1}), SCENARIO)
    assert any(problem in p for p in problems), problems


def test_prompt_is_filled_from_the_scenario():
    prompt = OS.system_prompt(SCENARIO)
    assert "Ubuntu 22.04 (GNOME), screen 1920x1080" in prompt
    assert "Focused window: todo.txt (~/Documents) - Text Editor\n[1] application" in prompt
    assert "pixels on the 1920x1080 screen" in prompt
    assert OS.initial_observation(SCENARIO).startswith("Focused window: todo.txt")
    assert {t.name for t in desktop.TOOLS} >= {"click", "hotkey", "write", "sleep"}


@pytest.mark.parametrize("path", EXAMPLES)
async def test_examples_validate_and_run(path):
    (spec,) = load_specs([path])
    assert spec.task.domain == "os" and 3 <= len(spec.actions) <= 5
    env = simgym.make(
        "os", world_model=simgym.FunctionWorldModel(scripted_world([GOOD_DESKTOP] * 5))
    )
    trajectory = await run_episode(env, spec)
    assert [t.observation.kind for t in trajectory.turns if t.observation.kind == "error"] == []
    assert len(trajectory.turns) == len(spec.actions)
    assert OS.check_observation(trajectory.initial_observation.text, None, env.scenario) == []


def test_there_are_at_least_five_examples():
    assert len(EXAMPLES) >= 5


_FILES = (
    "[3] application 'Files'\n  [4] frame 'Documents - Files' active pos=(160,90) size=(1200,760)\n"
)
RENAME_SCREENS = [
    "Focused window: Documents - Files\n"
    + _FILES
    + "    [10] table 'Files' pos=(360,140) size=(1000,710)\n"
    "      [11] table-cell 'budget.ods' pos=(360,150) size=(1000,36)\n"
    "      [12] table-cell 'draft final v2.odt' selected focused pos=(360,186) size=(1000,36)\n"
    "      [13] table-cell 'photos' pos=(360,222) size=(1000,36)",
    GOOD_DESKTOP,
    "Focused window: Documents - Files\n"
    + _FILES
    + "    [10] table 'Files' pos=(360,140) size=(1000,710)\n"
    "      [11] table-cell 'budget.ods' pos=(360,150) size=(1000,36)\n"
    "      [13] table-cell 'photos' pos=(360,186) size=(1000,36)\n"
    "      [12] table-cell 'report-2024.odt' selected focused pos=(360,222) size=(1000,36)",
]


async def test_recorded_episode_replays_exactly(tmp_path):
    (spec,) = load_specs(["examples/os/rename_file.yaml"])
    path = tmp_path / "os.jsonl"
    with simgym.TrajectoryWriter(path) as writer:
        env = simgym.make(
            "os",
            world_model=simgym.FunctionWorldModel(scripted_world(RENAME_SCREENS)),
            writer=writer,
        )
        recorded = await run_episode(env, spec)
    assert recorded.done and [t.format_problems for t in recorded.turns] == [[]] * 4

    replay_env = simgym.make("os", world_model="replay", trajectories=str(path))
    replayed = await run_episode(replay_env, spec)
    assert [t.observation.text for t in replayed.turns] == [
        t.observation.text for t in recorded.turns
    ]
    assert [t.observation.text for t in replayed.turns[:3]] == RENAME_SCREENS
    assert replayed.turns[2].action_text.count("\n") == 2  # the three-line action
    for turn in replayed.turns[:3]:
        assert OS.check_observation(turn.observation.text, turn.action, replay_env.scenario) == []


async def test_embedded_model_simulates_two_turns():
    env = simgym.make(
        "os", world_model="local", max_tokens=48, seed=5, validation_retries=0, render_known=True
    )
    first = await env.reset("Save the file")
    assert first.text.startswith("Focused window: todo.txt")
    for action in ("pyautogui.hotkey('ctrl', 's')", "pyautogui.click(1775, 57)"):
        result = await env.step(action)
        assert result.observation.kind == "observation" and result.observation.text.strip()
    turns = env.trajectory.turns
    assert [t.action_text for t in turns] == [
        "pyautogui.hotkey('ctrl', 's')",
        "pyautogui.click(1775, 57)",
    ]
    assert all(t.usage.prompt_tokens > 100 and t.usage.completion_tokens > 0 for t in turns)
    await env.close()
