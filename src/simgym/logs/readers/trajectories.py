"""simgym trajectory JSONL (:func:`simgym.core.trajectories.read_trajectories`): each
turn of an episode becomes a record; the episode is the session, the agent's name the
actor (role "agent"), the domain the system, the tool name (or "keystrokes" / "text")
the operation, the action's arguments (or text) the request and the observation the
response, with its error as the error flag and the turn's latency."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

from simgym.core.trajectories import UnreadableLineWarning, read_trajectories
from simgym.core.types import Trajectory
from simgym.logs.model import ImportReport, LogRecord


def _next(episodes: Iterator[Trajectory], report: ImportReport) -> Trajectory | None:
    """The next episode; the lines skipped on the way are counted, not warned about.
    (The warnings are caught only around this call, never across a ``yield``.)"""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnreadableLineWarning)
        episode = next(episodes, None)
    for _ in caught:
        report.read += 1
        report.skip("unreadable trajectory line")
    return episode


LOOKS_FOR = {
    "body": "each turn's action and observation",
    "actor": "the episode's agent name",
    "role": "none: every caller is the agent",
    "session": "the episode id",
    "objects": "nothing (trajectories name no objects)",
}


def read(path: Path, report: ImportReport) -> Iterator[LogRecord]:
    episodes = read_trajectories(path)
    while (trajectory := _next(episodes, report)) is not None:
        actor = str(trajectory.agent.get("name") or "agent")
        for turn in trajectory.turns:
            report.read += 1
            action = turn.action
            if action is None:
                operation, arguments = "text", turn.action_text
            elif action.kind == "tool_call":
                operation, arguments = str(action.name), action.arguments
            elif action.kind == "keystrokes":
                operation = "keystrokes"
                arguments = "".join(k.keystrokes for k in action.keystrokes)
            else:
                operation, arguments = "text", action.text
            yield LogRecord(
                session=trajectory.episode_id,
                operation=operation,
                system=trajectory.domain,
                actor=actor,
                role="agent",
                arguments=arguments,
                error=bool(turn.observation.error or turn.error),
                response=turn.observation.text,
                duration_ms=turn.latency_s * 1000 if turn.latency_s else None,
                source=f"{path.name}#{trajectory.episode_id}/{turn.index}",
            )
