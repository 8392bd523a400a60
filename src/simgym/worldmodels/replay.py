"""Answers from recorded trajectories: deterministic tests and re-runs of real episodes.

An observation is found by the exact sequence of actions (as rendered in the prompt) that
led to it in some recorded episode, so two episodes that share a first action but then
diverge are both replayed faithfully.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

from simgym.core.contract import action_text_of
from simgym.core.errors import WorldModelError
from simgym.core.trajectories import read_trajectories
from simgym.core.types import Trajectory
from simgym.core.worldmodel import Messages, Prediction

ReplayKey = tuple[str, ...]


def history_turns(trajectory: Trajectory):
    """The turns a world model saw (rejected actions and final answers never reach it)."""
    return [t for t in trajectory.turns if t.in_history]


class ReplayWorldModel:
    """Looks up the observation recorded after the same sequence of actions."""

    def __init__(
        self,
        trajectories: str | os.PathLike[str] | Iterable[Trajectory | str | os.PathLike[str]],
    ) -> None:
        sources = [trajectories] if isinstance(trajectories, (str, os.PathLike)) else trajectories
        self._table: dict[ReplayKey, str] = {}
        self.sources: list[str] = []
        count = 0
        for source in sources:
            if isinstance(source, Trajectory):
                episodes: Iterable[Trajectory] = [source]
            else:
                self.sources.append(str(source))
                episodes = read_trajectories(source)
            for trajectory in episodes:
                self._add(trajectory)
                count += 1
        if not self._table:
            raise WorldModelError("replay world model: the recordings hold no observations")
        self.episodes = count
        self.name = "replay"

    def _add(self, trajectory: Trajectory) -> None:
        actions: list[str] = []
        for turn in history_turns(trajectory):
            actions.append(turn.action_text)
            self._table.setdefault(tuple(actions), turn.observation.text)

    async def predict(
        self,
        messages: Messages,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> Prediction:
        start = time.perf_counter()
        key = tuple(action_text_of(m["content"]) for m in messages if m["role"] == "user")
        try:
            observation = self._table[key]
        except KeyError:
            last = key[-1] if key else ""
            raise WorldModelError(
                f"replay: no recorded observation after this sequence of {len(key)} action(s); "
                f"last action: {last[:200]!r}"
            ) from None
        return Prediction(
            observation=observation,
            raw=f"<predicted_observation>\n{observation}\n</predicted_observation>",
            tagged=True,
            latency_s=time.perf_counter() - start,
            model="replay",
        )

    def describe(self) -> dict[str, Any]:
        return {"backend": "replay", "sources": self.sources, "episodes": self.episodes}

    async def aclose(self) -> None:
        return None
