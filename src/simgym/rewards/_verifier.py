"""Rule verifiers' shared base: rewards computed from the trajectory alone, without a model.

Each verifier has a ``name`` and ``async score(trajectory)``. Reference data comes from the
constructor when given, else from ``trajectory.task.metadata``, so one verifier can score a
whole task set. A verifier never raises on a bad episode or bad task data: it scores 0.0
and says why in ``details["error"]``; bad constructor options raise :class:`SimgymError`
at once. The families live beside this module: ``_text`` (answer match), ``_state``,
``_tools`` (tool calls) and ``_tables``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.types import Trajectory
from simgym.rewards.base import RewardResult

TARGETS = ("answer", "final_observation")
MODES = ("all", "fraction")


def text_of(value: Any) -> str:
    """A reference value as text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def check_choice(label: str, value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise SimgymError(f"{label} must be one of {', '.join(choices)}; got {value!r}")
    return value


# -- base -------------------------------------------------------------------------------


class Verifier:
    """Shared plumbing: a name (``name=`` renames it) and results labelled with it."""

    name = "verifier"

    def __init__(self, *, name: str | None = None) -> None:
        if name is not None:
            if not isinstance(name, str) or not name:
                raise SimgymError("a reward name must be a non-empty string")
            self.name = name

    async def score(self, trajectory: Trajectory) -> RewardResult:
        return self.check(trajectory)

    def check(self, trajectory: Trajectory) -> RewardResult:
        """The synchronous score (rule verifiers need no I/O)."""
        raise NotImplementedError

    def result(self, value: float, **details: Any) -> RewardResult:
        return RewardResult(value=value, parts={self.name: value}, details=details)

    def fail(self, error: str, **details: Any) -> RewardResult:
        return self.result(0.0, error=error, **details)


def episode_text(trajectory: Trajectory, target: str) -> str | None:
    """The text a verifier reads: the final answer (None when the agent gave none) or
    the last observation the world produced."""
    if target == "answer":
        return trajectory.answer
    return trajectory.final_observation


# -- check lists ------------------------------------------------------------------------


def check_keys(kind: str, spec: Any, allowed: set[str], required: str) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise SimgymError(f"a {kind} check is an object, not {spec!r}")
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise SimgymError(
            f"{kind} check {spec!r}: unknown key(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    if required not in spec:
        raise SimgymError(f"{kind} check {spec!r} needs {required!r}")
    return spec


def score_checks(
    verifier: Verifier, outcomes: list[dict[str, Any]], mode: str, **details: Any
) -> RewardResult:
    passed = sum(1 for o in outcomes if o["passed"])
    if mode == "fraction":
        value = passed / len(outcomes)
    else:
        value = float(passed == len(outcomes))
    return verifier.result(value, passed=passed, total=len(outcomes), checks=outcomes, **details)


def parse_checks(kind: str, checks: Any, single: dict[str, Any], parse: Any) -> list[Any] | None:
    """Checks from ``checks=[...]`` or from one check's keys given directly."""
    if checks is not None and single:
        raise SimgymError(f"{kind} reward: give 'checks' or one check's keys, not both")
    if single:
        checks = [single]
    if checks is None:
        return None
    if not isinstance(checks, list) or not checks:
        raise SimgymError(f"{kind} reward: 'checks' must be a non-empty list")
    return [parse(c) for c in checks]
