"""Grounding for the GUI domains (web, os, android): what the element an action touches
is, read from the screen the agent is looking at.

The ledger's ``"tree"`` holds that screen's tree (no header lines), seeded from the
scenario's first screen. The world model's observation IS the next screen, which simgym
cannot know before the turn, so every simulated action removes ``"tree"`` from the
ledger (effect ``{"tree": null}``: the screen is no longer known) and element facts are
given only while a tree is there: a stale tree would state wrong facts.
``observe_web``, ``observe_os`` and ``observe_android`` (the domains' ``observe`` hooks,
applied by the environment after each turn, after the effects) turn the observation
into the patch that puts the new screen (and its URL, window or app) back, so every
action is grounded on the screen the agent is looking at.

Facts name the element (``element 12 is a button "Add to cart"``) or say it does not
exist; strict mode then expects typed text to show (``fill``, ``type``, ``write`` into
an editable element) and, on the web, an ``Error:`` line for an element that is not
there or cannot be filled, as the web prompt says the browser reports it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from simgym.core.grounding import Grounding
from simgym.core.types import Action
from simgym.domains._gui import browser, uitree

TREE = "tree"
HOME_SCREEN = "Home screen"
MAX_LABEL = 120
MAX_PROPS = 6
MIN_EXPECTED = 2  # shorter typed text is found anywhere; expecting it proves nothing
MAX_EXPECTED = 200

# Header names, as the domains' format checks accept them (kept here: the domain
# modules import this one).
URL_HEADERS = ("URL", "Current URL", "Page URL")
FOCUS_HEADERS = ("Focused window", "Active window", "Window", "Focused", "Focused application")
APP_HEADERS = ("App", "Current app", "Package")

_GEOMETRY = ("pos", "size", "bounds")
_WEB_FILLABLE = {"textbox", "searchbox", "combobox", "spinbutton", "textarea", "textfield"}
_WEB_UNFILLABLE = {
    "button", "link", "heading", "statictext", "checkbox", "radio", "img", "image",
    "menuitem", "tab", "listitem", "list", "rootwebarea", "separator", "switch", "option",
}  # fmt: skip
_ANDROID_EDITABLE = {"EditText", "AutoCompleteTextView", "MultiAutoCompleteTextView"}
_OS_EDITABLE = {"text", "entry", "password-text", "terminal", "document-text"}
_OS_POINTER = {
    "click", "doubleClick", "tripleClick", "rightClick", "middleClick", "moveTo", "dragTo",
    "mouseDown", "mouseUp", "scroll", "hscroll",
}  # fmt: skip
_PAIR = re.compile(r"\(\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*\)")


# -- the screen in the ledger -------------------------------------------------------------


def screen_tree(state: dict[str, Any]) -> uitree.Tree | None:
    """The current screen's tree, or None when the ledger does not know it."""
    text = state.get(TREE)
    if not isinstance(text, str) or not text.strip():
        return None
    tree = uitree.parse_tree(text)
    return tree if tree.nodes else None


def forget_screen(state: dict[str, Any]) -> dict[str, Any]:
    """The effect of an action the model answers: the screen changes to what it says."""
    return {TREE: None} if TREE in state else {}


def _index(tree: uitree.Tree, node_id: str) -> int | None:
    return next((i for i, n in enumerate(tree.nodes) if n.id == node_id), None)


def _own_text(tree: uitree.Tree, index: int) -> list[str]:
    """The text of the id-less nodes inside an element, not those inside its own
    elements (a list's text is not its items' text)."""
    depth = tree.nodes[index].depth
    texts: list[str] = []
    skip_below: int | None = None
    for node in tree.nodes[index + 1 :]:
        if node.depth <= depth:
            break
        if skip_below is not None and node.depth > skip_below:
            continue
        skip_below = None
        if node.id is not None:
            skip_below = node.depth
        elif node.name:
            texts.append(node.name)
    return texts


def label(tree: uitree.Tree, index: int) -> str:
    """What an element says: its name, or else the text inside it."""
    node = tree.nodes[index]
    return node.name or " / ".join(_own_text(tree, index)[:3])


def _quote(text: str) -> str:
    short = text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 3] + "..."
    return json.dumps(short, ensure_ascii=False)


def _props(node: uitree.Node) -> str:
    shown = [
        key if value is True else f"{key}={value!r}"
        for key, value in node.props.items()
        if key not in _GEOMETRY
    ]
    return ", ".join(shown[:MAX_PROPS])


