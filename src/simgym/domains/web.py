"""Web: an agent drives a browser with BrowserGym-style actions; the world model shows
the page's accessibility tree after each one.

Actions are calls such as ``click('12')`` or ``fill('31', 'ana@example.com')`` (a string in
call syntax, or a tool call ``{"name": "click", "arguments": {"bid": "12"}}``); element ids
are the ``[id]`` of the tree. ``send_msg_to_user(text)`` and ``report_infeasible(reason)``
are the agent's final word: they end the episode and are not simulated. An observation is
``URL:`` (and ``Title:``, ``Tabs:``, ``Error:``) header lines, then the tree (see
:mod:`simgym.domains._gui.uitree`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from simgym.core.domain import Demonstration, Domain, ScenarioBase, register_domain
from simgym.core.errors import ActionError
from simgym.core.grounding import Grounding
from simgym.core.state import STRING, object_schema
from simgym.core.types import Action
from simgym.domains._gui import calls, uitree
from simgym.domains._gui.calls import Param, Signature
from simgym.domains._gui.ground import check_screens, ground_web, observe_web, pinned

_BID = Param("bid", id=True, description="element id, the [id] in the page tree")
_BUTTON = Param("button", default="left", choices=("left", "middle", "right"), style="kw")
_MODIFIERS = Param(
    "modifiers",
    "array",
    default=[],
    choices=("Alt", "Control", "ControlOrMeta", "Meta", "Shift"),
    style="kw",
)

TABLE = calls.make_table(
    Signature("click", (_BID, _BUTTON, _MODIFIERS), description="Click an element."),
    Signature("dblclick", (_BID, _BUTTON, _MODIFIERS), description="Double-click an element."),
    Signature("hover", (_BID,), description="Move the mouse over an element."),
    Signature(
        "fill", (_BID, Param("value")), description="Replace the text of a field with value."
    ),
    Signature(
        "select_option",
        (_BID, Param("options", "string|array")),
        description="Choose option(s) of a select element, by label.",
    ),
    Signature(
        "press",
        (_BID, Param("key_comb", description="e.g. Enter, Control+a")),
        description="Press a key combination in an element.",
    ),
    Signature("focus", (_BID,), description="Focus an element."),
    Signature("clear", (_BID,), description="Empty a text field."),
    Signature(
        "drag_and_drop",
        (Param("from_bid", id=True), Param("to_bid", id=True)),
        description="Drag one element onto another.",
    ),
    Signature(
        "upload_file",
        (_BID, Param("file", "string|array")),
        description="Choose file(s) for a file input.",
    ),
    Signature(
        "scroll",
        (Param("delta_x", "number"), Param("delta_y", "number")),
        description="Scroll the page by pixels (positive delta_y scrolls down).",
    ),
    Signature("goto", (Param("url"),), description="Open a URL in the current tab."),
    Signature("go_back", description="Go back in history."),
    Signature("go_forward", description="Go forward in history."),
    Signature("new_tab", description="Open a new, empty tab."),
    Signature("tab_close", description="Close the current tab."),
    Signature("tab_focus", (Param("index", "integer"),), description="Switch to the tab at index."),
    Signature("noop", (Param("wait_ms", "number", default=1000, style="kw"),), description="Wait."),
    Signature(
        "send_msg_to_user",
        (Param("text"),),
        description="Answer the user; ends the episode.",
    ),
    Signature(
        "report_infeasible",
        (Param("reason"),),
        description="Report that the task cannot be done; ends the episode.",
    ),
)
# Final actions and the argument that carries their message.
FINALS = {"send_msg_to_user": "text", "report_infeasible": "reason"}
HINT = "click('12')"
# What a text action that is not a call gets told.
PROSE_HINT = "click('12'), or send_msg_to_user('...') to answer"
TOOLS = calls.tool_specs(TABLE)
_URL_SCHEMES = ("http", "https", "file", "about", "data", "chrome")


class WebScenario(ScenarioBase):
    """The site the browser is on: its first page, other pages, and the session."""

    site: str = Field("Example Shop", description="the site's name")
    start_url: str = "https://shop.example/"
    title: str = Field("", description="title of the first page (default: the site name)")
    page: str = Field(description="accessibility tree of the first page")
    pages: dict[str, str] = Field(
        default_factory=dict,
        description="other pages: URL -> what is on it (a description or a tree)",
    )
    session: dict[str, Any] = Field(
        default_factory=dict, description="who is logged in, the cart, saved data"
    )
    real_site: str | None = Field(
        None,
        description="the bundled site this scenario mirrors (simgym/real/sites/<name>, e.g. "
        "shop): the real web backend serves it, so the scenario also runs for real",
    )
    screens: dict[str, str] = Field(
        default_factory=dict,
        description="what some actions show, fixed by the scenario: an action in call syntax "
        "(click('31')) -> the whole next observation (URL and Title lines, then the tree); simgym "
        "answers these from the scenario, the world model the rest",
    )

    @field_validator("start_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not _is_url(value):
            raise ValueError(f"not an absolute URL: {value!r}")
        return value

    @field_validator("page")
    @classmethod
    def _tree(cls, value: str) -> str:
        problems = uitree.tree_problems(value)
        if problems:
            raise ValueError("the first page's tree is malformed: " + "; ".join(problems))
        return value.strip("\n")

    @model_validator(mode="after")
    def _screens(self) -> WebScenario:
        self.screens = check_screens(
            self.screens,
            lambda text: _render(_validate(Action.say(text), self), self),
            lambda text: uitree.observation_problems(text, required=[_URL_HEADERS]),
        )
        return self


def _is_url(text: str) -> bool:
    parts = urlsplit(text)
    if parts.scheme in ("about", "data"):
        return bool(parts.path)
    return parts.scheme in _URL_SCHEMES and bool(parts.netloc or parts.scheme == "file")


def _validate(action: Action, scenario: WebScenario) -> Action:
    if action.kind == "keystrokes":
        raise ActionError(f"the browser takes actions like {HINT}, not keystrokes")
    if action.kind == "tool_call" or action.name in FINALS:
        call = calls.call_from_tool(action.name or "", action.arguments, TABLE)
    else:
        call = calls.parse_calls(action.text or "", TABLE, max_calls=1, hint=PROSE_HINT)[0]
    _check_call(call)
    return calls.to_action(call, FINALS)


def _check_call(call: calls.Call) -> None:
    args = call.args
    if call.name == "goto" and not _is_url(args["url"]):
        raise ActionError(
            f"goto() needs an absolute URL such as https://example.com, got {args['url']!r}"
        )
    if call.name == "tab_focus" and args["index"] < 0:
        raise ActionError("tab_focus(): index must be 0 or more")
    if call.name == "noop" and args.get("wait_ms", 0) < 0:
        raise ActionError("noop(): wait_ms must be 0 or more")
    if call.name == "press" and not args["key_comb"].strip():
        raise ActionError("press(): key_comb is empty; give a key such as 'Enter'")
    for key in ("bid", "from_bid", "to_bid"):
        if key in args and not args[key].strip():
            raise ActionError(f"{call.name}(): {key} is empty")


def _render(action: Action, scenario: WebScenario) -> str:
    if action.name is None:
        return action.text or ""
    return calls.render_call(calls.Call(action.name, action.arguments), TABLE)


_URL_HEADERS = ("URL", "Current URL", "Page URL")


def _ground(action: Action, state: dict[str, Any], scenario: WebScenario) -> Grounding | None:
    screen = scenario.screens.get(_render(action, scenario)) if scenario.screens else None
    return pinned(ground_web(action, state, scenario), state, screen)


def _check(text: str, action: Action, scenario: WebScenario) -> list[str]:
    problems = uitree.observation_problems(text, required=[_URL_HEADERS])
    headers, _ = uitree.parse_observation(text)
    url = next((headers[k.lower()] for k in _URL_HEADERS if k.lower() in headers), None)
    if url and not _is_url(url):
        problems.insert(0, f"the URL line does not hold an absolute URL: {url[:80]!r}")
    return problems


def _parse_input(line: str, scenario: WebScenario) -> Action:
    """Call syntax (``click('12')``), a JSON tool call, or a short form (``click 12``,
    ``fill 31 ana@example.com``, ``goto https://...``, ``answer <text>``)."""
    stripped = line.strip()
    if stripped.startswith("{"):
        return Action.parse(stripped)
    if calls.looks_like_call(stripped):
        return Action.say(stripped)
    head, _, rest = stripped.partition(" ")
    if head == "answer":
        return calls.to_action(calls.Call("send_msg_to_user", {"text": rest.strip()}), FINALS)
    return calls.to_action(calls.parse_short(stripped, TABLE), FINALS)


def _initial(scenario: WebScenario) -> str:
    return f"URL: {scenario.start_url}\nTitle: {scenario.title or scenario.site}\n{scenario.page}"


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else "https://site.example"


def _slots(scenario: WebScenario) -> dict[str, str]:
    lines = [f"- Site: {scenario.site}, opened at {scenario.start_url} in one tab"]
    if scenario.session:
        lines.append("- Session: " + json.dumps(scenario.session, ensure_ascii=False))
    for url, page in scenario.pages.items():
        body = page.strip("\n")
        lines.append(f"- Page {url}:" + (f"\n{body}" if "\n" in body else f" {body}"))
    if scenario.notes:
        lines.append(f"- Also true: {scenario.notes}")
    return {
        "site": scenario.site,
        "environment": "\n".join(lines),
        "initial_page": _initial(scenario),
        "origin": _origin(scenario.start_url),
    }


def _default() -> dict[str, Any]:
    return {
        "site": "Harbor Books",
        "start_url": "https://harborbooks.example/cart",
        "title": "Your cart - Harbor Books",
        "page": (
            "[1] RootWebArea 'Your cart - Harbor Books', focused\n"
            "  [3] searchbox 'Search books'\n"
            "  [4] heading 'Your cart (2 items)'\n"
            "  [5] list ''\n"
            "    [6] listitem ''\n"
            "      StaticText 'The Salt Road - $18.00'\n"
            "      [7] spinbutton 'Quantity' value='1'\n"
            "    [8] listitem ''\n"
            "      StaticText 'Night Ferries - $12.50'\n"
            "      [9] spinbutton 'Quantity' value='1'\n"
            "  StaticText 'Subtotal: $30.50'\n"
            "  [10] button 'Checkout'"
        ),
        "pages": {
            "https://harborbooks.example/checkout": "address form, shipping choice "
            "(Standard $4, Express $9), 'Place order' button",
        },
        "session": {"user": "mira@example.com", "logged_in": True},
    }


DEMONSTRATIONS = (
    Demonstration(
        action="fill('3', 'lighthouse')",
        observation="URL: $origin/cart\nTitle: Cart\n"
        "[1] RootWebArea 'Cart', focused\n"
        "  [3] searchbox 'Search' value='lighthouse', focused\n"
        "  [10] button 'Checkout'",
    ),
    Demonstration(
        action="click('42')",
        observation="URL: $origin/cart\nTitle: Cart\nError: no element with id '42'\n"
        "[1] RootWebArea 'Cart', focused\n"
        "  [3] searchbox 'Search' value='lighthouse'\n"
        "  [10] button 'Checkout'",
        note="no such id",
    ),
)

WEB = register_domain(
    Domain(
        name="web",
        family="gui",
        description="A web browser: BrowserGym-style actions in, accessibility tree out.",
        scenario_model=WebScenario,
        prompt_file=Path(__file__).parent / "prompts" / "web.md",
        validate_action=_validate,
        render_action=_render,
        initial_observation=_initial,
        check_observation=_check,
        parse_input=_parse_input,
        prompt_slots=_slots,
        is_final=lambda action: action.kind == "text",
        observation_prefix=lambda action, scenario, last: "URL: ",
        default_scenario=_default,
        demonstrations=DEMONSTRATIONS,
        action_hint="click('12'), fill('31', 'text'), goto('https://...'), send_msg_to_user('...')",
        agent_tools=lambda scenario: list(TOOLS),
        initial_state=lambda s: {
            "url": s.start_url,
            "title": s.title or s.site,
            "session": dict(s.session),
            "tree": s.page,
        },
        ground=_ground,
        observe=observe_web,
        state_schema=object_schema(
            required=["url"],
            url=STRING,
            title=STRING,
            tabs=STRING,
            session={"type": "object"},
            tree=STRING,
        ),
    )
)
