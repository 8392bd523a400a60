"""Replay recorded real episodes through grounding (state, then execution) and count the
turns answered exactly, and how many of those equal the real recording.

    .venv/bin/python benchmarks/replay_exact.py devset/trajectories.jsonl
    .venv/bin/python benchmarks/replay_exact.py devset/trajectories.jsonl --execution off

Run times are masked (simgym.bench.exact_replay). One row per domain; the first
mismatches are listed under it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from results import save

from simgym.bench.exact_replay import replay
from simgym.real.execute import SandboxRunner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trajectories")
    parser.add_argument("--domains", default="terminal,swe")
    parser.add_argument("--execution", choices=["sandbox", "off"], default="sandbox")
    parser.add_argument("--show", type=int, default=5, help="mismatches to list per domain")
    args = parser.parse_args()
    runner = SandboxRunner() if args.execution == "sandbox" else None
    domains = args.domains.split(",")
    tallies = asyncio.run(replay(args.trajectories, domains, runner, keep=args.show))
    for domain in domains:
        t = tallies.get(domain)
        if t is None:
            continue
        print(
            f"{domain:9} execution={args.execution:7} turns {t.turns:4}  exact {t.exact:4}"
            f"  (by a run {t.executed:3})  equal to the real recording {t.equal:4}"
        )
        for line in t.mismatches:
            print("   ", line)
        if t.run_seconds:
            median = statistics.median(t.run_seconds) * 1000
            print(f"    {len(t.run_seconds)} runs, median {median:.1f} ms")
    rows = [
        {
            "domain": domain,
            "execution": args.execution,
            "turns": t.turns,
            "exact": t.exact,
            "exact_rate": round(t.exact / max(t.turns, 1), 4),
            "by_a_run": t.executed,
            "equal_to_real": t.equal,
            "run_median_ms": round(statistics.median(t.run_seconds) * 1000, 2)
            if t.run_seconds
            else None,
        }
        for domain in domains
        if (t := tallies.get(domain)) is not None
    ]
    save(
        "replay_exact",
        rows=rows,
        summary={"trajectories": args.trajectories, "execution": args.execution},
        notes="Recorded real episodes replayed through grounding alone (the state, then a "
        "real run in a sandbox; no world model): the turns grounding answers exactly, per "
        "domain, and how many of those equal the real recording. Run times are masked.",
    )


if __name__ == "__main__":
    main()
