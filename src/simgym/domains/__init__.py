"""Built-in domains. Importing this package registers them."""

from simgym.domains import (  # noqa: F401  (registration side effect)
    android,
    desktop,
    mcp,
    search,
    swe,
    terminal,
    web,
)
from simgym.domains.android import AndroidScenario
from simgym.domains.desktop import OSScenario
from simgym.domains.mcp import MCPScenario
from simgym.domains.search import SearchScenario
from simgym.domains.swe import SWEScenario
from simgym.domains.terminal import TerminalScenario
from simgym.domains.web import WebScenario

__all__ = [
    "AndroidScenario",
    "MCPScenario",
    "OSScenario",
    "SWEScenario",
    "SearchScenario",
    "TerminalScenario",
    "WebScenario",
]
