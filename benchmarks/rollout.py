"""Rollout throughput and memory: whole episodes (scripted agent, openai world model)
against a loopback server that answers every request after a fixed delay.

    .venv/bin/python benchmarks/rollout.py            # 1 to 10,000 at once, 500 and 100 ms
    .venv/bin/python benchmarks/rollout.py --quick    # a smoke run, seconds
    .venv/bin/python benchmarks/rollout.py --executors local,ray --concurrency 1024

Each episode is an mcp task: the agent makes ``--calls`` tool calls, then answers (the
answer never reaches the world model). At each server delay and concurrency C the run
plays C x ``--rounds`` episodes through ``simgym.rollout`` with at most C in flight (one
round above 1,024: those rows show that so many complete, and "done p50/last" shows
whether any episode was starved: all start together, so the last should finish close
to the median). The ideal time
is what a perfect client would need, episodes x calls x delay / C; efficiency is ideal /
measured. Everything simgym does per step counts (agent, validation, prompt rendering,
HTTP, parsing, reward, the trajectory) except writing files. "CPU ms/step" is this
process's CPU time per step: for a ray row only the driver's share, and a ray row's time
includes starting its workers (one a CPU; C is split between them) on a Ray instance
started once beforehand. "server ms/req" is the stand-in server's CPU per request: it
shares the machine's cores with the client, so on a small machine a row can be bound by
the server's share, which this column makes visible.

Memory per live episode: C episodes are started at once against a slower server and
the process is sampled until the first one ends; the peak over the run's start, divided
by C, is what one open episode costs (Python heap by tracemalloc, and resident memory
in a second, untraced run: tracing inflates RSS).

All numbers come from one run on one machine; compare ratios, not absolute times.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import psutil
from fixed_latency_server import running  # beside this script
from results import save
from rich.console import Console
from rich.table import Table

from simgym import Task
from simgym.rollout.loops import loop_factory
from simgym.rollout.runner import arollout

SCENARIO = {
    "server_name": "records",
    "output_format": "text",  # the server's fixed answer is plain text
    "tools": [
        {
            "name": "get_customer",
            "description": "Fetch one customer by id.",
            "parameters": {
                "type": "object",
                "properties": {"customer_id": {"type": "string"}},
                "required": ["customer_id"],
            },
        }
    ],
}


def tasks(count: int, tag: str) -> list[Task]:
    return [
        Task(id=f"{tag}-{i}", domain="mcp", instruction="Who is C-1001?", scenario=SCENARIO)
        for i in range(count)
    ]


def script(calls: int) -> list[Any]:
    call = {"name": "get_customer", "arguments": {"customer_id": "C-1001"}}
    return [call] * calls + [{"answer": "Ana Lima"}]


def settings(base: str, concurrency: int, calls: int, executor: str, workers: int) -> dict:
    """arollout arguments for one run; with Ray, C is split over the workers."""
    per_process = concurrency if executor == "local" else max(1, concurrency // workers)
    extra: dict[str, Any] = {}
    if executor == "ray":
        extra = {"executor_options": {"num_workers": min(workers, concurrency)}}
    return dict(
        agent="scripted",
        agent_options={"actions": script(calls)},
        world_model="openai",
        world_model_options={
            "base_url": base,
            "model": "fixed",
            "max_concurrency": per_process,
            # the server drops keep-alive connections idle for 5 s; a request that
            # meets one reconnects, as any real client would
            "max_retries": 2,
            "timeout": 600,
        },
        env_options={"validation_retries": 0},
        executor=executor,
        concurrency=per_process,
        max_turns=calls + 2,
        **extra,
    )


def server_cpu(base: str) -> float:
    """CPU seconds the stand-in server has used so far (0 when its pid is unknown)."""
    pid = getattr(base, "pid", None)
    if pid is None:
        return 0.0
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


async def timed(base: str, concurrency: int, episodes: int, calls: int, executor: str, workers):
    cpu, served = time.process_time(), server_cpu(base)
    started = time.perf_counter()
    ends: list[float] = []
    runs = await arollout(
        tasks(episodes, f"c{concurrency}"),
        on_done=lambda _: ends.append(time.perf_counter() - started),
        **settings(str(base), concurrency, calls, executor, workers),
    )
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    served = server_cpu(base) - served
    good = sum(
        1
        for t in runs
        for turn in t.turns
        if turn.error is None and not turn.observation.metadata.get("final_answer")
    )
    answered = sum(1 for t in runs if t.done and t.answer)
    errors = Counter(turn.error for t in runs for turn in t.turns if turn.error)
    return {
        "errors": errors,
        "episodes": len(runs),
        "answered": answered,
        "steps": good,
        "seconds": elapsed,
        "cpu": cpu,
        "server_cpu": served,
        "ends": sorted(ends),
    }


async def bare(base: str, concurrency: int, requests: int) -> dict:
    """The machine's own ceiling: the same requests from a bare aiohttp session (no
    simgym, no parsing of the answer beyond reading it), with a prompt of the size
    simgym's mcp requests have. A simgym row near this one is bound by the machine."""
    import aiohttp

    body = json.dumps(
        {
            "model": "fixed",
            "messages": [
                {"role": "system", "content": "s" * 2400},
                {"role": "user", "content": "u" * 200},
            ],
            "max_tokens": 64,
        }
    ).encode()
    url = f"{base}/chat/completions"
    gate = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency + 1)
    # the same timeout and retries as simgym's rows get (aiohttp's default gives a connect
    # 30 s, which ten thousand connections at once on a busy machine can exceed)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one() -> None:
            async with gate:
                for attempt in range(3):
                    try:
                        async with session.post(url, data=body) as response:
                            await response.read()
                        return
                    except (aiohttp.ClientConnectionError, TimeoutError):
                        if attempt == 2:
                            raise

        cpu, served = time.process_time(), server_cpu(base)
        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(requests)))
        elapsed = time.perf_counter() - started
    return {
        "errors": Counter(),
        "episodes": 0,
        "answered": 0,
        "steps": requests,
        "seconds": elapsed,
        "cpu": time.process_time() - cpu,
        "server_cpu": server_cpu(base) - served,
        "ends": [],
    }


