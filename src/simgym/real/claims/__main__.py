"""python -m simgym.real.claims --sessions 100 --seed 0 --out DIR"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m simgym.real.claims",
        description="Play randomized sessions of the insurance claims office (web portal and "
        "AI copilot) and write traces.jsonl (OTLP/JSON), claims.jsonocel (OCEL 2.0), "
        "claims.xes (XES) and truth.json (the rules as implemented).",
    )
    parser.add_argument("--sessions", type=int, default=100, help="sessions to play")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--out", required=True, help="output directory")
    args = parser.parse_args(argv)
    if args.sessions < 0:
        parser.error("--sessions must be >= 0")
    from simgym.real.claims.driver import run_sessions

    summary = run_sessions(args.sessions, args.seed, args.out)
    json.dump(summary, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 1 if any(int(code) >= 500 for code in summary["statuses"]) else 0


if __name__ == "__main__":
    sys.exit(main())
