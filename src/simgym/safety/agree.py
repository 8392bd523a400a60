"""Sim-vs-real agreement of the minefield verdicts: the same scripted plays run in the
simulator and on real backends, and each episode's minefields are compared.

For every case that runs both ways (:func:`simgym.safety.real.split_real`), every agent
and every sample, the two episodes are paired and compared on:

``verdict``     pass/fail: safe (no minefield hit) in both, or unsafe in both;
``hits``        the set of minefields hit is the same;
``minefields``  each minefield on its own (hit in both or in neither); reported also for
                the minefields read off the final state alone (``deleted``, ``record``,
                ``file``, and a GUI's ``state`` and ``screen``), the ones where a
                simulated world can differ from the real one
                (checks on actions and answers read the same record both ways);
``milestones``  each milestone on its own (for the record; not part of the target).

An episode that failed on either side (a world that could not be built, a world model
that could not be reached) is counted as not compared, never as agreeing. The report
(``agreement.json``, ``agreement.md``) gives the rates overall, per domain, per agent and
per case, lists every disagreement with both trajectories, and the cases left out and why.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from simgym.core.errors import SimgymError
from simgym.safety.cases import SafetyCase
from simgym.safety.real import split_real
from simgym.safety.runner import TRAJECTORIES, arun_suite

AGREEMENT_VERSION = 1
AGREEMENT = "agreement.json"
AGREEMENT_MD = "agreement.md"
# checks read off the final state (a GUI's: the ledger's url and tree, the last screen)
STATE_KINDS = frozenset({"deleted", "record", "file", "state", "screen"})


def _episodes(report: dict[str, Any]) -> dict[tuple[str, int | None], dict[str, Any]]:
    return {(c["id"], e["sample"]): e for c in report["cases"] for e in c["episodes"]}


def _hits(outcome: dict[str, Any]) -> list[str]:
    return sorted(v["check"] for v in outcome["violations"])


def compare_runs(
    cases: list[SafetyCase],
    sim: dict[str, Any],
    real: dict[str, Any],
    *,
    agent: str,
    sim_file: str,
    real_file: str,
) -> list[dict[str, Any]]:
    """One row per (case, sample) of two reports of the same agent on the same cases."""
    sim_eps, real_eps = _episodes(sim), _episodes(real)
    rows = []
    for case in cases:
        samples = sorted(
            {s for (cid, s) in [*sim_eps, *real_eps] if cid == case.id},
            key=lambda s: -1 if s is None else s,
        )
        for sample in samples:
            s, r = sim_eps.get((case.id, sample)), real_eps.get((case.id, sample))
            row: dict[str, Any] = {
                "case": case.id,
                "domain": case.domain,
                "category": case.category,
                "agent": agent,
                "sample": sample,
                "sim_episode": f"{sim_file}#{s['episode_id']}" if s else None,
                "real_episode": f"{real_file}#{r['episode_id']}" if r else None,
            }
            problem = _not_comparable(s, r)
            if problem is not None:
                rows.append({**row, "compared": False, "why": problem})
                continue
            assert s is not None and r is not None
            names = [m.name for m in case.minefields]
            # Checks on actions and answers read the same record both ways; checks on the
            # final state are where the simulated world can differ from the real one.
            stated = [m.name for m in case.minefields if m.kind in STATE_KINDS]
            sim_hits, real_hits = _hits(s), _hits(r)
            goals = [m.name for m in case.milestones]
            rows.append(
                {
                    **row,
                    "compared": True,
                    "sim_hits": sim_hits,
                    "real_hits": real_hits,
                    "sim_safe": s["safe"],
                    "real_safe": r["safe"],
                    "verdict_agree": s["safe"] == r["safe"],
                    "hits_agree": sim_hits == real_hits,
                    "minefields": len(names),
                    "minefields_agree": sum((n in sim_hits) == (n in real_hits) for n in names),
                    "state_minefields": len(stated),
                    "state_minefields_agree": sum(
                        (n in sim_hits) == (n in real_hits) for n in stated
                    ),
                    "milestones": len(goals),
                    "milestones_agree": sum(
                        (g in s["milestones"]) == (g in r["milestones"]) for g in goals
                    ),
                    "sim_milestones": s["milestones"],
                    "real_milestones": r["milestones"],
                }
            )
    return rows


def _not_comparable(sim: dict[str, Any] | None, real: dict[str, Any] | None) -> str | None:
    if sim is None:
        return "no simulated episode"
    if real is None:
        return "no real episode"
    if real.get("error"):
        return f"real episode failed: {real['error']}"
    if sim.get("error"):
        return f"simulated episode failed: {sim['error']}"
    return None


def _rate(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The agreement rates of a group of compared rows."""
    done = [r for r in rows if r["compared"]]
    mines = sum(r["minefields"] for r in done)
    stated = sum(r["state_minefields"] for r in done)
    goals = sum(r["milestones"] for r in done)
    return {
        "episodes": len(rows),
        "compared": len(done),
        "not_compared": len(rows) - len(done),
        "verdict_agreement": _rate(sum(r["verdict_agree"] for r in done), len(done)),
        "hit_set_agreement": _rate(sum(r["hits_agree"] for r in done), len(done)),
        "minefields": mines,
        "minefield_agreement": _rate(sum(r["minefields_agree"] for r in done), mines),
        "state_minefields": stated,
        "state_minefield_agreement": _rate(sum(r["state_minefields_agree"] for r in done), stated),
        "milestone_agreement": _rate(sum(r["milestones_agree"] for r in done), goals),
        "sim_violations": sum(not r["sim_safe"] for r in done),
        "real_violations": sum(not r["real_safe"] for r in done),
    }


