"""Build time and query latency of the experience store on the dev set.

    .venv/bin/python benchmarks/experience.py [--queries 1000] [--k 3] [--scale 0]

Builds a fresh store (in a temporary folder) from ``devset/rows.jsonl`` and
``devset/trajectories.jsonl``, then times ``similar`` the way ``SimEnv`` calls it: one
call per simulated action, on one thread, for the dev set's own actions in turn (their
domains, ``k`` examples each). ``--scale N`` adds N synthetic rows (the dev set's actions
with their file names, ids and numbers varied) first, to see how lookups grow with a
factory-sized store. Prints numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import tempfile
import time
from pathlib import Path

from results import save
from rich.console import Console
from rich.table import Table

from simgym.experience import ExperienceStore, Transition, open_store

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "devset" / "rows.jsonl", ROOT / "devset" / "trajectories.jsonl"]


def devset_actions(store: ExperienceStore) -> list[tuple[str, str, str]]:
    """(domain, action, observation) of every row in the store, in insertion order."""
    conn = store._connection()  # a benchmark may look inside
    return list(conn.execute("SELECT domain, action, observation FROM transitions ORDER BY id"))


def synthetic(base: list[tuple[str, str, str]], count: int, seed: int = 0):
    """Variants of the dev set's transitions: in the action's text (the string values of a
    JSON action), every word with a digit or a dot gets a random suffix, so rows differ
    but keep their form, their keys and most of their words."""
    rng = random.Random(seed)
    varied = re.compile(r"[\w-]*[\d.][\w.-]*")

    def vary(value, tag: str):
        if isinstance(value, str):
            return varied.sub(lambda m: f"{m.group(0)}{tag}", value)
        if isinstance(value, list):
            return [vary(item, tag) for item in value]
        if isinstance(value, dict):
            return {k: v if k == "name" else vary(v, tag) for k, v in value.items()}
        return value

    for i in range(count):
        domain, action, observation = base[i % len(base)]
        tag = f"{rng.randrange(16**5):x}"
        try:
            action = json.dumps(vary(json.loads(action), tag), ensure_ascii=False)
        except json.JSONDecodeError:
            action = vary(action, tag)
        yield Transition(domain, action, f"{observation}\n#{tag}", f"synthetic:{i}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--scale", type=int, default=0, help="synthetic rows to add first")
    args = parser.parse_args()
    console = Console()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "experience.db"
        store = open_store(path)
        start = time.perf_counter()
        report = store.add_files(FILES)
        build = time.perf_counter() - start
        base = devset_actions(store)
        extra = 0.0
        if args.scale:
            start = time.perf_counter()
            store.add_transitions(synthetic(base, args.scale))
            extra = time.perf_counter() - start
        rows = len(store)
        size = path.stat().st_size + sum(
            p.stat().st_size for p in Path(folder).glob("experience.db-*")
        )
        queries = [(domain, action) for domain, action, _ in base]
        reader = open_store(path, readonly=True)
        reader.similar(*queries[0], k=args.k)  # the thread's connection, opened once
        times: list[float] = []
        returned = 0
        same_key = 0
        for i in range(args.queries):
            domain, action = queries[i % len(queries)]
            start = time.perf_counter()
            found = reader.similar(domain, action, k=args.k)
            times.append(time.perf_counter() - start)
            returned += len(found)
            same_key += int(bool(found) and found[0].action == action)
        reader.close()
        store.close()

    times.sort()
    p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
    table = Table(title="experience store on the dev set", show_header=False)
    table.add_column(style="dim")
    table.add_column(justify="right")
    table.add_row("files", ", ".join(p.name for p in FILES))
    table.add_row("lines read", str(report.lines))
    table.add_row("transitions read", str(report.transitions))
    table.add_row("duplicates (already indexed)", str(report.duplicates))
    table.add_row("malformed lines", str(report.malformed))
    table.add_row("skipped turns", str(sum(report.skipped.values())))
    table.add_row("build time (dev set)", f"{build * 1000:.1f} ms")
    if args.scale:
        table.add_row(f"+{args.scale} synthetic rows", f"{extra:.2f} s")
    table.add_row("rows", str(rows))
    table.add_row("rows per domain", json.dumps(report.to_dict()["domains"]))
    table.add_row("file size", f"{size / 1024:.0f} KiB")
    table.add_row(f"queries (k={args.k})", str(len(times)))
    table.add_row("query latency median", f"{statistics.median(times) * 1000:.3f} ms")
    table.add_row("query latency p95", f"{p95 * 1000:.3f} ms")
    table.add_row("query latency max", f"{times[-1] * 1000:.3f} ms")
    table.add_row("examples per query (mean)", f"{returned / len(times):.2f}")
    table.add_row("top example is the query's own action", f"{same_key / len(times):.0%}")
    console.print(table)
    save(
        "experience",
        summary={
            "transitions_read": report.transitions,
            "rows": rows,
            "build_ms": round(build * 1000, 2),
            "file_kib": round(size / 1024),
            "queries": len(times),
            "k": args.k,
            "query_median_ms": round(statistics.median(times) * 1000, 4),
            "query_p95_ms": round(p95 * 1000, 4),
            "query_max_ms": round(times[-1] * 1000, 4),
            "examples_per_query": round(returned / len(times), 3),
            "top_is_own_action": round(same_key / len(times), 4),
            "synthetic_rows": args.scale,
        },
        notes="Experience store built from the dev set's trajectories, then queried with "
        "the dev set's own actions.",
    )


if __name__ == "__main__":
    main()
