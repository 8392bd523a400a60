"""Evaluate one policy on a task set, on the real records server and on its simulated twin.

``evaluate(tasks, agent=..., k=3)`` plays every task ``k`` times on each backend:

* ``real``: the bundled records MCP server, a fresh database per episode seeded with the
  task's records, or for ``terminal`` tasks a bash shell in a fresh sandbox holding the
  task's machine, for ``swe`` tasks the task's repository checked out in a fresh sandbox,
  or for ``search`` tasks the real full-text engine with the task's pages added to its
  index (the safety track's :class:`~simgym.safety.real.FreshWorlds` executor); changes
  are checked on the database or the files read back at the end;
* ``sim``: the twin, the task's domain on a world model (the embedded default unless
  told otherwise) with strict grounding; changes are checked on its hidden state.

An episode succeeds when its task reward is 1 (every check passed). The report gives each
backend's success rate with a 95% Wilson interval and the simulator-overfitting gap, sim
success minus real success, with Newcombe's interval. The ``k`` samples of one task are not
independent draws, so the intervals are somewhat narrower than a task-level analysis would
give; ``per_task`` keeps every outcome for one.

The policy is any agent spec; ``condition`` only labels the run. A trained condition is the
same call with a trained policy (e.g. ``agent="local", agent_options={"model_path": ...}``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from simgym.agents import create_agent
from simgym.agents.base import Agent
from simgym.bench.sim2real.stats import newcombe_difference, paired_task_bootstrap, wilson
from simgym.core.errors import SimgymError
from simgym.core.sync import run_sync
from simgym.core.trajectories import read_trajectories
from simgym.core.types import Task, Trajectory
from simgym.core.worldmodel import WorldModel
from simgym.perturb import Perturbations
from simgym.rewards import build_reward
from simgym.rollout.runner import arollout

BACKENDS = ("real", "sim")
REAL_DOMAINS = ("mcp", "terminal", "search", "swe")
SCHEMA = "simgym.sim2real/1"
REPORT = "report.json"
SUCCESS = 1.0 - 1e-9  # a reward of 1 up to float noise


def _real_world(domain: str) -> Any:
    """A fresh real world for one episode: the records server, its database seeded from
    the scenario, a sandboxed shell holding the scenario's machine, a sandboxed checkout
    of the scenario's repository, or the search engine with the scenario's pages in its
    index."""
    if domain not in REAL_DOMAINS:
        raise SimgymError(f"sim2real runs {', '.join(REAL_DOMAINS)} tasks, not {domain}")
    if domain == "search":
        from simgym.real.search import RealSearch

        return RealSearch()
    from simgym.safety.real import real_backend

    return real_backend(domain)


def succeeded(trajectory: Trajectory) -> bool:
    """Did the episode solve its task (reward 1, scored without error)?"""
    scored = "reward_error" not in trajectory.metrics
    return scored and trajectory.total_reward >= SUCCESS


def after_faults(trajectories: Iterable[Trajectory]) -> dict[str, Any]:
    """What the policy did on the turn after each injected fault: sent the same call again
    (``retried``), called something else or sent an invalid action (``other``), gave its
    final answer (``answered``), or had no turn left (``out_of_turns``); and how many
    episodes met a fault and how many of those it still solved."""
    counts = {"faults": 0, "retried": 0, "other": 0, "answered": 0, "out_of_turns": 0}
    episodes = solved = 0
    for trajectory in trajectories:
        turns = trajectory.turns
        hit = [i for i, turn in enumerate(turns) if turn.perturbation]
        if not hit:
            continue
        episodes += 1
        solved += succeeded(trajectory)
        for i in hit:
            counts["faults"] += 1
            failed, following = turns[i], turns[i + 1] if i + 1 < len(turns) else None
            if following is None:
                counts["out_of_turns"] += 1
            elif following.observation.metadata.get("final_answer"):
                counts["answered"] += 1
            elif _same_call(failed, following):
                counts["retried"] += 1
            else:
                counts["other"] += 1
    return {**counts, "episodes": episodes, "solved": solved}


def _same_call(a: Any, b: Any) -> bool:
    return (
        a.action is not None
        and b.action is not None
        and (a.action.name, a.action.arguments) == (b.action.name, b.action.arguments)
    )


def summarize(trajectories: Sequence[Trajectory], seconds: float | None = None) -> dict[str, Any]:
    """One backend's numbers: success rate with its 95% Wilson interval, errors, turns,
    time, and the outcomes per task and per task kind. ``seconds`` is this invocation's
    wall time (a resumed run's share); ``episode_seconds`` sums every episode's own. When
    faults were injected, ``faults`` tells how the policy met them (:func:`after_faults`)."""
    wins = [succeeded(t) for t in trajectories]
    n, s = len(wins), sum(wins)
    low, high = wilson(s, n)
    per_task: dict[str, list[int]] = {}
    by_kind: dict[str, dict[str, int]] = {}
    for trajectory, won in zip(trajectories, wins, strict=True):
        per_task.setdefault(trajectory.task.id, []).append(int(won))
        kind = str(trajectory.task.metadata.get("kind", "?"))
        cell = by_kind.setdefault(kind, {"episodes": 0, "successes": 0})
        cell["episodes"] += 1
        cell["successes"] += int(won)
    faults = after_faults(trajectories)
    return {
        **({"faults": faults} if faults["faults"] else {}),
        "episodes": n,
        "successes": s,
        "success_rate": s / n if n else 0.0,
        "ci95": [low, high],
        "mean_reward": sum(t.total_reward for t in trajectories) / n if n else 0.0,
        "errors": sum(1 for t in trajectories if t.error),
        "mean_turns": sum(len(t.turns) for t in trajectories) / n if n else 0.0,
        "seconds": seconds,
        "episode_seconds": sum(
            (t.finished_at or t.started_at) - t.started_at for t in trajectories
        ),
        "by_kind": by_kind,
        "per_task": per_task,
    }


def difference(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Success of ``a`` minus success of ``b`` (two :func:`summarize` cells over the same
    tasks), with Newcombe's interval and the paired task-level bootstrap."""
    diff, low, high = newcombe_difference(
        a["successes"], a["episodes"], b["successes"], b["episodes"]
    )
    paired, p_low, p_high, tasks = paired_task_bootstrap(a["per_task"], b["per_task"])
    return {
        "difference": diff,
        "ci95": [low, high],
        "method": "Newcombe hybrid score",
        # the same tasks on both sides: a task-level interval that uses the pairing
        "paired": {
            "difference": paired,
            "ci95": [p_low, p_high],
            "tasks": tasks,
            "method": "paired task-level bootstrap, 10,000 resamples",
        },
    }


def gap(sim: dict[str, Any], real: dict[str, Any]) -> dict[str, Any]:
    """The simulator-overfitting gap: sim success minus real success, with its interval."""
    found = difference(sim, real)
    paired = found.pop("paired")
    return {
        "sim_minus_real": found.pop("difference"),
        **found,
        "paired": {"sim_minus_real": paired.pop("difference"), **paired},
    }


def episodes_of(path: Path, tasks: list[Task], k: int, policy: dict[str, Any]) -> list[Trajectory]:
    """This evaluation's episodes in ``path`` (a resumed run's earlier ones included,
    another run's other tasks or extra samples left out), in task order. Episodes another
    policy played there are an error: a resumed run must not mix two policies' numbers."""
    order = {t.id: i for i, t in enumerate(tasks)}
    # keyed by (task, sample or 0): a k=1 run's episode (no sample) is the same draw as
    # sample 0 of a later k=3 run in the same folder, and must not count twice
    found = {
        (t.task.id, t.sample or 0): t
        for t in read_trajectories(path)
        if t.task.id in order and (t.sample or 0) < k
    }
    others = {json.dumps(t.agent, sort_keys=True) for t in found.values()}
    others -= {json.dumps(policy, sort_keys=True), "{}"}  # {}: a world that never started
    if others:
        raise SimgymError(
            f"{path} holds episodes of another policy ({sorted(others)[0]}); "
            "give this one its own output folder"
        )
    return sorted(found.values(), key=lambda t: (order[t.task.id], t.sample or 0))


async def aevaluate(
    tasks: Iterable[Task],
    *,
    agent: str | Agent = "local",
    agent_options: dict[str, Any] | None = None,
    condition: str = "untrained",
    k: int = 3,
    backends: Sequence[str] = BACKENDS,
    world_model: str | WorldModel = "local",
    world_model_options: dict[str, Any] | None = None,
    grounding: str = "strict",
    perturbations: Perturbations | None = None,
    max_turns: int = 8,
    concurrency: int = 1,
    out_dir: str | Path | None = None,
    on_done: Callable[[Trajectory], None] | None = None,
) -> dict[str, Any]:
    """Play ``tasks`` ``k`` times each on every backend in ``backends`` and return the
    report (see the module docstring). With ``out_dir``, episodes go to
    ``out_dir/{backend}.jsonl`` (a rerun resumes) and the report to ``out_dir/report.json``.
    ``perturbations`` injects faults into the twin only (the real server meets none)."""
    task_list = list(tasks)
    if not task_list:
        raise SimgymError("no tasks to evaluate")
    if k < 1:
        raise SimgymError(f"k must be at least 1, not {k}")
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        raise SimgymError(f"unknown backend(s) {unknown}; use {list(BACKENDS)}")
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    reward = build_reward(None)  # each task's own reward spec
    results: dict[str, Any] = {}
    described: dict[str, Any] = {}
    for backend in backends:
        # A policy given by name is built for each backend (the weights are loaded once
        # per process) and closed after it.
        policy = create_agent(agent, **(agent_options or {}))
        described = policy.describe()
        path = out / f"{backend}.jsonl" if out is not None else None
        started = time.perf_counter()
        try:
            played = await _play(
                backend,
                task_list,
                policy,
                reward,
                k=k,
                path=path,
                on_done=on_done,
                world_model=world_model,
                world_model_options=world_model_options or {},
                grounding=grounding,
                perturbations=perturbations,
                max_turns=max_turns,
                concurrency=concurrency,
            )
        finally:
            close = getattr(policy, "aclose", None)
            if close is not None and isinstance(agent, str):
                await close()
        seconds = time.perf_counter() - started
        episodes = episodes_of(path, task_list, k, described) if path is not None else played
        results[backend] = summarize(episodes, seconds)
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "condition": condition,
        "policy": described,
        "world_model": {
            "name": world_model if isinstance(world_model, str) else world_model.describe(),
            "options": world_model_options or {},
            "grounding": grounding,
        },
        **({"perturbations": perturbations.model_dump()} if perturbations else {}),
        "k": k,
        "max_turns": max_turns,
        "tasks": [t.id for t in task_list],
        "backends": results,
    }
    if "real" in results and "sim" in results:
        report["gap"] = gap(results["sim"], results["real"])
    if out is not None:
        (out / REPORT).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


