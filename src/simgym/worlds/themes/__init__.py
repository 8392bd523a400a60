"""Theme vocabularies for fictional worlds: which entities a world holds and how to invent them.

A :class:`Theme` is a schema: entity types (tables), each with typed attributes that carry
their own value generator, relations (``ref`` attributes pointing at another table),
derived attributes (totals and counts computed from other rows after generation) and
cross-field rules (a launch after the maker was founded, a weight within the truck's
capacity). Generators see the rows made so far and build every row so that it obeys the
rules; :func:`simgym.worlds.generate.check_world` verifies that they did.

Every name is invented from syllables (:class:`Names`), so no fact can be looked up in
the real world: an agent must read the world's own pages or tools.

Three themes ship, one module each: ``smartphones`` ("2029 smartphone market"),
``logistics`` ("mid-size logistics company") and ``bank`` ("regional bank"); the engine is
in ``_base`` (names, schema) and ``_columns`` (column constructors).
"""

from __future__ import annotations

from simgym.core.errors import SimgymError
from simgym.worlds.themes._base import (
    Attr,
    AttrKind,
    Ctx,
    Derive,
    Entity,
    Gen,
    Names,
    Rule,
    Tables,
    Theme,
    slug,
)
from simgym.worlds.themes._columns import (
    choice,
    count,
    date,
    integer,
    key,
    name,
    real,
    ref,
    text,
    total,
)
from simgym.worlds.themes.bank import BANK
from simgym.worlds.themes.logistics import LOGISTICS
from simgym.worlds.themes.smartphones import SMARTPHONES


class UnknownThemeError(SimgymError, KeyError):
    """A theme name that no vocabulary answers to."""

    def __str__(self) -> str:  # KeyError would wrap the message in quotes
        return str(self.args[0]) if self.args else "unknown theme"


THEMES: dict[str, Theme] = {t.key: t for t in (SMARTPHONES, LOGISTICS, BANK)}


def get_theme(name: str | Theme) -> Theme:
    """A theme by key ("bank"), title or alias ("regional bank"), case-insensitively."""
    if isinstance(name, Theme):
        return name
    wanted = " ".join(name.lower().replace("-", " ").split())
    for theme in THEMES.values():
        names = (theme.key, theme.title, *theme.aliases)
        if wanted in (" ".join(n.lower().replace("-", " ").split()) for n in names):
            return theme
    known = ", ".join(f"{t.key} ({t.title!r})" for t in THEMES.values())
    raise UnknownThemeError(f"unknown world theme {name!r}; known: {known}")


__all__ = [
    "Attr",
    "AttrKind",
    "BANK",
    "Ctx",
    "Derive",
    "Entity",
    "Gen",
    "LOGISTICS",
    "Names",
    "Rule",
    "SMARTPHONES",
    "THEMES",
    "Tables",
    "Theme",
    "UnknownThemeError",
    "choice",
    "count",
    "date",
    "get_theme",
    "integer",
    "key",
    "name",
    "real",
    "ref",
    "slug",
    "text",
    "total",
]
