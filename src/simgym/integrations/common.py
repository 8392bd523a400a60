"""Helpers every adapter needs: reading the tasks an adapter is configured with, picking
one for an episode, and saying why an episode ended."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.types import StepResult, Task


def as_tasks(task: Any, domain: str) -> list[Task]:
    """The served tasks: one, a list, or (none given) one empty task for the world (made
    once, so its id is the same every episode). Ids must be unique."""
    if task is None:
        return [Task(domain=domain)]
    many = task if isinstance(task, Sequence) and not isinstance(task, str) else [task]
    tasks = [Task.coerce(t, domain, bind=True) for t in many]
    if not tasks:
        raise SimgymError("the task list is empty")
    ids = [t.id for t in tasks]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise SimgymError(f"task ids must be unique: {', '.join(duplicates)}")
    return tasks


def pick_task(
    tasks: Sequence[Task],
    domain: str,
    task: Any = None,
    task_id: str | None = None,
    choose: Callable[[int], int] | None = None,
) -> Task:
    """The task for a new episode, the one way every adapter picks it.

    A task given as a string that is a served task's id or its exact instruction is that
    served task, reference answer and reward included (a client that names a known task by
    its text must not lose what scores it); any other task is the client's own, new one,
    with no reference unless it brings one.

    Args:
        tasks: the served tasks (:func:`as_tasks`).
        domain: the domain the tasks are for.
        task: the client's task (a :class:`Task`, its dict, or a string), or None.
        task_id: a served task's id, or None.
        choose: given the number of served tasks, the index of the next one (a seed, a
            random generator, or turns); None takes the first.

    Returns:
        The task.

    Raises:
        SimgymError: both ``task`` and ``task_id`` given, or an unknown ``task_id``.
    """
    if task is not None and task_id is not None:
        raise SimgymError("give task or task_id, not both")
    if isinstance(task, str):
        known = served_task(tasks, task)
        if known is not None:
            return known
    if task is not None:
        return Task.coerce(task, domain, bind=True)
    if task_id is not None:
        for served in tasks:
            if served.id == task_id:
                return served
        ids = ", ".join(t.id for t in tasks[:10])
        raise SimgymError(f"unknown task_id {task_id!r}; served tasks: {ids}")
    if len(tasks) == 1 or choose is None:
        return tasks[0]
    return tasks[choose(len(tasks)) % len(tasks)]


def served_task(tasks: Sequence[Task], text: str) -> Task | None:
    """The served task whose id, else whose exact instruction (surrounding blanks aside),
    is ``text``; None when none is."""
    for served in tasks:
        if served.id == text:
            return served
    wanted = text.strip()
    for served in tasks:
        if wanted and served.instruction.strip() == wanted:
            return served
    return None


def has_reference(task: Task) -> bool:
    """Whether a task carries what scores it (a ``reward`` spec or reference answers)."""
    meta = task.metadata
    return any(meta.get(key) is not None for key in ("reward", "answer", "answers"))


def why_ended(result: StepResult, max_turns: int) -> str:
    """Why the episode ``result`` ended, as an agent may read it (no backend address).

    Args:
        result: the step that ended the episode.
        max_turns: the environment's turn limit.

    Returns:
        One sentence: answered, the world model failed, a final action, or the turn limit.
    """
    if result.observation.metadata.get("final_answer"):
        return "the answer was submitted"
    if result.info.get("error_type") == "world_model":
        return f"the world model failed: {agent_safe(str(result.info.get('error')))}"
    if result.done:
        return "the episode reached its final action"
    return f"the turn limit ({max_turns}) was reached"


# A URL, or an IPv4 address with an optional port, as backends put them in their errors.
_URL = re.compile(r"(?:\s+at)?\s*\b[a-z][a-z0-9+.-]*://[^\s'\"),]*[^\s'\"),:;.]", re.IGNORECASE)
_ADDRESS = re.compile(r"(?:\s+at)?\s*\(?'?\b\d{1,3}(?:\.\d{1,3}){3}'?(?:(?::|, )\d+)?\)?")


def agent_safe(message: str) -> str:
    """An error as an agent may see it: the world model's URL and addresses taken out.

    The agent is the party under test (possibly hostile); where the world model runs is
    none of its business. The full message stays in the trajectory."""
    return _ADDRESS.sub("", _URL.sub("", message)).strip()
