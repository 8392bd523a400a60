"""GRPO in the twin, through TRL, in the local agent's own format.

    .venv/bin/python examples/sim2real/grpo.py --condition sim-grpo \\
        --base examples/sim2real/runs/sim-sft-seq/run/policy.gguf --steps 40
    .venv/bin/python examples/sim2real/run.py --condition sim-grpo --k 3 --tasks 21

TRL's ``GRPOTrainer`` trains the policy (LoRA) with simgym's
:class:`~simgym.integrations.trl.rollout.LocalFormatRollout` as its ``rollout_func``: each
step plays ``--tasks-per-step`` training tasks ``--num-generations`` times in the twin (the
embedded world model, strict grounding), each episode a whole conversation in the format
the ``local`` agent is evaluated in, scored by the task's own reward. Only the policy's
replies are trained (``env_mask``). The trained adapter is merged and exported to
``runs/CONDITION/run/policy.gguf``; the step-by-step rewards go to
``results/CONDITION/training.json`` and every episode to ``runs/CONDITION/episodes.jsonl``.
Held-out tasks are never played. A rerun resumes from the last checkpoint.

Start from a policy that already writes tool calls (an SFT round, ``--base``): GRPO learns
only from groups whose rewards differ.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from simgym.bench.sim2real import training_tasks
from simgym.train.base import file_sha256

HERE = Path(__file__).resolve().parent


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--condition", default="sim-grpo", help="label of the trained policy")
    parser.add_argument(
        "--base",
        default=str(HERE / "runs" / "sim-sft-seq" / "run" / "policy.gguf"),
        help="the policy to start from (a GGUF file, or a Hugging Face folder)",
    )
    parser.add_argument("--train-tasks", type=int, default=70)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--num-generations", type=int, default=4, help="GRPO group size")
    parser.add_argument("--tasks-per-step", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=128, help="per reply")
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--save-steps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, help="torch threads (default: all cores)")
    parser.add_argument("--out", type=Path, help="default: runs/CONDITION")
    parser.add_argument(
        "--results", type=Path, help="training record (default: results/CONDITION/training.json)"
    )
    parser.add_argument(
        "--world-model", default="local", help="the twin's world model (default: embedded)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from simgym.core.worldmodel import create_world_model
    from simgym.integrations.trl.rollout import LocalFormatRollout
    from simgym.train.base import load_model, load_tokenizer
    from simgym.train.resume import reached, restore

    console = Console()
    if args.threads:
        torch.set_num_threads(args.threads)
    out = args.out or HERE / "runs" / args.condition
    run = out / "run"
    if (run / "policy.gguf").is_file():
        console.print(f"already trained: {run / 'policy.gguf'} (delete it to train again)")
        return 0
    tasks = training_tasks(args.train_tasks)
    rollout = LocalFormatRollout(
        tasks,
        world_model=create_world_model(args.world_model),
        env_options={"grounding": "strict"},
        max_turns=args.max_turns,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        trajectories=out / "episodes.jsonl",
        seed=args.seed,
    )
    model = load_model(args.base)
    tokenizer = load_tokenizer(args.base)
    group = args.num_generations
    config = GRPOConfig(
        output_dir=str(run),
        max_steps=args.steps,
        per_device_train_batch_size=group,
        gradient_accumulation_steps=args.tasks_per_step,
        num_generations=group,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        temperature=args.temperature,
        beta=0.0,  # no reference model: half the forward passes on a CPU
        logging_steps=1,
        save_steps=args.save_steps,
        save_only_model=False,
        report_to="none",
        seed=args.seed,
        use_cpu=not torch.cuda.is_available(),
        bf16=torch.cuda.is_available(),
        shuffle_dataset=True,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=rollout.train_dataset,
        reward_funcs=rollout.reward_funcs,
        rollout_func=rollout,
        peft_config=LoraConfig(
            r=args.lora_rank,
            lora_alpha=2 * args.lora_rank,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
        ),
    )
    started = time.perf_counter()
    last = sorted(run.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    if last and reached(last[-1], args.steps):
        restore(trainer, last[-1])  # resuming would take one step past --steps
    else:
        trainer.train(resume_from_checkpoint=str(last[-1]) if last else None)
    seconds = time.perf_counter() - started
    policy = export(trainer, tokenizer, run, args.base)
    steps = [r for r in trainer.state.log_history if "reward" in r]
    record = {
        "collection": {
            "backend": "sim",
            "sampler": "the policy itself (GRPO, local format)",
            "base": args.base,
            "train_tasks": args.train_tasks,
            "episodes": trainer.state.global_step * args.tasks_per_step * group,
        },
        "options": {
            "mode": "lora",
            "method": "grpo",
            "steps": args.steps,
            "num_generations": group,
            "tasks_per_step": args.tasks_per_step,
            "lr": args.lr,
            "temperature": args.temperature,
            "beta": 0.0,
            "lora_rank": args.lora_rank,
            "max_turns": args.max_turns,
            "seed": args.seed,
        },
        "result": {
            "steps": trainer.state.global_step,
            "seconds": round(seconds, 1),  # this invocation's (a resumed run: its share)
            "reward_by_step": [round(float(r["reward"]), 3) for r in steps],
            "reward_std_by_step": [round(float(r.get("reward_std", 0.0)), 3) for r in steps],
        },
        "policy": {
            "file": str(policy.relative_to(HERE)) if policy.is_relative_to(HERE) else str(policy),
            "sha256": file_sha256(policy),
            "bytes": policy.stat().st_size,
        },
    }
    path = args.results or HERE / "results" / args.condition / "training.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    console.print(f"rewards by step: {record['result']['reward_by_step']}")
    console.print(f"policy: {policy}\ntraining record: {path}")
    return 0


def export(trainer: Any, tokenizer: Any, run: Path, base: str) -> Path:
    """Merge the LoRA weights into the policy and write ``run/policy.gguf`` for the local
    agent, with the starting policy's GGUF file as the template."""
    from simgym.train.base import resolve_base
    from simgym.train.gguf_export import export_gguf

    policy = run / "policy.gguf"
    merged = trainer.accelerator.unwrap_model(trainer.model).merge_and_unload()
    template = resolve_base(base)
    export_gguf(
        merged,
        policy,
        out_type="q8_0",
        tokenizer=tokenizer,
        template=template if template.suffix == ".gguf" else None,
    )
    return policy


if __name__ == "__main__":
    raise SystemExit(main())
