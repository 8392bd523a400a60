"""What the generated sim2real suites share: answers scored on a value, plans whose steps
read values from the world, and task sets made world by world.

A task's ``metadata["solution"]`` is its plan: tool calls, then ``{"answer": ...}``. A
call may ``read`` values from the observation that answers it (``{"read": {name: regex}}``,
the regex's first group), which later calls' arguments and the answer use as ``{name}``;
``metadata["values"]`` holds the true values, which the scripted reference plays
(:func:`reference_solution`) and the :class:`~simgym.bench.sim2real.ReaderAgent` never
sees.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simgym.core.types import Task

Maker = Callable[[random.Random, dict[str, Any]], tuple[str, dict[str, Any]]]


def token_answer(answer: str, solution: list[Any]) -> dict[str, Any]:
    """A lookup, passed when the answer holds the value as a whole token. ``contains``
    would normalize ``CACHE_SECRET=fwu9lhpe93`` to one word and miss the value in it."""
    token = rf"(?<![A-Za-z0-9]){re.escape(answer)}(?![A-Za-z0-9])"
    reward = {"type": "regex", "pattern": token}
    return {"answer": answer, "reward": reward, "solution": solution}


def number_answer(answer: int, solution: list[Any]) -> dict[str, Any]:
    """A number, passed when it is the only number in the answer: a whole token alone would
    take ``32`` from a made-up timestamp ``12:22:32.192``."""
    reward = {"type": "regex", "pattern": rf"^\D*(?<!\d){answer}(?!\d)\D*$"}
    return {"answer": str(answer), "reward": reward, "solution": solution}


def _pointer(path: str) -> str:
    """The JSON Pointer of a file in the final state (``{"files": {path: content}}``)."""
    return "/files/" + path.replace("~", "~0").replace("/", "~1")


def file_is(path: str, content: str) -> dict[str, Any]:
    """A ``state`` check: the file at ``path`` holds exactly ``content`` at the end."""
    return {"path": _pointer(path), "equals": content}


def file_absent(path: str) -> dict[str, Any]:
    """A ``state`` check: no file at ``path`` at the end."""
    return {"path": _pointer(path), "exists": False}


def make_tasks(
    kinds: dict[str, Maker],
    world: dict[str, Any],
    rng: random.Random,
    domain: str,
    count: int,
    prefix: str,
) -> list[Task]:
    """``count`` tasks on one ``world`` (its ``scenario`` and ``facts``), the ``kinds`` in
    turn, ids ``prefix000`` on."""
    tasks = []
    for n in range(count):
        kind = list(kinds)[n % len(kinds)]
        instruction, metadata = kinds[kind](rng, world["facts"])
        tasks.append(
            Task(
                id=f"{prefix}{n:03d}",
                domain=domain,
                instruction=instruction,
                scenario=world["scenario"],
                metadata={"kind": kind, **metadata},
            )
        )
    return tasks


@dataclass(frozen=True)
class Generated:
    """A generated suite's two task sets: one world a seed (``world(seed, pools)``), the
    ``kinds`` in turn on each; the held-out worlds from :attr:`heldout_seed` on, the
    training ones from seed 0 (or another) on, each set with its own pools and id prefix."""

    world: Callable[[int, Any], dict[str, Any]]
    kinds: dict[str, Maker]
    domain: str
    name: str  # in the seed of each world's task draws
    heldout_seed: int
    prefixes: tuple[str, str]  # held-out, training
    pools: tuple[Any, Any]  # held-out, training

    def make(self, seed: int, count: int, prefix: str, pools: Any) -> list[Task]:
        """``count`` tasks on the world of ``seed``, ids ``prefix000`` on."""
        rng = random.Random(f"sim2real-{self.name}-tasks-{seed}")
        return make_tasks(self.kinds, self.world(seed, pools), rng, self.domain, count, prefix)

    def heldout(self, count: int = 21, *, per_world: int = 7) -> list[Task]:
        """The held-out tasks, ``per_world`` on each held-out world; the first n of a
        longer list are the same n tasks. Never trained on."""
        return self._sets(self.heldout_seed, count, per_world, 0)

    def training(self, count: int = 70, *, seed: int = 0, per_world: int = 7) -> list[Task]:
        """Training tasks, ``per_world`` on each world from ``seed`` on; never a held-out
        world."""
        return self._sets(seed, count, per_world, 1)

    def _sets(self, first: int, count: int, per_world: int, which: int) -> list[Task]:
        tasks: list[Task] = []
        world = first
        while len(tasks) < count:
            size = min(per_world, count - len(tasks))
            prefix = f"{self.prefixes[which]}m{world}-"
            tasks += self.make(world, size, prefix, self.pools[which])
            world += 1
        return tasks


def reference_solution(task: Task) -> list[Any]:
    """A task's plan as the scripted agent plays it: the true answer in place of what the
    plan reads from the world, the true values (``metadata["values"]``) in the calls'
    arguments, the ``read`` steps as plain calls."""
    answer = task.metadata.get("answer")
    values = {str(k): str(v) for k, v in (task.metadata.get("values") or {}).items()}
    steps: list[Any] = []
    for step in task.metadata.get("solution") or []:
        if "answer" in step:
            text = str(step["answer"])
            steps.append({"answer": str(answer) if "{" in text and answer is not None else text})
        else:
            call = {k: v for k, v in step.items() if k != "read"}
            call["arguments"] = fill(call.get("arguments") or {}, values)
            steps.append(call)
    return steps


def fill(value: Any, values: dict[str, str]) -> Any:
    """``value`` (a string, or strings in lists and objects) with each ``{name}`` replaced
    by ``values[name]``; other text stays as it is."""
    if isinstance(value, str):
        for name, found in values.items():
            value = value.replace("{" + name + "}", found)
        return value
    if isinstance(value, list):
        return [fill(item, values) for item in value]
    if isinstance(value, dict):
        return {key: fill(item, values) for key, item in value.items()}
    return value
