"""Built-in domains, one module per registered name (``simgym.core.domain`` names them as
``"module:attr"`` strings, so ``get_domain`` needs no import of this package).

Lazy: importing one module of this package (``simgym.domains._gui.uitree``,
``simgym.domains.shell``) loads that module alone, not every domain. The scenario classes
below are imported on first use of their name.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simgym.domains.android import AndroidScenario
    from simgym.domains.mcp import MCPScenario
    from simgym.domains.os import OSScenario
    from simgym.domains.search import SearchScenario
    from simgym.domains.swe import SWEScenario
    from simgym.domains.terminal import TerminalScenario
    from simgym.domains.web import WebScenario

# each scenario class by the module that defines it
_LAZY = {
    "AndroidScenario": "simgym.domains.android",
    "MCPScenario": "simgym.domains.mcp",
    "OSScenario": "simgym.domains.os",
    "SWEScenario": "simgym.domains.swe",
    "SearchScenario": "simgym.domains.search",
    "TerminalScenario": "simgym.domains.terminal",
    "WebScenario": "simgym.domains.web",
}

__all__ = [
    "AndroidScenario",
    "MCPScenario",
    "OSScenario",
    "SWEScenario",
    "SearchScenario",
    "TerminalScenario",
    "WebScenario",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
