"""Real MCP servers built with the official ``mcp`` SDK (install ``simgym[mcp]``)."""
