"""The real executor of each domain, by name, imported when first used.

Each executor is a world-model backend (``world_model="real-terminal"``, ...) that runs
actions in a real environment: a sandboxed shell, a repository, a browser, an MCP server,
a search index. Keys are domain names (``simgym record`` picks a task's executor by its
domain), plus ``http``: the service behind a business world's twin, an mcp scenario whose
tools carry HTTP routes; it needs the service's URL (``$SIMGYM_REAL_HTTP_URL``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simgym.core.registry import Registry

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
    sandbox, where it has one). Loads them all; use ``EXECUTORS.get(name)`` for one."""
    return {name: EXECUTORS.get(name) for name in EXECUTORS.names()}