async def _play(
    backend: str,
    tasks: list[Task],
    policy: Agent,
    reward: Any,
    *,
    k: int,
    path: Path | None,
    on_done: Callable[[Trajectory], None] | None,
    world_model: str | WorldModel,
    world_model_options: dict[str, Any],
    grounding: str,
    perturbations: Perturbations | None,
    max_turns: int,
    concurrency: int,
) -> list[Trajectory]:
    """Play every task ``k`` times on one backend; return the episodes played now."""
    common: dict[str, Any] = {
        "agent": policy,
        "reward": reward,
        "group_size": k,
        "out": path,
        "on_done": on_done,
    }
    if backend == "real":
        from simgym.safety.real import FreshWorlds

        executor = FreshWorlds(
            policy, reward, max_turns=max_turns, concurrency=concurrency, backend=_real_world
        )
        return await arollout(tasks, world_model="real", executor=executor, **common)
    return await arollout(
        tasks,
        world_model=world_model,
        world_model_options=world_model_options,
        max_turns=max_turns,
        concurrency=concurrency,
        env_options={"grounding": grounding, "perturbations": perturbations},
        **common,
    )


def evaluate(tasks: Iterable[Task], **options: Any) -> dict[str, Any]:
    """Blocking :func:`aevaluate`."""
    return run_sync(aevaluate(list(tasks), **options))


