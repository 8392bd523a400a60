"""A weighted combination of rewards: ``sum(weight * value) / sum(weight)``.

Parts are scored concurrently (a judge part waits on a server while rule parts are
done). ``RewardResult.parts`` holds each part's value under a unique label (its name;
repeated names get ``_2``, ``_3``), and ``details`` holds, per label, the part's value,
weight and own details. A part that raises scores 0.0 with the error in its details, so
one broken part does not lose the others.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.types import Trajectory
from simgym.rewards.base import Reward, RewardResult


def unique_labels(names: Sequence[str]) -> list[str]:
    """The names, with repeats suffixed ``_2``, ``_3``, ... (never clashing with a name
    that is already taken)."""
    taken: set[str] = set()
    labels = []
    for name in names:
        label, n = name, 1
        while label in taken:
            n += 1
            label = f"{name}_{n}"
        taken.add(label)
        labels.append(label)
    return labels


class HybridReward:
    """Rewards combined with weights (normalized by their total)."""

    name = "hybrid"

    def __init__(self, parts: Sequence[tuple[Reward, float]], *, name: str | None = None) -> None:
        if not parts:
            raise SimgymError("a hybrid reward needs at least one part")
        for reward, weight in parts:
            if isinstance(weight, bool) or not isinstance(weight, int | float):
                raise SimgymError(f"weight of reward {reward.name!r} must be a number: {weight!r}")
            if not math.isfinite(weight) or weight < 0:
                raise SimgymError(f"weight of reward {reward.name!r} must be >= 0: {weight!r}")
        self.total_weight = float(sum(w for _, w in parts))
        if self.total_weight <= 0:
            raise SimgymError("the weights of a hybrid reward add up to 0")
        self.parts = list(parts)
        self.labels = unique_labels([r.name for r, _ in parts])
        if name is not None:
            self.name = name

    async def score(self, trajectory: Trajectory) -> RewardResult:
        results = await asyncio.gather(*(_score_part(r, trajectory) for r, _ in self.parts))
        value = 0.0
        parts: dict[str, float] = {}
        details: dict[str, Any] = {}
        for label, (reward, weight), result in zip(self.labels, self.parts, results, strict=True):
            value += weight * result.value
            parts[label] = result.value
            entry: dict[str, Any] = {"value": result.value, "weight": weight}
            if result.parts != {reward.name: result.value}:  # a nested hybrid's own parts
                entry["parts"] = result.parts
            if result.details:
                entry["details"] = result.details
            details[label] = entry
        return RewardResult(value=value / self.total_weight, parts=parts, details=details)

    async def aclose(self) -> None:
        for reward, _ in self.parts:
            close = getattr(reward, "aclose", None)
            if close is not None:
                await close()


async def _score_part(reward: Reward, trajectory: Trajectory) -> RewardResult:
    try:
        return await reward.score(trajectory)
    except Exception as exc:  # one broken part must not lose the others
        return RewardResult(
            value=0.0, parts={reward.name: 0.0}, details={"error": f"{type(exc).__name__}: {exc}"}
        )
