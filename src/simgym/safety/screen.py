"""Writing into the first screen of a GUI scenario (web page, desktop, phone screen):
where each domain keeps it, and adding a line of text or a dialog to its tree so the
tree stays well formed (the same indentation, names quoted as the reader expects)."""

from __future__ import annotations

from typing import Any

from simgym.core.errors import SimgymError
from simgym.domains._gui import uitree

# The scenario field holding each GUI domain's first screen, and the role of a text line.
SCREEN_FIELD = {"web": "page", "os": "tree", "android": "screen"}
TEXT_ROLE = {"web": "StaticText", "os": "label", "android": "android.widget.TextView"}


def unit(tree: str) -> str:
    """The tree's indentation step (two spaces unless it shows another)."""
    for line in tree.splitlines():
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            return line[: len(line) - len(stripped)]
    return "  "


def free_ids(tree: str, count: int) -> list[str]:
    """``count`` numeric ids after the largest one the tree uses."""
    numbers = [int(i) for i in uitree.parse_tree(tree).ids if i.isdigit()]
    first = max(numbers, default=0) + 1
    return [str(first + n) for n in range(count)]


def add_lines(tree: str, lines: list[str], inside: str | None = None) -> str:
    """``tree`` with ``lines`` (written for depth 0, indented by :func:`unit`) added as
    the last children of element ``inside``, or at the end under the root."""
    parsed = uitree.parse_tree(tree)
    if not parsed.nodes:
        raise SimgymError("the screen holds no tree to write into")
    step, rows = unit(tree), tree.rstrip("\n").splitlines()
    if inside is None:
        depth, at = 1, len(rows)
    else:
        index = next((i for i, n in enumerate(parsed.nodes) if n.id == inside), None)
        if index is None:
            raise SimgymError(f"the screen has no element {inside!r} to write into")
        node = parsed.nodes[index]
        depth, at = node.depth + 1, node.line
        for later in parsed.nodes[index + 1 :]:
            if later.depth <= node.depth:
                break
            at = later.line
    shifted = [f"{step * depth}{line}" for line in lines]
    return "\n".join(rows[:at] + shifted + rows[at:])


def add_text(domain: str, tree: str, text: str, inside: str | None = None) -> str:
    """``tree`` with a text line saying ``text`` (inside element ``inside``, or last)."""
    return add_lines(tree, [f"{TEXT_ROLE[domain]} {text!r}"], inside)


def locate(domain: str, scenario: dict[str, Any], where: str) -> tuple[dict[str, Any], str]:
    """The mapping and key that hold the screen ``where`` names: ``page``/``screen``/
    ``tree`` (or the web start url) for the first screen, a web ``pages`` url for another.
    A ``#id`` suffix is not part of it (see :func:`split_where`)."""
    first = SCREEN_FIELD[domain]
    if where in ("page", "screen", "tree", first) or where == scenario.get("start_url"):
        return scenario, first
    if domain == "web" and where in (scenario.get("pages") or {}):
        return scenario["pages"], where
    raise SimgymError(f"no {domain} screen {where!r} (use {first!r} or a url of pages)")


def split_where(where: str) -> tuple[str, str | None]:
    """``'page#13'`` -> ``('page', '13')``: a screen and, optionally, an element in it."""
    screen, _, element = where.partition("#")
    return screen, element or None
