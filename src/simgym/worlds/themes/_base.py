"""The theme engine: invented names and the schema a theme is written in (tables of typed
attributes with their own generators, relations, derived attributes and rules)."""

from __future__ import annotations

import datetime as dt
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

AttrKind = Literal["key", "name", "text", "int", "float", "date", "choice", "ref"]

# -- invented names ---------------------------------------------------------------------

_ONSETS = ("b", "br", "c", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p")
_ONSETS += ("r", "s", "st", "t", "tr", "v", "z", "th", "sh", "")
_INNER = ("d", "k", "l", "m", "n", "r", "s", "t", "v", "z", "th", "b", "g")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ia", "ea")
_CODAS = ("", "", "", "n", "r", "l", "s", "x", "th", "nd", "rk", "m", "nt")
_CITY_ENDS = ("ford", "haven", "mere", "ton", "vik", "stad", "port", "field", "wick", "dale")
_COUNTRY_ENDS = ("ia", "land", "ora", "esh", "any", "ovia")


class Names:
    """Invents pronounceable names and keeps each kind unique within one world."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._used: dict[str, set[str]] = {}

    def word(self, syllables: int = 2) -> str:
        # Later syllables start with one consonant, which keeps the words pronounceable.
        parts = [
            self.rng.choice(_ONSETS if i == 0 else _INNER) + self.rng.choice(_VOWELS)
            for i in range(syllables)
        ]
        parts[-1] += self.rng.choice(_CODAS)
        return "".join(parts).capitalize()

    def unique(self, kind: str, make: Callable[[], str]) -> str:
        """A fresh value from ``make`` never returned before for ``kind``."""
        used = self._used.setdefault(kind, set())
        for _ in range(2000):
            value = make()
            if value not in used:
                used.add(value)
                return value
        raise RuntimeError(f"ran out of unique {kind} names")  # a theme asking too much

    def person(self) -> str:
        return self.unique("person", lambda: f"{self.word(self.rng.randint(1, 2))} {self.word(2)}")

    def company(self, suffixes: tuple[str, ...]) -> str:
        return self.unique("company", lambda: f"{self.word(2)} {self.rng.choice(suffixes)}")

    def city(self) -> str:
        return self.unique(
            "place", lambda: self.word(self.rng.randint(1, 2)) + self.rng.choice(_CITY_ENDS)
        )

    def country(self) -> str:
        return self.unique("place", lambda: self.word(1) + self.rng.choice(_COUNTRY_ENDS))


def slug(text: str) -> str:
    """Lower-case words joined by hyphens, for URLs."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


# -- the schema -------------------------------------------------------------------------


class Tables:
    """The rows of a world by table, with lazily built indexes (key lookup, children)."""

    def __init__(self, theme: Theme, data: dict[str, list[dict[str, Any]]]) -> None:
        self.theme = theme
        self.data = data
        self._by_key: dict[str, dict[str, dict[str, Any]]] = {}
        self._children: dict[tuple[str, str], dict[Any, list[dict[str, Any]]]] = {}

    def rows(self, table: str) -> list[dict[str, Any]]:
        return self.data.get(table, [])

    def get(self, table: str, key: Any) -> dict[str, Any] | None:
        if table not in self._by_key:
            key_name = self.theme.entity(table).key.name
            self._by_key[table] = {row.get(key_name): row for row in self.rows(table)}
        return self._by_key[table].get(key)

    def children(self, table: str, attr: str, key: Any) -> list[dict[str, Any]]:
        """Rows of ``table`` whose ``attr`` (a ref) is ``key``, in table order."""
        if (table, attr) not in self._children:
            groups: dict[Any, list[dict[str, Any]]] = {}
            for row in self.rows(table):
                groups.setdefault(row.get(attr), []).append(row)
            self._children[(table, attr)] = groups
        return self._children[(table, attr)].get(key, [])

    def add(self, table: str, rows: list[dict[str, Any]]) -> None:
        self.data[table] = rows
        self._by_key.pop(table, None)
        for pair in [p for p in self._children if p[0] == table]:
            del self._children[pair]


@dataclass
class Ctx:
    """What a value generator sees: the world's random source and vocabulary, the tables
    finished so far, this table's rows so far and the row being built."""

    rng: random.Random
    names: Names
    tables: Tables
    vocab: dict[str, Any]
    today: dt.date
    position: int = 0  # index of the row being built within its table
    done: list[dict[str, Any]] = field(default_factory=list)
    row: dict[str, Any] = field(default_factory=dict)

    def ref(self, table: str, attr: str) -> dict[str, Any]:
        """The row of ``table`` that this row's ``attr`` points at."""
        found = self.tables.get(table, self.row[attr])
        assert found is not None, f"{attr} points at a missing {table} row"
        return found

    def cover(self, table: str) -> Any:
        """A key of ``table``: each row once for the first positions, then at random, so
        every parent gets at least one child."""
        rows = self.tables.rows(table)
        key = self.tables.theme.entity(table).key.name
        if self.position < len(rows):
            return rows[self.position][key]
        return self.rng.choice(rows)[key]

    def date_between(self, lo: dt.date, hi: dt.date) -> str:
        return (lo + dt.timedelta(days=self.rng.randint(0, (hi - lo).days))).isoformat()


Gen = Callable[[Ctx], Any]
Derive = Callable[[Tables, dict[str, Any]], Any]


@dataclass(frozen=True)
class Attr:
    """One column. ``label`` is how pages and questions name it ("launch price (USD)");
    ``lo``/``hi`` bound numbers and dates (dates as ISO strings); a ``ref`` holds a key of
    table ``ref``; a ``derive`` attribute is computed from other rows once all exist."""

    name: str
    label: str
    kind: AttrKind
    gen: Gen | None = None
    lo: Any = None
    hi: Any = None
    choices: tuple[Any, ...] = ()
    ref: str | None = None
    derive: Derive | None = None
    decimals: int = 0
    unique: bool = False
    mutable: bool = True  # may an MCP update tool change it (and a task ask to)?

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "float") or (
            self.kind == "choice" and all(isinstance(c, int) for c in self.choices)
        )


