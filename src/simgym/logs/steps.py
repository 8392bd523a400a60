"""A world's logged sessions as steps of its twin: each record with the tool call it is
(or why it is none), the action text the twin's world model reads and the observation
the twin should show.

The artifacts an import writes (:mod:`simgym.logs.artifacts`: experience, SFT rows,
tasks) are all read off these steps, so they agree with one another and with the twin.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from simgym.core.domain import get_domain
from simgym.core.types import Action
from simgym.logs.calls import CallMapper, ToolCall
from simgym.logs.twin import load_world, read_sessions, world_scenario

DOMAIN = "mcp"
SESSIONS = "sessions.jsonl"


@dataclass(frozen=True)
class Step:
    """One logged record of a session: ``index`` is its place in the session's
    ``records`` (0-based), ``call`` the twin's tool call or None, with ``reason``."""

    session: str
    index: int
    record: dict[str, Any]
    call: ToolCall | None
    reason: str | None = None

    @property
    def source(self) -> str:
        """Where the step was logged: ``sessions.jsonl:<session>#<index>``."""
        return f"{SESSIONS}:{self.session}#{self.index}"

    @property
    def failed(self) -> bool:
        status = self.record.get("status")
        return bool(self.record.get("error")) or (isinstance(status, int) and status >= 400)


@dataclass
class Twin:
    """What the artifacts need of a world: its scenario (validated), the call mapper."""

    root: Path
    scenario: BaseModel
    raw: dict[str, Any]
    mapper: CallMapper
    world: dict[str, Any]

    def action_text(self, call: ToolCall) -> str:
        """The action exactly as the twin's world model reads it in a user turn."""
        action = Action.tool_call(call.tool, call.arguments)
        return get_domain(DOMAIN).render_action(action, self.scenario)

    def steps(self) -> Iterator[tuple[str, list[Step]]]:
        """Each session (in file order) with its steps."""
        for session, records in read_sessions(self.root / SESSIONS):
            steps = []
            for index, record in enumerate(records):
                mapped = self.mapper.call(record)
                if isinstance(mapped, str):
                    steps.append(Step(session, index, record, None, mapped))
                else:
                    steps.append(Step(session, index, record, mapped))
            yield session, steps


def open_twin(world_dir: str | Path) -> Twin:
    """A business-world folder, read once for its artifacts."""
    raw = world_scenario(world_dir)
    world = load_world(world_dir)
    operations = [op for op in world["interface"]["operations"] if isinstance(op, dict)]
    return Twin(
        root=Path(world_dir),
        scenario=get_domain(DOMAIN).scenario(raw),
        raw=raw,
        mapper=CallMapper(operations, roles=bool(world["roles"])),
        world=world,
    )


def observation_text(response: Any) -> str:
    """A logged answer as the twin (JSON output) shows it: text as it is, else JSON."""
    if isinstance(response, str):
        return response
    return json.dumps(response, ensure_ascii=False)
