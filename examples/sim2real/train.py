"""Train a sim2real policy: demonstrations kept by the reward on one backend, then SFT.

    .venv/bin/python examples/sim2real/train.py --condition sim-sft --backend sim
    .venv/bin/python examples/sim2real/train.py --condition real-sft --backend real
    .venv/bin/python examples/sim2real/train.py --condition sim-faults-sft \\
        --curriculum linear:0:0.75
    .venv/bin/python examples/sim2real/run.py --condition sim-sft \\
        --model-path examples/sim2real/runs/sim-sft/run/policy.gguf --k 3 --tasks 21

The sampler (``--sampler``, default ``reader``) plays the first ``--train-tasks`` training
tasks ``--k`` times on ``--backend``: ``sim`` is the twin (the embedded world model, strict
grounding), ``real`` the records server itself. The episodes its reward accepts become
rows in the local agent's own prompt format, and the embedded SmolLM2 is fine-tuned on them
(LoRA, whole episodes) and exported to ``runs/CONDITION/run/policy.gguf``. Held-out tasks
are never used. Every stage resumes: rerun the same command after an interruption.

``--curriculum SCHEDULE:START:END`` is the controlled condition: the twin injects faults a
retry can clear (timeouts, rate limits, server errors, ...) at a rate that rises over the
training tasks, collected in ``--stages`` shares; the reader sends a failed call again (up
to ``--retries`` times), and the rows are trained in order, easy to hard, every epoch.

A second round of rejection sampling samples from the first round's policy and continues
from it::

    .venv/bin/python examples/sim2real/train.py --condition sim-rft2 --k 3 \\
        --sampler examples/sim2real/runs/sim-sft/run/policy.gguf \\
        --base examples/sim2real/runs/sim-sft/run/policy.gguf --epochs 1 --lr 2e-4
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from simgym.agents import create_agent
from simgym.bench.sim2real import SUITES, ReaderAgent, get_suite
from simgym.perturb import Curriculum
from simgym.train.base import file_sha256
from simgym.train.sft import MANIFEST
from simgym.train.sim2real import (
    collect,
    collect_curriculum,
    faults_met,
    train_policy,
    write_rows,
)

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--condition", default="sim-sft", help="label of the trained policy")
    parser.add_argument("--backend", choices=("sim", "real"), default="sim")
    parser.add_argument(
        "--suite", choices=sorted(SUITES), default="records", help="the environment's tasks"
    )
    parser.add_argument("--sampler", default="reader", help="reader, or a GGUF policy file")
    parser.add_argument("--train-tasks", type=int, default=70)
    parser.add_argument("--k", type=int, default=1, help="samples per training task")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--seed", type=int, default=0, help="training seed (data order, LoRA init)")
    parser.add_argument(
        "--base",
        help="the model to fine-tune (default: the embedded SmolLM2); a later round "
        "continues from the last round's policy.gguf",
    )
    parser.add_argument("--threads", type=int, help="torch threads (default: all cores)")
    parser.add_argument(
        "--curriculum", help="faults in the twin, SCHEDULE:START:END (steps: the tasks)"
    )
    parser.add_argument("--stages", type=int, default=5, help="curriculum stages")
    parser.add_argument("--retries", type=int, default=3, help="reader retries of a fault")
    parser.add_argument("--max-turns", type=int, help="default: 6, or 10 with --curriculum")
    parser.add_argument("--out", type=Path, help="default: runs[-SUITE]/CONDITION")
    parser.add_argument(
        "--results",
        type=Path,
        help="training record (default: results[-SUITE]/CONDITION/training.json)",
    )
    args = parser.parse_args(argv)
    console = Console()
    suite = get_suite(args.suite)
    out = args.out or HERE / f"runs{suite.suffix}" / args.condition
    tasks = suite.training(args.train_tasks)
    faults = args.curriculum is not None
    if faults and args.backend != "sim":
        parser.error("--curriculum injects faults into the twin: use --backend sim")
    max_turns = args.max_turns or (10 if faults else 6)
    sampler: Any = ReaderAgent(tasks, retries=args.retries if faults else 0)
    if args.sampler != "reader":  # a policy that samples its own attempts (a later round)
        sampler = create_agent("local", model_path=args.sampler, sample_seeds=True)
    if faults:
        spec = f"{args.curriculum}:{len(tasks)}" if args.curriculum.count(":") == 2 else None
        curriculum = Curriculum.parse(spec or args.curriculum)
        got = collect_curriculum(
            tasks,
            sampler,
            out / "collect",
            curriculum,
            stages=args.stages,
            domain=suite.domain,
            k=args.k,
            max_turns=max_turns,
        )
    else:
        got = collect(
            tasks, sampler, out / "collect", backend=args.backend, k=args.k, max_turns=max_turns
        )
    rows = write_rows(got.kept, out / "rows.jsonl")
    met = faults_met(got.kept)
    console.print(
        f"kept {len(got.kept)} of {got.episodes} episodes on {args.backend} "
        f"(acceptance {got.acceptance:.2f}), {met} faults met in them: {rows} rows"
    )
    policy = train_policy(
        out / "rows.jsonl",
        out / "run",
        epochs=args.epochs,
        lr=args.lr,
        threads=args.threads,
        order="sequential" if faults else "random",
        base=args.base,
        seed=args.seed,
    )
    summary = {
        "condition": args.condition,
        "suite": args.suite,
        "backend": args.backend,
        "sampler": args.sampler,
        "base": args.base,
        "train_tasks": args.train_tasks,
        "k": args.k,
        "episodes": got.episodes,
        "kept": len(got.kept),
        "curriculum": args.curriculum,
        "faults_met": met,
        "rows": rows,
        "policy": str(policy),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    record = args.results or HERE / f"results{suite.suffix}" / args.condition / "training.json"
    write_training_record(record, summary, out / "run", policy)
    console.print(f"policy: {policy}\ntraining record: {record}")
    return 0


KEPT_OPTIONS = (
    "base",
    "mode",
    "epochs",
    "batch_size",
    "lr",
    "max_length",
    "layout",
    "order",
    "seed",
)


def write_training_record(path: Path, summary: dict[str, Any], run: Path, policy: Path) -> None:
    """What was collected and trained, and which policy file came out, beside the
    condition's evaluation report (the run folder itself is too large to keep)."""
    manifest = json.loads((run / MANIFEST).read_text(encoding="utf-8"))
    result = manifest.get("result") or {}
    record = {
        "collection": {k: v for k, v in summary.items() if k not in ("condition", "policy")},
        "options": {k: manifest["options"].get(k) for k in KEPT_OPTIONS},
        "result": {
            k: result.get(k)
            for k in ("steps", "tokens", "seconds", "tokens_per_second", "train_loss")
        },
        "policy": {
            "file": str(policy.relative_to(HERE)) if policy.is_relative_to(HERE) else str(policy),
            "sha256": file_sha256(policy),
            "bytes": policy.stat().st_size,
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
