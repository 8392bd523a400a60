"""The real executor of each domain, by name, imported when first used.

Each executor is a world-model backend (``world_model="real-terminal"``, ...) that runs
actions in a real environment: a sandboxed shell, a repository, a browser, an MCP server,
a search index. Keys are domain names (``simgym record`` picks a task's executor by its
domain), plus ``http``: the service behind a business world's twin, an mcp scenario whose
tools carry HTTP routes; it needs the service's URL (``$SIMGYM_REAL_HTTP_URL``).

A domain from a plugin records with the plugin's own world model named ``real-<domain>``
(``simgym.worldmodels`` entry point), built with ``limits=`` when its factory takes it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from simgym.core.registry import Registry
from simgym.core.worldmodel import backend_factory, backend_names

ExecutorFactory = Callable[..., Any]

EXECUTORS: Registry[ExecutorFactory] = Registry(
    "real backend",
    {
        "terminal": "simgym.real.terminal:RealTerminal",
        "swe": "simgym.real.swe:RealSWE",
        "web": "simgym.real.web:RealWeb",
        # sandbox limits apply to the shell backends; the others take none
        "mcp": "simgym.real.registry:_mcp",
        "search": "simgym.real.registry:_search",
        "http": "simgym.real.registry:_http",
    },
)


def _mcp(limits: Any = None) -> Any:
    from simgym.real.mcp import RealMCP  # the MCP SDK only when an MCP world runs

    return RealMCP()


def _search(limits: Any = None) -> Any:
    from simgym.real.search import RealSearch

    return RealSearch()


def _http(limits: Any = None) -> Any:
    from simgym.real.http import RealHTTP

    return RealHTTP()


def real_backends() -> dict[str, ExecutorFactory]:
    """Domain name -> the factory of the real executor that runs it (``limits=`` for the
    sandbox, where it has one). Loads them all; use ``EXECUTORS.get(name)`` for one.
    Plugins' ``real-<domain>`` world models are included for the domains not built in."""
    found = {name: EXECUTORS.get(name) for name in EXECUTORS.names()}
    for backend in backend_names():
        domain = backend.removeprefix("real-")
        if backend.startswith("real-") and domain and domain not in found:
            found[domain] = _taking_limits(backend_factory(backend))
    return found


def _taking_limits(factory: ExecutorFactory) -> ExecutorFactory:
    """``factory`` called as ``factory(limits=...)``, dropping ``limits`` where it takes
    no such option (a plugin's backend that runs no sandbox)."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return factory
    if "limits" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return factory

    @functools.wraps(factory)
    def build(limits: Any = None, **options: Any) -> Any:
        return factory(**options)

    return build
