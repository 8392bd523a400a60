"""``real-sql``: the sql domain's real environment. Each episode opens a fresh in-memory
database built by the scenario's ``setup`` script and runs every line on it for real
(Python's sqlite3, printed as the sqlite3 shell prints); ``simgym record`` runs sql
episodes on it and ``-w real-sql`` plays against it.

A syntax error's caret line is the one part of the shell's output it cannot print (the
error's offset is not exposed by Python's sqlite3): its observation holds the first line.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from simgym import Prediction, Task, WorldModelError
from simgym_sql import console
from simgym_sql.domain import SQL, screen


class RealSQL:
    """A :class:`simgym.WorldModel` that is a real SQLite console (one episode at a time)."""

    name = "real-sql"

    def __init__(self) -> None:
        self._conn: sqlite3.Connection | None = None
        self._settings = console.Settings()

    async def start_episode(self, scenario: Any, task: Task) -> str | None:
        await self.end_episode()
        world: Any = SQL.scenario(scenario)
        self._conn = console.replay(world.setup, [])
        self._settings = console.Settings()
        return None  # the domain's banner

    async def end_episode(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def run_turn(self, action_text: str) -> Prediction:
        if self._conn is None:
            raise WorldModelError("real-sql: no episode is running")
        outcome = console.run_line(self._conn, action_text, self._settings)
        if outcome.final:
            return Prediction(observation="(sqlite3 exited)", model=self.name)
        text = screen(outcome.text, self._settings.pending)
        return Prediction(observation=text, model=self.name, raw=text)

    async def predict(self, messages: Any, **options: Any) -> Prediction:
        raise WorldModelError("real-sql runs each action itself (run_turn); it reads no prompt")

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "sqlite": sqlite3.sqlite_version}

    async def aclose(self) -> None:
        await self.end_episode()
