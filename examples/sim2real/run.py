"""Sim2real on the records MCP server, a real shell or a real search engine: real vs twin.

    .venv/bin/python examples/sim2real/run.py --condition untrained --k 3 --tasks 7
    .venv/bin/python examples/sim2real/run.py --condition sim-rft --model-path policy.gguf
    .venv/bin/python examples/sim2real/run.py --write-tasks      # refresh tasks/*.jsonl
    .venv/bin/python examples/sim2real/run.py --condition sim-sft --backends sim \
        --faults 0.5 --max-turns 10 --out examples/sim2real/results-faults/sim-sft
    .venv/bin/python examples/sim2real/run.py --suite shell --condition reader --k 1 --tasks 21
    .venv/bin/python examples/sim2real/run.py --suite shell --condition untrained --tasks 21 \
        --rescore

Each held-out task is played ``k`` times on the real server (a fresh database per episode)
and on its simulated twin (the embedded world model, strict grounding). Episodes go to
``results/CONDITION/{real,sim}.jsonl`` (a rerun resumes), the numbers to
``results/CONDITION/report.json``, and a table to the terminal. ``--faults LEVEL`` injects
the faults a retry can clear into the twin at that curriculum level (robustness; the real
server meets none). ``--suite shell`` plays the terminal tasks instead: a bash shell in a
fresh sandbox per episode against the grounded ``terminal`` twin (``results-shell/``; trained
policies from ``runs-shell/``); ``--suite search`` a company wiki in the real full-text
engine (SQLite FTS5 over the Python docs, the wiki's pages added per episode) against the
grounded ``search`` twin (``results-search/``). ``--rescore`` scores a condition's stored
episodes again with the tasks' current checks (after a check is fixed) and rewrites its
report.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from simgym.bench.sim2real import (
    SUITES,
    ReaderAgent,
    conditions_table,
    evaluate,
    faults_table,
    get_suite,
    report_table,
    rescore,
)
from simgym.bench.sim2real.tasks import task_line
from simgym.train.sim2real import fault_plan

HERE = Path(__file__).resolve().parent

# What each condition's policy is. A trained condition adds its checkpoint here (or gives
# --model-path): the evaluation itself does not change.
# sample_seeds: the k samples of a task are k different draws, not one draw k times.
# Two calibrations: "reference" plays each task's reference solution as written, and
# "reader" follows the same plan but reads ids and answers from what the world shows
# (both solve every task on the real server; the reader's sim score is the twin's).
CONDITIONS: dict[str, dict[str, Any]] = {
    "untrained": {"agent": "local", "agent_options": {"sample_seeds": True}},
    "reference": {"agent": "scripted", "agent_options": {}},
    "reader": {"agent": "reader", "agent_options": {}},
}
# trained by train.py: SFT on the reader's demonstrations the twin's (or, for the baseline,
# the real server's) reward accepted; sim-faults-sft in the twin with a fault curriculum,
# sim-sft-seq its ablation without faults; sim-rft2 a second round from sim-sft's samples;
# sim-grpo GRPO in the twin from sim-sft-seq (grpo.py). The same local agent and settings as
# the untrained policy.
TRAINED = ("sim-sft", "real-sft", "sim-faults-sft", "sim-sft-seq", "sim-rft2", "sim-grpo")
for _trained in TRAINED:  # the policy file: runs[-SUITE]/CONDITION/run/policy.gguf
    CONDITIONS[_trained] = {"agent": "local", "agent_options": {"sample_seeds": True}}


def policy_file(suite: str, condition: str) -> Path:
    """Where train.py (or grpo.py) leaves ``condition``'s policy for ``suite``."""
    return HERE / f"runs{get_suite(suite).suffix}" / condition / "run" / "policy.gguf"


def write_tasks() -> None:
    """Every suite's task sets as JSONL (without the worlds, which the generators rebuild)."""
    folder = HERE / "tasks"
    folder.mkdir(exist_ok=True)
    for suite in map(get_suite, SUITES):
        for name, tasks in zip(suite.files, (suite.heldout(21), suite.training(70)), strict=True):
            lines = "".join(task_line(t) + "\n" for t in tasks)
            (folder / name).write_text(lines, encoding="utf-8")
            print(f"wrote {folder / name}: {len(tasks)} tasks")


