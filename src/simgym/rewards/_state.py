"""State checks: predicates over ``final_state`` or the final observation read as JSON
(a path exists, equals, contains; a record in a collection exists or not)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.types import Trajectory
from simgym.rewards._json import MISSING, matches_subset, resolve_path, split_path, values_equal
from simgym.rewards._text import normalize_answer
from simgym.rewards._verifier import (
    MODES,
    Verifier,
    check_choice,
    check_keys,
    parse_checks,
    score_checks,
    text_of,
)
from simgym.rewards.base import RewardResult

STATE_SOURCES = ("final_state", "final_observation")


def _contains(container: Any, needle: Any, loose: bool) -> bool:
    if isinstance(container, str):
        if not isinstance(needle, str | int | float) or isinstance(needle, bool):
            return False
        if loose:
            small = normalize_answer(text_of(needle))
            return f" {small} " in f" {normalize_answer(container)} "
        return text_of(needle) in container
    if isinstance(container, list):
        return any(matches_subset(item, needle, loose=loose) for item in container)
    if isinstance(container, dict):
        if isinstance(needle, str):
            return needle in container
        return isinstance(needle, dict) and matches_subset(container, needle, loose=loose)
    return False


def _preview(value: Any, limit: int = 500) -> Any:
    """A value for the details: itself, or its JSON cut short when it is large (a whole
    table of records would bloat every trajectory line)."""
    text = text_of(value)
    return value if len(text) <= limit else text[:limit] + "..."


def _records(collection: Any) -> list[Any] | None:
    """The records of a collection: a list's items or an object's values (records keyed
    by id, as the MCP domain keeps them)."""
    if isinstance(collection, list):
        return collection
    if isinstance(collection, dict):
        return list(collection.values())
    return None


_PREDICATES = ("equals", "not_equals", "contains", "record")


@dataclass(frozen=True)
class StatePredicate:
    """One predicate on a JSON document, read from a dict:

    * ``{"path": P}`` / ``{"path": P, "exists": false}``: the path resolves (or not);
    * ``{"path": P, "equals": V}``, ``"not_equals"``, ``"contains"`` (substring of a
      string, member of a list, key or sub-object of an object);
    * ``{"path": P, "record": {field: value}}``: some record of the list (or object of
      records) at P has these fields; with ``"exists": false``, none has.

    ``"loose": true`` compares scalars as answers are compared.
    """

    spec: dict[str, Any]
    keys: tuple[str, ...]

    @classmethod
    def parse(cls, spec: Any) -> StatePredicate:
        spec = check_keys("state", spec, {"path", "exists", "loose", *_PREDICATES}, "path")
        given = [p for p in _PREDICATES if p in spec]
        if len(given) > 1:
            raise SimgymError(f"state check {spec!r}: use one of {', '.join(given)}, not both")
        if "exists" in spec and not isinstance(spec["exists"], bool):
            raise SimgymError(f"state check {spec!r}: 'exists' must be true or false")
        if given and given[0] != "record" and spec.get("exists") is False:
            raise SimgymError(f"state check {spec!r}: 'exists: false' goes with 'record' only")
        if "record" in spec and not isinstance(spec["record"], dict):
            raise SimgymError(f"state check {spec!r}: 'record' must be an object of fields")
        return cls(dict(spec), tuple(split_path(spec["path"])))

    def evaluate(self, document: Any) -> dict[str, Any]:
        spec, loose = self.spec, bool(self.spec.get("loose", False))
        value = resolve_path(document, self.keys)
        found = value is not MISSING
        outcome: dict[str, Any] = {"check": spec, "got": _preview(value) if found else None}
        if "record" in spec:
            records = _records(value) if found else None
            if records is None:
                return {**outcome, "passed": False, "why": "no list or object of records there"}
            hits = [r for r in records if matches_subset(r, spec["record"], loose=loose)]
            want = spec.get("exists", True)
            outcome["got"] = f"{len(hits)} matching of {len(records)} record(s)"
            return {**outcome, "passed": bool(hits) == want}
        if not found:
            return {**outcome, "passed": spec.get("exists") is False, "why": "path not found"}
        if "equals" in spec:
            return {**outcome, "passed": values_equal(value, spec["equals"], loose=loose)}
        if "not_equals" in spec:
            return {**outcome, "passed": not values_equal(value, spec["not_equals"], loose=loose)}
        if "contains" in spec:
            return {**outcome, "passed": _contains(value, spec["contains"], loose)}
        return {**outcome, "passed": spec.get("exists", True)}


def _json_document(text: str) -> Any:
    body = text.strip()
    if body.startswith("```"):
        body = re.sub(r"^```[\w-]*\s*|\s*```$", "", body)
    return json.loads(body)


class StateCheck(Verifier):
    """Predicates (:class:`StatePredicate`) over the episode's ``final_state``, or over
    the final observation parsed as JSON (``source="final_observation"``). Checks come
    from ``checks=[...]`` (or one check's keys), else ``metadata["state_checks"]``.
    ``mode="all"`` scores 1.0 only when every check passes; ``"fraction"`` gives partial
    credit."""

    name = "state"

    def __init__(
        self,
        checks: list[dict[str, Any]] | None = None,
        *,
        source: str = "final_state",
        mode: str = "all",
        name: str | None = None,
        **single: Any,
    ) -> None:
        super().__init__(name=name)
        self.source = check_choice("source", source, STATE_SOURCES)
        self.mode = check_choice("mode", mode, MODES)
        self.checks = parse_checks("state", checks, single, StatePredicate.parse)

    def check(self, trajectory: Trajectory) -> RewardResult:
        checks = self.checks
        if checks is None:
            try:
                checks = parse_checks(
                    "state", trajectory.task.metadata.get("state_checks"), {}, StatePredicate.parse
                )
            except SimgymError as exc:
                return self.fail(f"bad metadata 'state_checks': {exc}")
            if checks is None:
                return self.fail("no checks: none given and the task has no 'state_checks'")
        if self.source == "final_state":
            document = trajectory.final_state
            if document is None:
                return self.fail("the episode kept no final state (final_state is None)")
        else:
            try:
                document = _json_document(trajectory.final_observation)
            except json.JSONDecodeError as exc:
                return self.fail(
                    f"the final observation is not JSON: {exc}",
                    got=trajectory.final_observation[:500],
                )
        outcomes = [c.evaluate(document) for c in checks]
        return score_checks(self, outcomes, self.mode, source=self.source)
