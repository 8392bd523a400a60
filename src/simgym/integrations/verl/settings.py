"""What a simgym tool entry of a verl tool config carries, and the names verl finds us by."""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from simgym.core.env import SimEnv

TOOL_CLASS = "simgym.integrations.verl.SimgymTool"


AGENT_LOOP = "simgym_agent"


AGENT_LOOP_CLASS = "simgym.integrations.verl.SimgymAgentLoop"


WORLD_ATTR = "_simgym_world"  # where a trajectory's world key lives on verl's AgentData


NO_ANSWER = "verl's loop ended before the policy gave a final reply (a turn or length limit)"


PLAIN_LOOP = "verl's tool_agent loop dropped the trajectory without a final reply"


ENV_OPTIONS = frozenset(inspect.signature(SimEnv.__init__).parameters) - {
    "self",
    "domain",
    "world_model",
    "scenario",
    "writer",
    "reward_fn",
    "perturbations",
}


class VerlToolSettings(BaseModel):
    """The ``config`` block of a :class:`SimgymTool` entry (all tools of one config share
    it; ``tool`` names the tool when the entry gives no ``tool_schema``)."""

    model_config = ConfigDict(extra="forbid")

    type: str = "native"  # verl's tool type; only native tools exist in verl 0.9
    domain: str
    scenario: dict[str, Any] | None = None
    world_model: str = "local"
    world_model_options: dict[str, Any] = Field(default_factory=dict)
    env_options: dict[str, Any] = Field(default_factory=dict)
    perturbations: dict[str, Any] | None = None  # a fault plan (simgym.perturb), as data
    reward: Any = None
    score: bool = True
    trajectories: str | None = None
    tool: str | None = None

    def world_key(self) -> str:
        """What must agree for tools to share one world (everything but the tool name)."""
        return self.model_dump_json(exclude={"tool", "type"})