def describe(tree: uitree.Tree, index: int) -> str:
    """``a button "Checkout" (focused), inside listitem 6 "..."``: role, name and the
    text inside it, its properties and the nearest labelled element around it."""
    node = tree.nodes[index]
    article = "an" if node.role[:1].lower() in "aeiou" else "a"
    text = f"{article} {node.role}"
    inside = " / ".join(_own_text(tree, index)[:3])
    if node.name:
        text += f" {_quote(node.name)}" + (f" with text {_quote(inside)}" if inside else "")
    elif inside:
        text += f" showing {_quote(inside)}"
    props = _props(node)
    if props:
        text += f" ({props})"
    around = _context(tree, index)
    return text + (f", inside {around}" if around else "")


def _context(tree: uitree.Tree, index: int) -> str:
    parent = tree.nodes[index].parent
    while parent is not None and tree.nodes[parent].depth > 0:
        node, said = tree.nodes[parent], label(tree, parent)
        if node.id is not None and said:
            return f"{node.role} {node.id} {_quote(said)}"
        parent = node.parent
    return ""


def element_fact(tree: uitree.Tree, node_id: str, where: str) -> tuple[str, uitree.Node | None]:
    """The fact about element ``node_id`` and its node (None when it is not there)."""
    index = _index(tree, node_id)
    if index is None:
        return f"element {node_id} does not exist on the current {where}", None
    return f"element {node_id} is {describe(tree, index)}", tree.nodes[index]


def shows_verbatim(text: str) -> bool:
    """Whether typed text appears as typed in a tree line (quoting escapes nothing in it)."""
    plain = text.isprintable() and "\\" not in text
    return plain and MIN_EXPECTED <= len(text) <= MAX_EXPECTED and not ("'" in text and '"' in text)


def is_secret(node: uitree.Node) -> bool:
    """A password field shows dots, not what was typed."""
    flags = {k.lower(): v for k, v in node.props.items()}
    marked = any(flags.get(k) not in (None, False, "false") for k in ("password", "protected"))
    return marked or "password" in f"{node.role} {node.name}".lower()


# -- web ----------------------------------------------------------------------------------

_WEB_ELEMENTS = ("bid", "from_bid", "to_bid")
_WEB_STILL = ("fill", "clear", "focus", "hover")  # never leave the page
_WEB_SELECTS = {"combobox", "listbox", "select"}


def ground_web(action: Action, state: dict[str, Any], scenario: Any) -> Grounding | None:
    """Facts for a browser action (see the module docstring)."""
    if action.kind != "tool_call":
        return None
    name, args = action.name or "", action.arguments
    tree, url = screen_tree(state), state.get("url")
    facts = [f"the browser is at {url}"] if tree is not None and url else []
    expect = _web_elements(name, args, tree, url, facts) if tree is not None else []
    effects = forget_screen(state)
    moved, shown = _web_navigation(name, args, scenario, facts)
    effects.update(moved)
    screen = browser.next_screen(name, args, state)
    if screen is not None:
        facts += [f for f in screen.facts if f not in facts]
        return Grounding(facts=facts, effects=effects or None, observation=screen.observation)
    return _grounding(facts, effects, expect + shown)


def _web_elements(
    name: str, args: dict[str, Any], tree: uitree.Tree, url: str | None, facts: list[str]
) -> list[str]:
    """Facts about the elements an action names; what the page must then show."""
    nodes = {}
    for key in (k for k in _WEB_ELEMENTS if k in args):
        fact, nodes[key] = element_fact(tree, args[key], "page")
        facts.append(fact)
    if not nodes:
        return []
    stays = [url] if url else []
    if any(node is None for node in nodes.values()):
        facts.append(
            "the browser cannot act on a missing element: the page stays as it was, "
            "with an `Error:` line"
        )
        return ["Error:", *stays]
    expect = _web_element_expect(name, args, nodes.get("bid"), facts)
    return expect + (stays if name in _WEB_STILL else [])


def _web_element_expect(
    name: str, args: dict[str, Any], node: uitree.Node | None, facts: list[str]
) -> list[str]:
    if node is None:
        return []
    role = node.role.lower()
    if name == "fill" and role in _WEB_UNFILLABLE:
        facts.append(f"a {node.role} cannot be filled: the page stays, with an `Error:` line")
        return ["Error:"]
    if name == "fill" and role in _WEB_FILLABLE and not is_secret(node):
        value = args.get("value", "")
        if shows_verbatim(value):
            facts.append(f"after fill, element {node.id} holds the value {_quote(value)}")
            return [value]
    if name == "select_option" and role in _WEB_SELECTS:
        options = args.get("options")
        chosen = [options] if isinstance(options, str) else list(options or [])
        return [o for o in chosen if shows_verbatim(o)]
    return []


