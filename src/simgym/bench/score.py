"""``bench score``: per-domain and overall results from judged (or predicted) rows.

Each judge dimension is averaged over a domain's graded rows (1-5) and mapped to 0-100
as ``(mean - 1) / 4 * 100``; a domain's ``total`` is the same mapping of the mean of the
rows' totals (a row's total is the mean of its five scores). ``overall.macro`` averages
the domains with at least one graded row, each counting once (how AgentWorldBench
reports its overall number); ``overall.micro`` averages all graded rows together.

Failures are counted per domain, never dropped silently: ``infer_failed`` (the world
model never answered), ``empty`` (it answered nothing), ``judge_failed`` (no readable
grade after the allowed attempts). ``total_strict`` scores every failure as the lowest
grade (0 on the 0-100 scale), for a number that failures cannot flatter. Rule metrics are
averaged over the rows where they apply, with their counts.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from simgym.bench.judge import DIMENSIONS, judge_status
from simgym.bench.metrics import METRIC_NAMES

SCHEMA = "simgym.bench.score/1"


def to_100(mean_1_to_5: float) -> float:
    """A 1-5 mean on the 0-100 scale."""
    return (mean_1_to_5 - 1) / 4 * 100


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _r(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def classify(row: dict[str, Any]) -> str:
    """``graded``, ``infer_failed``, ``empty``, ``judge_failed`` or ``not_judged``."""
    if row.get("status") != "ok":
        return "infer_failed"
    if not (row.get("observation") or "").strip():
        return "empty"
    status = judge_status(row)
    if status is None:
        return "not_judged"
    if status == "ok":
        return "graded"
    return "judge_failed"


def _group(rows: list[dict[str, Any]]) -> dict[str, Any]:
    kinds = [classify(r) for r in rows]
    graded = [r for r, k in zip(rows, kinds, strict=True) if k == "graded"]
    judged_any = any(judge_status(r) is not None for r in rows)
    result: dict[str, Any] = {
        "rows": len(rows),
        "graded": len(graded),
        "infer_failed": kinds.count("infer_failed"),
        "empty": kinds.count("empty"),
        "judge_failed": kinds.count("judge_failed"),
        "not_judged": kinds.count("not_judged"),
    }
    result["failed"] = result["infer_failed"] + result["empty"] + result["judge_failed"]
    scores: dict[str, float | None] = {}
    for dim in DIMENSIONS:
        mean = _mean([float(r["judge"]["scores"][dim]) for r in graded])
        scores[dim] = _r(to_100(mean)) if mean is not None else None
    totals = [float(r["judge"]["total"]) for r in graded]
    mean_total = _mean(totals)
    scores["total"] = _r(to_100(mean_total)) if mean_total is not None else None
    result["scores"] = scores
    # Failures as the lowest grade (1 -> 0 on the 0-100 scale), over every judged row.
    judged = result["graded"] + result["failed"]
    result["total_strict"] = (
        _r(sum(to_100(t) for t in totals) / judged) if judged_any and judged else None
    )
    result["metrics"] = _metric_summary(rows)
    latencies = [r["latency_s"] for r in rows if isinstance(r.get("latency_s"), int | float)]
    result["latency_s"] = {
        "mean": _r(_mean(latencies), 3),
        "median": _r(statistics.median(latencies), 3) if latencies else None,
    }
    result["tokens"] = {
        "prompt": sum((r.get("usage") or {}).get("prompt_tokens", 0) for r in rows),
        "completion": sum((r.get("usage") or {}).get("completion_tokens", 0) for r in rows),
    }
    return result


def _metric_summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    summary = {}
    for name in METRIC_NAMES:
        values = [
            float(r["metrics"][name])
            for r in rows
            if isinstance(r.get("metrics"), dict) and r["metrics"].get(name) is not None
        ]
        summary[name] = {"mean": _r(_mean(values), 4), "n": len(values)}
    return summary


def score_rows(rows: list[dict[str, Any]], *, sources: list[str] | None = None) -> dict[str, Any]:
    """The score report (a JSON-ready dict) for result rows (one per key)."""
    by_domain: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_domain[row.get("domain") or "unknown"].append(row)
    domains = {d: _group(by_domain[d]) for d in sorted(by_domain)}
    scored = [d for d, g in domains.items() if g["scores"]["total"] is not None]
    macro: dict[str, float | None] = {}
    for dim in (*DIMENSIONS, "total"):
        values = [domains[d]["scores"][dim] for d in scored]
        macro[dim] = _r(_mean(values))
    strict = [domains[d]["total_strict"] for d in domains if domains[d]["total_strict"] is not None]
    micro = _group(rows) if rows else None
    overall = {
        "macro": {
            "scores": macro,
            "total_strict": _r(_mean(strict)),
            "domains": scored,
            "domains_without_grades": [d for d in domains if d not in scored],
        },
        "micro": micro,
    }
    return {
        "schema": SCHEMA,
        "sources": sources or [],
        "rows": len(rows),
        "world_models": _distinct(rows, _effective_world_model),
        "judges": _distinct(rows, _effective_judge),
        "domains": domains,
        "overall": overall,
    }


def _effective_world_model(row: dict[str, Any]) -> dict[str, Any] | None:
    """The backend's description with the settings each request actually used."""
    info = row.get("world_model")
    if not isinstance(info, dict):
        return None
    info = {k: v for k, v in info.items() if not k.startswith("request_")}
    for key in ("max_tokens", "temperature"):
        if row["world_model"].get(f"request_{key}") is not None:
            info[key] = row["world_model"][f"request_{key}"]
    return info


def _effective_judge(row: dict[str, Any]) -> dict[str, Any] | None:
    judge = row.get("judge")
    if not isinstance(judge, dict) or not isinstance(judge.get("model"), dict):
        return None
    info = dict(judge["model"])
    for key in ("max_tokens", "temperature", "attempts_allowed", "context_turns"):
        if judge.get(key) is not None:
            info[key] = judge[key]
    return info


def _distinct(rows: list[dict[str, Any]], pick) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    for row in rows:
        value = pick(row)
        if isinstance(value, dict) and value not in seen:
            seen.append(value)
    return seen
