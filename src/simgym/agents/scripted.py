"""A scripted agent: plays a fixed list of actions, for tests, demos and replays.

Actions are given per task id (as action files hold them) or as one list for every task.
Each entry is sent as written (the environment validates it); an entry
``{"answer": "..."}`` ends the episode with that answer. When the list runs out the
episode stops without an answer.
"""

from __future__ import annotations

import json
from typing import Any

from simgym.agents.base import AgentError, Decision, EpisodeView


class ScriptedAgent:
    """Plays ``actions`` (or ``by_task[task_id]``) in order."""

    name = "scripted"

    def __init__(
        self,
        actions: list[Any] | None = None,
        *,
        by_task: dict[str, list[Any]] | None = None,
    ) -> None:
        self.actions = list(actions or [])
        self.by_task = dict(by_task or {})

    async def start(self, view: EpisodeView) -> _ScriptSession:
        return _ScriptSession(list(self.by_task.get(view.task_id, self.actions)))

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


class _ScriptSession:
    def __init__(self, actions: list[Any]) -> None:
        self._actions = actions
        self._next = 0
        self.messages: list[dict[str, Any]] = []

    async def act(self, observation: str) -> Decision | None:
        self.messages.append({"role": "user", "content": observation})
        if self._next >= len(self._actions):
            return None
        entry = self._actions[self._next]
        self._next += 1
        self.messages.append({"role": "assistant", "content": _as_text(entry)})
        if isinstance(entry, dict) and set(entry) == {"answer"}:
            return Decision(answer=str(entry["answer"]))
        if entry is None:
            # `actions: [null]` in one file: fail this episode (recorded with the error),
            # not the whole run, as an uncaught ValueError from Decision would.
            raise AgentError(f"script entry {self._next} is null, not an action")
        return Decision(action=entry)


def _as_text(entry: Any) -> str:
    return entry if isinstance(entry, str) else json.dumps(entry, ensure_ascii=False, default=str)