def summary(folder: Path, baseline: str | None = None) -> str:
    """The reports under ``folder`` as one markdown table: the untrained policy first,
    trained conditions next, the calibrations last; each compared with ``baseline``
    (default: the untrained policy, or sim-sft in a twin with faults). Reports played in a
    twin with faults (``--faults``) get the faults table instead."""
    reports = [json.loads(p.read_text()) for p in sorted(folder.glob("*/report.json"))]
    calibrations = ("reference", "reader")

    def rank(report: dict[str, Any]) -> tuple[int, str]:
        name = report["condition"]
        return (0 if name == "untrained" else 2 if name in calibrations else 1, name)

    ordered = sorted(reports, key=rank)
    if any("perturbations" in r for r in reports):
        return faults_table(ordered, baseline or "sim-sft")
    return conditions_table(ordered, baseline or "untrained")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--condition", default="untrained", help="label of the policy")
    parser.add_argument("--agent", help="agent name (default: the condition's, else local)")
    parser.add_argument("--model-path", help="a GGUF policy for the local agent")
    parser.add_argument("--k", type=int, default=3, help="samples per task and backend")
    parser.add_argument("--tasks", type=int, default=7, help="the first N held-out tasks")
    parser.add_argument("--backends", default="real,sim", help="real, sim or both")
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--faults", type=float, help="fault level in the twin, 0 to 1")
    parser.add_argument(
        "--suite", choices=sorted(SUITES), default="records", help="the environment's tasks"
    )
    parser.add_argument("--out", type=Path, help="default: results[-SUITE]/CONDITION")
    parser.add_argument("--write-tasks", action="store_true", help="write tasks/*.jsonl, exit")
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="score CONDITION's stored episodes (--tasks as evaluated) with today's checks, exit",
    )
    parser.add_argument(
        "--summary", action="store_true", help="print every stored report as one table, exit"
    )
    parser.add_argument(
        "--baseline", help="the condition --summary compares with (untrained; faults: sim-sft)"
    )
    args = parser.parse_args(argv)
    if args.write_tasks:
        write_tasks()
        return 0
    suite = get_suite(args.suite)
    results = HERE / f"results{suite.suffix}"
    if args.summary:
        print(summary(args.out or results, args.baseline))
        return 0
    out = args.out or results / args.condition
    if args.rescore:
        report = rescore(out, suite.heldout(args.tasks))
        Console().print(report_table(report))
        print(f"changed: {report['rescored']['changed']}; report: {out / 'report.json'}")
        return 0
    policy = CONDITIONS.get(args.condition, CONDITIONS["untrained"])
    agent = args.agent or policy["agent"]
    options = dict(policy["agent_options"]) if agent == policy["agent"] else {}
    if args.model_path:
        options["model_path"] = args.model_path
    elif args.condition in TRAINED and agent == "local":
        options["model_path"] = str(policy_file(args.suite, args.condition))
    tasks = suite.heldout(args.tasks)
    policy_spec: Any = agent
    if agent == "scripted" and "by_task" not in options:
        options["by_task"] = {t.id: suite.reference(t) for t in tasks}
    if agent == "reader":  # not a registered agent: it is handed the task plans
        policy_spec, options = ReaderAgent(tasks, retries=3 if args.faults else 0), {}
    console = Console()
    report = evaluate(
        tasks,
        agent=policy_spec,
        agent_options=options,
        condition=args.condition,
        k=args.k,
        backends=[b.strip() for b in args.backends.split(",") if b.strip()],
        max_turns=args.max_turns,
        perturbations=fault_plan(args.faults, domain=suite.domain) if args.faults else None,
        out_dir=out,
        on_done=lambda t: console.print(
            f"[dim]{t.task.id}#{t.sample or 0} {t.world_model.get('backend', '?')}: "
            f"reward {t.total_reward:.2f}, {len(t.turns)} turns[/dim]"
        ),
    )
    console.print(report_table(report))
    console.print(f"report: {out / 'report.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
