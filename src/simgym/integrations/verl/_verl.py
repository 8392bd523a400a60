"""verl itself, imported once with a message that says how to install it."""

from __future__ import annotations

from simgym.core.errors import SimgymError

try:
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
    from verl.experimental.agent_loop.tool_agent_loop import AgentData, ToolAgentLoop
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
    from verl.utils.rollout_trace import rollout_trace_op
except ImportError as exc:  # pragma: no cover (the verl extra is installed in development)
    raise SimgymError(
        f"the verl adapter needs verl 0.9: pip install 'simgym[verl]' ({exc})"
    ) from None

__all__ = [
    "AgentData",
    "AgentLoopOutput",
    "BaseTool",
    "OpenAIFunctionToolSchema",
    "ToolAgentLoop",
    "ToolResponse",
    "register",
    "rollout_trace_op",
]
