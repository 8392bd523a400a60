"""Fidelity of the business twin per log format, with and without experience retrieval.

Plays the demo back office (``--sessions`` operator sessions), then for each log format
it wrote runs ``simgym logs eval`` (build a world from the training sessions, replay the
held-out ones through the twin on the embedded model, compare with the real service's
log) and prints one table::

    python benchmarks/logs_twin.py --sessions 120 --holdout 0.25
    python benchmarks/logs_twin.py --formats jsonl,otlp --experience off
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

FILES = {
    "otlp": "traces.otlp.jsonl",
    "ocel-json": "ocel.json",
    "ocel-sqlite": "ocel.sqlite",
    "jsonl": "sessions.jsonl",
    "har": "client.har",
    "xes": "events.xes",
}
COLUMNS = (
    ("replayed", "calls"),
    ("json_validity", "JSON valid"),
    ("outcome_agreement", "outcome agrees"),
    ("violations", "violations"),
    ("violations_answered", "answered"),
    ("violations_exact", "exact answer"),
    ("final_state_checks", "state checks"),
    ("final_state_agreement", "state agrees"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=120)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--holdout", type=float, default=0.25)
    parser.add_argument("--formats", default=",".join(FILES))
    parser.add_argument("--experience", default="off,on", help="off, on, or off,on")
    parser.add_argument("--max-sessions", type=int, default=None)
    parser.add_argument("--dir", type=Path, default=None, help="keep logs and worlds here")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args()

    from simgym.logs.eval import evaluate
    from simgym.real.backoffice import run_sessions

    root = args.dir or Path(tempfile.mkdtemp(prefix="simgym-twin-"))
    logs = root / "logs"
    summary = run_sessions(args.sessions, args.seed, logs)
    console = Console()
    console.print(f"demo back office: {summary['requests']} requests in {args.sessions} sessions")
    table = Table(title=f"twin fidelity on held-out sessions ({args.holdout:.0%} held out)")
    for name in ("format", "experience", *(label for _, label in COLUMNS), "seconds"):
        table.add_column(name)
    rows = []
    for fmt in args.formats.split(","):
        for mode in args.experience.split(","):
            start = time.perf_counter()
            report = evaluate(
                [str(logs / FILES[fmt])],
                root / f"eval-{fmt}-{mode}",
                holdout=args.holdout,
                seed=0,
                experience=mode == "on",
                max_sessions=args.max_sessions,
            )
            seconds = time.perf_counter() - start
            rows.append({"format": fmt, "experience": mode, "seconds": seconds, **report})
            cells = ["-" if report.get(k) is None else str(report.get(k)) for k, _ in COLUMNS]
            table.add_row(fmt, mode, *cells, f"{seconds:.0f}")
            console.print(f"{fmt} experience {mode}: {', '.join(cells)} ({seconds:.0f} s)")
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
