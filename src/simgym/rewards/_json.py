"""JSON paths and value comparison, shared by the state and tool-call checks."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from simgym.core.errors import SimgymError
from simgym.rewards._text import answers_match
from simgym.rewards._verifier import text_of

MISSING = object()
_INDEX = re.compile(r"0|[1-9]\d*")


def split_path(path: str) -> list[str]:
    """The keys of a path: a JSON Pointer (RFC 6901, ``/customers/1/email``; ``""`` is the
    whole document) or a dotted path (``customers.1.email``)."""
    if not isinstance(path, str):
        raise SimgymError(f"a path must be a string, not {path!r}")
    if path == "":
        return []
    if path.startswith("/"):
        keys = []
        for raw in path[1:].split("/"):
            if re.search(r"~(?![01])", raw):
                raise SimgymError(f"invalid JSON Pointer {path!r}: '~' must be '~0' or '~1'")
            keys.append(raw.replace("~1", "/").replace("~0", "~"))
        return keys
    keys = path.split(".")
    if any(k == "" for k in keys):
        raise SimgymError(f"invalid dotted path {path!r}: empty key")
    return keys


def resolve_path(document: Any, keys: Sequence[str]) -> Any:
    """The value at ``keys`` in a JSON document, or ``MISSING``. List indexes are
    decimal numbers without leading zeros (RFC 6901); ``-`` never resolves."""
    node = document
    for key in keys:
        if isinstance(node, dict):
            if key not in node:
                return MISSING
            node = node[key]
        elif isinstance(node, list):
            if not _INDEX.fullmatch(key) or int(key) >= len(node):
                return MISSING
            node = node[int(key)]
        else:
            return MISSING
    return node


def values_equal(actual: Any, expected: Any, *, loose: bool = False) -> bool:
    """JSON equality (numbers by value, booleans apart from numbers). With ``loose``,
    scalars compare as answers do (case, punctuation, "450" == 450)."""
    if isinstance(actual, dict) and isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(
            values_equal(actual[k], expected[k], loose=loose) for k in expected
        )
    if isinstance(actual, list) and isinstance(expected, list):
        return len(actual) == len(expected) and all(
            values_equal(a, e, loose=loose) for a, e in zip(actual, expected, strict=True)
        )
    if isinstance(actual, bool) or isinstance(expected, bool):
        if isinstance(actual, bool) and isinstance(expected, bool):
            return actual == expected
        return loose and answers_match(text_of(actual), text_of(expected))
    numbers = (int, float)
    if isinstance(actual, numbers) and isinstance(expected, numbers):
        return math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-12)
    if loose and not isinstance(actual, dict | list) and not isinstance(expected, dict | list):
        if actual is None or expected is None:
            return actual is expected
        return answers_match(text_of(actual), text_of(expected))
    return bool(actual == expected)


def matches_subset(actual: Any, expected: Any, *, loose: bool = False) -> bool:
    """Like :func:`values_equal`, except that an expected object only needs its own keys
    to be present and to match (recursively); other keys in ``actual`` are ignored."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and matches_subset(actual[k], v, loose=loose) for k, v in expected.items()
        )
    return values_equal(actual, expected, loose=loose)
