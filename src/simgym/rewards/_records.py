"""Record checks: conditions on the records a task should leave behind, found by their
attribute values rather than their ids.

A system assigns ids itself, so a check names a record by what it holds: ``{"collection":
"loans", "match": {"amount": 40000, "purpose": "car"}, "expect": {"status": "approved"}}``
passes when some record of ``loans`` has the ``match`` fields and also the ``expect``
fields. Checks may refer to one another: a check with ``"ref": "customers.0"`` binds the
id of the record it found, and a later check's ``match`` value ``"$customers.0"`` stands
for that id (``{"customer_id": "$customers.0"}``). With ``"new": true`` (the default) a
record whose id was already in the state before the episode (``before``) is not a
candidate, so a world seeded with last-seen records does not pass a task by itself. Two
checks never bind the same record.

:func:`check_records` reads a ledger state (``{"loans": [...], ...}``; a collection may
also be an object of records keyed by id); :class:`RecordChecks` is the reward that reads
``task.metadata["checks"]``, the episode's ``final_state`` and the scenario's state.
"""

from __future__ import annotations

from typing import Any

from simgym.core.types import Trajectory
from simgym.rewards._verifier import MODES, Verifier, check_choice

REF_PREFIX = "$"


def _records(collection: Any) -> list[dict[str, Any]]:
    if isinstance(collection, dict):
        collection = list(collection.values())
    if not isinstance(collection, list):
        return []
    return [r for r in collection if isinstance(r, dict)]


def _same(a: Any, b: Any) -> bool:
    """JSON equality (1 == 1.0, but True is not 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def _ids(state: dict[str, Any] | None, collection: str, key: str) -> set[str]:
    if not isinstance(state, dict):
        return set()
    return {str(r.get(key)) for r in _records(state.get(collection)) if r.get(key) is not None}


def _resolve(match: dict[str, Any], bound: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``match`` with ``$ref`` values replaced by bound ids, and the refs not bound."""
    out, missing = {}, []
    for field, value in match.items():
        if isinstance(value, str) and value.startswith(REF_PREFIX):
            ref = value[len(REF_PREFIX) :]
            if ref not in bound:
                missing.append(ref)
                continue
            value = bound[ref]
        out[field] = value
    return out, missing


def _has(record: dict[str, Any], fields: dict[str, Any]) -> bool:
    return all(k in record and _same(record[k], v) for k, v in fields.items())


def check_records(
    checks: list[dict[str, Any]],
    state: dict[str, Any] | None,
    before: dict[str, Any] | None = None,
) -> tuple[bool, list[dict[str, Any]]]:
    """Evaluate record checks (see the module docstring) on ``state``; ``before`` is the
    state the episode started from. Returns (all passed, one outcome per check)."""
    bound: dict[str, Any] = {}
    used: set[tuple[str, str]] = set()
    outcomes: list[dict[str, Any]] = []
    state = state if isinstance(state, dict) else {}
    for check in checks:
        collection = str(check.get("collection", ""))
        key = str(check.get("key", "id"))
        ref = check.get("ref")
        outcome: dict[str, Any] = {"collection": collection, "ref": ref, "passed": False}
        match, missing = _resolve(dict(check.get("match") or {}), bound)
        expect = dict(check.get("expect") or {})
        if missing:
            outcomes.append({**outcome, "why": f"refers to {', '.join(missing)}, not found"})
            continue
        old = _ids(before, collection, key) if check.get("new", True) else set()
        candidates = [
            r
            for r in _records(state.get(collection))
            if str(r.get(key)) not in old
            and (collection, str(r.get(key))) not in used
            and _has(r, match)
        ]
        good = [r for r in candidates if _has(r, expect)]
        pick = good[0] if good else (candidates[0] if candidates else None)
        if pick is None:
            outcomes.append({**outcome, "found": False, "why": "no record matches"})
            continue
        used.add((collection, str(pick.get(key))))
        if ref:
            bound[str(ref)] = pick.get(key)
        outcome.update(found=True, id=pick.get(key), passed=bool(good))
        if not good:
            outcome["got"] = {k: pick.get(k) for k in expect}
            outcome["why"] = "found, but not in the expected state"
        outcomes.append(outcome)
    return all(o["passed"] for o in outcomes), outcomes


class RecordChecks(Verifier):
    """The reward of record checks: ``checks=[...]`` or the task's ``metadata["checks"]``,
    on the episode's ``final_state`` (records new since the scenario's ``state``).
    ``mode="all"`` scores 1.0 only when every check passes; ``"fraction"`` gives partial
    credit."""

    name = "records"

    def __init__(
        self,
        checks: list[dict[str, Any]] | None = None,
        *,
        mode: str = "all",
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.mode = check_choice("mode", mode, MODES)
        self.checks = checks

    def check(self, trajectory: Trajectory) -> Any:
        checks = self.checks if self.checks is not None else trajectory.task.metadata.get("checks")
        if not isinstance(checks, list) or not checks:
            return self.fail("no checks: none given and the task has no 'checks'")
        if not all(isinstance(c, dict) for c in checks):
            return self.fail("bad metadata 'checks': each check is an object")
        if trajectory.final_state is None:
            return self.fail("the episode kept no final state (final_state is None)")
        before = trajectory.scenario.get("state") if trajectory.scenario else None
        if trajectory.metrics.get("state_source") == "live":
            before = None  # a real service starts from its own data, not the scenario's
        passed, outcomes = check_records(checks, trajectory.final_state, before)
        good = sum(o["passed"] for o in outcomes)
        value = good / len(outcomes) if self.mode == "fraction" else float(passed)
        return self.result(value, passed=good, total=len(outcomes), checks=outcomes)
