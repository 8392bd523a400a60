"""Fidelity of a business twin on a separate held-out log, per demo system.

Plays one of the two demo systems twice (a training run and a held-out run, each with
its own seed and so its own people, policies and accounts), then runs the command a
user would run::

    simgym logs eval TRAIN --heldout HELD --out OUT --json [--max-sessions N]

and saves its numbers (``benchmarks/results/logs_eval/``): the outcome agreement, the
refusals answered with the right status and error code (each kind a row), the
final-state agreement over field checks and the model's share of answers::

    python benchmarks/logs_eval.py bank                       # 300 seed 11 / 100 seed 12
    python benchmarks/logs_eval.py claims --max-sessions 50   # 300 seed 0 / 100 seed 7
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

# system -> (training sessions, seed, held-out sessions, seed, the log file the eval reads)
SYSTEMS = {
    "bank": (300, 11, 100, 12, "traces.otlp.jsonl"),
    "claims": (300, 0, 100, 7, "traces.jsonl"),
}
SUMMARY = (
    "sessions",
    "replayed",
    "outcome_agreement",
    "refusals",
    "refusals_answered",
    "refusals_exact",
    "final_state_checks",
    "final_state_agreement",
    "model_share",
    "start_from_reads",
    "json_validity",
)


def play(system: str, sessions: int, seed: int, out: Path) -> None:
    """Write a run of the system's logs into ``out``."""
    if system == "bank":
        from simgym.real.backoffice import run_sessions

        run_sessions(sessions, seed, out)
        return
    command = [sys.executable, "-m", "simgym.real.claims", "--sessions", str(sessions)]
    command += ["--seed", str(seed), "--out", str(out)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def _without_model(train: Path, held: Path, root: Path, args: argparse.Namespace) -> dict:
    """The same evaluation in this process, with a stand-in world model that answers
    ``{}``: what the rules and the state decide, on a machine where the embedded model
    is too slow for a few hundred calls."""
    from simgym.logs.eval import evaluate
    from simgym.worldmodels.function import FunctionWorldModel

    return evaluate(
        [str(train)],
        root / "eval",
        heldout=[str(held)],
        world_model=FunctionWorldModel(lambda messages: "{}"),
        max_sessions=args.max_sessions,
        start_from_reads=not args.no_start_from_reads,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("system", choices=sorted(SYSTEMS))
    parser.add_argument("--train-sessions", type=int)
    parser.add_argument("--train-seed", type=int)
    parser.add_argument("--held-sessions", type=int)
    parser.add_argument("--held-seed", type=int)
    parser.add_argument("--max-sessions", type=int, help="replay this many held-out sessions")
    parser.add_argument(
        "--world-model",
        default="local",
        help="the eval's --world-model; 'none': a stand-in that answers every call the "
        "rules and state leave with {} (refusals, final state and the model's share come "
        "out as with any model; outcome agreement counts the model's answers as misses)",
    )
    parser.add_argument("--timeout", type=int, default=3600, help="seconds for the eval")
    parser.add_argument(
        "--no-start-from-reads",
        action="store_true",
        help="the eval's --no-start-from-reads: a held-out session starts only from what "
        "earlier sessions showed, not also from the records it reads before changing them",
    )
    args = parser.parse_args()
    train_n, train_seed, held_n, held_seed, log = SYSTEMS[args.system]
    train_n = args.train_sessions or train_n
    held_n = args.held_sessions or held_n
    train_seed = train_seed if args.train_seed is None else args.train_seed
    held_seed = held_seed if args.held_seed is None else args.held_seed

    with tempfile.TemporaryDirectory(prefix=f"logs-eval-{args.system}-") as tmp:
        root = Path(tmp)
        play(args.system, train_n, train_seed, root / "train")
        play(args.system, held_n, held_seed, root / "held")
        command = ["simgym", "logs", "eval", str(root / "train" / log)]
        command += ["--heldout", str(root / "held" / log), "--out", str(root / "eval")]
        command += ["--world-model", args.world_model, "--json"]
        if args.max_sessions:
            command += ["--max-sessions", str(args.max_sessions)]
        if args.no_start_from_reads:
            command += ["--no-start-from-reads"]
        started = time.perf_counter()
        if args.world_model == "none":
            report = _without_model(root / "train" / log, root / "held" / log, root, args)
        else:
            # the command as a user runs it; its progress lines go to this stderr
            script = Path(sys.executable).with_name("simgym")
            runner = (
                [str(script)] if script.is_file() else [sys.executable, "-m", "simgym.cli.main"]
            )
            done = subprocess.run(
                [*runner, *command[1:]],
                stdout=subprocess.PIPE,
                text=True,
                timeout=args.timeout,
                check=False,
            )
            if done.returncode != 0:
                sys.exit(f"the eval failed (exit {done.returncode}): {shlex.join(command)}")
            report = json.loads(done.stdout)
        seconds = time.perf_counter() - started

    rows = [
        {"kind": kind, "refusals": row["calls"], "answered": row["answered"], "exact": row["exact"]}
        for kind, row in report["refusals_by_kind"].items()
    ]
    summary = {k: report.get(k) for k in SUMMARY}
    summary["eval_seconds"] = round(seconds, 1)
    table = Table(title=f"{args.system}: twin fidelity on {report['sessions']} held-out sessions")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key in SUMMARY:
        table.add_row(key, str(report.get(key)))
    for row in rows:
        table.add_row(f"  {row['kind']}", f"{row['answered']} of {row['refusals']}")
    Console().print(table)

    from results import save

    logged = [
        f"training: {train_n} sessions seed {train_seed}",
        f"held out: {held_n} sessions seed {held_seed}",
    ]
    save(
        "logs_eval",
        rows=rows,
        summary={"system": args.system, **summary},
        notes=(
            f"{args.system} demo; {'; '.join(logged)}; command: "
            + shlex.join(
                ["simgym", "logs", "eval", "TRAIN", "--heldout", "HELD", "--out", "OUT"]
                + command[8:]
            )
            + f"; world model {args.world_model}, strict grounding"
            + (
                " (the same evaluation run in process by simgym.logs.eval.evaluate with a "
                "stand-in model answering {}: outcome agreement counts every answer the "
                "rules and state left as a miss)"
                if args.world_model == "none"
                else ""
            )
        ),
    )


if __name__ == "__main__":
    main()