def run(coro: Any, event_loop: str) -> Any:
    """``asyncio.run`` on the named loop (asyncio's own or uvloop)."""
    with asyncio.Runner(loop_factory=loop_factory(event_loop)) as runner:
        return runner.run(coro)


def throughput(args, base: str, delay: float) -> list[dict]:
    """Per concurrency, per loop: the bare client's row, then simgym's, back to back, so
    each ratio compares runs made under the same load on a shared machine."""
    rows = []
    for concurrency in args.concurrency:
        # the biggest rows run one round: they show that that many complete
        rounds = args.rounds if concurrency <= 1024 else 1
        episodes = concurrency * rounds
        for executor in args.executors:
            # Ray's workers run episodes on Ray's own loops: one pass, on asyncio
            loops = args.loops if executor == "local" else ["asyncio"]
            for event_loop in loops:
                if args.bare and (executor == "local" or "local" not in args.executors):
                    requests = episodes * args.calls
                    result = run(bare(base, concurrency, requests), event_loop)
                    rows.append(
                        {
                            "delay": delay,
                            "executor": "bare aiohttp",
                            "loop": event_loop,
                            "concurrency": concurrency,
                            "expected_steps": requests,
                            "ideal": requests * delay / concurrency,
                            **result,
                        }
                    )
                result = run(
                    timed(base, concurrency, episodes, args.calls, executor, args.workers),
                    event_loop,
                )
                rows.append(
                    {
                        "delay": delay,
                        "executor": executor,
                        "loop": event_loop,
                        "concurrency": concurrency,
                        "expected_steps": episodes * args.calls,
                        "ideal": episodes * args.calls * delay / concurrency,
                        **result,
                    }
                )
    return rows


