"""Accessibility trees as text: the observation format of the web, os and android domains.

An observation is a few header lines (``URL: ...``, ``Focused window: ...``, ``App: ...``)
followed by a tree, one node a line, indented by depth::

    URL: https://shop.example/cart
    [1] RootWebArea 'Your cart', focused
      [12] button 'Checkout' enabled
      StaticText 'Total: $31.50'

A node line is ``[id] role 'name' properties``: the id is what actions address, the role
a word (``button``, ``android.widget.Switch``), the name a quoted string (single or double
quotes, backslash escapes), and properties are flags (``focused``) or ``key=value`` pairs
(``checked=false``, ``value='ana'``, ``pos=(10,20)``, ``bounds=[0,0][1080,200]``), separated
by spaces or commas. The reader is deliberately tolerant of the variations real trees show:

* indentation by tabs (BrowserGym) or by spaces (two per level, or another consistent
  width up to four);
* nodes without an id, as long as they carry a quoted name (``StaticText 'Total: $5'``)
  or are a bare role word: real trees are full of such text-only nodes;
* unrecognised trailing text on a line that has an ``[id]`` (it is kept, not judged).

What it reports as a problem: no nodes at all, the same id twice, a line indented more
than one level below the line above it (or by a width that is not a whole number of
levels), mixed tabs and spaces, and lines that are none of the above (prose, headers in
the middle of the tree, code fences).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

# Quoted strings as Python writes them (repr), which is what BrowserGym and our prompts use.
_QUOTED = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_NODE = re.compile(
    r"(?P<indent>[ \t]*)(?:\[(?P<id>[^\]\s]+)\][ \t]*)?(?P<role>[A-Za-z_][\w.$-]*)(?P<rest>.*)$"
)
_NAME = re.compile(rf"[ \t]+(?P<name>{_QUOTED})")
_PROP = re.compile(
    rf"(?P<key>[A-Za-z_][\w.:-]*)(?:=(?P<value>{_QUOTED}|(?:\[[^\]]*\])+|\([^)]*\)|[^\s,]+))?"
)
_HEADER = re.compile(r"(?P<key>[A-Za-z][\w ()/&.-]{0,40}?)\s*:\s*(?P<value>.*)$")
_STRAY_TAGS = ("<predicted_observation>", "</predicted_observation>", "<think>", "</think>")
MAX_LISTED = 3  # problems of one kind listed before "and N more"


@dataclass(frozen=True)
class Node:
    """One element of the tree. ``props`` maps flags to ``True`` and pairs to their text."""

    id: str | None
    role: str
    name: str
    props: dict[str, str | bool]
    depth: int
    line: int  # 1-based line number in the observation
    parent: int | None = None  # index of the parent in ``Tree.nodes``
    extra: str = ""  # trailing text the reader did not recognise


@dataclass
class Tree:
    """A parsed tree: its nodes in document order and what is wrong with it."""

    nodes: list[Node] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [n.id for n in self.nodes if n.id is not None]

    def find(self, node_id: str) -> Node | None:
        return next((n for n in self.nodes if n.id == node_id), None)


def parse_line(line: str) -> tuple[str, Node] | None:
    """Read one node line; returns (indentation, node) or None when it is not a node."""
    match = _NODE.match(line.rstrip())
    if match is None:
        return None
    rest = match["rest"]
    if rest and rest[0] not in " \t,":
        return None  # e.g. "URL: ..." or "Total:" - a word glued to punctuation
    name_match = _NAME.match(rest)
    name = _unquote(name_match["name"]) if name_match else ""
    if name_match:
        rest = rest[name_match.end() :]
    props, extra = _read_props(rest)
    has_id = match["id"] is not None
    if not has_id and not name_match and rest.strip(" \t,"):
        return None  # no id and no quoted name: prose such as "The page shows a cart."
    node = Node(
        id=match["id"],
        role=match["role"],
        name=name,
        props=props,
        depth=0,
        line=0,
        extra=extra if has_id else "",
    )
    return match["indent"], node


def _unquote(token: str) -> str:
    try:
        value = ast.literal_eval(token)
    except (ValueError, SyntaxError):
        return token[1:-1]
    return value if isinstance(value, str) else token[1:-1]


def _read_props(text: str) -> tuple[dict[str, str | bool], str]:
    props: dict[str, str | bool] = {}
    pos, end = 0, len(text)
    while pos < end:
        if text[pos] in " \t,":
            pos += 1
            continue
        match = _PROP.match(text, pos)
        if match is None or (match.end() < end and text[match.end()] not in " \t,"):
            return props, text[pos:].strip()
        value = match["value"]
        if value is None:
            props[match["key"]] = True
        else:
            props[match["key"]] = _unquote(value) if value[0] in "'\"" else value
        pos = match.end()
    return props, ""


def split_headers(text: str) -> tuple[dict[str, str], int]:
    """The ``Key: value`` lines before the tree, keyed by lower-case key, and the index of
    the first line after them. Blank lines around the headers are skipped."""
    headers: dict[str, str] = {}
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            index += 1
            continue
        if line[:1] in " \t[" or parse_line(line) is not None:
            break
        match = _HEADER.match(line)
        if match is None:
            break
        headers.setdefault(match["key"].strip().lower(), match["value"].strip())
        index += 1
    return headers, index


def parse_tree(text: str, first_line: int = 1) -> Tree:
    """Parse tree text (no headers); ``first_line`` numbers the lines in messages."""
    tree = Tree()
    unparsable: list[str] = []
    rows: list[tuple[str, Node]] = []
    for offset, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        number = first_line + offset
        if line.lstrip().startswith("```"):
            tree.problems.append(f"line {number}: code fence in the tree")
            continue
        parsed = parse_line(line)
        if parsed is None:
            unparsable.append(f"line {number}: {line.strip()[:60]!r}")
            continue
        indent, node = parsed
        rows.append((indent, replace(node, line=number)))
    if unparsable:
        listed = "; ".join(unparsable[:MAX_LISTED])
        more = len(unparsable) - MAX_LISTED
        suffix = f" (and {more} more)" if more > 0 else ""
        tree.problems.append(f"not a tree node: {listed}{suffix}")
    if not rows:
        tree.problems.append("no tree nodes (expected lines like [12] button 'OK')")
        return tree
    depths, indent_problems = _depths([indent for indent, _ in rows], [n.line for _, n in rows])
    tree.problems.extend(indent_problems)
    tree.nodes = _link([node for _, node in rows], depths)
    tree.problems.extend(_duplicate_ids(tree.nodes))
    return tree


def _depths(indents: list[str], lines: list[int]) -> tuple[list[int], list[str]]:
    """Depth of each node from its indentation, and the problems found on the way."""
    problems: list[str] = []
    uses_tabs = any("\t" in i for i in indents)
    if uses_tabs and any(" " in i for i in indents):
        problems.append("indentation mixes tabs and spaces")
    widths = [i.count("\t") if uses_tabs else len(i) for i in indents]
    base = min(widths)
    steps = [w - base for w in widths if w > base]
    # The narrowest step is one level, unless it is wider than anyone indents (then it
    # is a jump of several levels of the documented two spaces).
    unit = 1 if uses_tabs else (min(steps) if steps and min(steps) <= 4 else 2)
    depths: list[int] = []
    bad: list[str] = []
    previous = -1
    for width, line in zip(widths, lines, strict=True):
        level, remainder = divmod(width - base, unit)
        if remainder:
            bad.append(f"line {line}: indentation is not a whole number of levels")
        if level > previous + 1:
            bad.append(f"line {line}: indented {level - previous} levels below the line above")
            level = previous + 1
        depths.append(level)
        previous = level
    if bad:
        more = len(bad) - MAX_LISTED
        problems.append(
            "bad indentation: "
            + "; ".join(bad[:MAX_LISTED])
            + (f" (and {more} more)" if more > 0 else "")
        )
    return depths, problems


def _link(nodes: list[Node], depths: list[int]) -> list[Node]:
    linked: list[Node] = []
    stack: list[int] = []  # indexes of the open ancestors, one per depth
    for index, (node, depth) in enumerate(zip(nodes, depths, strict=True)):
        del stack[depth:]
        parent = stack[-1] if stack else None
        linked.append(replace(node, depth=depth, parent=parent))
        stack.append(index)
    return linked


def _duplicate_ids(nodes: list[Node]) -> list[str]:
    seen: dict[str, int] = {}
    problems = []
    for node in nodes:
        if node.id is None:
            continue
        if node.id in seen:
            problems.append(f"duplicate id [{node.id}] (lines {seen[node.id]} and {node.line})")
        else:
            seen[node.id] = node.line
    return problems[:MAX_LISTED]


def tree_problems(text: str) -> list[str]:
    """What is wrong with a tree (no headers expected); empty when it is well formed."""
    return parse_tree(text).problems


def parse_observation(text: str) -> tuple[dict[str, str], Tree]:
    """Split an observation into its header lines and its tree."""
    headers, start = split_headers(text)
    body = "\n".join(text.splitlines()[start:])
    return headers, parse_tree(body, first_line=start + 1)


def observation_problems(text: str, required: Sequence[Sequence[str]] = ()) -> list[str]:
    """Format problems of a whole observation.

    ``required`` lists header groups: each group is a few accepted names of one header
    (``("App", "Activity", "Package")``, matched case-insensitively), one of which must
    appear before the tree; problems name the first.
    """
    problems = [f"stray {tag} tag" for tag in _STRAY_TAGS if tag in text]
    headers, tree = parse_observation(text)
    for group in required:
        if not any(key.lower() in headers for key in group):
            problems.append(f"no '{group[0]}:' line before the tree")
    return problems + tree.problems