def build_agreement(rows: list[dict[str, Any]], skipped: dict[str, str]) -> dict[str, Any]:
    """The agreement report over compared rows (see the module docstring)."""
    report: dict[str, Any] = {"version": AGREEMENT_VERSION, "summary": summarize(rows)}
    for axis in ("domain", "agent", "case"):
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            groups[row[axis]].append(row)
        key = "by_case" if axis == "case" else f"by_{axis}"
        report[key] = {name: summarize(g) for name, g in groups.items()}
    report["rows"] = rows
    report["disagreements"] = [
        r for r in rows if r["compared"] and not (r["verdict_agree"] and r["hits_agree"])
    ]
    report["not_compared"] = [r for r in rows if not r["compared"]]
    report["skipped"] = skipped
    return report


async def arun_agreement(
    cases: list[SafetyCase],
    out_dir: str | Path,
    *,
    agents: tuple[str, ...] = ("reckless", "careful"),
    k: int = 1,
    seed: int | None = None,
    world_model: str = "local",
    world_model_options: dict[str, Any] | None = None,
    env_options: dict[str, Any] | None = None,
    concurrency: int = 4,
    real_concurrency: int = 2,
    max_turns: int = 12,
) -> dict[str, Any]:
    """Play the cases that run both ways with each scripted agent, in the simulator
    (``OUT/sim/AGENT``) and for real (``OUT/real/AGENT``), each a full safety report;
    compare the minefield verdicts; write ``OUT/agreement.json`` and ``.md``."""
    runs, skipped = split_real(cases)
    if not runs:
        reasons = "; ".join(sorted(set(skipped.values()))) or "no cases"
        raise SimgymError(f"no case runs both ways here: {reasons}")
    missing = sorted({a for a in agents for c in runs if a not in c.plays})
    if missing:
        raise SimgymError(
            f"agreement replays the cases' scripted plays; no plays for agent(s) {missing}"
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    seconds: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    for agent in agents:
        sim_dir, real_dir = out / "sim" / agent, out / "real" / agent
        sim_started = time.perf_counter()
        sim = await arun_suite(
            runs,
            sim_dir,
            agent=agent,
            world_model=world_model,
            world_model_options=world_model_options,
            k=k,
            seed=seed,
            concurrency=concurrency,
            max_turns=max_turns,
            env_options=env_options,
        )
        real_started = time.perf_counter()
        real = await arun_suite(
            runs,
            real_dir,
            executor="real",
            agent=agent,
            k=k,
            seed=seed,
            concurrency=real_concurrency,
            max_turns=max_turns,
        )
        seconds[agent] = {
            "sim": round(real_started - sim_started, 1),
            "real": round(time.perf_counter() - real_started, 1),
        }
        rows += compare_runs(
            runs,
            sim,
            real,
            agent=agent,
            sim_file=f"sim/{agent}/{TRAJECTORIES}",
            real_file=f"real/{agent}/{TRAJECTORIES}",
        )
    report = build_agreement(rows, skipped)
    report["run"] = {
        "agents": list(agents),
        "k": k,
        "seed": seed,
        "world_model": world_model,
        "env_options": {key: str(v) for key, v in (env_options or {}).items()},
        "cases": len(runs),
        "seconds": seconds,
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    (out / AGREEMENT).write_text(
        json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (out / AGREEMENT_MD).write_text(agreement_markdown(report), encoding="utf-8")
    return report


def run_agreement(cases: list[SafetyCase], out_dir: str | Path, **kwargs: Any) -> dict:
    """Blocking :func:`arun_agreement`."""
    return asyncio.run(arun_agreement(cases, out_dir, **kwargs))


# -- Markdown -------------------------------------------------------------------------------

_COLUMNS = (
    ("compared", "episodes"),
    ("verdict_agreement", "pass/fail agree"),
    ("hit_set_agreement", "hit sets agree"),
    ("minefields", "minefield checks"),
    ("minefield_agreement", "minefields agree"),
    ("state_minefields", "on the final state"),
    ("state_minefield_agreement", "final-state minefields agree"),
    ("sim_violations", "unsafe (sim)"),
    ("real_violations", "unsafe (real)"),
    ("not_compared", "not compared"),
)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, list):
        return ", ".join(value) or "none"
    return str(value)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return out


def agreement_markdown(report: dict[str, Any]) -> str:
    """The agreement report as Markdown."""
    run = report.get("run", {})
    seconds = run.get("seconds", {})
    timing = ", ".join(f"{a}: sim {t['sim']} s, real {t['real']} s" for a, t in seconds.items())
    lines = [
        "# Sim-vs-real agreement of the minefield verdicts",
        "",
        f"agents {', '.join(run.get('agents', []))}, k = {run.get('k')}, simulated by "
        f"`{run.get('world_model')}` {run.get('env_options') or ''}; {run.get('cases')} "
        f"case(s) run both ways; wall {run.get('wall_seconds')} s ({timing})",
        "",
        "## By domain",
        "",
    ]
    head = ["", *(t for _, t in _COLUMNS)]

    def rows_of(groups: dict[str, Any]) -> list[list[str]]:
        return [[name, *(_cell(m[k]) for k, _ in _COLUMNS)] for name, m in groups.items()]

    summary = ["**all**", *(_cell(report["summary"][k]) for k, _ in _COLUMNS)]
    lines += _table(head, [*rows_of(report["by_domain"]), summary])
    lines += ["", "## By agent", ""]
    lines += _table(head, rows_of(report["by_agent"]))
    lines += ["", "## Per case", ""]
    case_rows = []
    for row in report["rows"]:
        if not row["compared"]:
            case_rows.append([row["case"], row["agent"], "-", "-", "not compared", row["why"]])
            continue
        agree = "yes" if row["verdict_agree"] and row["hits_agree"] else "**no**"
        verdicts = f"{_safe(row['sim_safe'])} / {_safe(row['real_safe'])}"
        case_rows.append(
            [
                row["case"],
                row["agent"],
                _cell(row["sim_hits"]),
                _cell(row["real_hits"]),
                verdicts,
                agree,
            ]
        )
    lines += _table(
        ["case", "agent", "hits (sim)", "hits (real)", "sim / real", "agree"], case_rows
    )
    lines += ["", "## Disagreements", ""]
    if not report["disagreements"]:
        lines.append("none")
    for row in report["disagreements"]:
        lines.append(
            f"- {row['case']} ({row['agent']}): sim hit {_cell(row['sim_hits'])}, real hit "
            f"{_cell(row['real_hits'])}; {row['sim_episode']} vs {row['real_episode']}"
        )
    if report["skipped"]:
        lines += ["", "## Not run for real", ""]
        reasons: dict[str, list[str]] = defaultdict(list)
        for case, why in report["skipped"].items():
            reasons[why].append(case)
        for why, ids in sorted(reasons.items()):
            lines.append(
                f"- {why}: {len(ids)} case(s) ({', '.join(ids[:6])}{', ...' * (len(ids) > 6)})"
            )
    return "\n".join(lines) + "\n"


def _safe(safe: bool) -> str:
    return "pass" if safe else "fail"
