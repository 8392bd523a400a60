"""Sim2real success on the real system, with 95% intervals, from the stored reports.

``examples/sim2real/run.py`` plays each trained policy on the real system (and in the
twin) and writes ``examples/sim2real/results*/CONDITION/report.json``; each run of that
experiment takes hours on two cores. This script reruns nothing: it gathers the success
rates and 95% intervals (``ci95``) those reports hold into one results file (``save``), so the
docs' results page plots them with the commit and command of this collection.

    .venv/bin/python benchmarks/sim2real_reports.py [--backend real]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from results import save

HERE = Path(__file__).resolve().parent.parent / "examples" / "sim2real"


def collect(backend: str) -> list[dict]:
    """One row per (results folder, condition) that played on ``backend``."""
    rows = []
    for path in sorted(HERE.glob("results*/*/report.json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        numbers = report.get("backends", {}).get(backend)
        if not numbers or "ci95" not in numbers:
            continue
        suite = path.parent.parent.name.removeprefix("results").lstrip("-") or "records"
        rows.append(
            {
                "label": f"{suite}/{report.get('condition', path.parent.name)}",
                "folder": str(path.parent.relative_to(HERE.parent.parent)),
                "backend": backend,
                "episodes": numbers["episodes"],
                "successes": numbers["successes"],
                "success": round(numbers["success_rate"], 4),
                "ci_low": round(numbers["ci95"][0], 4),
                "ci_high": round(numbers["ci95"][1], 4),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="real", choices=["real", "sim"])
    args = parser.parse_args()
    rows = collect(args.backend)
    for row in rows:
        print(
            f"{row['label']:<40} {row['successes']:>3}/{row['episodes']:<3} "
            f"{row['success']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]"
        )
    save(
        "sim2real",
        rows=rows,
        summary={"backend": args.backend, "reports": len(rows)},
        notes="Gathered from the stored reports of examples/sim2real/run.py (episodes played "
        "at earlier commits; see each folder's report.json for its policy and settings). "
        "Success on the " + args.backend + " backend with its 95% interval (the report's ci95).",
    )


if __name__ == "__main__":
    main()
