"""Helpers every adapter needs: reading the tasks an adapter is configured with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from simgym.core.errors import SimgymError
from simgym.core.types import Task


def as_task(task: Task | str | dict[str, Any] | None, domain: str) -> Task:
    """A task for ``domain`` from an instruction, a dict or a Task (None: an empty task)."""
    if task is None:
        task = Task()
    elif isinstance(task, str):
        task = Task(instruction=task)
    elif isinstance(task, dict):
        try:
            task = Task.model_validate(task)
        except ValidationError as exc:
            raise SimgymError(f"invalid task: {exc}") from None
    elif not isinstance(task, Task):
        raise SimgymError(f"a task is an instruction, a Task or a dict, not {type(task).__name__}")
    if task.domain not in (None, domain):
        raise SimgymError(f"the task is for domain {task.domain!r}, not {domain!r}")
    return task.model_copy(update={"domain": domain})


def as_tasks(task: Any, domain: str) -> list[Task]:
    """The served tasks: one, a list, or (none given) one empty task for the world (made
    once, so its id is the same every episode). Ids must be unique."""
    if task is None:
        return [Task(domain=domain)]
    many = task if isinstance(task, Sequence) and not isinstance(task, str) else [task]
    tasks = [as_task(t, domain) for t in many]
    if not tasks:
        raise SimgymError("the task list is empty")
    ids = [t.id for t in tasks]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise SimgymError(f"task ids must be unique: {', '.join(duplicates)}")
    return tasks
