"""Train a sim2real policy: demonstrations kept by the reward on one backend, then SFT.

    .venv/bin/python examples/sim2real/train.py --condition sim-sft --backend sim
    .venv/bin/python examples/sim2real/train.py --condition real-sft --backend real
    .venv/bin/python examples/sim2real/run.py --condition sim-sft \\
        --model-path examples/sim2real/runs/sim-sft/run/policy.gguf --k 3 --tasks 21

The sampler (``--sampler``, default ``reader``) plays the first ``--train-tasks`` training
tasks ``--k`` times on ``--backend``: ``sim`` is the twin (the embedded world model, strict
grounding), ``real`` the records server itself. The episodes its reward accepts become
rows in the local agent's own prompt format, and the embedded SmolLM2 is fine-tuned on them
(LoRA, whole episodes) and exported to ``runs/CONDITION/run/policy.gguf``. Held-out tasks
are never used. Every stage resumes: rerun the same command after an interruption.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from simgym.agents import create_agent
from simgym.bench.sim2real import ReaderAgent, training_tasks
from simgym.train.sim2real import collect, train_policy, write_rows

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--condition", default="sim-sft", help="label of the trained policy")
    parser.add_argument("--backend", choices=("sim", "real"), default="sim")
    parser.add_argument("--sampler", default="reader", help="reader, or a GGUF policy file")
    parser.add_argument("--train-tasks", type=int, default=70)
    parser.add_argument("--k", type=int, default=1, help="samples per training task")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--threads", type=int, help="torch threads (default: all cores)")
    parser.add_argument("--out", type=Path, help="default: runs/CONDITION")
    args = parser.parse_args(argv)
    console = Console()
    out = args.out or HERE / "runs" / args.condition
    tasks = training_tasks(args.train_tasks)
    sampler: Any = ReaderAgent(tasks)
    if args.sampler != "reader":  # a policy that samples its own attempts (a later round)
        sampler = create_agent("local", model_path=args.sampler, sample_seeds=True)
    got = collect(tasks, sampler, out / "collect", backend=args.backend, k=args.k)
    rows = write_rows(got.kept, out / "rows.jsonl")
    console.print(
        f"kept {len(got.kept)} of {got.episodes} episodes on {args.backend} "
        f"(acceptance {got.acceptance:.2f}): {rows} rows"
    )
    policy = train_policy(
        out / "rows.jsonl", out / "run", epochs=args.epochs, lr=args.lr, threads=args.threads
    )
    summary = {
        "condition": args.condition,
        "backend": args.backend,
        "sampler": args.sampler,
        "train_tasks": args.train_tasks,
        "k": args.k,
        "episodes": got.episodes,
        "kept": len(got.kept),
        "rows": rows,
        "policy": str(policy),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    console.print(f"policy: {policy}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
