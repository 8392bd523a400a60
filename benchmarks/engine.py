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
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from rich.console import Console
from rich.table import Table

import simgym
from simgym import FunctionWorldModel, OpenAIWorldModel, Task

SCREEN = "dev@devbox:~$ ls -la\n" + "\n".join(
    f"-rw-r--r-- 1 dev dev {1000 + i:>6} Dec  2 14:{i:02d} file_{i:02d}.txt" for i in range(8)
) + "\ndev@devbox:~$"
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def throughput(episodes: int, turns: int, limits: list[int], delay: float) -> list[dict]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("fixed_latency_server.py")),
         "--port", str(port), "--delay", str(delay)],
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/models", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        results = []
        for limit in limits:
            backend = OpenAIWorldModel(base_url=base, model="fixed", max_concurrency=limit,
                                       max_retries=0, timeout=60)

            async def episode(i: int) -> int:
                env = simgym.make("terminal", world_model=backend, validation_retries=0)
                await env.reset(Task(id=f"e{i}"))
                ok = 0
                for _ in range(turns):
                    res = await env.step("ls -la")
                    ok += res.observation.kind == "observation"
                return ok

            async def main() -> tuple[int, float]:
                await episode(-1)  # connect and warm up
                start = time.perf_counter()
                ok = sum(await asyncio.gather(*(episode(i) for i in range(episodes))))
                elapsed = time.perf_counter() - start
                await backend.aclose()
                return ok, elapsed

            ok, elapsed = asyncio.run(main())
            ideal = limit / delay
            rate = ok / elapsed
            results.append({"limit": limit, "steps": ok, "expected": episodes * turns,
                            "seconds": elapsed, "steps_per_s": rate, "ideal": ideal,
                            "share_of_ideal": rate / ideal})
        return results
    finally:
        server.terminate()
        server.wait(10)


def prefix_share(episodes: int, turns: int) -> dict[str, float]:
    """For each request after an episode's first, the share of its prompt (as a chat
    template would lay it out) that is the previous request repeated as a prefix."""
    shares: list[float] = []
    last: dict[str, str] = {}

    def serialize(messages) -> str:
        return "".join(f"<|{m['role']}|>\n{m['content']}<|end|>\n" for m in messages)

    def world(messages) -> str:
        return ANSWER

    async def main() -> None:
        for domain, action in (("terminal", "ls -la"),
                               ("mcp", {"name": "get_customer", "arguments": {"customer_id": "C-1001"}})):
            for i in range(episodes):
                seen: list[str] = []

                def recorder(messages, seen=seen):
                    seen.append(serialize(messages))
                    return ANSWER if domain == "terminal" else \
                        '<predicted_observation>{"id": "C-1001", "name": "Ana Lima"}</predicted_observation>'

                env = simgym.make(domain, world_model=FunctionWorldModel(recorder), max_turns=turns)
                await env.reset(Task(id=f"{domain}-{i}", instruction="Explore the system."))
                for _ in range(turns):
                    await env.step(action)
                for prev, cur in zip(seen, seen[1:]):
                    common = len(os.path.commonprefix([prev, cur]))
                    shares.append(common / len(cur))
                last[domain] = seen[-1]

    asyncio.run(main())
    shares.sort()
    return {"requests": len(shares), "mean": sum(shares) / len(shares), "min": shares[0],
            "p10": shares[len(shares) // 10]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
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
    t = Table(title=f"2. {args.episodes} concurrent episodes x {args.turns} steps, "
              f"server answers after {args.delay * 1000:.0f} ms")
    for col in ("concurrency limit", "steps ok", "seconds", "steps/s", "ideal steps/s",
                "share of ideal", "target"):
        t.add_column(col)
    for r in rows:
        t.add_row(str(r["limit"]), f"{r['steps']}/{r['expected']}", f"{r['seconds']:.2f}",
                  f"{r['steps_per_s']:.1f}", f"{r['ideal']:.0f}", f"{r['share_of_ideal']:.1%}",
                  ">= 80%")
    console.print(t)

    p = prefix_share(20 if args.quick else 50, 10)
    t = Table(title="3. prompt prefix reuse between consecutive requests of an episode")
    for col in ("requests", "mean share", "p10", "min", "target"):
        t.add_column(col)
    t.add_row(str(p["requests"]), f"{p['mean']:.2%}", f"{p['p10']:.2%}", f"{p['min']:.2%}", ">= 95%")
    console.print(t)


if __name__ == "__main__":
    main()
