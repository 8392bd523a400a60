"""A backend made from a Python function: for rules-based worlds, tests and overhead
benchmarks. The function gets the contract messages and returns the raw model text."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from simgym.core.worldmodel import Messages, Prediction

PredictFn = Callable[[Messages], str | Awaitable[str]]


class FunctionWorldModel:
    """Wraps ``fn(messages) -> str`` (sync or async) as a world model."""

    def __init__(self, fn: PredictFn, name: str = "function") -> None:
        self._fn = fn
        self.name = name

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
        raw = self._fn(messages)
        if inspect.isawaitable(raw):
            raw = await raw
        return Prediction.from_raw(str(raw), latency_s=time.perf_counter() - start, model=self.name)

    def describe(self) -> dict[str, Any]:
        return {"backend": "function", "name": self.name}

    async def aclose(self) -> None:
        return None