def _rate(cell: dict[str, Any]) -> str:
    low, high = cell["ci95"]
    return f"{cell['success_rate']:.2f} [{low:.2f}, {high:.2f}]"


def report_table(report: dict[str, Any]) -> Any:
    """The report as a rich table: one row per backend, then the gap."""
    from rich.table import Table

    table = Table(
        title=f"sim2real: {report['condition']} ({report['policy'].get('name')}), "
        f"{len(report['tasks'])} tasks x k={report['k']}"
    )
    columns = (
        "backend",
        "episodes",
        "successes",
        "success [95% CI]",
        "errors",
        "turns",
        "episode s",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "backend" else "right", no_wrap=True)
    for name, cell in report["backends"].items():
        seconds = cell.get("episode_seconds")
        table.add_row(
            name,
            str(cell["episodes"]),
            str(cell["successes"]),
            _rate(cell),
            str(cell["errors"]),
            f"{cell['mean_turns']:.1f}",
            "" if seconds is None else f"{seconds:.0f}",
        )
    if "gap" in report:
        low, high = report["gap"]["ci95"]
        table.add_row(
            "gap (sim - real)",
            "",
            "",
            f"{report['gap']['sim_minus_real']:+.2f} [{low:+.2f}, {high:+.2f}]",
            "",
            "",
            "",
        )
        paired = report["gap"].get("paired")
        if paired:  # reports written before the paired interval have none
            low, high = paired["ci95"]
            table.add_row(
                "gap, paired by task",
                str(paired["tasks"]),
                "",
                f"{paired['sim_minus_real']:+.2f} [{low:+.2f}, {high:+.2f}]",
                "",
                "",
                "",
            )
    met = [(name, c["faults"]) for name, c in report["backends"].items() if "faults" in c]
    table.caption = "; ".join(f"{name}: {_fault_text(f)}" for name, f in met) or None
    return table


