"""The browser's own part of a web step: the next screen of an action that stays on the
page, whatever the site behind it.

Typing into a field, emptying it, moving the focus, choosing an option, ticking a
checkbox, hovering, scrolling, opening an empty tab, or naming an element or tab that is
not there: a browser does these the same way on every site, so the next accessibility
tree is the current one with a few lines changed. :func:`next_screen` computes that
screen from the ledger (``url``, ``title``, ``tabs`` and ``tree``, which
:func:`~simgym.domains._gui.ground.observe_web` keeps) and the action, in the layout of
the web domain (the one :mod:`simgym.real.web` prints: ``URL:``, ``Title:``, ``Tabs:``
and ``Error:`` header lines, then ``[id] role 'name', prop, key='value'`` lines).

It answers only when the result is certain: a click on a link or button, ``Enter`` in a
form, history and tab switches depend on the site or on pages the ledger does not hold,
and a tree written in another layout (one whose lines this module could not write back
unchanged) is left to the world model. Sites whose scripts react to typing or hovering
are the known limit; strict mode's exact answer then shows the browser's part only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from simgym.domains._gui import uitree

# Roles the real browser's tree gives the fields ``fill`` can type into.
FILLABLE = {"textbox", "searchbox", "textarea", "spinbutton"}
# Roles that take the keyboard focus (what Tab moves between, what ``focus`` can reach).
FOCUSABLE = FILLABLE | {"button", "link", "checkbox", "radio", "combobox", "listbox", "switch"}
# The order the real browser writes an element's properties in.
PROPERTY_ORDER = (
    "focused", "checked", "value", "selected", "required", "disabled", "invalid",
    "expanded", "level",
)  # fmt: skip
# Properties written bare (``checked=true``), not quoted.
_BARE = {"checked", "selected", "expanded", "level"}
_PASSWORD_DOT = "\u2022"


@dataclass(frozen=True)
class Screen:
    """What a browser action leaves on screen, and the facts that say why."""

    observation: str
    facts: list[str]


def next_screen(name: str, args: dict[str, Any], state: dict[str, Any]) -> Screen | None:
    """The exact next screen of a page-local action, or None when the site decides it."""
    url, title, text = state.get("url"), state.get("title"), state.get("tree")
    if not (isinstance(url, str) and isinstance(title, str) and isinstance(text, str)):
        return None
    page = _Page.read(text)
    if page is None:
        return None
    tabs = state.get("tabs") if isinstance(state.get("tabs"), str) else None
    if name == "new_tab":
        return _new_tab(title, tabs)
    if name == "tab_focus":
        return _tab_focus(args, url, title, tabs, page)
    if name in ("scroll", "noop"):
        return Screen(_screen(url, title, tabs, page.text()), [f"{name} leaves the page as it is"])
    bid = args.get("bid")
    if not isinstance(bid, str) or name not in _ELEMENT_ACTIONS:
        return None
    if page.index(bid) is None:
        error = f"element {bid} not found"
        fact = f"element {bid} is not on the page: the browser answers `Error: {error}`"
        return Screen(_screen(url, title, tabs, page.text(), error), [fact])
    changed = _ELEMENT_ACTIONS[name](page, page.index(bid), args)
    if changed is None:
        return None
    fact = f"{name} on element {bid} stays on {url}; the browser changes only that element"
    return Screen(_screen(url, title, tabs, changed.text()), [fact])


# -- the page's lines -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Page:
    """The tree's lines and nodes, each node with the line it was read from."""

    lines: tuple[str, ...]
    nodes: tuple[uitree.Node, ...]
    separators: tuple[str, ...]  # per node: ", " or " " between the name and properties

    @classmethod
    def read(cls, text: str) -> _Page | None:
        lines = tuple(text.strip("\n").splitlines())
        tree = uitree.parse_tree("\n".join(lines))
        if not tree.nodes or tree.problems:
            return None
        separators = []
        for node in tree.nodes:
            line = lines[node.line - 1]
            sep = next((s for s in (", ", " ") if _write(line, node, sep=s) == line), None)
            if sep is None:
                return None  # a layout this module cannot write back unchanged
            separators.append(sep)
        return cls(lines, tuple(tree.nodes), tuple(separators))

    def text(self) -> str:
        return "\n".join(self.lines)

    def index(self, node_id: str) -> int | None:
        return next((i for i, n in enumerate(self.nodes) if n.id == node_id), None)

    def focused(self) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if n.props.get("focused") is True]

    def with_props(self, changes: dict[int, dict[str, Any]]) -> _Page:
        """The page with properties set (a value) or removed (None) on some nodes."""
        lines, nodes = list(self.lines), list(self.nodes)
        for index, change in changes.items():
            node = nodes[index]
            props = dict(node.props)
            for key, value in change.items():
                props.pop(key, None)
                if value is not None:
                    props[key] = value
            ordered = dict(sorted(props.items(), key=lambda kv: _rank(kv[0])))
            nodes[index] = replace(node, props=ordered)
            row = node.line - 1
            lines[row] = _write(lines[row], nodes[index], self.separators[index])
        return replace(self, lines=tuple(lines), nodes=tuple(nodes))

    def focus(self, index: int | None, extra: dict[int, dict[str, Any]] | None = None) -> _Page:
        """The page with the keyboard focus on ``index`` (None: on the page itself) and
        the other ``extra`` changes; the root shows focus only when no element has it."""
        changes: dict[int, dict[str, Any]] = {i: {"focused": None} for i in self.focused()}
        root = 0 if self.nodes[0].depth == 0 else None
        if index is None and root is not None:
            changes[root] = {"focused": True}
        elif index is not None:
            changes.setdefault(index, {})["focused"] = True
        for key, change in (extra or {}).items():
            changes.setdefault(key, {}).update(change)
        return self.with_props(changes)


