"""Write what verl needs to train a sim2real policy with GRPO in the twin (see VERL.md).

    python examples/sim2real/verl_prepare.py --out verl_sim2real          # embedded world model
    python examples/sim2real/verl_prepare.py --out verl_sim2real --faults 0.5 \\
        --world-model openai --base-url http://127.0.0.1:8000/v1 --wm-model agentworld

The worlds are the twin of the customer-records server that ``train.py`` trains in: the
training tasks' generated banks (never the held-out records), strict grounding, the
tasks' own rewards (a ``contains`` check on lookups, ``state`` checks on updates and
tickets). ``--faults LEVEL`` injects the faults a retry can clear at that curriculum level
into every world. Validation tasks come from other generated banks, not the held-out set.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from simgym.bench.sim2real import training_tasks
from simgym.integrations.verl import write_verl_recipe
from simgym.train.sim2real import fault_plan

VAL_SEED = 1000  # validation banks: far from the training banks' seeds (0, 1, ...)


def main(argv: list[str] | None = None) -> dict[str, Path]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("verl_sim2real"))
    parser.add_argument("--train-tasks", type=int, default=700)
    parser.add_argument("--val-tasks", type=int, default=28)
    parser.add_argument("--faults", type=float, help="fault level in the twin, 0 to 1")
    parser.add_argument("--world-model", default="local", help="local, openai, or module:attr")
    parser.add_argument("--base-url", help="the world model's server (openai)")
    parser.add_argument("--wm-model", help="the world model's name on that server")
    parser.add_argument("--max-turns", type=int, default=10, help="steps per episode")
    args = parser.parse_args(argv)

    options: dict[str, Any] = {}
    if args.base_url:
        options["base_url"] = args.base_url
    if args.wm_model:
        options["model"] = args.wm_model
    train = training_tasks(args.train_tasks)
    val = training_tasks(args.val_tasks, seed=VAL_SEED)
    # Every task carries its own bank; the scenario here only gives the tools' schemas,
    # which every bank shares.
    paths = write_verl_recipe(
        args.out,
        train,
        val,
        "mcp",
        train[0].scenario,
        data_source="sim2real",
        world_model=args.world_model,
        world_model_options=options,
        env_options={"max_turns": args.max_turns, "grounding": "strict"},
        perturbations=fault_plan(args.faults) if args.faults else None,
    )
    for name, path in paths.items():
        print(f"{name:13} {path}")
    return paths


if __name__ == "__main__":
    main()
