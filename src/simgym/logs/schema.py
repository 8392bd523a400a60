"""JSON schemas inferred from observed values: types, required keys (present every
time), enums for small closed sets of strings, and formats (date-time, date, email,
uuid, uri) when every observed string has one."""

from __future__ import annotations

import re
from collections import Counter

from simgym.logs.mask import key_kind
from simgym.logs.model import JSON

MAX_ENUM = 8  # a string field with at most this many values (each seen twice on average)
_TRACK = 64  # distinct strings kept per field before it counts as open

FORMATS = {
    "date-time": re.compile(
        r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$"
    ),
    "date": re.compile(r"^\d{4}-\d{2}-\d{2}$"),
    "email": re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$"),
    "uuid": re.compile(r"^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$", re.IGNORECASE),
    "uri": re.compile(r"^[a-z][a-z0-9+.-]*://\S+$"),
}


def _type(value: JSON) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


class Shape:
    """Everything seen at one place of a JSON value; :meth:`schema` describes it."""

    def __init__(self, key: str | None = None) -> None:
        self.key = key
        self.count = 0
        self.types: Counter[str] = Counter()
        self.objects = 0
        self.properties: dict[str, Shape] = {}
        self.present: Counter[str] = Counter()
        self.items: Shape | None = None
        self.strings: Counter[str] = Counter()
        self.open = False
        self.formats: Counter[str] = Counter()
        self.low: float | None = None
        self.high: float | None = None

    def add(self, value: JSON) -> None:
        self.count += 1
        kind = _type(value)
        self.types[kind] += 1
        if isinstance(value, dict):
            self.objects += 1
            for k, v in value.items():
                self.present[k] += 1
                shape = self.properties.get(k)
                if shape is None:  # (setdefault would build a Shape on every call)
                    shape = self.properties[k] = Shape(k)
                shape.add(v)
        elif isinstance(value, list):
            if self.items is None:
                self.items = Shape(self.key)
            for v in value:
                self.items.add(v)
        elif isinstance(value, str):
            if not self.open:
                self.strings[value] += 1
                if len(self.strings) > _TRACK:
                    self.open = True
                    self.strings.clear()
            for name, pattern in FORMATS.items():
                if pattern.match(value):
                    self.formats[name] += 1
                    break
        elif kind in ("integer", "number"):
            self.low = value if self.low is None else min(self.low, value)
            self.high = value if self.high is None else max(self.high, value)

    def required(self) -> list[str]:
        return sorted(k for k, n in self.present.items() if n == self.objects)

    def schema(self) -> dict[str, JSON]:
        types = set(self.types)
        if {"integer", "number"} <= types:
            types.discard("integer")
        out: dict[str, JSON] = {}
        if len(types) == 1:
            out["type"] = next(iter(types))
        elif types:
            out["type"] = sorted(types)
        if "object" in types:
            out["properties"] = {k: s.schema() for k, s in sorted(self.properties.items())}
            out["required"] = self.required()
        if "array" in types and self.items is not None and self.items.count:
            out["items"] = self.items.schema()
        strings = self.types["string"]
        if strings:
            fmt = next((f for f, n in self.formats.items() if n == strings), None)
            if fmt:
                out["format"] = fmt
            elif (
                not self.open
                and key_kind(self.key) is None
                and 0 < len(self.strings) <= MAX_ENUM
                and strings >= 2 * len(self.strings)
            ):
                out["enum"] = sorted(self.strings)
        if self.low is not None:
            out["minimum"], out["maximum"] = self.low, self.high
        out["x-seen"] = self.count
        return out
