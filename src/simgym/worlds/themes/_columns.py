"""Column constructors and value generators for writing themes: each column states its
range once, serving both the generator and :func:`simgym.worlds.generate.check_world`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from simgym.worlds.themes._base import Attr, Derive, Gen, Rule, Tables

# -- small helpers for generators and rules --------------------------------------------


def _count(child: str, attr: str) -> Derive:
    def derive(tables: Tables, row: dict[str, Any]) -> int:
        parent = tables.theme.entity(tables.theme.entity(child).attr(attr).ref or "")
        return len(tables.children(child, attr, row[parent.key.name]))

    return derive


def _total(child: str, attr: str, value: str) -> Derive:
    def derive(tables: Tables, row: dict[str, Any]) -> int:
        parent = tables.theme.entity(tables.theme.entity(child).attr(attr).ref or "")
        return sum(r[value] for r in tables.children(child, attr, row[parent.key.name]))

    return derive


def _key(prefix: str, width: int) -> Gen:
    return lambda c: f"{prefix}-{c.position + 1:0{width}d}"


def _int(lo: int, hi: int, step: int = 1) -> Gen:
    return lambda c: c.rng.randrange(lo, hi + 1, step)


def _log_int(lo: int, hi: int) -> Gen:
    """Spread over orders of magnitude, as company sizes and sales are."""
    return lambda c: min(hi, max(lo, round(lo * (hi / lo) ** c.rng.random())))


def _float(lo: float, hi: float, decimals: int) -> Gen:
    return lambda c: round(c.rng.uniform(lo, hi), decimals)


def _choice(choices: tuple[Any, ...]) -> Gen:
    return lambda c: c.rng.choice(choices)


def pick(vocab: str) -> Gen:
    """One entry of a world-level vocabulary list (cities, chip designers)."""
    return lambda c: c.rng.choice(c.vocab[vocab])


def any_key(table: str) -> Gen:
    """A key of any row of ``table`` (no coverage)."""
    return lambda c: c.rng.choice(c.tables.rows(table))[c.tables.theme.entity(table).key.name]


def year_start(year: int) -> dt.date:
    return dt.date(year, 1, 1)


def from_iso(value: str) -> dt.date:
    return dt.date.fromisoformat(value)


# -- column constructors (each states its range once: the generator's and the check's) --


def key(column: str, label: str, prefix: str, width: int) -> Attr:
    """Sequential keys: ``PH-0001``, ``PH-0002``, ..."""
    return Attr(column, label, "key", _key(prefix, width), mutable=False)


def name(column: str, label: str, gen: Gen) -> Attr:
    return Attr(column, label, "name", gen, unique=True, mutable=False)


def text(column: str, label: str, gen: Gen, *, unique: bool = False, mutable: bool = True) -> Attr:
    return Attr(column, label, "text", gen, unique=unique, mutable=mutable)


def integer(
    column: str,
    label: str,
    lo: int,
    hi: int,
    gen: Gen | None = None,
    *,
    step: int = 1,
    log: bool = False,
    mutable: bool = True,
) -> Attr:
    """Uniform in [lo, hi] by ``step`` (``log``: spread over orders of magnitude), unless
    ``gen`` narrows it further for the row."""
    if gen is None:
        gen = _log_int(lo, hi) if log else _int(lo, hi, step)
    return Attr(column, label, "int", gen, lo, hi, mutable=mutable)


def real(column: str, label: str, lo: float, hi: float, decimals: int) -> Attr:
    return Attr(column, label, "float", _float(lo, hi, decimals), lo, hi, decimals=decimals)


def choice(
    column: str,
    label: str,
    choices: tuple[Any, ...],
    gen: Gen | None = None,
    *,
    mutable: bool = True,
) -> Attr:
    return Attr(column, label, "choice", gen or _choice(choices), choices=choices, mutable=mutable)


def date(column: str, label: str, gen: Gen, lo: dt.date, hi: dt.date) -> Attr:
    """A date drawn by ``gen`` (which keeps the row's own rules); rules depend on dates,
    so updates never change them."""
    return Attr(column, label, "date", gen, lo.isoformat(), hi.isoformat(), mutable=False)


def ref(column: str, label: str, table: str, gen: Gen | None = None) -> Attr:
    """A key of ``table``; by default every row of it gets at least one pointer."""
    return Attr(column, label, "ref", gen or (lambda c: c.cover(table)), ref=table, mutable=False)


def count(column: str, label: str, child: str, attr: str) -> Attr:
    """How many ``child`` rows point here through ``attr`` (at least one, by coverage)."""
    return Attr(column, label, "int", derive=_count(child, attr), lo=1, mutable=False)


def total(column: str, label: str, child: str, attr: str, value: str, lo: int = 0) -> Attr:
    """The sum of ``value`` over the ``child`` rows pointing here through ``attr``."""
    return Attr(column, label, "int", derive=_total(child, attr, value), lo=lo, mutable=False)


def one_value_per(table: str, by: str, then: str) -> Rule:
    def check(tables: Tables) -> Iterator[str]:
        seen: dict[Any, Any] = {}
        for row in tables.rows(table):
            first = seen.setdefault(row[by], row[then])
            if first != row[then]:
                yield f"{table}: {by} {row[by]!r} has {then} {first!r} and {row[then]!r}"

    return Rule(f"{table}_{by}_{then}", f"in {table}, one {by} always has the same {then}", check)
