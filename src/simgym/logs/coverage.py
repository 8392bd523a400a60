"""What an import found, field by field: the coverage report.

Every import counts, over the records it read, how many carried a body (request or
response), an actor, a role, a named session (not one made up from a trace or an
object), objects, and how many were refusals. The report goes in the world's
``manifest.json`` under ``"coverage"``, with ``problems``: the reasons the world cannot be
called a twin (no bodies, no object state). :func:`coverage_problems` reads them back for
whoever must refuse such a world (``logs eval``); :func:`warning_lines` gives them as the
loud one-line warnings ``logs import`` and ``logs inspect`` print.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from pathlib import Path

from simgym.logs.model import JSON, LogRecord, ObjectRef

COVERAGE_KEY = "coverage"
# what a field means to the twin when the logs never carried it
_WITHOUT = {
    "body": "the twin will hold no state and every answer will be the model's free text",
    "actor": "no rule can name who acted (self-approval, segregation of duties)",
    "role": "no permission rule can be learned",
    "session": "sessions are guessed (from traces or objects), tasks follow them",
    "objects": "no object is tracked, so no life cycle can be learned",
}


def _present(value: JSON) -> bool:
    return value not in (None, "", {}, [])


class CoverageCounter:
    """Counts, record by record, which fields an import found (bounded memory: one
    counter per operation)."""

    def __init__(self) -> None:
        self.calls = 0
        self.found: Counter[str] = Counter()
        self.refusals: Counter[str] = Counter()
        self.op_calls: Counter[str] = Counter()
        self.op_objects: Counter[str] = Counter()
        self.op_types: dict[str, Counter[str]] = defaultdict(Counter)

    def add(self, record: LogRecord) -> None:
        self.calls += 1
        key = record.key
        self.op_calls[key] += 1
        if _present(record.arguments) or _present(record.response):
            self.found["body"] += 1
        if _present(record.arguments):
            self.found["request"] += 1
        if _present(record.response):
            self.found["response"] += 1
        if record.actor:
            self.found["actor"] += 1
        if record.role:
            self.found["role"] += 1
        if record.attributes.get("session_from") is None:
            self.found["session"] += 1
        if record.objects:
            self.found["objects"] += 1
            self.op_objects[key] += 1
            for obj in record.objects:
                self.op_types[key][obj.type] += 1
        if any(o.state for o in record.objects):
            self.found["state"] += 1
        if record.failed:
            if record.status is not None:
                self.refusals[str(record.status)] += 1
            else:
                self.refusals["error (no status in the log)"] += 1

    def report(
        self,
        *,
        sessions: int = 0,
        entity_types: int = 0,
        looked_for: dict[str, list[str]] | None = None,
    ) -> dict[str, JSON]:
        """The coverage as JSON: shares of calls per field, objects per operation,
        refusals, the reasons a field was not found (``looked_for``: field -> where each
        reader looked), and the ``problems`` that keep the world from being a twin."""
        n = self.calls

        def share(name: str) -> float:
            return round(self.found[name] / n, 4) if n else 0.0

        fields = {
            name: {"calls": self.found[name], "share": share(name)}
            for name in ("body", "request", "response", "actor", "role", "session", "objects")
        }
        missing: dict[str, str] = {}
        for name in ("body", "actor", "role", "session", "objects"):
            if self.found[name] < n:
                where = "; ".join((looked_for or {}).get(name, [])) or "the readers' defaults"
                lacking = n - self.found[name]
                missing[name] = f"not found on {lacking} of {n} calls (looked for: {where})"
        operations = {
            key: {
                "calls": calls,
                "with_objects": self.op_objects[key],
                "object_types": dict(self.op_types[key].most_common()),
            }
            for key, calls in sorted(self.op_calls.items())
        }
        problems = []
        if n and not self.found["body"]:
            where = "; ".join((looked_for or {}).get("body", []))
            problems.append(
                f"no request/response bodies found in {n} calls: {_WITHOUT['body']}"
                + (f" (looked for: {where})" if where else "")
            )
        if n and not entity_types:
            problems.append(
                f"no object state found in {n} calls: the twin has no records to serve "
                "or change, and every answer will be the model's free text"
            )
        if not n:
            problems.append("no calls were read: there is nothing to simulate")
        return {
            "calls": n,
            "sessions": sessions,
            "fields": fields,
            "state_share": share("state"),
            "entity_types": entity_types,
            "refusals": dict(self.refusals.most_common()),
            "operations": operations,
            "not_found": missing,
            "problems": problems,
            "twin": not problems,
        }


def summary_lines(coverage: dict[str, JSON]) -> list[str]:
    """The report in a few plain lines (what ``logs import`` and ``inspect`` print)."""
    fields = coverage.get("fields") or {}
    n = coverage.get("calls", 0)

    def pct(name: str) -> str:
        return f"{fields.get(name, {}).get('share', 0.0):.0%}"

    ops = coverage.get("operations") or {}
    with_objects = sum(1 for o in ops.values() if o.get("with_objects"))
    refusals = coverage.get("refusals") or {}
    lines = [
        f"coverage of {n} calls: bodies {pct('body')} (request {pct('request')}, response "
        f"{pct('response')}), actors {pct('actor')}, roles {pct('role')}, named sessions "
        f"{pct('session')} ({coverage.get('sessions', 0)} sessions), objects {pct('objects')}"
        f" ({with_objects} of {len(ops)} operations name one), object state "
        f"{coverage.get('state_share', 0.0):.0%} ({coverage.get('entity_types', 0)} types)",
        "refusals seen: "
        + (", ".join(f"{k} x{v}" for k, v in refusals.items()) if refusals else "none"),
    ]
    for name, why in (coverage.get("not_found") or {}).items():
        impact = _WITHOUT.get(name, "")
        lines.append(f"{name} {why}" + (f": {impact}" if impact else ""))
    return lines


def warning_lines(coverage: dict[str, JSON]) -> list[str]:
    """One loud line per problem (empty when the world can be called a twin)."""
    return [f"WARNING: {p}" for p in coverage.get("problems") or []]


def coverage_problems(world_dir: str | os.PathLike[str]) -> list[str]:
    """Why the world in ``world_dir`` cannot be called a twin (empty: it can). A world
    whose manifest has no coverage report (written before there was one) is recounted
    from its ``sessions.jsonl`` and ``entities.json``; a folder without them is a
    problem, never a pass."""
    world = Path(world_dir)
    try:
        manifest = json.loads((world / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        return [f"not a logs world folder: {world} ({exc.__class__.__name__})"]
    coverage = manifest.get(COVERAGE_KEY) if isinstance(manifest, dict) else None
    if isinstance(coverage, dict) and isinstance(coverage.get("problems"), list):
        return [str(p) for p in coverage["problems"]]
    return recount(world).get("problems", [])  # type: ignore[return-value]


def recount(world_dir: str | os.PathLike[str]) -> dict[str, JSON]:
    """The coverage of a world folder from its ``sessions.jsonl`` and ``entities.json``
    (names of the looked-for places are not kept there, so none are given)."""
    world = Path(world_dir)
    counter = CoverageCounter()
    sessions = 0
    try:
        with open(world / "sessions.jsonl", encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                sessions += 1
                for rec in json.loads(line).get("records", []):
                    counter.add(_record_of(rec))
        types = json.loads((world / "entities.json").read_text()).get("types", {})
    except (OSError, ValueError, AttributeError) as exc:
        return {"problems": [f"cannot recount {world}: {exc.__class__.__name__}: {exc}"]}
    return counter.report(sessions=sessions, entity_types=len(types))


def _record_of(data: dict[str, JSON]) -> LogRecord:
    objects = [
        ObjectRef(str(o.get("type")), str(o.get("id")), o.get("qualifier"), o.get("state"))
        for o in data.get("objects") or []
        if isinstance(o, dict)
    ]
    return LogRecord(
        session=str(data.get("session")),
        operation=str(data.get("operation")),
        system=str(data.get("system") or "http"),
        actor=data.get("actor"),  # type: ignore[arg-type]
        role=data.get("role"),  # type: ignore[arg-type]
        method=data.get("method"),  # type: ignore[arg-type]
        arguments=data.get("arguments"),
        status=data.get("status"),  # type: ignore[arg-type]
        error=bool(data.get("error")),
        response=data.get("response"),
        objects=objects,
        attributes=data.get("attributes") or {},  # type: ignore[arg-type]
    )
