"""What every real environment shares: it answers the world-model protocol by running
the action for real.

A real executor subclasses :class:`RealExecutor` and implements ``run_action(text)``
(execute the rendered action, return the observation) plus ``start_episode`` /
``end_episode`` (:class:`~simgym.core.worldmodel.LiveWorld`). The base turns that into
``predict``: it times the call, wraps the result, and answers a retried turn from memory,
because the environment re-asks when a format check fails and running an action twice
would change the world.
"""

from __future__ import annotations

import time
from typing import Any

from simgym.core import contract
from simgym.core.worldmodel import Messages, Prediction


class RealExecutor:
    """Base class of the real backends (see the module docstring)."""

    name: str = "real"

    def __init__(self) -> None:
        self._last: tuple[int, str, Prediction] | None = None

    def forget_turns(self) -> None:
        """Call at the start of an episode: earlier answers no longer apply."""
        self._last = None

    async def run_action(self, action_text: str) -> str:
        raise NotImplementedError

    async def run_turn(self, action_text: str) -> Prediction:
        """Run one action for real (``SimEnv`` calls this directly, once per turn)."""
        start = time.perf_counter()
        observation = await self.run_action(action_text)
        return Prediction(
            observation=observation,
            raw=observation,
            tagged=True,
            latency_s=time.perf_counter() - start,
            model=self.name,
            finish_reason="executed",
            metadata=self.turn_metadata(observation),
        )

    def turn_metadata(self, observation: str) -> dict[str, Any]:
        """What the turn's observation metadata records beside the text (a sandbox's
        refused writes, say); nothing by default."""
        return {}

    async def predict(
        self,
        messages: Messages,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> Prediction:
        """The world-model protocol, for callers that only have messages: run the last
        user message's action. A repeated request (a caller's retry) is answered from
        memory, because running the action again would change the world."""
        content = messages[-1]["content"]
        if self._last is not None and self._last[:2] == (len(messages), content):
            return self._last[2]
        prediction = await self.run_turn(contract.action_text_of(content))
        self._last = (len(messages), content, prediction)
        return prediction

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name}
