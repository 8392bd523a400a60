"""Helpers every adapter needs: reading the tasks an adapter is configured with."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.types import Task


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


# A URL, or an IPv4 address with an optional port, as backends put them in their errors.
_URL = re.compile(r"(?:\s+at)?\s*\b[a-z][a-z0-9+.-]*://[^\s'\"),]*[^\s'\"),:;.]", re.IGNORECASE)
_ADDRESS = re.compile(r"(?:\s+at)?\s*\(?'?\b\d{1,3}(?:\.\d{1,3}){3}'?(?:(?::|, )\d+)?\)?")


def agent_safe(message: str) -> str:
    """An error as an agent may see it: the world model's URL and addresses taken out.

    The agent is the party under test (possibly hostile); where the world model runs is
    none of its business. The full message stays in the trajectory."""
    return _ADDRESS.sub("", _URL.sub("", message)).strip()
