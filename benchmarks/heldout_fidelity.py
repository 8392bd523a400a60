"""Simulation fidelity on the held-out episode set: how many turns the simulator gets exactly right.

Three ways in:

    # 1. episode files (default: heldout/episodes/*/*.yaml): runs
    #    `simgym run FILES -o WORKDIR/sim.jsonl --compare real [EXTRA...]` and scores its compare file;
    #    options this script does not know (or anything after `--`) go to `simgym run` unchanged,
    #    e.g. `--execution off`; one `simgym run --help` does not list stops the script (exit 2)
    .venv/bin/python benchmarks/heldout_fidelity.py [FILES...] [--workdir DIR] [EXTRA...]

    # 2. a compare file that `simgym run ... --compare real` already wrote
    .venv/bin/python benchmarks/heldout_fidelity.py --compare-file OUT.compare.jsonl

    # 3. the recorded real trajectories plus a simulated run of the same episodes
    .venv/bin/python benchmarks/heldout_fidelity.py --real heldout/trajectories.jsonl --sim sim.jsonl

Per domain it prints the turns, the turns whose real observation prints something, how many of
those the simulation got exactly right, and the percentage:

- terminal, swe: exact text after stripping trailing blanks (each line's, and blank lines at the
  end), with durations that programs print masked (unittest's `Ran 3 tests in 0.003s`, pytest's
  `=== 2 passed in 0.01s ===`). A terminal turn prints something when the screen holds more than
  the echoed command line(s) and the prompt; a swe turn when the tool said more than `[exit code: N]`.
- mcp: equal as parsed JSON when both sides parse (an MCP envelope's text items are parsed too
  when they hold JSON), else exact text. Every mcp turn prints something.

With a fresh real run (mode 1) and heldout/trajectories.jsonl present, it also says how many real
turns differ from the committed recording (the same masking), so a change in the real backends
shows up instead of silently moving the ground truth.

Exit status: 0 when scored; 2 when the simulation could not run (an option `simgym run` does not
know is named, not ignored), or when nothing could be compared.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from results import save

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_EPISODES = sorted(str(p) for p in (ROOT / "heldout" / "episodes").glob("*/*.yaml"))
RECORDING = ROOT / "heldout" / "trajectories.jsonl"

DURATION_RULES = [
    # unittest: "Ran 3 tests in 0.003s"
    (re.compile(r"^(Ran \d+ tests? in )\d+(?:\.\d+)?s$", re.M), r"\1<T>s"),
    # pytest summary: "===== 2 passed, 1 failed in 0.12s ====="
    (re.compile(r"^(=+ .* in )\d+(?:\.\d+)?s( \([^)]*\))?( =+)$", re.M), r"\1<T>s\3"),
]
MASK_NOTE = ("durations masked: unittest 'Ran N tests in <T>s', pytest '=== ... in <T>s ==='")
EXIT_LINE = re.compile(r"^\[exit code: -?\d+\]$")


# --------------------------------------------------------------------------- normalising


def strip_blanks(text: str) -> str:
    lines = [line.rstrip() for line in (text or "").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def mask_durations(text: str) -> str:
    for pattern, repl in DURATION_RULES:
        text = pattern.sub(repl, text)
    return text


def norm_text(text: str) -> str:
    return mask_durations(strip_blanks(text))


def deep_json(text: str):
    """The observation as JSON, with an MCP envelope's JSON text items parsed too; None if not JSON."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        items = []
        for item in value["content"]:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                try:
                    inner = json.loads(item["text"])
                except ValueError:
                    inner = None
                if isinstance(inner, (dict, list)):
                    item = {**item, "text": inner}
            items.append(item)
        value = {**value, "content": items}
    return value


def keystroke_lines(action: str) -> int:
    """How many lines the typed keys occupy on the screen (one per newline-terminated line)."""
    try:
        value = json.loads(action)
    except (TypeError, ValueError):
        return 1
    if isinstance(value, list):
        typed = "".join(k.get("keystrokes", "") for k in value if isinstance(k, dict))
        return max(1, typed.count("\n"))
    return 1