def versus_bare(rows: list[dict]) -> list[dict]:
    """Each simgym row's throughput as a share of the bare client's nearest earlier row
    at the same delay and concurrency (on the same loop for a local row)."""
    ratios = []
    for i, row in enumerate(rows):
        if row["executor"] == "bare aiohttp":
            continue
        same = [
            r
            for r in rows[:i]
            if r["executor"] == "bare aiohttp"
            and r["delay"] == row["delay"]
            and r["concurrency"] == row["concurrency"]
            and (row["executor"] != "local" or r["loop"] == row["loop"])
        ]
        if not same:
            continue
        ref = same[-1]
        speed, ref_speed = row["steps"] / row["seconds"], ref["steps"] / ref["seconds"]
        ratios.append(
            {
                "delay_ms": round(row["delay"] * 1000),
                "concurrency": row["concurrency"],
                "executor": row["executor"],
                "loop": row["loop"],
                "steps_per_s": round(speed, 1),
                "bare_steps_per_s": round(ref_speed, 1),
                "of_bare": round(speed / ref_speed, 3),
                "cpu_ms_per_step": round(row["cpu"] / max(row["steps"], 1) * 1e3, 3),
                "bare_cpu_ms_per_req": round(ref["cpu"] / max(ref["steps"], 1) * 1e3, 3),
            }
        )
    return ratios


async def live_memory(base: str, count: int, calls: int, traced: bool) -> dict:
    """Start ``count`` episodes at once; sample memory until the first one ends."""
    process = psutil.Process()
    finished = 0

    def on_done(_):
        nonlocal finished
        finished += 1

    gc.collect()
    if traced:
        tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0] if traced else process.memory_info().rss
    peak, samples = baseline, 0
    run = asyncio.create_task(
        arollout(
            tasks(count, "mem"),
            on_done=on_done,
            **settings(base, count, calls, "local", 1),
        )
    )
    while not run.done() and finished == 0:
        now = tracemalloc.get_traced_memory()[0] if traced else process.memory_info().rss
        peak, samples = max(peak, now), samples + 1
        await asyncio.sleep(0.05)
    run.cancel()  # the rest of the run measures nothing
    with contextlib.suppress(asyncio.CancelledError):
        await run
    if traced:
        tracemalloc.stop()
    return {"bytes": peak - baseline, "samples": samples}


def fresh_live_memory(base: str, count: int, calls: int, traced: bool) -> dict:
    """One measurement in this (new) process, after a warm-up episode has imported
    and built everything a rollout needs once per process."""
    asyncio.run(timed(base, 1, 1, calls, "local", 1))
    return asyncio.run(live_memory(base, count, calls, traced))


def memory(args, base: str) -> dict:
    # Each measure in its own new process: memory freed by earlier runs stays resident
    # and would hide what the episodes take.
    spawn = multiprocessing.get_context("spawn")
    result = {}
    for key, traced in (("heap", True), ("rss", False)):
        with ProcessPoolExecutor(1, mp_context=spawn) as pool:
            job = pool.submit(fresh_live_memory, base, args.memory_episodes, args.calls, traced)
            result[key] = job.result()
    return result


def _free_ports(count: int) -> list[int]:
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


