"""The experiment's environments by name: each suite's held-out and training task sets.

``records`` is the customer-records MCP server (:mod:`~simgym.bench.sim2real.tasks`),
``shell`` a bash shell in a sandbox (:mod:`~simgym.bench.sim2real.shell_tasks`),
``search`` a company wiki in a real full-text engine
(:mod:`~simgym.bench.sim2real.search_tasks`), ``swe`` edits to a small Python package in a
sandboxed repository (:mod:`~simgym.bench.sim2real.swe_tasks`). The example scripts take
``--suite NAME``.
"""

from __future__ import annotations

import importlib
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


def _generated(name: str, target: str) -> Callable[[], Suite]:
    """A generated suite from its :class:`~simgym.bench.sim2real.plans.Generated` sets,
    named ``"module:attr"`` (imported when the suite is asked for): task files
    ``NAME-heldout.jsonl`` and ``NAME-train.jsonl``, faults in the sets' domain."""

    def build() -> Suite:
        from simgym.bench.sim2real.plans import reference_solution

        module, attr = target.split(":")
        sets = getattr(importlib.import_module(module), attr)
        files = (f"{name}-heldout.jsonl", f"{name}-train.jsonl")
        return Suite(name, sets.heldout, sets.training, reference_solution, files, sets.domain)

    return build


SUITES: dict[str, Callable[[], Suite]] = {
    "records": _records,
    "shell": _generated("shell", "simgym.bench.sim2real.shell_tasks:SHELL"),
    "search": _generated("search", "simgym.bench.sim2real.search_tasks:SEARCH"),
    "swe": _generated("swe", "simgym.bench.sim2real.swe_tasks:SWE"),
}


def get_suite(name: str) -> Suite:
    """The suite called ``name`` (``records``, ``shell``, ``search`` or ``swe``)."""
    try:
        return SUITES[name]()
    except KeyError:
        raise SimgymError(f"unknown suite {name!r}; choose one of {sorted(SUITES)}") from None
