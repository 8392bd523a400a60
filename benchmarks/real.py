"""Step latency: the real backends against the embedded world model, on the same actions.

    .venv/bin/python benchmarks/real.py                       # a few minutes on 2 cores
    .venv/bin/python benchmarks/real.py --steps 5 --max-tokens 64 devset/episodes/web/*.yaml

For each action file (by default one dev-set episode per domain) the first ``--steps``
actions run twice: once against the domain's real backend (bubblewrap shell, sandboxed
repository tools, the SQLite records MCP server, the FTS5 docs index, headless Chromium),
and once simulated by the embedded model (``world_model="local"``, SmolLM2-135M in
llama.cpp, ``--max-tokens`` per answer). A step is timed around ``env.step`` and only
steps the world answered count (an agent's final answer is neither executed nor
simulated). The table shows the median per domain; the simulated median includes the
first step's system-prompt evaluation once, later steps reuse the cached prefix.
Start-up (building a sandbox, launching Chromium, loading the model) is not a step and is
not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import defaultdict
from pathlib import Path

from results import save
from rich.console import Console
from rich.table import Table

import simgym.domains  # noqa: F401  (registers the built-in domains)
from simgym.core.env import SimEnv
from simgym.real.registry import real_backends
from simgym.rollout.scripted import load_specs
from simgym.worldmodels import LocalWorldModel

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FILES = [
    ROOT / "devset/episodes/terminal/csv_totals.yaml",
    ROOT / "devset/episodes/swe/missing_import.yaml",
    ROOT / "devset/episodes/mcp/unknown_customer.yaml",
    ROOT / "devset/episodes/search/bisect_sorted_insert.yaml",
    ROOT / "devset/episodes/web/checkout_success.yaml",
]
# Order of the table's rows.
DOMAINS = ("terminal", "swe", "mcp", "search", "web")


async def timed_steps(env: SimEnv, spec, steps: int) -> list[float]:
    """Seconds per answered step of the first ``steps`` actions of one episode."""
    await env.reset(spec.task)
    times = []
    for action in spec.actions[:steps]:
        start = time.perf_counter()
        result = await env.step(action)
        elapsed = time.perf_counter() - start
        turn = env.trajectory.turns[-1]
        if turn.in_history and not turn.error:
            times.append(elapsed)
        if result.done or result.truncated:
            break
    await env.close(reason=None)
    return times


async def run_real(specs, steps: int) -> dict[str, list[float]]:
    backends = real_backends()
    found: dict[str, list[float]] = defaultdict(list)
    for spec in specs:
        executor = backends[spec.task.domain]()
        env = SimEnv(spec.task.domain, executor, validation_retries=0)
        try:
            found[spec.task.domain] += await timed_steps(env, spec, steps)
        finally:
            await executor.aclose()
    return found


async def run_simulated(
    specs, steps: int, max_tokens: int, n_ctx: int
) -> tuple[dict[str, list[float]], dict[str, str]]:
    model = LocalWorldModel(n_ctx=n_ctx, max_tokens=max_tokens)
    found: dict[str, list[float]] = defaultdict(list)
    failed: dict[str, str] = {}
    for spec in specs:
        env = SimEnv(spec.task.domain, model, max_tokens=max_tokens)
        try:
            found[spec.task.domain] += await timed_steps(env, spec, steps)
        except Exception as exc:  # a prompt too long for the context, say: say so, go on
            failed[spec.task.domain] = f"{type(exc).__name__}: {exc}"[:80]
    return found, failed


def median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:,.1f}" if values else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="action files (default: 5)")
    parser.add_argument("--steps", type=int, default=4, help="actions per file")
    parser.add_argument("--max-tokens", type=int, default=48, help="simulated answer budget")
    parser.add_argument("--n-ctx", type=int, default=8192, help="embedded model context")
    parser.add_argument("--real-only", action="store_true", help="skip the simulated runs")
    args = parser.parse_args()

    specs = load_specs([str(f) for f in (args.files or DEFAULT_FILES)])
    console = Console()
    with console.status("running the real backends"):
        real = asyncio.run(run_real(specs, args.steps))
    simulated: dict[str, list[float]] = {}
    failed: dict[str, str] = {}
    if not args.real_only:
        with console.status("simulating with the embedded model"):
            simulated, failed = asyncio.run(
                run_simulated(specs, args.steps, args.max_tokens, args.n_ctx)
            )

    table = Table(title=f"Median step latency, ms (first {args.steps} actions per file)")
    table.add_column("domain")
    table.add_column("files", justify="right")
    table.add_column("real steps", justify="right")
    table.add_column("real median", justify="right")
    table.add_column("sim steps", justify="right")
    table.add_column(f"sim median (local, {args.max_tokens} tok)", justify="right")
    table.add_column("sim / real", justify="right")
    files = defaultdict(int)
    for spec in specs:
        files[spec.task.domain] += 1
    for domain in [d for d in DOMAINS if d in files] + sorted(set(files) - set(DOMAINS)):
        r, s = real.get(domain, []), simulated.get(domain, [])
        ratio = (
            f"{statistics.median(s) / statistics.median(r):,.0f}x"
            if r and s and statistics.median(r) > 0
            else "-"
        )
        table.add_row(
            domain,
            str(files[domain]),
            str(len(r)),
            median_ms(r),
            str(len(s)) if not args.real_only else "-",
            median_ms(s) if domain not in failed else f"failed: {failed[domain]}",
            ratio,
        )
    console.print(table)
    rows = []
    for domain in [d for d in DOMAINS if d in files] + sorted(set(files) - set(DOMAINS)):
        r, s = real.get(domain, []), simulated.get(domain, [])
        rows.append(
            {
                "domain": domain,
                "files": files[domain],
                "real_steps": len(r),
                "real_median_ms": round(statistics.median(r) * 1000, 2) if r else None,
                "sim_steps": len(s),
                "sim_median_ms": round(statistics.median(s) * 1000, 2) if s else None,
                "sim_failed": failed.get(domain),
            }
        )
    save(
        "real",
        rows=rows,
        summary={"steps": args.steps, "max_tokens": args.max_tokens, "real_only": args.real_only},
        notes="Median step latency of the real backends and of the embedded world model "
        "simulating the same actions (first --steps actions of each episode file).",
    )


if __name__ == "__main__":
    main()