def _web_navigation(
    name: str, args: dict[str, Any], scenario: Any, facts: list[str]
) -> tuple[dict[str, Any], list[str]]:
    """Effects and expectations of actions that certainly change the URL."""
    if name == "new_tab":
        facts.append("new_tab opens an empty tab at about:blank and makes it the active one")
        return {"url": "about:blank"}, ["about:blank"]
    if name != "goto":
        return {}, []
    url = args["url"]
    facts.append(f"goto opens {url} in the current tab")
    page = _known_page(scenario, url)
    if page is None:
        return {"url": url}, []
    body = page.strip("\n")
    facts.append(
        f"the page at {url} holds:" + ("\n" + _indent(body) if "\n" in body else f" {body}")
    )
    return {"url": url}, [url]


def _known_page(scenario: Any, url: str) -> str | None:
    pages = getattr(scenario, "pages", None) or {}
    key = url.rstrip("/")
    return next((text for u, text in pages.items() if u.rstrip("/") == key), None)


def _indent(text: str) -> str:
    return "\n".join(f"  {line}".rstrip() for line in text.splitlines())


def observe_web(observation: str, action: Action, state: dict[str, Any]) -> dict[str, Any]:
    """The ledger patch after a browser observation: its tree, URL, title and tabs (a
    header the observation lacks is removed, so the ledger never keeps a stale one)."""
    patch = _observe(observation, {"url": URL_HEADERS, "tabs": ("Tabs",)})
    headers, _ = uitree.split_headers(observation)
    patch["title"] = headers.get("title")  # an empty title ("about:blank") is a title
    patch.setdefault("tabs", None)
    return patch


# -- android ------------------------------------------------------------------------------


def ground_android(action: Action, state: dict[str, Any], scenario: Any) -> Grounding | None:
    """Facts for a phone action (see the module docstring)."""
    if action.kind != "tool_call":
        return None
    name, args = action.name or "", action.arguments
    tree = screen_tree(state)
    facts = [_foreground(state)] if tree is not None and state.get("app") else []
    expect: list[str] = []
    effects = forget_screen(state)
    node = None
    if tree is not None and args.get("id"):
        fact, node = element_fact(tree, args["id"], "screen")
        facts.append(fact)
    if name == "type" and node is not None and _android_editable(node) and not is_secret(node):
        if shows_verbatim(args.get("text", "")):
            facts.append(f"after typing, element {node.id} shows {_quote(args['text'])}")
            expect.append(args["text"])
    if name == "open_app":
        effects.update(_open_app(args.get("name", ""), scenario, facts, expect))
    if name == "home":
        facts.append(f"home() shows the launcher: `App: {HOME_SCREEN}`")
        effects.update({"app": HOME_SCREEN, "activity": ""})
        expect.append(f"App: {HOME_SCREEN}")
    return _grounding(facts, effects, expect)


def _foreground(state: dict[str, Any]) -> str:
    activity = state.get("activity")
    return f"the foreground app is {state['app']}" + (f" ({activity})" if activity else "")


def _android_editable(node: uitree.Node) -> bool:
    return node.role.rsplit(".", 1)[-1] in _ANDROID_EDITABLE or node.props.get("editable") is True


def _open_app(name: str, scenario: Any, facts: list[str], expect: list[str]) -> dict[str, Any]:
    installed = list(getattr(scenario, "apps", None) or [])
    if not installed or not name.strip():
        return {}  # nothing known about what is installed
    match = next((app for app in installed if app.casefold() == name.strip().casefold()), None)
    if match is None:
        facts.append(
            f"no app named {_quote(name)} is installed (installed: {', '.join(installed)})"
        )
        return {}
    facts.append(f"{match} is installed: open_app brings it to the foreground")
    expect.append(match)
    return {"app": match, "activity": ""}


def observe_android(observation: str, action: Action, state: dict[str, Any]) -> dict[str, Any]:
    """The ledger patch after a phone observation: its tree, app and activity."""
    patch = _observe(observation, {"app": APP_HEADERS, "activity": ("Activity",)})
    if "app" in patch:
        patch.setdefault("activity", "")
    return patch


# -- os -----------------------------------------------------------------------------------


def ground_os(action: Action, state: dict[str, Any], scenario: Any) -> Grounding | None:
    """Facts for pyautogui code: what is under the pointer, or what has the keyboard
    focus, for the first call (later calls act on the screen it leaves)."""
    if action.kind != "tool_call":
        return None
    steps = _os_steps(action)
    tree = screen_tree(state)
    facts = (
        [f"the focused window is {_quote(state['focused'])}"]
        if tree and state.get("focused")
        else []
    )
    expect: list[str] = []
    effects = forget_screen(state)
    mouse = _last_point(steps)
    if mouse is not None:
        effects["mouse"] = list(mouse)
    if tree is not None and steps:
        expect += _os_first_step(steps[0], len(steps), tree, state, facts)
    return _grounding(facts, effects, expect)


