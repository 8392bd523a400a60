"""The world model wrapper that answers scripted turns itself."""

from __future__ import annotations

import json
from typing import Any

from simgym.bench.consistency.domains import Scripted
from simgym.core import contract
from simgym.core.state import STATE_CLOSE, STATE_OPEN
from simgym.core.worldmodel import Messages, Prediction, WorldModel


class ScriptedTurns:
    """A world model that answers scripted turns itself and forwards the others to the
    model under test. Set :attr:`script` before each step (None: forward). One per
    episode; the backend it wraps is shared and closed by its owner."""

    def __init__(self, inner: WorldModel) -> None:
        self.inner = inner
        self.name = inner.name
        # Forwarded so that a SimEnv built without ``grounding=`` acts as on the backend
        # itself; the benchmark passes its grounding mode explicitly anyway.
        self.default_grounding = getattr(inner, "default_grounding", None)
        self.render_known = getattr(inner, "render_known", None)
        self.script: Scripted | None = None
        self.request_chars = 0  # size of the last request forwarded to the model
        self.answers: list[str] = []  # observations the model wrote, for the row

    async def predict(
        self,
        messages: Messages,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> Prediction:
        if self.script is None:
            self.request_chars = sum(len(m["content"]) for m in messages)
            prediction = await self.inner.predict(
                messages, max_tokens=max_tokens, temperature=temperature, seed=seed, prefix=prefix
            )
            self.answers.append(prediction.observation)
            return prediction
        text = self.script.observation(prefix or "")
        raw = f"{contract.OPEN_TAG}\n{text}\n{contract.CLOSE_TAG}"
        if messages and STATE_OPEN in messages[0]["content"]:  # the prompt asks for updates
            raw += f"\n{STATE_OPEN}{json.dumps(self.script.patch)}{STATE_CLOSE}"
        return Prediction.from_raw(raw, model="scripted")

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    async def aclose(self) -> None:
        return None
