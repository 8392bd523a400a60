"""Names that resolve to objects without importing anything in advance.

A :class:`Registry` holds built-in entries as ``"module:attr"`` strings (the way Gymnasium
names environments) and imports a module only when one of its names is first asked for;
users register objects (or their own strings) at run time. Registering by import side
effect is what this replaces: a name resolves whether or not its module was imported.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from importlib import metadata
from typing import Generic, TypeVar

from simgym.core.errors import PluginError, SimgymError

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


# The entry-point groups simgym reads, one per registry other packages may add to.
PLUGIN_GROUPS: tuple[str, ...] = (
    "simgym.domains",
    "simgym.worldmodels",
    "simgym.rewards",
    "simgym.log_readers",
    "simgym.agents",
)

_SCANNED: dict[tuple[str, tuple[str, ...]], dict[str, list[metadata.EntryPoint]]] = {}


def plugin_entry_points(group: str) -> dict[str, list[metadata.EntryPoint]]:
    """The entry points of ``group`` that installed distributions declare, by name (a name
    two distributions declare has two). Nothing is imported. Scanned once per
    ``sys.path``: a path added later (a plugin installed into a target folder) is seen.

    Args:
        group: the entry-point group, e.g. ``"simgym.domains"``.

    Returns:
        Name -> the entry points declaring it, in discovery order.
    """
    key = (group, tuple(sys.path))
    found = _SCANNED.get(key)
    if found is None:
        found = {}
        for point in metadata.entry_points(group=group):
            same = found.setdefault(point.name, [])
            # one distribution seen twice on sys.path (an egg-link and a copy) is one
            if all(_dist_name(p) != _dist_name(point) for p in same):
                same.append(point)
        _SCANNED[key] = found
    return found


def _dist_name(point: metadata.EntryPoint) -> str:
    dist = getattr(point, "dist", None)
    if dist is None:
        return "an unknown distribution"
    return f"{dist.metadata['Name']} {dist.version}"


def load_plugin(group: str, name: str, kind: str) -> object | None:
    """The object the plugin entry point ``name`` of ``group`` names, or None when no
    installed distribution declares it.

    Args:
        group: the entry-point group.
        name: the entry point's name (a domain name, a backend name, ...).
        kind: what the group registers, for messages ("domain", "world model", ...).

    Returns:
        The loaded object, or None if no plugin declares ``name``.

    Raises:
        PluginError: two distributions declare ``name``, or importing it failed.
    """
    points = plugin_entry_points(group).get(name)
    if not points:
        return None
    if len(points) > 1:
        raise PluginError(
            f"{kind} {name!r} is declared by more than one plugin in entry-point group "
            f"{group!r}: {', '.join(_dist_name(p) for p in points)}; uninstall one"
        )
    [point] = points
    try:
        return point.load()
    except Exception as exc:  # any failure of a plugin's import is reported, not swallowed
        raise PluginError(
            f"plugin {kind} {name!r} ({point.value!r}, entry-point group {group!r}, "
            f"from distribution {_dist_name(point)}) failed to load: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


class Registry(Generic[T]):
    """``kind`` names what is registered (for error messages); ``builtins`` maps names to
    ``"module:attr"`` strings; ``error`` is raised for an unknown name; ``group`` is the
    entry-point group whose plugins add names (consulted only for a name not found here,
    and when listing names); ``check`` is called on each object a plugin gives and raises
    :class:`PluginError` when it is not what the registry holds."""

    def __init__(
        self,
        kind: str,
        builtins: dict[str, str] | None = None,
        error: Callable[[str], Exception] = SimgymError,
        *,
        group: str | None = None,
        check: Callable[[str, object], None] | None = None,
    ) -> None:
        self.kind = kind
        self.group = group
        self._entries: dict[str, T | str] = dict(builtins or {})
        self._error = error
        self._check = check

    def register(self, name: str, value: T | str) -> None:
        """Add or replace ``name``: an object, or a ``"module:attr"`` string to load later."""
        self._entries[name] = value

    def get(self, name: str) -> T:
        """The object registered as ``name``: a built-in, a run-time registration, or an
        installed plugin's entry point (loaded now and kept)."""
        entry = self._entries.get(name)
        if entry is None:
            entry = self._plugin(name)
        if isinstance(entry, str):
            entry = load_entry(entry)
            self._entries[name] = entry  # type: ignore[assignment]
        return entry  # type: ignore[return-value]

    def _plugin(self, name: str) -> T:
        loaded = load_plugin(self.group, name, self.kind) if self.group else None
        if loaded is None:
            raise self._error(f"unknown {self.kind} {name!r}; available: {', '.join(self.names())}")
        if self._check is not None:
            self._check(name, loaded)
        self._entries[name] = loaded  # type: ignore[assignment]
        return loaded  # type: ignore[return-value]

    def __contains__(self, name: object) -> bool:
        if name in self._entries:
            return True
        return bool(self.group) and isinstance(name, str) and name in self.plugin_names()

    def plugin_names(self) -> list[str]:
        """Names installed plugins add (not imported; built-ins shadow a plugin's name)."""
        if not self.group:
            return []
        return sorted(set(plugin_entry_points(self.group)) - set(self._entries))

    def names(self) -> list[str]:
        return sorted({*self._entries, *self.plugin_names()})
