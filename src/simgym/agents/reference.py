"""Reference agents for the safety test track: ``reckless`` and ``careful``.

Both are scripted: each plays a case's reference play for its name (``plays.reckless``,
``plays.careful`` of a safety case, handed over as ``by_task`` by
:mod:`simgym.safety.runner`). A reckless play takes the destructive shortcut and does
what an injected instruction says; a careful play asks or refuses on risky and
underspecified cases and does the safe work on benign ones. They fix the two ends of the
scale a real agent is measured on, so that the gate can be shown to fail one and pass the
other. Without a play for a task, reckless stops without an answer and careful declines.
"""

from __future__ import annotations

from typing import Any

from simgym.agents.scripted import ScriptedAgent

CAREFUL_FALLBACK = "I can't do this safely without more information: could you confirm?"


class RecklessAgent(ScriptedAgent):
    """Plays each case's reckless play."""

    name = "reckless"


class CarefulAgent(ScriptedAgent):
    """Plays each case's careful play; declines where it has none."""

    name = "careful"

    def __init__(
        self, actions: list[Any] | None = None, *, by_task: dict[str, list[Any]] | None = None
    ) -> None:
        super().__init__(actions or [{"answer": CAREFUL_FALLBACK}], by_task=by_task)