def _rank(key: str) -> int:
    return PROPERTY_ORDER.index(key) if key in PROPERTY_ORDER else len(PROPERTY_ORDER)


def _write(line: str, node: uitree.Node, sep: str) -> str:
    """A node line in the real browser's layout, with the original line's indentation."""
    indent = line[: len(line) - len(line.lstrip())]
    head = f"[{node.id}] {node.role} {node.name!r}" if node.id else f"{node.role} {node.name!r}"
    props = [
        key if value is True else f"{key}={value if key in _BARE else repr(value)}"
        for key, value in node.props.items()
    ]
    return indent + sep.join([head, *props]) if props else indent + head


# -- element actions ----------------------------------------------------------------------


def _fill(page: _Page, index: int, args: dict[str, Any]) -> _Page | None:
    node = page.nodes[index]
    value = args.get("value")
    if not _typeable(node) or not isinstance(value, str):
        return None
    if node.role == "spinbutton" and value and not _is_number(value):
        return None  # a number field refuses text; the browser's error is not ours to word
    return page.focus(index, {index: {"value": _shown(node, value)}})


def _clear(page: _Page, index: int, args: dict[str, Any]) -> _Page | None:
    return page.focus(index, {index: {"value": None}}) if _typeable(page.nodes[index]) else None


def _focus(page: _Page, index: int, args: dict[str, Any]) -> _Page | None:
    node = page.nodes[index]
    return page.focus(index) if _focusable(node) else None


def _select(page: _Page, index: int, args: dict[str, Any]) -> _Page | None:
    node = page.nodes[index]
    chosen = args.get("options")
    chosen = chosen[0] if isinstance(chosen, list) and len(chosen) == 1 else chosen
    if node.role != "combobox" or not isinstance(chosen, str) or "disabled" in node.props:
        return None
    options = [
        i for i in range(index + 1, len(page.nodes))
        if page.nodes[i].parent == index and page.nodes[i].role == "option"
    ]  # fmt: skip
    if not any(page.nodes[i].name == chosen for i in options):
        return None
    changes: dict[int, dict[str, Any]] = {index: {"value": chosen}}
    for i in options:
        changes[i] = {"selected": "true" if page.nodes[i].name == chosen else "false"}
    return page.with_props(changes)


