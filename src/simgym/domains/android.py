"""Android: an agent taps, types and swipes on a phone, AndroidWorld-style; the world model
shows the new screen's view hierarchy after each action.

Actions are calls on element ids (the ``[id]`` of the tree): ``tap('7')``,
``long_press('7')``, ``type('5', 'hello')``, ``swipe('up')``, ``back()``, ``home()``,
``enter()``, ``open_app('Clock')``, ``wait()``, and ``finish('answer')``, which ends the
episode without being simulated. Tool calls with the same names work, and so do
AndroidWorld's JSON actions (``{"action_type": "click", "index": 5}``), mapped by
:func:`from_androidworld`. An observation is an ``App:`` line (and optionally
``Activity:``), then the tree (see :mod:`simgym.domains._gui.uitree`).

``swipe(direction)`` moves the finger in that direction: ``swipe('up')`` reveals what is
below. AndroidWorld's ``scroll`` names the content's direction instead, so its
``scroll down`` becomes ``swipe('up')``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from simgym.core.domain import Demonstration, Domain, ScenarioBase, register_domain
from simgym.core.errors import ActionError
from simgym.core.grounding import Grounding
from simgym.core.safeload import loads_json
from simgym.core.state import STRING, object_schema
from simgym.core.types import Action
from simgym.domains._gui import calls, uitree
from simgym.domains._gui.calls import Call, Param, Signature
from simgym.domains._gui.ground import check_screens, ground_android, observe_android, pinned

_ID = Param("id", id=True, description="element id, the [id] in the screen tree")
DIRECTIONS = ("up", "down", "left", "right")

TABLE = calls.make_table(
    Signature("tap", (_ID,), description="Tap an element."),
    Signature("long_press", (_ID,), description="Press and hold an element."),
    Signature("type", (_ID, Param("text")), description="Type text into a field."),
    Signature(
        "swipe",
        (
            Param("direction", choices=DIRECTIONS),
            Param("id", default=None, id=True, style="kw"),
        ),
        description="Swipe the finger up/down/left/right, on the screen or an element.",
    ),
    Signature("back", description="Press Back."),
    Signature("home", description="Press Home."),
    Signature("enter", description="Press Enter on the keyboard."),
    Signature("open_app", (Param("name"),), description="Launch an installed app by name."),
    Signature("wait", description="Wait for the screen to settle."),
    Signature(
        "finish",
        (
            Param("answer", default=""),
            Param("status", default="complete", choices=("complete", "infeasible"), style="kw"),
        ),
        description="End the task, with an answer if one was asked for.",
    ),
)
FINALS = {"finish": "answer"}
HINT = "tap('7')"
TOOLS = calls.tool_specs(TABLE)

_OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}
# AndroidWorld action types that are not also our own action names.
_AW_ONLY = {"click", "input_text", "scroll", "navigate_back", "navigate_home", "keyboard_enter"}
_AW_ONLY |= {"status", "answer"}


class AndroidScenario(ScenarioBase):
    """The phone: model, system, apps, and the screen it starts on."""

    device: str = "Pixel 6"
    android_version: str = "13"
    apps: list[str] = Field(default_factory=list, description="installed apps")
    app: str = Field("Home screen", description="the app in the foreground")
    activity: str = Field("", description="its activity, e.g. com.android.settings/.Settings")
    screen: str = Field(description="view hierarchy of the first screen")
    screens: dict[str, str] = Field(
        default_factory=dict,
        description="what some actions show, fixed by the scenario: an action in call syntax "
        "(tap('7')) -> the whole next observation (the App line, then the tree); simgym "
        "answers these from the scenario, the world model the rest",
    )

    @field_validator("screen")
    @classmethod
    def _tree(cls, value: str) -> str:
        problems = uitree.tree_problems(value)
        if problems:
            raise ValueError("the screen tree is malformed: " + "; ".join(problems))
        return value.strip("\n")

    @model_validator(mode="after")
    def _screens(self) -> AndroidScenario:
        self.screens = check_screens(
            self.screens,
            lambda text: _render(_validate(Action.say(text), self), self),
            lambda text: uitree.observation_problems(text, required=[_APP_HEADERS]),
        )
        return self


# -- actions -------------------------------------------------------------------------------


def _validate(action: Action, scenario: AndroidScenario) -> Action:
    if action.kind == "keystrokes":
        raise ActionError(f"the phone takes actions like {HINT}, not keystrokes")
    if action.kind == "tool_call" or action.name in FINALS:
        name, args = action.name or "", action.arguments
        call = _androidworld_call(name, args) or calls.call_from_tool(name, args, TABLE)
    else:
        text = calls.strip_fences(action.text or "")
        if text.startswith("{"):
            return from_androidworld(_json_object(text))
        call = calls.parse_calls(text, TABLE, max_calls=1, hint=f"{HINT}, or finish('...')")[0]
    _check_call(call)
    return calls.to_action(call, FINALS)


def _json_object(text: str) -> dict[str, Any]:
    try:
        data = loads_json(text)
    except json.JSONDecodeError as exc:
        raise ActionError(f"action looks like JSON but does not parse: {exc}") from None
    if not isinstance(data, dict):
        raise ActionError("a JSON action must be an object")
    return data


def from_androidworld(data: Mapping[str, Any]) -> Action:
    """An AndroidWorld JSON action (``{"action_type": "click", "index": 5}``) as ours."""
    data = dict(data)
    kind = data.pop("action_type", None)
    if not isinstance(kind, str):
        raise ActionError('an AndroidWorld action needs "action_type"')
    call = _androidworld_call(kind, data, force=True)
    assert call is not None
    _check_call(call)
    return calls.to_action(call, FINALS)


def _androidworld_call(kind: str, args: Mapping[str, Any], *, force: bool = False) -> Call | None:
    """Map an AndroidWorld action type to our call; None when ``kind`` and its arguments
    read as one of our own actions (``tap``, or ``open_app`` with ``name``)."""
    aw_style = kind in _AW_ONLY or "index" in args or "app_name" in args
    if not (aw_style or force):
        return None
    args = dict(args)
    index = args.pop("index", None)
    element = {} if index is None else {"id": index}

    def ours(name: str, arguments: dict[str, Any]) -> Call:
        if args:
            raise ActionError(f"AndroidWorld action {kind!r} does not take {sorted(args)}")
        return calls.call_from_tool(name, arguments, TABLE)

    if kind in ("click", "long_press"):
        if index is None:
            raise ActionError(f"{kind} needs an element index (this phone has no coordinates)")
        return ours("tap" if kind == "click" else "long_press", element)
    if kind == "input_text":
        text = args.pop("text", None)
        if index is None:
            raise ActionError("input_text needs the index of the field to type into")
        return ours("type", {**element, "text": text})
    if kind in ("scroll", "swipe"):
        direction = args.pop("direction", None)
        if kind == "scroll" and direction in _OPPOSITE:
            direction = _OPPOSITE[direction]  # content moves one way, the finger the other
        return ours("swipe", {**element, "direction": direction})
    if kind == "open_app":
        return ours("open_app", {"name": args.pop("app_name", None)})
    if kind == "status":
        goal = args.pop("goal_status", "complete")
        return ours("finish", {"status": goal})
    if kind == "answer":
        return ours("finish", {"answer": args.pop("text", "")})
    simple = {"navigate_back": "back", "navigate_home": "home", "keyboard_enter": "enter"}
    if kind in simple or kind == "wait":
        return ours(simple.get(kind, kind), {})
    raise ActionError(f"unknown AndroidWorld action type {kind!r}")


def _check_call(call: Call) -> None:
    for key in ("id", "name"):
        value = call.args.get(key)
        if isinstance(value, str) and not value.strip():
            raise ActionError(f"{call.name}(): {key} is empty")


def _render(action: Action, scenario: AndroidScenario) -> str:
    if action.name is None:
        return action.text or ""
    return calls.render_call(Call(action.name, action.arguments), TABLE)


# -- observations --------------------------------------------------------------------------

_APP_HEADERS = ("App", "Activity", "Package", "Current app")


def _ground(action: Action, state: dict[str, Any], scenario: AndroidScenario) -> Grounding | None:
    screen = scenario.screens.get(_render(action, scenario)) if scenario.screens else None
    return pinned(ground_android(action, state, scenario), state, screen)


def _check(text: str, action: Action, scenario: AndroidScenario) -> list[str]:
    return uitree.observation_problems(text, required=[_APP_HEADERS])


def _parse_input(line: str, scenario: AndroidScenario) -> Action:
    """Call syntax (``tap('7')``), an AndroidWorld JSON action, or a short form: ``tap 7``,
    ``type 5 hello there``, ``swipe up``, ``back``, ``open_app Clock``, ``finish done``."""
    stripped = line.strip()
    if stripped.startswith("{"):
        data = _json_object(stripped)
        return from_androidworld(data) if "action_type" in data else Action.parse(data)
    if calls.looks_like_call(stripped):
        return Action.say(stripped)
    return calls.to_action(calls.parse_short(stripped, TABLE), FINALS)


def _initial(scenario: AndroidScenario) -> str:
    activity = f"\nActivity: {scenario.activity}" if scenario.activity else ""
    return f"App: {scenario.app}{activity}\n{scenario.screen}"


def _slots(scenario: AndroidScenario) -> dict[str, str]:
    lines = [f"- Device: {scenario.device}, Android {scenario.android_version}"]
    if scenario.apps:
        lines.append("- Installed apps: " + ", ".join(scenario.apps))
    if scenario.notes:
        lines.append(f"- Also true: {scenario.notes}")
    return {
        "environment": "\n".join(lines),
        "initial_screen": _initial(scenario),
        "device": scenario.device,
    }


def _default() -> dict[str, Any]:
    return {
        "device": "Pixel 6",
        "android_version": "13",
        "apps": ["Settings", "Clock", "Messages", "Chrome", "Camera", "Play Store"],
        "app": "Settings",
        "activity": "com.android.settings/.Settings",
        "screen": (
            "[1] android.widget.FrameLayout ''\n"
            "  [2] android.widget.TextView 'Settings'\n"
            "  [3] androidx.recyclerview.widget.RecyclerView '' scrollable\n"
            "    [4] android.widget.LinearLayout 'Network & internet' clickable\n"
            "      android.widget.TextView 'Mobile, Wi-Fi, hotspot'\n"
            "    [5] android.widget.LinearLayout 'Connected devices' clickable\n"
            "    [6] android.widget.LinearLayout 'Battery' clickable\n"
            "      android.widget.TextView '72% - Should last until about 9 PM'"
        ),
        "notes": "Wi-Fi is off; the home network 'Lindenweg 4' is saved.",
    }


DEMONSTRATIONS = (
    Demonstration(
        action="tap('9')",
        observation="App: Clock\nActivity: com.google.android.deskclock/.DeskClock\n"
        "[1] android.widget.FrameLayout ''\n"
        "  [10] android.widget.TextView '7:00 AM'\n"
        "  [11] android.widget.Switch '7:00 AM' checkable checked=true clickable",
    ),
    Demonstration(
        action="home()",
        observation="App: Home screen\nActivity: com.google.android.apps.nexuslauncher/"
        ".NexusLauncherActivity\n"
        "[1] android.widget.FrameLayout ''\n"
        "  [30] android.widget.TextView 'Clock' clickable\n"
        "  [31] android.widget.TextView 'Settings' clickable",
    ),
)

ANDROID = register_domain(
    Domain(
        name="android",
        family="gui",
        description="An Android phone: taps, typing and swipes in, the view hierarchy out.",
        scenario_model=AndroidScenario,
        prompt_file=Path(__file__).parent / "prompts" / "android.md",
        validate_action=_validate,
        render_action=_render,
        initial_observation=_initial,
        check_observation=_check,
        parse_input=_parse_input,
        prompt_slots=_slots,
        is_final=lambda action: action.kind == "text",
        observation_prefix=lambda action, scenario, last: "App: ",
        default_scenario=_default,
        demonstrations=DEMONSTRATIONS,
        action_hint="tap('7'), type('5', 'hello'), swipe('up'), back(), finish('answer')",
        agent_tools=lambda scenario: list(TOOLS),
        initial_state=lambda s: {"app": s.app, "activity": s.activity, "tree": s.screen},
        ground=_ground,
        observe=observe_android,
        state_schema=object_schema(required=["app"], app=STRING, activity=STRING, tree=STRING),
    )
)
