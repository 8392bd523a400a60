"""Parsing text that users and agents hand us, with limits that keep hostile input cheap.

Plain ``json.loads`` and ``yaml.safe_load`` fail in ways callers do not expect: deep
nesting raises ``RecursionError``, an integer over 4,300 digits raises a bare
``ValueError``, JSON's non-standard ``NaN``/``Infinity`` parse and are later written
back as invalid JSON, and YAML aliases (a "billion laughs") expand a few hundred bytes
into gigabytes once the data is serialized. The functions here turn every one of these
into the error type the caller already handles (``json.JSONDecodeError`` or
``yaml.YAMLError``), so one ``except`` clause covers all bad input.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from simgym.core.errors import SimgymError

# What aliases may add to a YAML document once expanded: one unit per node plus one per
# character of a scalar. Real files use anchors for a few shared defaults (kilobytes);
# 1 MB leaves room for those and refuses a billion laughs long before it costs memory.
YAML_ALIAS_BUDGET = 1_000_000

# Nesting deeper than this is refused. Python's parsers fail near 1,000 levels with a
# RecursionError, and pydantic refuses to serialize far less, so a 900-deep task would
# load and then crash the run when its trajectory is written. Real data rarely passes 20.
MAX_DEPTH = 64


class InputLimitError(yaml.YAMLError):
    """A YAML document beyond what simgym reads (alias expansion, nesting, integer size)."""


class BoundedSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses documents whose aliases expand beyond
    :data:`YAML_ALIAS_BUDGET` or refer to themselves.

    PyYAML builds one shared object per anchor, so loading stays small; the blow-up comes
    when the data is copied or serialized (a trajectory line, a prompt). The check runs
    on the composed node graph, before any Python object is constructed.
    """

    def compose_document(self) -> Node | None:
        node = super().compose_document()
        if node is not None:
            _check_aliases(node, YAML_ALIAS_BUDGET)
        return node


def _scalar_text(loader: yaml.SafeLoader, node: ScalarNode) -> str:
    return loader.construct_scalar(node)


def _not_json(loader: yaml.SafeLoader, node: Node) -> Any:
    raise yaml.constructor.ConstructorError(
        None, None, f"{node.tag} is not supported: simgym files hold JSON data", node.start_mark
    )


# simgym's files are JSON in YAML's clothes: every value must survive json.dumps (prompts,
# trajectories, exports). A date stays the text it was written as; sets, binary and
# ordered pairs are refused instead of crashing the run when the episode is written.
BoundedSafeLoader.add_constructor("tag:yaml.org,2002:timestamp", _scalar_text)
for _tag in ("binary", "set", "omap", "pairs"):
    BoundedSafeLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _not_json)


def _check_aliases(root: Node, budget: int) -> None:
    # Aliases are the same Node object reached twice, so sizes are memoized per node and
    # each extra visit of a node adds its full expanded size to the total.
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    extra = 0

    def size(node: Node) -> int:
        nonlocal extra
        key = id(node)
        if key in on_path:
            raise InputLimitError("YAML alias refers to a node that contains it (recursive)")
        if key in sizes:
            extra += sizes[key]
            if extra > budget:
                raise InputLimitError(
                    f"YAML aliases expand beyond {budget:,} units; refusing (billion laughs?)"
                )
            return sizes[key]
        on_path.add(key)
        total = 1
        if isinstance(node, ScalarNode):
            total += len(node.value)
        elif isinstance(node, SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        on_path.discard(key)
        sizes[key] = total
        return total

    size(root)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` with limits; every failure is a ``yaml.YAMLError`` whose text is
    one line (PyYAML's own spans several, with a caret under the spot)."""
    try:
        return _check_value(yaml.load(text, Loader=BoundedSafeLoader))  # noqa: S506
    except RecursionError:
        raise InputLimitError("YAML nested too deeply") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = ": ".join(filter(None, [exc.context, exc.problem])) or type(exc).__name__
        raise yaml.YAMLError(f"{what}{where}") from None
    except InputLimitError:
        raise
    except yaml.YAMLError as exc:  # the reader's (a control character) spans lines too
        raise yaml.YAMLError(" ".join(str(exc).split())) from None
    except ValueError as exc:  # int() of a 5,000-digit scalar, and the like
        raise InputLimitError(f"YAML value not readable: {_first_line(exc)}") from None


def _check_value(value: Any, limit: int = MAX_DEPTH) -> Any:
    """``value`` itself, or ``ValueError`` when lists/dicts nest deeper than ``limit``, a
    float is NaN or infinite, or a string holds a lone surrogate (``"\\ud800"`` is legal
    JSON and YAML, but the text cannot be written as UTF-8, so the trajectory holding it
    would fail to save)."""
    stack = [(value, 1)]
    while stack:  # iterative: the point is to survive what recursion would not
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item)
            continue
        if isinstance(item, float) and not math.isfinite(item):  # YAML's .nan and .inf
            raise ValueError(f"{item} is not a JSON number")
        if not isinstance(item, dict | list):
            continue
        if depth > limit:
            raise ValueError(f"nested deeper than {limit} levels")
        if isinstance(item, dict):
            stack.extend((key, depth) for key in item)
            stack.extend((child, depth + 1) for child in item.values())
        else:
            stack.extend((child, depth + 1) for child in item)
    return value


def _check_text(text: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a string holds a lone UTF-16 surrogate (\\ud800-\\udfff)") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 reads as inf, which JSON cannot write back
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def loads_json(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` for untrusted text: standard JSON only (no ``NaN``/``Infinity``, no
    number that overflows to infinity), at most ``max_depth`` levels of nesting; every
    failure is a ``json.JSONDecodeError``."""
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
        return _check_value(value, max_depth)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", _as_str(text), 0) from None
    except (ValueError, UnicodeDecodeError) as exc:  # also ints over 4,300 digits
        raise json.JSONDecodeError(_first_line(exc), _as_str(text), 0) from None


def _as_str(text: str | bytes) -> str:
    return text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text


def read_text(path: str | os.PathLike[str]) -> str:
    """A file's text as UTF-8; a binary or mis-encoded file is a one-line
    :class:`SimgymError` naming the file and the first bad byte."""
    path = Path(path)
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SimgymError(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def read_scenario(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A scenario mapping from a YAML/JSON file; a file with a ``scenario`` mapping (an
    action or task file) gives that. Anything else is a one-line :class:`SimgymError`."""
    path = Path(path)
    if not path.is_file():
        raise SimgymError(f"scenario file not found: {path}")
    try:
        data = load_yaml(read_text(path))
    except yaml.YAMLError as exc:
        raise SimgymError(f"{path}: not valid YAML/JSON: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("scenario"), dict):
        data = data["scenario"]
    if not isinstance(data, dict):
        raise SimgymError(f"{path}: a scenario must be a mapping")
    return data


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    if "integer string conversion" in text:  # Python's own limit, worded for developers
        return "an integer has more than 4,300 digits"
    return (text.splitlines() or [type(exc).__name__])[0][:200]
