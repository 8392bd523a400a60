"""Built-in domains. Importing this package registers them."""

from simgym.domains import mcp, search, swe, terminal  # noqa: F401  (registration side effect)
from simgym.domains.mcp import MCPScenario
from simgym.domains.search import SearchScenario
from simgym.domains.swe import SWEScenario
from simgym.domains.terminal import TerminalScenario

__all__ = ["MCPScenario", "SWEScenario", "SearchScenario", "TerminalScenario"]
