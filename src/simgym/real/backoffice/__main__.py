"""python -m simgym.real.backoffice --sessions 50 --seed 0 --out DIR"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m simgym.real.backoffice",
        description="Play randomized sessions against the real back-office service and "
        "write traces.otlp.jsonl, ocel.json, ocel.sqlite, sessions.jsonl, client.har and "
        "events.xes.",
    )
    parser.add_argument("--sessions", type=int, default=50, help="sessions to play")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--out", required=True, help="output directory")
    args = parser.parse_args(argv)
    if args.sessions < 0:
        parser.error("--sessions must be >= 0")
    from simgym.real.backoffice.driver import run_sessions

    summary = run_sessions(args.sessions, args.seed, args.out)
    json.dump(summary, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 1 if any(int(code) >= 500 for code in summary["statuses"]) else 0


if __name__ == "__main__":
    sys.exit(main())