@contextlib.contextmanager
def ray_cluster(nodes: int, cpus: int) -> Any:
    """``nodes`` Ray nodes on this machine started with ``ray start`` (a head, then workers
    joining it by address), each with ``cpus`` CPUs, its own ports and a temp dir of the
    cluster's own; yields the address and stops exactly those processes afterwards."""
    ray_bin = str(Path(sys.executable).with_name("ray"))
    temp_dir = tempfile.mkdtemp(prefix="sgbench", dir="/tmp")  # Ray's socket paths: short
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    gcs = _free_ports(1)[0]
    address = f"127.0.0.1:{gcs}"
    started: list[subprocess.Popen] = []
    try:
        for i in range(nodes):
            ports = _free_ports(7)
            low = 20000 + (gcs + 97 * i) % 30000  # a worker port range per node
            role = (
                ["--head", f"--port={gcs}", "--include-dashboard=false"]
                if i == 0
                else [f"--address={address}"]
            )
            flags = (
                "node-manager-port", "object-manager-port", "ray-client-server-port",
                "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
                "metrics-export-port", "runtime-env-agent-port",
            )  # fmt: skip
            command = [ray_bin, "start", *role, f"--num-cpus={cpus}", f"--temp-dir={temp_dir}"]
            command += [f"--{flag}={port}" for flag, port in zip(flags, ports, strict=True)]
            command += [f"--min-worker-port={low}", f"--max-worker-port={low + 60}", "--block"]
            started.append(
                subprocess.Popen(
                    command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            )
            if i == 0:
                for _ in range(360):
                    with (
                        contextlib.suppress(OSError),
                        socket.create_connection(("127.0.0.1", gcs), 1),
                    ):
                        break
                    time.sleep(0.5)
        yield address
    finally:
        import ray

        ray.shutdown()
        for process in reversed(started):
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(30)
        # anything of this cluster still running (found by its temp dir, no other Ray)
        left = [
            p
            for p in psutil.process_iter(["cmdline"])
            if any(temp_dir in part for part in p.info["cmdline"] or ())
        ]
        for proc in left:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        shutil.rmtree(temp_dir, ignore_errors=True)


def start_ray(args) -> None:
    """Connect once here, so no row pays for it: to ``--ray-address`` (a cluster started
    with ``ray start``, e.g. a head and a worker node on this machine) or a new local
    instance. The nodes found are printed: the rows' workers are spread over them."""
    import ray

    if not ray.is_initialized():
        if args.ray_address:
            ray.init(address=args.ray_address, logging_level="warning")
            deadline = time.monotonic() + 300
            while len([n for n in ray.nodes() if n.get("Alive")]) < args.ray_nodes_wanted:
                if time.monotonic() > deadline:
                    raise SystemExit("the Ray worker node(s) did not join in 300 s")
                time.sleep(0.5)
        else:
            ray.init(include_dashboard=False, logging_level="warning")
    args.workers = args.workers or int(ray.cluster_resources().get("CPU", 1))
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    args.ray_nodes = len(nodes)
    print(f"ray: {len(nodes)} node(s), {args.workers} worker(s)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small runs, a smoke test")
    parser.add_argument("--concurrency", default="1,64,1024,10000", help="episodes in flight")
    parser.add_argument("--rounds", type=int, default=2, help="episodes = C x rounds")
    parser.add_argument("--calls", type=int, default=5, help="tool calls per episode")
    parser.add_argument(
        "--delays", default="0.5,0.1", help="server latencies to run against, seconds"
    )
    parser.add_argument("--memory-episodes", type=int, default=10_000)
    parser.add_argument("--memory-delay", type=float, default=2.0)
    parser.add_argument("--executors", default="local", help="local, ray, or local,ray")
    parser.add_argument("--workers", type=int, default=None, help="ray workers (default: CPUs)")
    parser.add_argument(
        "--ray-address", default=None, help="a running Ray cluster (default: start a local one)"
    )
    parser.add_argument(
        "--ray-nodes",
        type=int,
        default=0,
        help="start this many Ray nodes here with `ray start` (a head and workers, one CPU "
        "each) and run the ray rows on them",
    )
    parser.add_argument(
        "--loops",
        default="asyncio",
        help="event loops for the local and bare rows: asyncio, uvloop, or asyncio,uvloop",
    )
    parser.add_argument("--markdown", action="store_true", help="also print table 1 as markdown")
    parser.add_argument(
        "--no-memory", dest="memory", action="store_false", help="skip table 2 (memory)"
    )
    parser.add_argument(
        "--no-bare",
        dest="bare",
        action="store_false",
        help="skip the bare-aiohttp rows (the machine's ceiling, no simgym)",
    )
    args = parser.parse_args()
    if args.quick:
        args.concurrency, args.rounds, args.delays = "1,16,64", 1, "0.05"
        args.memory_episodes, args.memory_delay = 64, 0.5
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    args.delays = [float(d) for d in args.delays.split(",")]
    args.executors = [e.strip() for e in args.executors.split(",")]
    args.loops = [e.strip() for e in args.loops.split(",")]
    for name in args.loops:
        loop_factory(name)  # an unknown or missing loop fails before any row
    args.ray_nodes_wanted = max(args.ray_nodes, 1)
    with contextlib.ExitStack() as stack:
        if "ray" in args.executors:
            if args.ray_nodes and not args.ray_address:
                args.ray_address = stack.enter_context(ray_cluster(args.ray_nodes, 1))
            start_ray(args)
        else:
            args.ray_nodes = 0
        report(args)


def report(args) -> None:
    console = Console(width=160)  # the table is wide; keep it whole in a log file

    rows = []
    for delay in args.delays:
        with running(delay) as base:
            run(timed(base, 1, 1, args.calls, "local", 1), "asyncio")  # imports, first connect
            rows += throughput(args, base, delay)
    table = Table(
        title=f"1. episodes of {args.calls} tool calls + an answer (mcp, openai world model) "
        "against a server that answers after a fixed delay"
    )
    columns = (
        "server",
        "executor",
        "loop",
        "at once",
        "episodes",
        "steps",
        "s",
        "ep/s",
        "steps/s",
        "ideal s",
        "eff.",
        "CPU ms/step",
        "server ms/req",
        "done p50/last s",
    )
    for col in columns:
        table.add_column(col, justify="right")
    cells = []
    for r in rows:
        ends = r["ends"] or [0.0]
        cells.append(
            (
                f"{r['delay'] * 1000:.0f} ms",
                r["executor"],
                r["loop"],
                f"{r['concurrency']:,}",
                f"{r['answered']:,}/{r['episodes']:,}" if r["episodes"] else "-",
                f"{r['steps']:,}" + ("" if r["steps"] == r["expected_steps"] else " (short!)"),
                f"{r['seconds']:.2f}",
                f"{r['episodes'] / r['seconds']:.1f}" if r["episodes"] else "-",
                f"{r['steps'] / r['seconds']:.1f}",
                f"{r['ideal']:.2f}",
                f"{r['ideal'] / r['seconds']:.0%}",
                f"{r['cpu'] / max(r['steps'], 1) * 1e3:.2f}",
                f"{r['server_cpu'] / max(r['steps'], 1) * 1e3:.2f}",
                f"{ends[len(ends) // 2]:.1f}/{ends[-1]:.1f}" if r["ends"] else "-",
            )
        )
        table.add_row(*cells[-1])
    console.print(table)
    if args.markdown:  # the same table, ready for the README
        print("| " + " | ".join(columns) + " |")
        print("|" + "---|" * len(columns))
        for row in cells:
            print("| " + " | ".join(row) + " |")
    for r in rows:
        for error, count in r["errors"].most_common(3):
            console.print(f"{r['executor']} x {r['concurrency']}: {count} step(s) failed: {error}")
    ratios = versus_bare(rows)
    if ratios:
        table = Table(title="simgym's throughput as a share of the bare client's, same run")
        for col in ("server", "at once", "executor", "loop", "of bare", "CPU ms/step", "bare"):
            table.add_column(col, justify="right")
        for r in ratios:
            table.add_row(
                f"{r['delay_ms']} ms",
                f"{r['concurrency']:,}",
                r["executor"],
                r["loop"],
                f"{r['of_bare']:.0%}",
                f"{r['cpu_ms_per_step']:.2f}",
                f"{r['bare_cpu_ms_per_req']:.2f}",
            )
        console.print(table)
    load = os.getloadavg()
    console.print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    saved_rows = [
        {k: v for k, v in r.items() if k not in ("errors", "ends")}
        | {
            "errors": sum(r["errors"].values()),
            "steps_per_s": r["steps"] / r["seconds"],
            "efficiency": r["ideal"] / r["seconds"],
            "cpu_ms_per_step": r["cpu"] / max(r["steps"], 1) * 1e3,
            "done_p50_s": r["ends"][len(r["ends"]) // 2] if r["ends"] else None,
            "done_last_s": r["ends"][-1] if r["ends"] else None,
        }
        for r in rows
    ]
    save(
        "rollout",
        rows=saved_rows,
        summary={"versus_bare": ratios, "ray_nodes": args.ray_nodes, "calls": args.calls},
        notes="Each simgym row beside the bare aiohttp client's row run just before it, at "
        "the same delay, concurrency and event loop; the machine is shared, so compare the "
        "ratios (of_bare), not absolute times.",
    )

    if not args.memory:
        return
    with running(args.memory_delay) as base:
        mem = memory(args, base)
    table = Table(
        title=f"2. memory per live episode: {args.memory_episodes:,} episodes open at once "
        f"(server answers after {args.memory_delay * 1000:.0f} ms)"
    )
    for col in ("measure", "total", "per live episode", "samples"):
        table.add_column(col, justify="right")
    for label, key in (("Python heap (tracemalloc)", "heap"), ("resident (RSS)", "rss")):
        got = mem[key]
        table.add_row(
            label,
            f"{got['bytes'] / 2**20:.1f} MiB",
            f"{got['bytes'] / args.memory_episodes / 1024:.1f} KiB",
            str(got["samples"]),
        )
    console.print(table)


if __name__ == "__main__":
    main()
