"""The experiment's environments by name: each suite's held-out and training task sets.

``records`` is the customer-records MCP server (:mod:`~simgym.bench.sim2real.tasks`),
``shell`` a bash shell in a sandbox (:mod:`~simgym.bench.sim2real.shell_tasks`),
``search`` a company wiki in a real full-text engine
(:mod:`~simgym.bench.sim2real.search_tasks`), ``swe`` edits to a small Python package in a
sandboxed repository (:mod:`~simgym.bench.sim2real.swe_tasks`). The example scripts take
``--suite NAME``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.types import Task


@dataclass(frozen=True)
class Suite:
    """One environment's task sets and how its reference plans are played."""

    name: str
    heldout: Callable[[int], list[Task]]
    training: Callable[[int], list[Task]]
    reference: Callable[[Task], list[Any]]
    files: tuple[str, str]  # tasks/ file names: held-out, training
    domain: str  # the twin's domain, where its faults are injected

    @property
    def suffix(self) -> str:
        """What the example's folders of this suite end with (``results-shell``); the
        records suite, the first, has none."""
        return "" if self.name == "records" else f"-{self.name}"


def _records() -> Suite:
    from simgym.bench.sim2real.tasks import heldout_tasks, training_tasks

    return Suite(
        "records",
        heldout_tasks,
        training_tasks,
        lambda task: list(task.metadata["solution"]),
        ("heldout.jsonl", "train.jsonl"),
        "mcp",
    )


def _shell() -> Suite:
    from simgym.bench.sim2real.plans import reference_solution
    from simgym.bench.sim2real.shell_tasks import shell_heldout_tasks, shell_training_tasks

    return Suite(
        "shell",
        shell_heldout_tasks,
        shell_training_tasks,
        reference_solution,
        ("shell-heldout.jsonl", "shell-train.jsonl"),
        "terminal",
    )


def _search() -> Suite:
    from simgym.bench.sim2real.plans import reference_solution
    from simgym.bench.sim2real.search_tasks import search_heldout_tasks, search_training_tasks

    return Suite(
        "search",
        search_heldout_tasks,
        search_training_tasks,
        reference_solution,
        ("search-heldout.jsonl", "search-train.jsonl"),
        "search",
    )


def _swe() -> Suite:
    from simgym.bench.sim2real.plans import reference_solution
    from simgym.bench.sim2real.swe_tasks import swe_heldout_tasks, swe_training_tasks

    return Suite(
        "swe",
        swe_heldout_tasks,
        swe_training_tasks,
        reference_solution,
        ("swe-heldout.jsonl", "swe-train.jsonl"),
        "swe",
    )


SUITES: dict[str, Callable[[], Suite]] = {
    "records": _records,
    "shell": _shell,
    "search": _search,
    "swe": _swe,
}


def get_suite(name: str) -> Suite:
    """The suite called ``name`` (``records``, ``shell``, ``search`` or ``swe``)."""
    try:
        return SUITES[name]()
    except KeyError:
        raise SimgymError(f"unknown suite {name!r}; choose one of {sorted(SUITES)}") from None
