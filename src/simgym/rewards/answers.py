"""Reading an LLM judge's answer leniently, for every judge in simgym (the rubric
reward here, ``bench judge``): reasoning dropped, JSON objects found anywhere in the
text, scores read from numbers or strings."""

from __future__ import annotations

import json
import re
from typing import Any

_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_CLOSE = "</think>"
_CODE = re.compile(r"```[A-Za-z]*\s*\n?(.*?)```", re.DOTALL)
_TAGGED = re.compile(r"<(\w*evaluation\w*)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_NUMBER = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*(\d+(?:\.\d+)?))?\s*")


def strip_reasoning(text: str | None) -> str:
    """``text`` without ``<think>`` blocks (an unclosed one runs to the end) and without
    what comes before a lone ``</think>`` (a chat template may open the block itself)."""
    text = _THINK.sub("", text or "")
    cut = text.lower().rfind(_CLOSE)
    return text[cut + len(_CLOSE) :] if cut != -1 else text


def json_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects in ``text``: those in ``<...evaluation...>`` tags, then in code
    fences, then every outermost ``{...}`` in order. Trailing commas are forgiven."""
    found = [m.group(2) for m in _TAGGED.finditer(text)]
    found += [m.group(1) for m in _CODE.finditer(text)]
    found += _balanced_objects(text)
    return [value for value in map(_loads, found) if isinstance(value, dict)]


def _balanced_objects(text: str) -> list[str]:
    """Every outermost ``{...}`` span, skipping braces inside JSON strings."""
    spans, depth, start, in_string, escaped = [], 0, -1, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"' and depth:
            in_string = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    return spans


def _loads(candidate: str) -> Any:
    for attempt in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
        try:
            return json.loads(attempt.strip())
        except (json.JSONDecodeError, ValueError):
            continue
    return None


def read_number(value: Any, scale: float | None = None) -> float | None:
    """A score from a JSON value: a number, a string like ``"7"`` or ``"7/10"`` (scaled
    to ``scale`` when given, else the ``/10`` is ignored), or ``{"score": 7, ...}``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        found = _NUMBER.fullmatch(value)
        return scaled(found.group(1), found.group(2), scale) if found else None
    if isinstance(value, dict):
        for key in ("score", "value", "rating"):
            if key in value:
                return read_number(value[key], scale)
    return None


def scaled(score: str, out_of: str | None, scale: float | None) -> float:
    """``score`` out of ``out_of``, rescaled to ``scale`` (unchanged without either)."""
    value = float(score)
    if scale is not None and out_of and float(out_of) > 0:
        value = value / float(out_of) * scale
    return value