def _os_steps(action: Action) -> list[tuple[str, dict[str, Any]]]:
    if action.name == "sequence":
        return [(s["name"], s.get("arguments") or {}) for s in action.arguments.get("steps", [])]
    if action.name in ("WAIT", None):
        return []
    return [(action.name, action.arguments)]


def _point(args: dict[str, Any]) -> tuple[float, float] | None:
    x, y = args.get("x"), args.get("y")
    return (x, y) if x is not None and y is not None else None


def _last_point(steps: Sequence[tuple[str, dict[str, Any]]]) -> tuple[float, float] | None:
    points = [_point(args) for name, args in steps if name in _OS_POINTER]
    return next((p for p in reversed(points) if p is not None), None)


def _os_first_step(
    step: tuple[str, dict[str, Any]],
    count: int,
    tree: uitree.Tree,
    state: dict[str, Any],
    facts: list[str],
) -> list[str]:
    """Facts about what the first call acts on; typed text it must show, when it is the
    only call (a later one, Enter say, may submit and clear it)."""
    name, args = step
    if name in _OS_POINTER:
        point = _point(args) or _mouse(state)
        if point is not None:
            facts.append(_at_point(tree, point))
        return []
    if name not in ("write", "typewrite") or not isinstance(args.get("message"), str):
        return []
    index = next((i for i, n in enumerate(tree.nodes) if n.props.get("focused") is True), None)
    if index is None:
        return []
    node = tree.nodes[index]
    facts.append(
        f"the keyboard focus is on element {node.id or '(no id)'}, {describe(tree, index)}"
    )
    text = args["message"]
    if count == 1 and _os_editable(node) and not is_secret(node) and shows_verbatim(text):
        return [text]
    return []


def _mouse(state: dict[str, Any]) -> tuple[float, float] | None:
    mouse = state.get("mouse")
    return (mouse[0], mouse[1]) if isinstance(mouse, list) and len(mouse) == 2 else None


def _os_editable(node: uitree.Node) -> bool:
    return node.props.get("editable") is True or node.role.lower() in _OS_EDITABLE


def box(node: uitree.Node) -> tuple[float, float, float, float] | None:
    """``(left, top, width, height)`` from ``pos=(x,y) size=(w,h)``, or None."""
    pos, size = (
        _PAIR.fullmatch(str(node.props.get("pos", ""))),
        _PAIR.fullmatch(str(node.props.get("size", ""))),
    )
    if pos is None or size is None:
        return None
    return float(pos[1]), float(pos[2]), float(size[1]), float(size[2])


def element_at(tree: uitree.Tree, point: tuple[float, float]) -> int | None:
    """The innermost element whose box holds ``point`` (the one a click hits)."""
    x, y = point
    found = None
    for index, node in enumerate(tree.nodes):
        area = box(node)
        if area and area[0] <= x < area[0] + area[2] and area[1] <= y < area[1] + area[3]:
            if found is None or node.depth >= tree.nodes[found].depth:
                found = index
    return found


def _at_point(tree: uitree.Tree, point: tuple[float, float]) -> str:
    where = f"({point[0]:g}, {point[1]:g})"
    index = element_at(tree, point)
    if index is not None:
        node = tree.nodes[index]
        return f"the point {where} is on element {node.id or '(no id)'}, {describe(tree, index)}"
    if any(box(n) for n in tree.nodes):
        return f"no element of the current screen is at {where}: a click there changes nothing"
    return f"the current tree gives no element positions, so what is at {where} is not known"


def observe_os(observation: str, action: Action, state: dict[str, Any]) -> dict[str, Any]:
    """The ledger patch after a desktop observation: its tree and focused window."""
    return _observe(observation, {"focused": FOCUS_HEADERS})


# -- shared -------------------------------------------------------------------------------


def _observe(observation: str, keys: dict[str, Sequence[str]]) -> dict[str, Any]:
    """The observation's tree and the headers named in ``keys`` ({ledger key: header
    names}) as a merge patch; a missing or empty tree leaves the screen unknown."""
    headers, start = uitree.split_headers(observation)
    body = "\n".join(observation.splitlines()[start:]).strip("\n")
    patch: dict[str, Any] = {TREE: body if uitree.parse_tree(body).nodes else None}
    for key, names in keys.items():
        value = next((headers[n.lower()] for n in names if n.lower() in headers), None)
        if value:
            patch[key] = value
    return patch


def _grounding(facts: list[str], effects: dict[str, Any], expect: list[str]) -> Grounding | None:
    if not (facts or effects or expect):
        return None
    return Grounding(facts=facts, effects=effects or None, expect=list(dict.fromkeys(expect)))
