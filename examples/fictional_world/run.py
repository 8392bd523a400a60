"""An agent on 50 verifiable tasks of a generated fictional world, with faults injected.

    .venv/bin/python examples/fictional_world/run.py                      # offline, seconds
    .venv/bin/python examples/fictional_world/run.py --difficulty 0.6 --tasks 100
    .venv/bin/python examples/fictional_world/run.py --agent openai \\
        --agent-base-url http://127.0.0.1:8001/v1 --world-model openai \\
        --base-url http://127.0.0.1:8000/v1                               # real models

The world (a seeded, internally consistent relational world) is served two ways: as web
pages behind the simulated search engine, and as records behind a simulated MCP server.
Half the tasks are questions over the search pages, half are lookups and updates over the
MCP tools; every task carries its ground-truth answer and reward spec. The same tasks run
twice in one go, without and with perturbations (faults picked per turn, reproducibly from
the seed), and the script prints the reward distribution of both, by task kind.

Offline defaults: the world model is the world's own oracle (it answers straight from the
world's tables) and the agents are two readers of the reference solution: each plays the
solution's calls and answers only if every call came back with a usable result; the naive
one gives up at the first failed call, the persistent one retries a failed call up to
three times. Neither sees a fault's label, only what the environment shows. Give
``--agent openai``/``local`` and ``--world-model local``/``openai`` for real models.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter, defaultdict
from typing import Any

from rich.console import Console
from rich.table import Table

import simgym
from simgym.agents import Decision, EpisodeView
from simgym.perturb import perturbations_for_level
from simgym.worlds import generate_tasks, generate_world, oracle_actions, world_oracle

# What a failed call looks like from the agent's side (no labels: only the text it sees).
FAILURE_SIGNS = (
    '"error"',
    '"isError": true',
    "Error:",
    "error:",
    "timed out",
    "Timeout",
    "denied",
    "No results",
    "Too Many Requests",
    "429",
    "unavailable",
    "try again",
    "dialog",
    "has_more",
    "next_cursor",
    "truncated",
    "partial",
)


class Reader:
    """Plays a reference solution, checks each result, retries failed calls ``retries``
    times, and answers only when every call succeeded (else it admits failure)."""

    def __init__(self, plans: dict[str, list[Any]], retries: int) -> None:
        self.plans = plans
        self.retries = retries
        self.name = f"reader(retries={retries})"

    async def start(self, view: EpisodeView) -> _ReaderSession:
        return _ReaderSession(self.plans[view.task_id], self.retries)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


class _ReaderSession:
    def __init__(self, plan: list[Any], retries: int) -> None:
        *self.calls, self.final = plan
        self.retries = retries
        self.next = 0
        self.tries = 0
        self.messages: list[dict[str, Any]] = []

    async def act(self, observation: str) -> Decision:
        if self.next > 0 or self.tries > 0:  # judge the result of the call just made
            if any(sign in observation for sign in FAILURE_SIGNS):
                if self.tries > self.retries:
                    return Decision(answer="I could not get the information.")
                self.next -= 1  # retry the same call
            else:
                self.tries = 0
        if self.next >= len(self.calls):
            return Decision(answer=self.final["answer"])
        call = self.calls[self.next]
        self.next += 1
        self.tries += 1
        return Decision(action=call)


def build_tasks(world, count: int, seed: int) -> list[simgym.Task]:
    search = generate_tasks(world, count // 2, domain="search", seed=seed)
    mcp = generate_tasks(world, count - count // 2, domain="mcp", seed=seed)
    return search + mcp


async def run(
    args: argparse.Namespace, tasks, world, level: float, retries: int
) -> list[simgym.Trajectory]:
    if args.agent == "reader":
        agent: Any = Reader({t.id: oracle_actions(world, t) for t in tasks}, retries)
        agent_options: dict[str, Any] = {}
    else:
        agent = args.agent
        agent_options = {"base_url": args.agent_base_url, "model": args.agent_model}
        agent_options = {k: v for k, v in agent_options.items() if v}
    if args.world_model == "oracle":
        world_model: Any = simgym.FunctionWorldModel(world_oracle(world), name="world-oracle")
        wm_options: dict[str, Any] = {}
    else:
        world_model = args.world_model
        wm_options = {"base_url": args.base_url, "model": args.model}
        wm_options = {k: v for k, v in wm_options.items() if v}
    env_options: dict[str, Any] = {"state_updates": True}  # update tasks check the state
    if level > 0:
        env_options["perturbations"] = perturbations_for_level(level, seed=args.seed)
    return await simgym.arollout(
        tasks,
        agent=agent,
        agent_options=agent_options,
        world_model=world_model,
        world_model_options=wm_options,
        concurrency=args.concurrency,
        max_turns=args.max_turns,
        seed=args.seed,
        env_options=env_options,
    )


def report(console: Console, runs: dict[str, list[simgym.Trajectory]]) -> None:
    table = Table(title="reward by task kind (mean, and episodes scoring 0 / partial / 1)")
    table.add_column("task kind")
    for label in runs:
        table.add_column(f"{label}: mean", justify="right")
        table.add_column(f"{label}: 0/part/1", justify="right")
    kinds = sorted({t.task.metadata["kind"] for run in runs.values() for t in run})
    for kind in [*kinds, "all"]:
        row = [kind]
        for trajectories in runs.values():
            group = [t for t in trajectories if kind == "all" or t.task.metadata["kind"] == kind]
            rewards = [t.total_reward for t in group]
            zero = sum(r == 0 for r in rewards)
            full = sum(r >= 1 for r in rewards)
            mean = sum(rewards) / len(rewards) if rewards else 0.0
            row += [f"{mean:.3f}", f"{zero}/{len(rewards) - zero - full}/{full}"]
        table.add_row(*row)
    console.print(table)
    faults = Counter(
        turn.perturbation["fault"]
        for run in runs.values()
        for t in run
        for turn in t.turns
        if turn.perturbation
    )
    if faults:
        console.print("faults injected: " + ", ".join(f"{k} {v}" for k, v in faults.most_common()))
    histogram: dict[str, Counter] = defaultdict(Counter)
    for label, run in runs.items():
        for t in run:
            histogram[label][round(t.total_reward, 1)] += 1
    for label, counts in histogram.items():
        bins = "  ".join(f"{k:.1f}: {v}" for k, v in sorted(counts.items()))
        console.print(f"reward histogram ({label}): {bins}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--theme", default="2029 smartphone market")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--difficulty", type=float, default=0.4, help="fault level, 0 to 1")
    parser.add_argument("--agent", default="reader", help="reader | openai | local")
    parser.add_argument("--agent-base-url")
    parser.add_argument("--agent-model")
    parser.add_argument("--world-model", default="oracle", help="oracle | local | openai")
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-turns", type=int, default=40)
    args = parser.parse_args()

    console = Console()
    world = generate_world(args.theme, args.seed)
    tasks = build_tasks(world, args.tasks, args.seed)
    console.print(
        f"world {world.name!r} ({args.theme}, seed {args.seed}): "
        f"{sum(len(rows) for rows in world.tables.values())} rows; {len(tasks)} tasks"
    )
    faults = f"faults {args.difficulty:g}"
    if args.agent == "reader":
        runs = {
            "no faults": asyncio.run(run(args, tasks, world, 0.0, 0)),
            f"{faults} naive": asyncio.run(run(args, tasks, world, args.difficulty, 0)),
            f"{faults} retry": asyncio.run(run(args, tasks, world, args.difficulty, 3)),
        }
    else:
        runs = {
            "no faults": asyncio.run(run(args, tasks, world, 0.0, 0)),
            faults: asyncio.run(run(args, tasks, world, args.difficulty, 0)),
        }
    report(console, runs)


if __name__ == "__main__":
    main()
