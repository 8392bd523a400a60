"""Tool-call checks: a tool was (not) called, with arguments, within count bounds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.types import Action, Trajectory, Turn
from simgym.rewards._json import matches_subset
from simgym.rewards._verifier import (
    MODES,
    Verifier,
    check_choice,
    check_keys,
    parse_checks,
    score_checks,
)
from simgym.rewards.base import RewardResult


def tool_call_of(turn: Turn) -> tuple[Action, bool] | None:
    """The tool call a turn made, and whether it failed. An invalid call (rejected, or
    passed to the world as invalid) is recorded without a parsed action, only its text;
    that text is read back so attempts can be counted."""
    if turn.action is not None:
        return (turn.action, bool(turn.error)) if turn.action.kind == "tool_call" else None
    if not turn.action_text.strip().startswith("{"):
        return None
    try:
        action = Action.parse(turn.action_text)
    except SimgymError:
        return None  # cut short or not a call at all: nothing to count
    return (action, True) if action.kind == "tool_call" else None


@dataclass(frozen=True)
class ToolCallPredicate:
    """One check on the tool calls of an episode, read from a dict: ``tool`` (the name),
    optional ``arguments`` (a subset the call's arguments must match), ``called`` (false:
    never called), ``min_count`` / ``max_count`` / ``count``, ``loose``."""

    spec: dict[str, Any]
    low: int
    high: int | None

    @classmethod
    def parse(cls, spec: Any) -> ToolCallPredicate:
        allowed = {"tool", "arguments", "called", "min_count", "max_count", "count", "loose"}
        spec = check_keys("tool_call", spec, allowed, "tool")
        if not isinstance(spec["tool"], str) or not spec["tool"]:
            raise SimgymError(f"tool_call check {spec!r}: 'tool' must be a tool name")
        if "arguments" in spec and not isinstance(spec["arguments"], dict):
            raise SimgymError(f"tool_call check {spec!r}: 'arguments' must be an object")
        for key in ("min_count", "max_count", "count"):
            bound = spec.get(key)
            if bound is not None and (type(bound) is not int or bound < 0):
                raise SimgymError(f"tool_call check {spec!r}: {key!r} must be an integer >= 0")
        called = spec.get("called", True)
        if not isinstance(called, bool):
            raise SimgymError(f"tool_call check {spec!r}: 'called' must be true or false")
        if not called and {"count", "min_count", "max_count"} & set(spec):
            raise SimgymError(f"tool_call check {spec!r}: 'called: false' takes no counts")
        low = spec.get("count", spec.get("min_count", 1 if called else 0))
        high = spec.get("count", spec.get("max_count", None if called else 0))
        if "count" in spec and ("min_count" in spec or "max_count" in spec):
            raise SimgymError(f"tool_call check {spec!r}: 'count' or min/max, not both")
        if high is not None and low > high:
            raise SimgymError(f"tool_call check {spec!r}: no count fits (min > max)")
        return cls(dict(spec), low, high)

    def evaluate(self, trajectory: Trajectory, count_failed: bool) -> dict[str, Any]:
        spec, loose = self.spec, bool(self.spec.get("loose", False))
        calls = [c for c in map(tool_call_of, trajectory.turns) if c is not None]
        same_name = [(call, failed) for call, failed in calls if call.name == spec["tool"]]
        counted = [call for call, failed in same_name if count_failed or not failed]
        if "arguments" in spec:
            counted = [
                c for c in counted if matches_subset(c.arguments, spec["arguments"], loose=loose)
            ]
        count = len(counted)
        passed = count >= self.low and (self.high is None or count <= self.high)
        bounds = f"{self.low}..{'' if self.high is None else self.high}"
        return {
            "check": spec,
            "passed": passed,
            "count": count,
            "expected_count": bounds,
            "calls": [c.arguments for c, _ in same_name[:5]],  # what was actually sent
            "failed_calls": sum(1 for _, failed in same_name if failed),
        }


class ToolCallCheck(Verifier):
    """Checks (:class:`ToolCallPredicate`) on the tool calls in the turns: from
    ``checks=[...]`` (or one check's keys), else ``metadata["tool_checks"]``. A call that
    failed (invalid, rejected, or its turn errored) does not count unless
    ``count_failed``."""

    name = "tool_call"

    def __init__(
        self,
        checks: list[dict[str, Any]] | None = None,
        *,
        mode: str = "all",
        count_failed: bool = False,
        name: str | None = None,
        **single: Any,
    ) -> None:
        super().__init__(name=name)
        self.mode = check_choice("mode", mode, MODES)
        self.count_failed = count_failed
        self.checks = parse_checks("tool_call", checks, single, ToolCallPredicate.parse)

    def check(self, trajectory: Trajectory) -> RewardResult:
        checks = self.checks
        if checks is None:
            try:
                checks = parse_checks(
                    "tool_call",
                    trajectory.task.metadata.get("tool_checks"),
                    {},
                    ToolCallPredicate.parse,
                )
            except SimgymError as exc:
                return self.fail(f"bad metadata 'tool_checks': {exc}")
            if checks is None:
                return self.fail("no checks: none given and the task has no 'tool_checks'")
        outcomes = [c.evaluate(trajectory, self.count_failed) for c in checks]
        return score_checks(self, outcomes, self.mode)
