"""A person as the policy: observations are printed, actions are typed.

A line is read with the domain's own short forms (the same as ``simgym play``: a command
line in the terminal, ``click 12`` on the web, a JSON tool call for MCP). ``/answer TEXT``
ends the episode with that answer, ``/tools`` lists the tools, ``/quit`` stops.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

from simgym.agents.base import Decision, EpisodeView
from simgym.core.errors import ActionError


class HumanAgent:
    """Reads actions from ``stdin`` (a terminal or a pipe) and shows observations."""

    name = "human"

    def __init__(
        self,
        *,
        stdin: TextIO | None = None,
        show: Callable[[str], None] | None = None,
    ) -> None:
        self.stdin = stdin
        self.show = show or _print

    async def start(self, view: EpisodeView) -> _HumanSession:
        self.show(f"Task: {view.instruction or '(none)'}\nActions: {view.action_hint}")
        return _HumanSession(self, view)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def read_line(self) -> str | None:
        stream = self.stdin or sys.stdin
        if stream.isatty():
            try:
                return input("> ")
            except EOFError:
                return None
        line = stream.readline()
        return line.rstrip("\n") if line else None


class _HumanSession:
    def __init__(self, agent: HumanAgent, view: EpisodeView) -> None:
        self.agent = agent
        self.view = view
        self.messages: list[dict[str, Any]] = []

    async def act(self, observation: str) -> Decision | None:
        self.agent.show(observation)
        self.messages.append({"role": "user", "content": observation})
        while True:
            line = await asyncio.to_thread(self.agent.read_line)
            if line is None or line.strip() == "/quit":
                return None
            if not line.strip():
                continue
            self.messages.append({"role": "assistant", "content": line})
            if line.startswith("/answer"):
                return Decision(answer=line.removeprefix("/answer").strip())
            if line.strip() == "/tools":
                self.agent.show(
                    "\n".join(json.dumps(t.to_plain(), ensure_ascii=False) for t in self.view.tools)
                )
                continue
            try:
                action = self.view.parse_input(line) if self.view.parse_input else line
            except ActionError as exc:
                self.agent.show(f"[not an action] {exc}")
                continue
            return Decision(action=action)


def _print(text: str) -> None:
    print(text, flush=True)
