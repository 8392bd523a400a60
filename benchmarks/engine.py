"""Engine benchmarks: framework overhead, throughput against a fixed-latency server, and
prompt prefix reuse between consecutive requests of an episode.

    .venv/bin/python benchmarks/engine.py            # all three, about a minute
    .venv/bin/python benchmarks/engine.py --quick    # smaller runs

All numbers come from one run on one machine; compare ratios, not absolute times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from fixed_latency_server import running  # beside this script
from rich.console import Console
from rich.table import Table

import simgym
from simgym import FunctionWorldModel, OpenAIWorldModel, Task

SCREEN = (
    "dev@devbox:~$ ls -la\n"
    + "\n".join(
        f"-rw-r--r-- 1 dev dev {1000 + i:>6} Dec  2 14:{i:02d} file_{i:02d}.txt" for i in range(8)
    )
    + "\ndev@devbox:~$"
)
ANSWER = f"<predicted_observation>\n{SCREEN}\n</predicted_observation>"


def overhead(steps: int) -> dict[str, float]:
    """Time per step with a backend that answers instantly, minus nothing: everything
    measured is simgym's own work (validation, rendering, parsing, checks, records)."""
    backend = FunctionWorldModel(lambda messages: ANSWER)

    async def main() -> float:
        env = simgym.make("terminal", world_model=backend, max_turns=10**9)
        await env.reset(Task(id="bench"))
        for _ in range(200):  # warm-up
            await env.step("ls -la")
        per_episode = 50
        start = time.perf_counter()
        done = 0
        while done < steps:
            await env.reset(Task(id="bench"))
            for _ in range(per_episode):
                await env.step("ls -la")
            done += per_episode
        return (time.perf_counter() - start) / done

    per_step = asyncio.run(main())
    return {"ms_per_step": per_step * 1e3, "steps": steps}


def throughput(episodes: int, turns: int, limits: list[int], delay: float) -> list[dict]:
    with running(delay) as base:
        results = []
        for limit in limits:
            ok, elapsed = asyncio.run(_drive(base, limit, episodes, turns))
            ideal = limit / delay
            rate = ok / elapsed
            results.append(
                {
                    "limit": limit,
                    "steps": ok,
                    "expected": episodes * turns,
                    "seconds": elapsed,
                    "steps_per_s": rate,
                    "ideal": ideal,
                    "share_of_ideal": rate / ideal,
                }
            )
        return results


async def _drive(base: str, limit: int, episodes: int, turns: int) -> tuple[int, float]:
    """All episodes at once through one shared backend; returns (good steps, seconds)."""
    backend = OpenAIWorldModel(
        base_url=base, model="fixed", max_concurrency=limit, max_retries=0, timeout=60
    )

    async def episode(i: int) -> int:
        env = simgym.make("terminal", world_model=backend, validation_retries=0)
        await env.reset(Task(id=f"e{i}"))
        ok = 0
        for _ in range(turns):
            res = await env.step("ls -la")
            ok += res.observation.kind == "observation"
        return ok

    await episode(-1)  # connect and warm up
    start = time.perf_counter()
    ok = sum(await asyncio.gather(*(episode(i) for i in range(episodes))))
    elapsed = time.perf_counter() - start
    await backend.aclose()
    return ok, elapsed


MCP_ANSWER = '<predicted_observation>{"id": "C-1001", "name": "Ana Lima"}</predicted_observation>'
DOMAIN_RUNS = (
    ("terminal", "ls -la", ANSWER),
    ("mcp", {"name": "get_customer", "arguments": {"customer_id": "C-1001"}}, MCP_ANSWER),
)


def _chat_text(messages) -> str:
    """The prompt as a ChatML-style template lays it out, which is what a server caches."""
    return "".join(f"<|{m['role']}|>\n{m['content']}<|end|>\n" for m in messages)


def prefix_share(episodes: int, turns: int) -> list[dict]:
    """For each request after an episode's first, the share of its prompt (as a chat
    template lays it out) that repeats the previous request of the episode as a prefix.

    The most any layout can reach is len(previous) / len(current): the new observation
    and action are new text by necessity. ``full_reuse`` counts requests that repeat the
    whole previous request, i.e. reach that ceiling.
    """
    rows = []

    async def run(domain: str, action, answer: str) -> list[tuple[int, float, bool]]:
        out = []
        for i in range(episodes):
            seen: list[str] = []

            def recorder(messages, seen=seen, answer=answer):
                seen.append(_chat_text(messages))
                return answer

            env = simgym.make(domain, world_model=FunctionWorldModel(recorder), max_turns=turns)
            await env.reset(Task(id=f"{domain}-{i}", instruction="Explore the system."))
            for _ in range(turns):
                await env.step(action)
            for k, (prev, cur) in enumerate(zip(seen, seen[1:], strict=False), 2):
                common = len(os.path.commonprefix([prev, cur]))
                out.append((k, common / len(cur), common == len(prev)))
        return out

    for domain, action, answer in DOMAIN_RUNS:
        samples = asyncio.run(run(domain, action, answer))
        shares = [s for _, s, _ in samples]
        late = [s for k, s, _ in samples if k > turns // 2]
        rows.append(
            {
                "domain": domain,
                "requests": len(samples),
                "mean": sum(shares) / len(shares),
                "turn2": min(s for k, s, _ in samples if k == 2),
                "late": sum(late) / len(late),
                "full_reuse": sum(f for _, _, f in samples) / len(samples),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.1)
    parser.add_argument("--limits", default="16,32,64")
    args = parser.parse_args()
    console = Console()
    if args.quick:
        args.episodes, args.turns = 200, 3

    o = overhead(2000 if args.quick else 10000)
    t = Table(title="1. framework overhead (instant in-process backend)")
    t.add_column("steps")
    t.add_column("ms / step")
    t.add_column("target")
    t.add_row(str(o["steps"]), f"{o['ms_per_step']:.3f}", "< 0.5 ms")
    console.print(t)

    limits = [int(x) for x in args.limits.split(",")]
    rows = throughput(args.episodes, args.turns, limits, args.delay)
    t = Table(
        title=f"2. {args.episodes} concurrent episodes x {args.turns} steps, "
        f"server answers after {args.delay * 1000:.0f} ms"
    )
    for col in (
        "concurrency limit",
        "steps ok",
        "seconds",
        "steps/s",
        "ideal steps/s",
        "share of ideal",
        "target",
    ):
        t.add_column(col)
    for r in rows:
        t.add_row(
            str(r["limit"]),
            f"{r['steps']}/{r['expected']}",
            f"{r['seconds']:.2f}",
            f"{r['steps_per_s']:.1f}",
            f"{r['ideal']:.0f}",
            f"{r['share_of_ideal']:.1%}",
            ">= 80%",
        )
    console.print(t)

    turns = 20
    rows = prefix_share(10 if args.quick else 40, turns)
    t = Table(title=f"3. prompt prefix reuse, episodes of {turns} turns")
    for col in (
        "domain",
        "requests",
        "mean share",
        "turn 2",
        f"turns {turns // 2 + 1}-{turns}",
        "whole previous request reused",
        "target",
    ):
        t.add_column(col)
    for r in rows:
        t.add_row(
            r["domain"],
            str(r["requests"]),
            f"{r['mean']:.2%}",
            f"{r['turn2']:.2%}",
            f"{r['late']:.2%}",
            f"{r['full_reuse']:.0%}",
            ">= 95%",
        )
    console.print(t)


if __name__ == "__main__":
    main()
