"""Sim-vs-real: the same scripted episodes, simulated and real, compared turn by turn.

Both runs play the same action list, so turn ``i`` of one is turn ``i`` of the other.
Turns no world saw (rejected actions, final answers) are skipped. Each pair gets the
benchmark's rule metrics (edit similarity, line F1) and the domain's format check on
both sides; a world-model failure on one side shows as a pair with an error text.
"""

from __future__ import annotations

from typing import Any

from simgym.bench.metrics import edit_similarity, line_f1
from simgym.core.domain import get_domain
from simgym.core.types import Trajectory, Turn


def _worldly(turn: Turn) -> bool:
    """Did a world (simulated or real) have to answer this turn?"""
    final_answer = bool(turn.observation.metadata.get("final_answer"))
    return turn.error_type != "action" and not final_answer


def _format_checker(trajectory: Trajectory):
    """``check(turn) -> bool | None`` for one episode (its scenario validated once)."""
    domain = get_domain(trajectory.domain)
    scenario = domain.scenario(trajectory.scenario or None)

    def check(turn: Turn) -> bool | None:
        if turn.observation.kind == "error" or turn.action is None:
            return None
        return not domain.check_observation(turn.observation.text, turn.action, scenario)

    return check


def compare_turns(simulated: list[Trajectory], real: list[Trajectory]) -> list[dict[str, Any]]:
    """One row per turn both worlds answered, for episodes present on both sides."""
    by_id = {t.task.id: t for t in real}
    rows: list[dict[str, Any]] = []
    for sim in simulated:
        other = by_id.get(sim.task.id)
        if other is None:
            continue
        sim_ok, real_ok = _format_checker(sim), _format_checker(other)
        for a, b in zip(sim.turns, other.turns, strict=False):
            if not (_worldly(a) and _worldly(b)):
                continue
            rows.append(
                {
                    "task_id": sim.task.id,
                    "domain": sim.domain,
                    "turn": a.index,
                    "action": a.action_text,
                    "simulated": a.observation.text,
                    "real": b.observation.text,
                    "edit_similarity": edit_similarity(a.observation.text, b.observation.text),
                    "line_f1": line_f1(a.observation.text, b.observation.text),
                    "simulated_format_ok": sim_ok(a),
                    "real_format_ok": real_ok(b),
                }
            )
    return rows


def summarize(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per-domain means of the turn metrics, and the share of well-formed turns."""
    out: dict[str, dict[str, float]] = {}
    for domain in sorted({r["domain"] for r in rows}):
        group = [r for r in rows if r["domain"] == domain]
        checked = [r["simulated_format_ok"] for r in group if r["simulated_format_ok"] is not None]
        out[domain] = {
            "turns": len(group),
            "edit_similarity": sum(r["edit_similarity"] for r in group) / len(group),
            "line_f1": sum(r["line_f1"] for r in group) / len(group),
            "simulated_format_ok": sum(checked) / len(checked) if checked else float("nan"),
        }
    return out
