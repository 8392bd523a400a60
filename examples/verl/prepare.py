"""Write what verl needs to train a policy in a simulated MCP server: a tool config, an
agent-loop config and train/validation datasets (Parquet), all in ``--out``.

    python examples/verl/prepare.py --out verl_simgym                       # embedded world model
    python examples/verl/prepare.py --out verl_simgym --world-model openai \\
        --base-url http://127.0.0.1:8000/v1 --wm-model agentworld           # a served LWM

The world is the mcp domain's default scenario (a bank's customer records); each task asks
a question whose answer is in the hidden records, and is scored by exact match on
``metadata["answer"]``. See README.md for the verl command line that uses these files.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import simgym
from simgym.integrations.verl import write_verl_recipe

QUESTIONS = [
    ("tier-c1001", "Which tier is customer C-1001 in? Answer with the tier only.", "gold"),
    ("tier-c1002", "Which tier is customer C-1002 in? Answer with the tier only.", "basic"),
    ("id-ana", "What is Ana Lima's customer id? Answer with the id only.", "C-1001"),
    ("id-ben", "What is Ben Okafor's customer id? Answer with the id only.", "C-1002"),
    (
        "email-c1001",
        "What is the email of customer C-1001? Answer with it only.",
        "ana.lima@example.com",
    ),
    ("email-ben", "What is Ben Okafor's email? Answer with the address only.", "ben@example.org"),
]


def tasks() -> list[simgym.Task]:
    return [
        simgym.Task(id=task_id, domain="mcp", instruction=question, metadata={"answer": answer})
        for task_id, question, answer in QUESTIONS
    ]


def main(argv: list[str] | None = None) -> dict[str, Path]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("verl_simgym"))
    parser.add_argument("--world-model", default="local", help="local, openai, or module:attr")
    parser.add_argument("--base-url", help="the world model's server (openai)")
    parser.add_argument("--wm-model", help="the world model's name on that server")
    parser.add_argument("--wm-max-tokens", type=int, default=256)
    parser.add_argument("--max-turns", type=int, default=8, help="tool calls per episode")
    parser.add_argument("--val", type=int, default=2, help="tasks held out for validation")
    args = parser.parse_args(argv)

    options: dict[str, Any] = {"max_tokens": args.wm_max_tokens}
    if args.base_url:
        options["base_url"] = args.base_url
    if args.wm_model:
        options["model"] = args.wm_model
    rows = tasks()
    paths = write_verl_recipe(
        args.out,
        rows[: len(rows) - args.val],
        rows[len(rows) - args.val :],
        "mcp",
        world_model=args.world_model,
        world_model_options=options,
        env_options={"max_turns": args.max_turns},
    )
    for name, path in paths.items():
        print(f"{name:13} {path}")
    return paths


if __name__ == "__main__":
    main()