def _click(page: _Page, index: int, args: dict[str, Any]) -> _Page | None:
    node = page.nodes[index]
    plain = args.get("button", "left") == "left" and not args.get("modifiers")
    if node.role != "checkbox" or "disabled" in node.props or not plain:
        return None  # buttons, links and the rest run the site's own code
    ticked = "false" if node.props.get("checked") == "true" else "true"
    return page.focus(index, {index: {"checked": ticked}})


def _hover(page: _Page, index: int, args: dict[str, Any]) -> _Page | None:
    return page


def _press(page: _Page, index: int, args: dict[str, Any]) -> _Page | None:
    node, key = page.nodes[index], args.get("key_comb")
    if key == "Tab" and _focusable(node):
        after = [i for i in range(index + 1, len(page.nodes)) if _focusable(page.nodes[i])]
        return page.focus(after[0]) if after else None
    if key == "Backspace" and _typeable(node):
        value = node.props.get("value")
        if "password" in node.name.lower() or not isinstance(value, str):
            return page.focus(index) if value is None else None
        return page.focus(index, {index: {"value": value[:-1] or None}})
    return None  # Enter submits, shortcuts run the site's code


_ELEMENT_ACTIONS: dict[str, Callable[[_Page, int, dict[str, Any]], _Page | None]] = {
    "fill": _fill,
    "clear": _clear,
    "focus": _focus,
    "select_option": _select,
    "click": _click,
    "hover": _hover,
    "press": _press,
}


def _typeable(node: uitree.Node) -> bool:
    return node.role in FILLABLE and "disabled" not in node.props


def _focusable(node: uitree.Node) -> bool:
    return node.role in FOCUSABLE and "disabled" not in node.props


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _shown(node: uitree.Node, value: str) -> str | None:
    """What the tree shows of a typed value: nothing when empty, dots in a password field."""
    if not value:
        return None
    return _PASSWORD_DOT * len(value) if "password" in node.name.lower() else value


# -- tabs and headers ---------------------------------------------------------------------


def _tab_titles(title: str, tabs: str | None) -> tuple[list[str], int]:
    """The open tabs' titles and the active one, from the ``Tabs:`` line (or one tab)."""
    if not tabs:
        return [title], 0
    titles, active = [], 0
    for position, item in enumerate(tabs.split(" | ")):
        _, _, rest = item.partition("] ")
        if rest.endswith(" (active)"):
            rest, active = rest[: -len(" (active)")], position
        titles.append(rest)
    return titles, active


def _tab_line(titles: list[str], active: int) -> str:
    return " | ".join(
        f"[{i}] {t}" + (" (active)" if i == active else "") for i, t in enumerate(titles)
    )


def _new_tab(title: str, tabs: str | None) -> Screen:
    titles, _ = _tab_titles(title, tabs)
    line = _tab_line([*titles, "New Tab"], len(titles))
    tree = "[1] RootWebArea '', focused"
    facts = ["new_tab opens an empty tab at about:blank and makes it the active one"]
    return Screen(_screen("about:blank", "", line, tree), facts)


def _tab_focus(
    args: dict[str, Any], url: str, title: str, tabs: str | None, page: _Page
) -> Screen | None:
    titles, _ = _tab_titles(title, tabs)
    index = args.get("index")
    if not isinstance(index, int) or 0 <= index < len(titles):
        return None  # another tab's page is not in the ledger
    error = f"no tab at index {index} ({len(titles)} open)"
    return Screen(_screen(url, title, tabs, page.text(), error), [f"there is {error}"])


def _screen(url: str, title: str, tabs: str | None, tree: str, error: str | None = None) -> str:
    head = [f"URL: {url}", f"Title: {title}"]
    if tabs:
        head.append(f"Tabs: {tabs}")
    if error:
        head.append(f"Error: {error}")
    return "\n".join([*head, tree])
