"""Benchmark-runner throughput: `bench infer` against a server with a fixed latency,
compared with a sequential one-request-at-a-time loop over the same rows (the way the
reference AgentWorldBench script runs).

    .venv/bin/python benchmarks/bench.py                  # about a minute
    .venv/bin/python benchmarks/bench.py --concurrency 64 --rows 2560 --sequential-rows 100

Rows are synthetic AgentWorldBench rows (official layout, four domains, a few turns of
history each), written to a temporary folder and read back with the benchmark's loader.
simgym's runner does all of its real work per row: building the messages, the request,
parsing, the rule metrics and an append-and-flush of the results line. The sequential loop
uses the openai SDK's blocking client, one request at a time, over the first
``--sequential-rows`` of the same rows (at 200 ms a request, all 1280 would take over
four minutes; its rate does not depend on how many rows it runs). Both open their
connections before the clock starts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path

import openai
from fixed_latency_server import running  # beside this script
from rich.console import Console
from rich.table import Table

from simgym.bench.data import load_rows
from simgym.bench.infer import run_infer
from simgym.bench.messages import build_messages
from simgym.bench.store import read_rows
from simgym.worldmodels import OpenAIWorldModel

DOMAINS = ("terminal", "mcp", "search", "android")


def synthetic_rows(folder: Path, count: int, turns: int, seed: int = 0) -> None:
    """``count`` rows in the official layout, spread over four domain files."""
    rng = random.Random(seed)
    system = "# Role\n\nYou simulate the environment.\n\n" + "Rules of this world. " * 100
    files = {d: (folder / f"{d}_test.jsonl").open("w", encoding="utf-8") for d in DOMAINS}
    try:
        for i in range(count):
            domain = DOMAINS[i % len(DOMAINS)]
            prompts = [
                f"### Turn {t}\n\n**Action:**\n```json\n"
                f'{{"name": "tool_{t}", "arguments": {{"n": {rng.randint(0, 999)}}}}}\n```'
                for t in range(1, turns + 1)
            ]
            responses = [
                "**Environment Observation:**\n"
                + "\n".join(f"line {k}: value {rng.randint(0, 10**6)}" for k in range(12))
                for _ in range(turns)
            ]
            turn = rng.randint(1, turns)
            row = {
                "task": domain,
                "id": i,
                "prompt": prompts,
                "response": responses,
                "current_prompt": prompts[turn - 1],
                "system_str": system,
                "turn_idx": turn,
                "total_turns": turns,
            }
            files[domain].write(json.dumps(row) + "\n")
    finally:
        for f in files.values():
            f.close()


def simgym_runner(rows, base: str, concurrency: int, out: Path) -> tuple[int, float, float]:
    """``(rows written ok, seconds, CPU seconds)`` for one `bench infer` run (resume
    bookkeeping included: the output file starts empty)."""
    backend = OpenAIWorldModel(
        base_url=base, model="fixed", max_concurrency=concurrency, max_retries=0, timeout=60
    )

    async def main() -> float:
        # Open the connections first, as a long run would have them open.
        warm = build_messages(rows[0])
        await asyncio.gather(*(backend.predict(warm, max_tokens=16) for _ in range(concurrency)))
        start, cpu = time.perf_counter(), time.process_time()
        await run_infer(rows, backend, out, concurrency=concurrency, max_tokens=16)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        await backend.aclose()
        return elapsed, cpu

    elapsed, cpu = asyncio.run(main())
    written, _ = read_rows(out)
    return sum(r["status"] == "ok" for r in written), elapsed, cpu


def sequential_loop(rows, base: str) -> tuple[int, float]:
    """The reference script's way: one blocking request after another."""
    client = openai.OpenAI(base_url=base, api_key="EMPTY", max_retries=0)
    client.chat.completions.create(
        model="fixed", messages=build_messages(rows[0]), max_tokens=16
    )  # warm up
    ok = 0
    start = time.perf_counter()
    for row in rows:
        response = client.chat.completions.create(
            model="fixed", messages=build_messages(row), max_tokens=16
        )
        ok += bool(response.choices[0].message.content)
    return ok, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1280)
    parser.add_argument("--sequential-rows", type=int, default=50)
    parser.add_argument("--turns", type=int, default=4, help="turns per trajectory")
    parser.add_argument("--delay", type=float, default=0.2, help="server latency, seconds")
    parser.add_argument(
        "--concurrency",
        default="64,256,1024",
        help="rows in flight, one run each; a run has at least 3 x C rows",
    )
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]

    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        synthetic_rows(folder, max([args.rows] + [3 * c for c in levels]), args.turns)
        every = load_rows(folder)
        with running(args.delay) as base:
            for level in levels:
                rows = every[: max(args.rows, 3 * level)]
                out = folder / f"out-{level}.jsonl"
                runs.append((level, len(rows), *simgym_runner(rows, base, level, out)))
            seq_rows = every[: args.sequential_rows]
            seq_ok, seq_seconds = sequential_loop(seq_rows, base)

    seq_rate = seq_ok / seq_seconds
    table = Table(
        title=f"bench infer throughput, server latency {args.delay * 1000:.0f} ms "
        f"({args.turns}-turn rows)"
    )
    for col in (
        "runner",
        "rows ok",
        "seconds",
        "rows/s",
        "ideal rows/s",
        "% of ideal",
        "CPU ms/row",
        "x sequential",
    ):
        table.add_column(col)
    for level, count, ok, seconds, cpu in runs:
        rate, ideal = ok / seconds, level / args.delay
        table.add_row(
            f"simgym, concurrency {level:,}",
            f"{ok}/{count}",
            f"{seconds:.2f}",
            f"{rate:.1f}",
            f"{ideal:.0f}",
            f"{rate / ideal:.0%}",
            f"{cpu / max(ok, 1) * 1e3:.2f}",
            f"{rate / seq_rate:.0f}",
        )
    table.add_row(
        "sequential loop",
        f"{seq_ok}/{len(seq_rows)}",
        f"{seq_seconds:.2f}",
        f"{seq_rate:.2f}",
        f"{1 / args.delay:.0f}",
        f"{seq_rate * args.delay:.0%}",
        "",
        "1",
    )
    console = Console(width=140)
    console.print(table)


if __name__ == "__main__":
    main()
