"""The faults a company's logs show, as a perturbation plan for its twin.

Business refusals (403, 409, 422) are rules the twin enforces (``behaviour.json``); what
is left are the system's own failures: 5xx answers, 429s, calls that timed out. Their
observed rate per operation becomes a rule of a :mod:`simgym.perturb` plan in the
world's ``faults.yaml``, so an agent can train against the failure rates production
really has: ``simgym run ... --world DIR --perturb DIR/faults.yaml``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from simgym.logs.twin import load_world, tool_names

FAULTS_FILE = "faults.yaml"
TIMEOUT_STATUSES = frozenset({"504", "408"})


def fault_rules(operations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One rule per operation and kind of failure it showed, with its observed rate."""
    names = tool_names(operations)
    rules = []
    for op in operations:
        tool = names.get(str(op.get("name")))
        statuses = Counter({str(k): int(v) for k, v in (op.get("statuses") or {}).items()})
        calls = sum(statuses.values())
        if tool is None or not calls:
            continue
        timeouts = sum(n for s, n in statuses.items() if s in TIMEOUT_STATUSES)
        limited = statuses.get("429", 0)
        errors = Counter(
            {s: n for s, n in statuses.items() if s[:1] == "5" and s not in TIMEOUT_STATUSES}
        )
        errors["500"] += statuses.get("error", 0)  # a failed call with no status
        for kind, n, params in (
            ("timeout", timeouts, {}),
            ("rate_limit", limited, {}),
            ("server_error", sum(errors.values()), _status(errors)),
        ):
            if n:
                rule: dict[str, Any] = {
                    "name": f"{tool} {kind} (seen {n} of {calls})",
                    "fault": kind,
                    "probability": round(n / calls, 4),
                    "tools": [tool],
                }
                if params:
                    rule["params"] = params
                rules.append(rule)
    return rules


def _status(errors: Counter[str]) -> dict[str, int]:
    common = [s for s, n in errors.most_common() if n and s.isdigit()]
    return {"status": int(common[0])} if common else {}


def write_faults(world_dir: str | Path, seed: int = 0) -> int:
    """Write the world's ``faults.yaml``; return how many rules it holds."""
    root = Path(world_dir)
    operations = [op for op in load_world(root)["interface"]["operations"] if isinstance(op, dict)]
    rules = fault_rules(operations)
    header = (
        "# The failures the logs show, at their observed rates (simgym.logs.faults).\n"
        "# Use: simgym run ... --world DIR --perturb DIR/faults.yaml\n"
    )
    body = yaml.safe_dump({"seed": seed, "rules": rules}, sort_keys=False, allow_unicode=True)
    (root / FAULTS_FILE).write_text(header + body, encoding="utf-8")
    return len(rules)
