"""OS (domain name ``os``): an agent drives a desktop with pyautogui code, OSWorld-style;
the world model shows the desktop's accessibility tree after each action.

An action is pyautogui code, one call per line (``pyautogui.click(512, 300)``,
``pyautogui.hotkey('ctrl', 's')``, ``time.sleep(1)``; ``import pyautogui`` is allowed and
nothing else is), or one of the special actions ``WAIT``, ``DONE`` and ``FAIL``. Tool calls
name the pyautogui function (``{"name": "click", "arguments": {"x": 512, "y": 300}}``);
OSWorld's ``computer_13`` action types (``CLICK``, ``TYPING``, ``HOTKEY`` ...) map onto it.
Several calls become one ``sequence`` action. ``DONE`` and ``FAIL`` end the episode without
being simulated. The module is named ``desktop`` so it does not read as the stdlib ``os``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from simgym.core.domain import Demonstration, Domain, ScenarioBase, register_domain
from simgym.core.errors import ActionError
from simgym.core.grounding import Grounding
from simgym.core.state import STRING, STRING_LIST, STRING_MAP, object_schema
from simgym.core.types import Action
from simgym.domains._gui import calls, uitree
from simgym.domains._gui.calls import Call, Param, Signature
from simgym.domains._gui.ground import check_screens, ground_os, observe_os, pinned

_X = Param("x", "number", default=None, description="screen x in pixels")
_Y = Param("y", "number", default=None, description="screen y in pixels")
_BUTTON = Param("button", default="left", choices=("left", "middle", "right"), style="kw")
_DURATION = Param("duration", "number", default=0.0, style="kw")
_INTERVAL = Param("interval", "number", default=0.0, style="kw")
_XY_REQUIRED = (Param("x", "number"), Param("y", "number"))


def _gui(name: str, *params: Param, description: str = "", **extra: Any) -> Signature:
    return Signature(name, params, module="pyautogui", description=description, **extra)


TABLE = calls.make_table(
    _gui(
        "click",
        _X,
        _Y,
        Param("clicks", "integer", default=1, style="kw"),
        _INTERVAL,
        _BUTTON,
        _DURATION,
        description="Click at (x, y), or where the mouse is.",
    ),
    _gui("doubleClick", _X, _Y, _INTERVAL, _BUTTON, _DURATION, description="Double-click."),
    _gui("tripleClick", _X, _Y, _INTERVAL, _BUTTON, _DURATION, description="Triple-click."),
    _gui("rightClick", _X, _Y, _DURATION, description="Right-click."),
    _gui("middleClick", _X, _Y, _DURATION, description="Middle-click."),
    _gui("moveTo", *_XY_REQUIRED, _DURATION, description="Move the mouse to (x, y)."),
    _gui("dragTo", *_XY_REQUIRED, _DURATION, _BUTTON, description="Drag the mouse to (x, y)."),
    _gui("mouseDown", _X, _Y, _BUTTON, description="Press a mouse button."),
    _gui("mouseUp", _X, _Y, _BUTTON, description="Release a mouse button."),
    _gui(
        "scroll",
        Param("clicks", "integer"),
        _X,
        _Y,
        description="Scroll: positive clicks scroll up, negative down.",
    ),
    _gui("hscroll", Param("clicks", "integer"), _X, _Y, description="Scroll sideways."),
    _gui(
        "typewrite",
        Param("message", "string|array"),
        _INTERVAL,
        description="Type text, or press the keys of a list.",
    ),
    _gui("write", Param("message"), _INTERVAL, description="Type text."),
    _gui(
        "press",
        Param("keys", "string|array"),
        Param("presses", "integer", default=1, style="kw"),
        _INTERVAL,
        description="Press and release key(s).",
    ),
    _gui(
        "hotkey",
        Param("interval", "number", default=0.0, style="kwonly"),
        varargs=Param("keys", "array"),
        description="Press keys together, e.g. hotkey('ctrl', 's').",
    ),
    _gui("keyDown", Param("key"), description="Hold a key down."),
    _gui("keyUp", Param("key"), description="Release a held key."),
    Signature("sleep", (Param("secs", "number"),), module="time", description="Wait some seconds."),
)
SPECIAL = ("WAIT", "DONE", "FAIL")  # OSWorld's special actions
FINALS = ("DONE", "FAIL")
MAX_CALLS = 30
MAX_SLEEP_S = 300.0
HINT = "pyautogui.click(512, 300)"
TOOLS = calls.tool_specs(TABLE)

_NAMED_KEYS = frozenset(
    """
    accept add alt altleft altright apps backspace browserback browserfavorites browserforward
    browserhome browserrefresh browsersearch browserstop capslock clear command convert ctrl
    ctrlleft ctrlright decimal del delete divide down end enter esc escape execute final fn
    help home insert left launchapp1 launchapp2 launchmail launchmediaselect modechange
    multiply nexttrack nonconvert numlock option optionleft optionright pagedown pageup pause
    pgdn pgup playpause prevtrack print printscreen prntscrn prtsc prtscr return right
    scrolllock select separator shift shiftleft shiftright sleep space stop subtract tab up
    volumedown volumemute volumeup win winleft winright yen
    """.split()
    + [f"f{i}" for i in range(1, 25)]
    + [f"num{i}" for i in range(10)]
)
_KEY_PARAMS = {"press": "keys", "hotkey": "keys", "keyDown": "key", "keyUp": "key"}


class OSScenario(ScenarioBase):
    """The desktop: system, screen, applications, windows, files."""

    os: str = "Ubuntu 22.04 (GNOME)"
    screen: str = Field("1920x1080", description="screen size, WIDTHxHEIGHT in pixels")
    user: str = "user"
    apps: list[str] = Field(default_factory=list, description="installed applications")
    windows: list[str] = Field(default_factory=list, description="open windows, by title")
    focused: str = Field("Desktop", description="title of the focused window")
    tree: str = Field(description="accessibility tree of the desktop at the start")
    files: dict[str, str] = Field(default_factory=dict, description="path -> content")
    screens: dict[str, str] = Field(
        default_factory=dict,
        description="what some actions show, fixed by the scenario: an action in call syntax "
        "(pyautogui.click(960, 540)) -> the whole next observation (the Focused window "
        "line, then the tree); simgym answers these from the scenario, the world model the rest",
    )

    @field_validator("screen")
    @classmethod
    def _size(cls, value: str) -> str:
        if not re.fullmatch(r"[1-9]\d{1,4}x[1-9]\d{1,4}", value.strip()):
            raise ValueError(f"screen must be WIDTHxHEIGHT, e.g. 1920x1080, got {value!r}")
        return value.strip()

    @field_validator("tree")
    @classmethod
    def _tree(cls, value: str) -> str:
        problems = uitree.tree_problems(value)
        if problems:
            raise ValueError("the desktop tree is malformed: " + "; ".join(problems))
        return value.strip("\n")

    @model_validator(mode="after")
    def _screens(self) -> OSScenario:
        self.screens = check_screens(
            self.screens,
            lambda text: _render(_validate(Action.say(text), self), self),
            lambda text: uitree.observation_problems(text, required=[_FOCUS_HEADERS]),
        )
        return self

    @property
    def size(self) -> tuple[int, int]:
        width, height = self.screen.split("x")
        return int(width), int(height)


# -- actions -------------------------------------------------------------------------------


def _validate(action: Action, scenario: OSScenario) -> Action:
    if action.kind == "keystrokes":
        raise ActionError(f"the desktop takes pyautogui code such as {HINT}, not keystrokes")
    special = _special(action)
    if special is not None:
        return _special_action(special)
    if action.kind == "tool_call":
        steps = _tool_calls(action.name or "", action.arguments)
    else:
        steps = calls.parse_calls(action.text or "", TABLE, max_calls=MAX_CALLS, hint=HINT)
    if len(steps) > MAX_CALLS:  # nested sequences flatten past the per-level check
        raise ActionError(f"at most {MAX_CALLS} calls per step, got {len(steps)}")
    for step in steps:
        _check_call(step, scenario)
    if len(steps) == 1:
        return calls.to_action(steps[0])
    return Action.tool_call(
        "sequence", {"steps": [{"name": s.name, "arguments": s.args} for s in steps]}
    )


def _special(action: Action) -> str | None:
    word = (action.name if action.kind == "tool_call" else action.name or action.text) or ""
    word = calls.strip_fences(word).strip().upper()
    return word if word in SPECIAL else None


def _special_action(word: str) -> Action:
    if word in FINALS:  # the agent's verdict: ends the episode, nothing to simulate
        return Action(kind="text", text=word, name=word)
    return Action.tool_call(word, {})


def _tool_calls(name: str, arguments: Mapping[str, Any]) -> list[Call]:
    if name == "sequence":
        steps = arguments.get("steps")
        if not isinstance(steps, list) or not steps:
            raise ActionError('a sequence needs "steps": [{"name": ..., "arguments": {...}}]')
        if len(steps) > MAX_CALLS:
            raise ActionError(f"at most {MAX_CALLS} calls per step, got {len(steps)}")
        out = []
        for step in steps:
            if not isinstance(step, dict) or not isinstance(step.get("name"), str):
                raise ActionError("each step of a sequence needs a name and arguments")
            out.extend(_tool_calls(step["name"], step.get("arguments") or {}))
        return out
    if name in _COMPUTER13:
        return _COMPUTER13[name](dict(arguments))
    return [calls.call_from_tool(name, arguments, TABLE)]


def _c13(target: str, **renames: str) -> Callable[[dict[str, Any]], list[Call]]:
    """A computer_13 action type that is one pyautogui call with renamed parameters."""

    def convert(args: dict[str, Any]) -> list[Call]:
        named = {renames.get(k, k): v for k, v in args.items()}
        return [calls.call_from_tool(target, named, TABLE)]

    return convert


def _c13_scroll(args: dict[str, Any]) -> list[Call]:
    dx, dy = args.pop("dx", 0), args.pop("dy", 0)
    if args:
        raise ActionError(f"SCROLL takes dx and dy, not {sorted(args)}")
    out = [calls.call_from_tool("scroll", {"clicks": dy}, TABLE)] if dy else []
    out += [calls.call_from_tool("hscroll", {"clicks": dx}, TABLE)] if dx else []
    if not out:
        raise ActionError("SCROLL needs a non-zero dx or dy")
    return out


# OSWorld's structured action space, as pyautogui calls.
_COMPUTER13 = {
    "CLICK": _c13("click", num_clicks="clicks"),
    "RIGHT_CLICK": _c13("rightClick"),
    "DOUBLE_CLICK": _c13("doubleClick"),
    "MOVE_TO": _c13("moveTo"),
    "DRAG_TO": _c13("dragTo"),
    "MOUSE_DOWN": _c13("mouseDown"),
    "MOUSE_UP": _c13("mouseUp"),
    "SCROLL": _c13_scroll,
    "TYPING": _c13("write", text="message"),
    "PRESS": _c13("press", key="keys"),
    "KEY_DOWN": _c13("keyDown"),
    "KEY_UP": _c13("keyUp"),
    "HOTKEY": _c13("hotkey"),
}


def _check_call(call: Call, scenario: OSScenario) -> None:
    args = call.args
    if ("x" in args) != ("y" in args):
        raise ActionError(f"{call.name}(): give both x and y, or neither")
    if "x" in args and args["x"] is not None and args["y"] is not None:
        width, height = scenario.size
        if not (0 <= args["x"] < width and 0 <= args["y"] < height):
            raise ActionError(
                f"{call.name}(): ({args['x']}, {args['y']}) is outside the {width}x{height} screen"
            )
    for key in ("duration", "interval", "secs"):
        if args.get(key, 0) < 0:
            raise ActionError(f"{call.name}(): {key} must not be negative")
    if args.get("secs", 0) > MAX_SLEEP_S:
        raise ActionError(f"sleep(): at most {MAX_SLEEP_S:g} seconds")
    if args.get("clicks", 1) < 0 and call.name in ("click", "doubleClick", "tripleClick"):
        raise ActionError(f"{call.name}(): clicks must not be negative")
    keys = args.get(_KEY_PARAMS.get(call.name, ""))
    if call.name == "typewrite" and isinstance(args["message"], list):
        keys = args["message"]
    for key in [keys] if isinstance(keys, str) else keys or []:
        if not _is_key(key):
            raise ActionError(f"{call.name}(): {key!r} is not a pyautogui key name")


def _is_key(key: str) -> bool:
    return (len(key) == 1 and key.isprintable()) or key.lower() in _NAMED_KEYS


def _render(action: Action, scenario: OSScenario) -> str:
    if action.kind == "text" or action.name in SPECIAL:
        return action.name or action.text or ""
    if action.name == "sequence":
        steps = action.arguments["steps"]
        return "\n".join(
            calls.render_call(Call(s["name"], s.get("arguments", {})), TABLE) for s in steps
        )
    return calls.render_call(Call(action.name or "", action.arguments), TABLE)


# -- observations --------------------------------------------------------------------------

_FOCUS_HEADERS = ("Focused window", "Active window", "Window", "Focused", "Focused application")


def _ground(action: Action, state: dict[str, Any], scenario: OSScenario) -> Grounding | None:
    screen = scenario.screens.get(_render(action, scenario)) if scenario.screens else None
    return pinned(ground_os(action, state, scenario), state, screen)


def _check(text: str, action: Action, scenario: OSScenario) -> list[str]:
    return uitree.observation_problems(text, required=[_FOCUS_HEADERS])


def _parse_input(line: str, scenario: OSScenario) -> Action:
    """pyautogui code (``pyautogui.click(512, 300)``; ``;`` separates calls), WAIT, DONE,
    FAIL, a JSON tool call, or a short form: ``click 512 300``, ``hotkey ctrl s``,
    ``write hello world``, ``press enter``."""
    stripped = line.strip()
    if stripped.upper() in SPECIAL or calls.looks_like_call(stripped):
        return Action.say(stripped)
    if stripped.startswith("{"):
        return Action.parse(stripped)
    return calls.to_action(calls.parse_short(stripped, TABLE))


def _initial(scenario: OSScenario) -> str:
    return f"Focused window: {scenario.focused}\n{scenario.tree}"


def _slots(scenario: OSScenario) -> dict[str, str]:
    width, height = scenario.size
    lines = [
        f"- System: {scenario.os}, screen {width}x{height}, user `{scenario.user}`",
    ]
    if scenario.apps:
        lines.append("- Installed applications: " + ", ".join(scenario.apps))
    if scenario.windows:
        lines.append("- Open windows: " + " | ".join(scenario.windows))
    if scenario.files:
        lines.append("- Files:")
        for path, content in scenario.files.items():
            shown = content.strip("\n")
            lines.append(f"  - {path}" + (f":\n```\n{shown}\n```" if shown else ""))
    if scenario.notes:
        lines.append(f"- Also true: {scenario.notes}")
    return {
        "environment": "\n".join(lines),
        "initial_desktop": _initial(scenario),
        "screen": f"{width}x{height}",
    }


def _default() -> dict[str, Any]:
    return {
        "os": "Ubuntu 22.04 (GNOME)",
        "screen": "1920x1080",
        "user": "sam",
        "apps": ["Text Editor", "Files", "Terminal", "Firefox"],
        "windows": ["todo.txt (~/Documents) - Text Editor"],
        "focused": "todo.txt (~/Documents) - Text Editor",
        "tree": (
            "[1] application 'Text Editor'\n"
            "  [2] frame 'todo.txt (~/Documents) - Text Editor' active "
            "pos=(0,32) size=(1920,1048)\n"
            "    [3] push-button 'Open' pos=(12,40) size=(80,34)\n"
            "    [4] push-button 'Save' pos=(1740,40) size=(70,34)\n"
            "    [5] text 'buy stamps\\nreturn library books' focused editable "
            "pos=(0,82) size=(1920,998)"
        ),
    }


DEMONSTRATIONS = (
    Demonstration(
        action="pyautogui.hotkey('ctrl', 'o')",
        observation="Focused window: Open File\n"
        "[1] application 'Text Editor'\n"
        "  [20] dialog 'Open File' focused pos=(560,240) size=(800,600)\n"
        "    [21] push-button 'Cancel' pos=(1080,780) size=(110,34)",
    ),
    Demonstration(
        action="pyautogui.click(1135, 797)",
        observation="Focused window: notes.txt - Text Editor\n"
        "[1] application 'Text Editor'\n"
        "  [2] frame 'notes.txt - Text Editor' active pos=(0,32) size=(1920,1048)",
        note="after example 1: the click hit 'Cancel'",
    ),
)

OS = register_domain(
    Domain(
        name="os",
        family="gui",
        description="A desktop: pyautogui code in, the desktop's accessibility tree out.",
        scenario_model=OSScenario,
        prompt_file=Path(__file__).parent / "prompts" / "os.md",
        validate_action=_validate,
        render_action=_render,
        initial_observation=_initial,
        check_observation=_check,
        parse_input=_parse_input,
        prompt_slots=_slots,
        is_final=lambda action: action.kind == "text",
        observation_prefix=lambda action, scenario, last: "Focused window: ",
        default_scenario=_default,
        demonstrations=DEMONSTRATIONS,
        action_hint="pyautogui.click(512, 300), pyautogui.hotkey('ctrl', 's'), WAIT, DONE",
        agent_tools=lambda scenario: list(TOOLS),
        initial_state=lambda s: {
            "focused": s.focused,
            "windows": list(s.windows),
            "files": dict(s.files),
            "tree": s.tree,
        },
        ground=_ground,
        observe=observe_os,
        state_schema=object_schema(
            required=["focused"],
            focused=STRING,
            windows=STRING_LIST,
            files=STRING_MAP,
            tree=STRING,
        ),
    )
)