def prints_something(domain: str, action: str, real: str) -> bool:
    text = strip_blanks(real)
    if domain == "terminal":
        lines = text.split("\n")
        echoed = keystroke_lines(action)
        # the echoed command (prompt + first line, then '> ' continuation lines) and the final prompt
        body = lines[echoed:-1] if len(lines) > echoed else []
        return any(line.strip() for line in body)
    if domain == "swe":
        return any(line.strip() and not EXIT_LINE.match(line.strip()) for line in text.split("\n"))
    return bool(text.strip())


def exact(domain: str, simulated: str | None, real: str | None) -> bool:
    if simulated is None or real is None:
        return False
    if domain == "mcp":
        a, b = deep_json(simulated), deep_json(real)
        if a is not None and b is not None:
            return a == b
        return simulated == real
    return norm_text(simulated) == norm_text(real)


# --------------------------------------------------------------------------- loading turns


def load_jsonl(path: Path) -> list[dict]:
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass  # a line torn by a crash
    return rows


def turns_of(path: Path) -> dict[tuple[str, int], dict]:
    """(task id, turn index) -> {domain, action, text, kind} from a trajectory file."""
    out = {}
    for traj in load_jsonl(path):
        task_id = traj["task"]["id"]
        for turn in traj.get("turns", []):
            obs = turn.get("observation") or {}
            out[(task_id, int(turn["index"]))] = {
                "domain": traj.get("domain") or traj["task"].get("domain"),
                "action": turn.get("action_text", ""),
                "text": obs.get("text"),
                "kind": obs.get("kind"),
            }
    return out


def rows_from_compare(path: Path) -> list[dict]:
    return [
        {"task_id": r["task_id"], "domain": r["domain"], "turn": int(r["turn"]),
         "action": r.get("action", ""), "simulated": r.get("simulated"), "real": r.get("real")}
        for r in load_jsonl(path)
    ]


def rows_from_pair(real_path: Path, sim_path: Path) -> list[dict]:
    real, sim = turns_of(real_path), turns_of(sim_path)
    rows = []
    for key, r in sorted(real.items()):
        s = sim.get(key)
        rows.append({"task_id": key[0], "domain": r["domain"], "turn": key[1], "action": r["action"],
                     "simulated": s["text"] if s else None, "real": r["text"]})
    return rows


# --------------------------------------------------------------------------- running the simulation


def run_help() -> str:
    proc = subprocess.run([simgym_bin(), "run", "--help"], capture_output=True, text=True,
                          env=_wide_env())
    return proc.stdout + proc.stderr


def _wide_env():
    import os
    return dict(os.environ, COLUMNS="250", TERM="dumb", NO_COLOR="1")


def simgym_bin() -> str:
    local = ROOT / ".venv" / "bin" / "simgym"
    return str(local) if local.exists() else (shutil.which("simgym") or "simgym")


class CannotRun(Exception):
    """The simulation could not run: the message says why (exit status 2)."""


def unknown_options(extra: list[str], help_text: str) -> list[str]:
    if "--compare" not in help_text:
        raise CannotRun("could not read `simgym run --help`:\n" + help_text[-800:])
    names = [a.split("=", 1)[0] for a in extra if a.startswith("--")]
    return [n for n in names if not re.search(re.escape(n) + r"(?![\w-])", help_text)]


