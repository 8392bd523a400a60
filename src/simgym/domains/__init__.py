"""Built-in domains. Importing this package registers them."""

from simgym.domains import mcp, swe, terminal  # noqa: F401  (registration side effect)
from simgym.domains.mcp import MCPScenario
from simgym.domains.swe import SWEScenario
from simgym.domains.terminal import TerminalScenario

__all__ = ["MCPScenario", "SWEScenario", "TerminalScenario"]
