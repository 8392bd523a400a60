"""``simgym logs import`` time against the length of one value: it must grow linearly.

    .venv/bin/python benchmarks/logs_long_values.py                  # 1 KB .. 5 MB
    .venv/bin/python benchmarks/logs_long_values.py --sizes 1000,100000 --records 50

Each row writes a flat JSONL log of ``--records`` calls of a small service (customers
looked up, notes added) in which every note carries one long text value of the given
length, then imports it the way ``simgym logs import`` does (``read_logs`` then
``build_world``; masking runs over every string) in this process, and prints the wall
time, the time per MB of log and the ratio to the previous row's time against the ratio
of lengths. The text is the worst case the old masking had: letters, dots and "@"-free
runs (Python's backtracking email pattern restarted at every letter: 100 KB took 48 s)
with an email and a long digit run at its end, which must still be masked.

Times are from one run on one machine; nothing is asserted (tests/test_hostile_surfaces.py
holds the bound that is). On a shared machine, compare rows of the same run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path


def long_text(length: int) -> str:
    unit = "lorem.ipsum-dolor_sit+amet%consectetur."  # no space: one run of local-part text
    text = (unit * (length // len(unit) + 1))[: max(0, length - 60)]
    # something that must still be masked, at the end of the long value
    return text + " write to ada.meyer@bank.test, account 12345678901 "


def write_log(path: Path, records: int, length: int) -> None:
    text = long_text(length)
    with path.open("w", encoding="utf-8") as f:
        for i in range(records):
            session = f"s{i // 4}"
            customer = f"C-{i // 4:04d}"
            if i % 2 == 0:
                row = {
                    "session": session,
                    "time": f"2025-03-03T08:{i // 60 % 60:02d}:{i % 60:02d}Z",
                    "operation": "GET /customers/{customer_id}",
                    "method": "GET",
                    "path": f"/customers/{customer}",
                    "request": {"customer_id": customer},
                    "response": {"id": customer, "name": "Ada Meyer", "email": "ada@bank.test"},
                    "status": 200,
                }
            else:
                row = {
                    "session": session,
                    "time": f"2025-03-03T08:{i // 60 % 60:02d}:{i % 60:02d}Z",
                    "operation": "POST /customers/{customer_id}/notes",
                    "method": "POST",
                    "path": f"/customers/{customer}/notes",
                    "request": {"customer_id": customer, "text": text},
                    "response": {"id": f"N-{i}", "customer_id": customer, "text": text},
                    "status": 201,
                }
            f.write(json.dumps(row) + "\n")


def import_once(log: Path, out: Path) -> tuple[float, dict]:
    from simgym.logs import ImportReport, build_world, read_logs

    report = ImportReport()
    start = time.perf_counter()
    manifest = build_world(read_logs([log], report), out, report=report)
    return time.perf_counter() - start, manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="1000,10000,100000,1000000,5000000",
        help="value lengths in characters, comma-separated",
    )
    parser.add_argument("--records", type=int, default=20, help="calls in each log")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    work = Path(tempfile.mkdtemp(prefix="simgym-long-values-"))
    print(f"logs import, {args.records} records, one long value in half of them")
    print(
        f"{'value length':>13} {'log MB':>8} {'import s':>9} {'s per log MB':>13} "
        f"{'time x':>7} {'length x':>9}"
    )
    previous: tuple[int, float] | None = None
    try:
        for size in sizes:
            log = work / f"log-{size}.jsonl"
            write_log(log, args.records, size)
            mb = log.stat().st_size / 1e6
            seconds, _ = import_once(log, work / f"world-{size}")
            masked = not any(
                b"ada.meyer@bank.test" in f.read_bytes()
                for f in (work / f"world-{size}").rglob("*")
                if f.is_file()
            )
            grow = (
                f"{seconds / previous[1]:7.1f} {size / previous[0]:9.1f}"
                if previous
                else f"{'':>7} {'':>9}"
            )
            print(
                f"{size:>13,} {mb:8.2f} {seconds:9.3f} {seconds / mb:13.3f} {grow}"
                + ("" if masked else "  (email left unmasked!)")
            )
            previous = (size, seconds)
            shutil.rmtree(work / f"world-{size}", ignore_errors=True)
            log.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