def _fault_text(faults: dict[str, Any]) -> str:
    return (
        f"{faults['faults']} faults in {faults['episodes']} episodes ({faults['solved']} "
        f"solved); next turn: retried {faults['retried']}, other {faults['other']}, "
        f"answered {faults['answered']}, no turn left {faults['out_of_turns']}"
    )


def _difference_text(cell: dict[str, Any], base: dict[str, Any]) -> str:
    """``cell``'s success minus ``base``'s: Newcombe's interval, then the paired one."""
    d = difference(cell, base)
    paired = d["paired"]
    return f"{_interval(d['difference'], d['ci95'])}; " + _interval(
        paired["difference"], paired["ci95"]
    )


def _interval(value: float, ci: list[float]) -> str:
    return f"{value:+.2f} [{ci[0]:+.2f}, {ci[1]:+.2f}]"


def conditions_table(reports: Sequence[dict[str, Any]], baseline: str = "untrained") -> str:
    """A markdown table of several conditions' reports (same tasks): real and sim success,
    the gap, and each condition's real success minus the ``baseline`` condition's (the
    question sim2real asks: did training help on the real server?), where both ran the
    same tasks."""
    base = next((r for r in reports if r["condition"] == baseline), None)
    lines = [
        "| condition | real success [95% CI] | sim success [95% CI] | gap, sim - real "
        "(Newcombe; paired) | real minus " + baseline + " (Newcombe; paired) | episodes |",
        "|---|---|---|---|---|---|",
    ]
    for report in reports:
        cells = report["backends"]
        real, sim = cells.get("real"), cells.get("sim")
        gap_text = ""
        if "gap" in report:
            g = report["gap"]
            gap_text = _interval(g["sim_minus_real"], g["ci95"])
            if "paired" in g:
                gap_text += "; " + _interval(g["paired"]["sim_minus_real"], g["paired"]["ci95"])
        gain = ""
        same_tasks = base is not None and base["tasks"] == report["tasks"]
        if same_tasks and base is not report and real and "real" in base["backends"]:
            gain = _difference_text(real, base["backends"]["real"])
        episodes = " / ".join(str(c["episodes"]) for c in (real, sim) if c)
        lines.append(
            f"| {report['condition']} | {_rate(real) if real else ''} | "
            f"{_rate(sim) if sim else ''} | {gap_text} | {gain} | {episodes} |"
        )
    return "\n".join(lines)


def faults_table(reports: Sequence[dict[str, Any]], baseline: str = "sim-sft") -> str:
    """A markdown table of policies played in a twin with injected faults (the ``sim``
    side of each report): success, success minus the ``baseline`` condition's on the same
    tasks, and what each policy did on the turn after a fault."""
    base = next((r for r in reports if r["condition"] == baseline), None)
    lines = [
        "| condition | twin success with faults [95% CI] | minus "
        + baseline
        + " (Newcombe; paired) | faults | next turn: retried / other / answered / none left"
        " | episodes with a fault: solved |",
        "|---|---|---|---|---|---|",
    ]
    for report in reports:
        sim = report["backends"].get("sim")
        if sim is None:
            continue
        gain = ""
        if base is not None and base is not report and base["tasks"] == report["tasks"]:
            gain = _difference_text(sim, base["backends"]["sim"])
        f = sim.get("faults") or after_faults([])
        after = f"{f['retried']} / {f['other']} / {f['answered']} / {f['out_of_turns']}"
        lines.append(
            f"| {report['condition']} | {_rate(sim)} | {gain} | {f['faults']} | {after} | "
            f"{f['solved']} of {f['episodes']} |"
        )
    return "\n".join(lines)