def simulate(files: list[str], workdir: Path, extra: list[str]) -> Path:
    unknown = unknown_options(extra, run_help())
    if unknown:
        raise CannotRun(f"simgym run does not know {', '.join(unknown)} (not in `simgym run --help`); "
                        "nothing was run, so there is no number for these settings.")
    out = workdir / "sim.jsonl"
    for suffix in ("", ".real", ".compare"):
        Path(str(out).replace(".jsonl", f"{suffix}.jsonl")).unlink(missing_ok=True)
    cmd = [simgym_bin(), "run", *files, "-o", str(out), "--compare", "real"]
    if not any(a.split("=", 1)[0] == "--concurrency" for a in extra):
        cmd += ["--concurrency", "2"]  # a small machine: two sandboxes and one model at a time
    cmd += extra
    print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_wide_env())
    compare = workdir / "sim.compare.jsonl"
    if proc.returncode != 0 or not compare.exists():
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        hint = ""
        if out.exists() and RECORDING.exists():
            hint = ("\nthe simulated run may still be whole: score it against the recording with\n"
                    f"  {Path(sys.argv[0]).as_posix()} --real {RECORDING.relative_to(ROOT)} --sim {out}")
        raise CannotRun("simgym run failed (exit status %d), no compare file:\n  %s%s"
                        % (proc.returncode, "\n  ".join(tail), hint))
    return compare


# --------------------------------------------------------------------------- scoring


def score(rows: list[dict]) -> dict[str, dict]:
    table: dict[str, dict] = defaultdict(lambda: {"turns": 0, "printing": 0, "exact_printing": 0,
                                                   "exact_all": 0, "missing": 0, "misses": []})
    for r in rows:
        d = table[r["domain"]]
        d["turns"] += 1
        if r["simulated"] is None or r["real"] is None:
            d["missing"] += 1
        ok = exact(r["domain"], r["simulated"], r["real"])
        d["exact_all"] += ok
        if r["real"] is not None and prints_something(r["domain"], r["action"], r["real"]):
            d["printing"] += 1
            d["exact_printing"] += ok
            if not ok:
                d["misses"].append(f"{r['task_id']}#{r['turn']}")
    return dict(sorted(table.items()))


def pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f}%" if b else "n/a"


def report(table: dict[str, dict], show_misses: bool) -> None:
    print(f"{'domain':<10}{'turns':>7}{'printing':>10}{'exact':>8}{'exact %':>10}"
          f"{'(all turns exact)':>20}")
    tot = defaultdict(int)
    for domain, d in table.items():
        print(f"{domain:<10}{d['turns']:>7}{d['printing']:>10}{d['exact_printing']:>8}"
              f"{pct(d['exact_printing'], d['printing']):>10}"
              f"{d['exact_all']:>10}/{d['turns']:<3} {pct(d['exact_all'], d['turns']):>6}")
        for k in ("turns", "printing", "exact_printing", "exact_all"):
            tot[k] += d[k]
    print(f"{'total':<10}{tot['turns']:>7}{tot['printing']:>10}{tot['exact_printing']:>8}"
          f"{pct(tot['exact_printing'], tot['printing']):>10}"
          f"{tot['exact_all']:>10}/{tot['turns']:<3} {pct(tot['exact_all'], tot['turns']):>6}")
    print("exact: terminal/swe text after stripping trailing blanks, " + MASK_NOTE
          + "; mcp equal as parsed JSON (MCP text items parsed too), else exact text")
    for domain, d in table.items():
        if d["missing"]:
            print(f"{domain}: {d['missing']} turns had no simulated or no real observation (counted wrong)")
        if show_misses and d["misses"]:
            print(f"{domain} misses: {' '.join(d['misses'])}")


def drift(real_rows: list[dict], recording: Path) -> None:
    """Fresh real observations against the committed recording."""
    recorded = turns_of(recording)
    same = differ = absent = 0
    where = []
    for r in real_rows:
        rec = recorded.get((r["task_id"], r["turn"]))
        if rec is None:
            absent += 1
            continue
        if exact(r["domain"], rec["text"], r["real"]):
            same += 1
        else:
            differ += 1
            where.append(f"{r['task_id']}#{r['turn']}")
    print(f"fresh real run vs {recording.relative_to(ROOT)}: {same} turns equal, {differ} differ"
          + (f", {absent} not in the recording" if absent else "")
          + (f" ({' '.join(where[:12])}{' ...' if len(where) > 12 else ''})" if where else ""))


