"""One place where benchmark scripts keep what they measured.

Every benchmark that reports numbers calls :func:`save` once at the end of a run. A run
becomes one JSON file under ``benchmarks/results/<name>/`` named by its UTC time, holding
the numbers and where they came from: the commit (and whether the tree had local
changes), the machine (CPU count, model, load average at the end) and the exact command.
The docs site's results pages are generated from these files, newest first, so no number
in the docs is typed by hand.

    from results import save          # benchmarks/ is on sys.path when a script runs
    save("rollout", rows=[{...}, ...], summary={"efficiency": 0.95})

``SIMGYM_RESULTS_DIR`` moves the folder (tests point it at a temporary directory);
``SIMGYM_RESULTS=off`` turns saving off.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = Path(__file__).resolve().parent / "results"


def results_dir() -> Path:
    """The folder runs are saved under (``SIMGYM_RESULTS_DIR`` or ``benchmarks/results``)."""
    return Path(os.environ.get("SIMGYM_RESULTS_DIR") or DEFAULT_DIR)


def _git(*args: str) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance(command: list[str] | None = None) -> dict[str, Any]:
    """Where a run comes from: commit, machine and the command line that made it."""
    argv = command if command is not None else [Path(sys.argv[0]).name, *sys.argv[1:]]
    script = Path(sys.argv[0])
    if command is None and script.parent.name == "benchmarks":
        argv = [f"benchmarks/{script.name}", *sys.argv[1:]]
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    return {
        "commit": _git("rev-parse", "HEAD") or "unknown",
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "time": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python " + shlex.join(argv),
        "machine": {
            "cpus": os.cpu_count(),
            "cpu": _cpu_model(),
            "python": platform.python_version(),
            "system": platform.system(),
            "load_average_at_end": load,
        },
    }


def save(
    name: str,
    *,
    rows: list[dict[str, Any]] | None = None,
    summary: dict[str, Any] | None = None,
    notes: str = "",
    command: list[str] | None = None,
) -> Path | None:
    """Write one run's numbers; returns the file, or None when saving is off.

    Args:
        name: the benchmark's name (one folder per benchmark, e.g. ``"rollout"``).
        rows: the table the script printed, one dict per row, column name to value.
        summary: the headline numbers (what a results page plots or quotes).
        notes: one or two sentences a reader needs to read the numbers right.
        command: the command line, when it is not this process's own ``sys.argv``.

    Returns:
        The path of the JSON file written.
    """
    if os.environ.get("SIMGYM_RESULTS", "").lower() in {"off", "0", "no"}:
        return None
    record = {
        "benchmark": name,
        **provenance(command),
        "notes": notes,
        "summary": summary or {},
        "rows": rows or [],
    }
    folder = results_dir() / name
    folder.mkdir(parents=True, exist_ok=True)
    stamp = record["time"].replace(":", "").replace("-", "")
    path = folder / f"{stamp}.json"
    n = 1
    while path.exists():
        n += 1
        path = folder / f"{stamp}-{n}.json"
    path.write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"results saved to {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return path


def load_all(name: str | None = None, folder: Path | None = None) -> list[dict[str, Any]]:
    """Every saved run (of one benchmark, or all), newest first."""
    base = folder or results_dir()
    pattern = f"{name}/*.json" if name else "*/*.json"
    runs = [json.loads(p.read_text(encoding="utf-8")) for p in base.glob(pattern)]
    return sorted(runs, key=lambda r: r.get("time", ""), reverse=True)
