"""What a reward is: a scorer of a finished episode.

A reward reads a :class:`~simgym.core.types.Trajectory` (the task with its reference
answer or rubric in ``task.metadata``, the agent's ``answer``, every turn, the
``final_observation`` and, when the environment keeps one, the ``final_state``) and returns
a :class:`RewardResult`. Rewards are async so a judge can call a model; rule rewards simply
return. The rollout adds ``value`` to the trajectory's ``total_reward`` and records each
part in ``reward_parts``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from simgym.core.types import Trajectory


class RewardResult(BaseModel):
    """A score in [0, 1] (by convention), the named parts it came from, and why."""

    value: float
    parts: dict[str, float] = Field(default_factory=dict)
    details: dict[str, Any] = Field(default_factory=dict)


@runtime_checkable
class Reward(Protocol):
    """Scores a finished episode. ``name`` labels its part in ``reward_parts``."""

    name: str

    async def score(self, trajectory: Trajectory) -> RewardResult: ...