EPISODE_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")
OWN_OPTIONS = {"--compare-file": 1, "--real": 1, "--sim": 1, "--workdir": 1, "--misses": 0,
               "-h": 0, "--help": 0}


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """This script's arguments, and the options meant for `simgym run` (after `--`, or any option
    this script does not know, with the values that follow it)."""
    own: list[str] = []
    extra: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            extra += argv[i + 1:]
            break
        name = a.split("=", 1)[0]
        if name in OWN_OPTIONS:
            n = 0 if "=" in a else OWN_OPTIONS[name]
            own += argv[i:i + 1 + n]
            i += 1 + n
        elif a.startswith("-"):
            extra.append(a)
            i += 1
            while i < len(argv) and not argv[i].startswith("-") and not argv[i].endswith(EPISODE_SUFFIXES):
                extra.append(argv[i])
                i += 1
        else:
            own.append(a)
            i += 1
    return own, extra


def main(argv: list[str] | None = None) -> int:
    own, extra = split_argv(list(sys.argv[1:] if argv is None else argv))
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Any other option (or anything after --) goes to `simgym run`, e.g. --execution off.")
    ap.add_argument("files", nargs="*", help="episode files (default: heldout/episodes/*/*.yaml)")
    ap.add_argument("--compare-file", type=Path, help="score this `--compare real` file instead of running")
    ap.add_argument("--real", type=Path, help="recorded real trajectories (with --sim)")
    ap.add_argument("--sim", type=Path, help="a simulated run of the same episodes (with --real)")
    ap.add_argument("--workdir", type=Path, help="where the run's files go (default: a temporary folder)")
    ap.add_argument("--misses", action="store_true", help="list the printing turns the simulation got wrong")
    args = ap.parse_args(own)

    if args.real or args.sim:
        if not (args.real and args.sim):
            ap.error("--real and --sim go together")
        if extra:
            ap.error("options for the simulation (%s) need a run: drop --real/--sim" % " ".join(extra))
        rows = rows_from_pair(args.real, args.sim)
        print(f"real: {args.real}  simulated: {args.sim}")
    elif args.compare_file:
        if extra:
            ap.error("options for the simulation (%s) need a run: drop --compare-file" % " ".join(extra))
        rows = rows_from_compare(args.compare_file)
        print(f"compare file: {args.compare_file}")
    else:
        files = args.files or DEFAULT_EPISODES
        workdir = args.workdir or Path(tempfile.mkdtemp(prefix="heldout-fidelity-"))
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            compare = simulate(files, workdir, extra)
        except CannotRun as exc:
            print(exc, file=sys.stderr)
            return 2
        rows = rows_from_compare(compare)
        print(f"compare file: {compare}" + (f"  (simulation options: {' '.join(extra)})" if extra else ""))
        if RECORDING.exists():
            drift(rows, RECORDING)
    if not rows:
        print("nothing to compare", file=sys.stderr)
        return 2
    table = score(rows)
    report(table, args.misses)
    save(
        "heldout_fidelity",
        rows=[
            {
                "domain": domain,
                "turns": d["turns"],
                "printing": d["printing"],
                "exact_printing": d["exact_printing"],
                "exact_rate": round(d["exact_printing"] / max(d["printing"], 1), 4),
                "exact_all": d["exact_all"],
                "missing": d["missing"],
            }
            for domain, d in table.items()
        ],
        summary={
            "turns": sum(d["turns"] for d in table.values()),
            "printing": sum(d["printing"] for d in table.values()),
            "exact_printing": sum(d["exact_printing"] for d in table.values()),
        },
        notes="Turns the simulator got exactly right against the real environment, per "
        "domain; exact_rate counts only turns whose real observation prints something.",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
