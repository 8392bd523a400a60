"""Names that resolve to objects without importing anything in advance.

A :class:`Registry` holds built-in entries as ``"module:attr"`` strings (the way Gymnasium
names environments) and imports a module only when one of its names is first asked for;
users register objects (or their own strings) at run time. Registering by import side
effect is what this replaces: a name resolves whether or not its module was imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Generic, TypeVar

from simgym.core.errors import SimgymError

T = TypeVar("T")


def load_entry(spec: str) -> object:
    """The object a ``"package.module:attr"`` string names (``attr`` may be dotted)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise SimgymError(f"an entry point is 'module:attr', not {spec!r}")
    try:
        value: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise SimgymError(f"cannot import {module_name!r} for {spec!r}: {exc}") from exc
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise SimgymError(f"{module_name!r} has no {attr!r} (entry point {spec!r})") from None
    return value


class Registry(Generic[T]):
    """``kind`` names what is registered (for error messages); ``builtins`` maps names to
    ``"module:attr"`` strings; ``error`` is raised for an unknown name."""

    def __init__(
        self,
        kind: str,
        builtins: dict[str, str] | None = None,
        error: Callable[[str], Exception] = SimgymError,
    ) -> None:
        self.kind = kind
        self._entries: dict[str, T | str] = dict(builtins or {})
        self._error = error

    def register(self, name: str, value: T | str) -> None:
        """Add or replace ``name``: an object, or a ``"module:attr"`` string to load later."""
        self._entries[name] = value

    def get(self, name: str) -> T:
        try:
            entry = self._entries[name]
        except KeyError:
            raise self._error(
                f"unknown {self.kind} {name!r}; available: {', '.join(self.names())}"
            ) from None
        if isinstance(entry, str):
            entry = load_entry(entry)
            self._entries[name] = entry  # type: ignore[assignment]
        return entry  # type: ignore[return-value]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def names(self) -> list[str]:
        return sorted(self._entries)
