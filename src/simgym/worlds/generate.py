"""Fictional worlds: relational tables of invented entities, generated from a theme and a
seed, and the constraint checks that prove them free of contradictions.

``generate_world("regional bank", seed=7)`` builds every table of the theme in order,
row by row, from one random source seeded with ``"{theme}:{seed}"`` (no global random,
no clock, no set iteration), so the same theme and seed give byte-identical JSON
(:meth:`World.to_json`). :func:`check_world` returns one line per violated constraint:
keys unique, references resolving, values of the declared type and range, derived
totals equal to the rows they summarize, and the theme's cross-field rules.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, PrivateAttr

from simgym.core.errors import SimgymError
from simgym.core.safeload import loads_json, read_text
from simgym.worlds.themes import Attr, Ctx, Entity, Names, Tables, Theme, get_theme

WORLD_FORMAT = "simgym.world/1"


class WorldError(SimgymError):
    """A world file that cannot be read, or a request the world cannot answer."""


class World(BaseModel):
    """One generated world: its theme and seed, its name and site, and its tables (rows
    are plain dicts keyed by attribute name, in the theme's attribute order)."""

    format: str = WORLD_FORMAT
    theme: str
    seed: int
    name: str
    title: str
    description: str
    today: dt.date
    base_url: str
    tables: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    _view: Tables | None = PrivateAttr(None)

    @property
    def schema(self) -> Theme:
        return get_theme(self.theme)

    def view(self) -> Tables:
        """The rows with indexes (key lookup, children of a row); built once, so treat a
        world as read-only after it is made."""
        if self._view is None or self._view.data is not self.tables:
            self._view = Tables(self.schema, self.tables)
        return self._view

    def row_count(self) -> int:
        return sum(len(rows) for rows in self.tables.values())

    def to_json(self) -> str:
        """Canonical JSON: header fields, then one row per line (stable, diffable)."""
        head = self.model_dump(mode="json", exclude={"tables"})
        lines = ["{"]
        lines.extend(
            f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in head.items()
        )
        lines.append('  "tables": {')
        for t, (table, rows) in enumerate(self.tables.items()):
            lines.append(f"    {json.dumps(table)}: [")
            for i, row in enumerate(rows):
                comma = "," if i < len(rows) - 1 else ""
                lines.append(f"      {json.dumps(row, ensure_ascii=False)}{comma}")
            lines.append("    ]" + ("," if t < len(self.tables) - 1 else ""))
        lines.extend(["  }", "}"])
        return "\n".join(lines) + "\n"

    @classmethod
    def from_json(cls, text: str) -> World:
        try:
            data = loads_json(text)  # huge ints and deep nesting are JSON errors too
        except json.JSONDecodeError as exc:
            raise WorldError(f"not a world file (invalid JSON: {exc})") from None
        if not isinstance(data, dict) or data.get("format") != WORLD_FORMAT:
            raise WorldError(f'not a world file: expected "format": "{WORLD_FORMAT}"')
        try:
            world = cls.model_validate(data)
            world.schema  # noqa: B018  (an unknown theme fails here, with the known ones)
        except (ValueError, KeyError) as exc:
            raise WorldError(f"invalid world file: {exc}") from None
        return world

    @classmethod
    def load(cls, path: str | Path) -> World:
        path = Path(path)
        if not path.is_file():
            raise WorldError(f"world file not found: {path}")
        try:
            return cls.from_json(read_text(path))
        except WorldError as exc:
            raise WorldError(f"{path}: {exc}") from None

    # -- reading rows -----------------------------------------------------------------

    def row(self, table: str, key: Any) -> dict[str, Any]:
        found = self.view().get(table, key)
        if found is None:
            raise WorldError(f"{table} has no row {key!r}")
        return found

    def label(self, table: str, row: dict[str, Any]) -> str:
        """How text names a row: its name, or its key when the table has no names."""
        return str(row[self.schema.entity(table).name.name])

    def display(self, table: str, attr: Attr, value: Any) -> str:
        """A value as pages and answers write it (a reference as the target's name)."""
        if attr.kind == "ref" and attr.ref is not None:
            target = self.view().get(attr.ref, value)
            return self.label(attr.ref, target) if target is not None else str(value)
        return format_value(attr, value)


def format_value(attr: Attr, value: Any) -> str:
    """One canonical text form: plain digits (no thousands separators), floats with the
    attribute's decimals, ISO dates."""
    if value is None:
        return ""
    if attr.kind == "float":
        return f"{float(value):.{attr.decimals}f}"
    return str(value)


# -- generation -----------------------------------------------------------------------


def generate_world(theme: str | Theme, seed: int) -> World:
    """A world of ``theme`` (key, title or alias) from ``seed``; deterministic."""
    schema = get_theme(theme)
    rng = random.Random(f"{schema.key}:{seed}")
    names = Names(rng)
    vocab = schema.setup(names)
    name = schema.world_name(names)
    tables = Tables(schema, {})
    for entity in schema.entities:
        tables.add(entity.table, _generate_table(entity, rng, names, tables, vocab, schema))
    for entity in schema.entities:
        derived = [a for a in entity.attrs if a.derive is not None]
        for row in tables.rows(entity.table):
            for attr in derived:
                row[attr.name] = attr.derive(tables, row)  # type: ignore[misc]
    return World(
        theme=schema.key,
        seed=seed,
        name=name,
        title=f"{name} ({schema.title})",
        description=schema.description.format(name=name),
        today=schema.today,
        base_url=schema.site(name),
        tables=tables.data,
    )


def _generate_table(
    entity: Entity,
    rng: random.Random,
    names: Names,
    tables: Tables,
    vocab: dict[str, Any],
    schema: Theme,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for position in range(rng.randint(*entity.count)):
        ctx = Ctx(rng, names, tables, vocab, schema.today, position, rows, {})
        for attr in entity.attrs:
            if attr.derive is not None:
                ctx.row[attr.name] = None  # keeps the column order; filled at the end
            elif attr.gen is None:
                raise ValueError(f"{entity.table}.{attr.name} has neither gen nor derive")
            else:
                ctx.row[attr.name] = attr.gen(ctx)
        rows.append(ctx.row)
    return rows


# -- constraints ----------------------------------------------------------------------


def check_world(world: World) -> list[str]:
    """Every violated constraint, one line each; an empty list means the world is sound."""
    try:
        schema = world.schema
    except KeyError as exc:
        return [str(exc)]
    problems: list[str] = []
    tables = world.view()
    wanted = [e.table for e in schema.entities]
    missing = [t for t in wanted if t not in world.tables]
    extra = [t for t in world.tables if t not in wanted]
    if missing:
        problems.append(f"missing tables: {', '.join(missing)}")
    if extra:
        problems.append(f"unknown tables: {', '.join(extra)}")
    if missing:
        return problems  # the checks below would only repeat the absence
    today = world.today.isoformat()
    for entity in schema.entities:
        problems.extend(_check_table(entity, tables, today))
    if problems:
        return problems  # totals and rules assume well-typed, resolving rows
    for entity in schema.entities:
        problems.extend(_check_totals(entity, tables))
    for rule in schema.rules:
        problems.extend(f"rule {rule.name}: {line}" for line in rule.check(tables))
    return problems


def _check_table(entity: Entity, tables: Tables, today: str) -> list[str]:
    problems: list[str] = []
    names = [a.name for a in entity.attrs]
    rows = tables.rows(entity.table)
    if not rows:
        return [f"{entity.table}: no rows"]
    seen: dict[str, set[Any]] = {a.name: set() for a in entity.attrs if a.unique or a.kind == "key"}
    key = entity.key.name
    for number, row in enumerate(rows):
        where = f"{entity.table}[{row.get(key, f'#{number}')}]"
        if list(row) != names:
            lost = [n for n in names if n not in row]
            stray = [n for n in row if n not in names]
            problems.append(f"{where}: fields missing {lost}, unknown {stray}, or out of order")
            continue
        for attr in entity.attrs:
            value = row[attr.name]
            problem = _check_value(attr, value, tables, today)
            if problem:
                problems.append(f"{where}.{attr.name}: {problem}")
            if attr.name in seen:
                if value in seen[attr.name]:
                    problems.append(f"{where}.{attr.name}: {value!r} is not unique")
                seen[attr.name].add(value)
    return problems


def _check_totals(entity: Entity, tables: Tables) -> list[str]:
    """Derived values against the rows they summarize."""
    problems = []
    derived = [a for a in entity.attrs if a.derive is not None]
    for row in tables.rows(entity.table) if derived else []:
        for attr in derived:
            expected = attr.derive(tables, row)  # type: ignore[misc]
            if row[attr.name] != expected:
                where = f"{entity.table}[{row[entity.key.name]}].{attr.name}"
                problems.append(f"{where}: {row[attr.name]!r}, but the rows add up to {expected!r}")
    return problems


def _check_value(attr: Attr, value: Any, tables: Tables, today: str) -> str | None:
    """Why ``value`` does not fit ``attr`` (type, range, choices, reference), or None."""
    if attr.kind in ("key", "name", "text", "ref"):
        if not isinstance(value, str) or not value.strip():
            return f"expected a non-empty string, got {value!r}"
        if attr.kind == "ref" and tables.get(attr.ref or "", value) is None:
            return f"refers to a missing {attr.ref} row {value!r}"
        return None
    if attr.kind == "choice":
        return (
            None
            if value in attr.choices and type(value) is not bool
            else f"{value!r} is not one of {list(attr.choices)}"
        )
    if attr.kind == "date":
        if not isinstance(value, str):
            return f"expected an ISO date, got {value!r}"
        try:
            dt.date.fromisoformat(value)
        except ValueError:
            return f"{value!r} is not an ISO date (YYYY-MM-DD)"
        if value > today:
            return f"{value} is after the world's today ({today})"
    elif attr.kind == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            return f"expected an integer, got {value!r}"
    elif attr.kind == "float":
        if not isinstance(value, int | float) or isinstance(value, bool):
            return f"expected a number, got {value!r}"
        if round(value, attr.decimals) != value:
            return f"{value!r} has more than {attr.decimals} decimals"
    if attr.lo is not None and value < attr.lo:
        return f"{value!r} is below the minimum {attr.lo!r}"
    if attr.hi is not None and value > attr.hi:
        return f"{value!r} is above the maximum {attr.hi!r}"
    return None