@dataclass(frozen=True)
class Entity:
    """A table: one kind of thing in the world. ``summary`` is a ``str.format`` template
    over the row's formatted values (a ref shows the target's name) that opens its page;
    ``brief`` names the attribute shown next to it in lists on other pages."""

    table: str
    singular: str
    plural: str
    count: tuple[int, int]
    attrs: tuple[Attr, ...]
    summary: str
    brief: str | None = None

    @property
    def key(self) -> Attr:
        return next(a for a in self.attrs if a.kind == "key")

    @property
    def name(self) -> Attr:
        """The attribute that names a row in text (the key when rows have no name)."""
        return next((a for a in self.attrs if a.kind == "name"), self.key)

    def attr(self, name: str) -> Attr:
        found = next((a for a in self.attrs if a.name == name), None)
        if found is None:
            raise KeyError(f"{self.table} has no attribute {name!r}")
        return found

    def refs(self) -> list[Attr]:
        return [a for a in self.attrs if a.kind == "ref"]


@dataclass(frozen=True)
class Rule:
    """A cross-field constraint; ``check`` yields one line per violation."""

    name: str
    description: str
    check: Callable[[Tables], Iterator[str]]


@dataclass(frozen=True)
class Theme:
    """A world's vocabulary: entities (in generation order: a table only refers to the
    ones before it), rules, and how to name the world and its web site."""

    key: str
    title: str
    aliases: tuple[str, ...]
    today: dt.date
    entities: tuple[Entity, ...]
    rules: tuple[Rule, ...]
    world_name: Callable[[Names], str]
    site: Callable[[str], str]  # world name -> base URL of the site holding its pages
    description: str  # str.format template with {name}
    setup: Callable[[Names], dict[str, Any]] = lambda names: {}

    def entity(self, table: str) -> Entity:
        found = next((e for e in self.entities if e.table == table), None)
        if found is None:
            raise KeyError(f"theme {self.key!r} has no table {table!r}")
        return found

    def relations(self) -> list[tuple[Entity, Attr, Entity]]:
        """(child table, its ref attribute, parent table) for every relation."""
        return [
            (child, attr, self.entity(attr.ref or ""))
            for child in self.entities
            for attr in child.refs()
        ]
