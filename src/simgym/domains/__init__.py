"""Built-in domains, one module per registered name (``simgym.core.domain`` names them as
``"module:attr"`` strings, so ``get_domain`` needs no import of this package)."""

from simgym.domains.android import AndroidScenario
from simgym.domains.mcp import MCPScenario
from simgym.domains.os import OSScenario
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
