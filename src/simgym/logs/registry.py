"""Which reader reads a file: the ``READERS`` registry (format name -> "module:attr"),
detection by extension and first bytes, and :func:`read_logs` over many files."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from simgym.core.errors import SimgymError
from simgym.core.registry import Registry
from simgym.logs.model import ImportReport, LogRecord

Reader = Callable[[Path, ImportReport], Iterator[LogRecord]]

_R = "simgym.logs.readers."
READERS: Registry[Reader] = Registry(
    "log format",
    {
        "otlp": _R + "otlp:read",
        "ocel": _R + "ocel:read",
        "xes": _R + "xes:read",
        "har": _R + "har:read",
        "mcp": _R + "mcp:read",
        "trajectories": _R + "trajectories:read",
        "jsonl": _R + "flat:read_jsonl",
        "csv": _R + "flat:read_csv",
    },
)
FORMATS = ("otlp", "ocel", "xes", "har", "mcp", "trajectories", "jsonl", "csv")

_HEAD = 1 << 16


def detect_format(path: str | os.PathLike[str]) -> str:
    """The format of a log file, from its extension and then its first bytes."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".sqlite", ".sqlite3", ".db"):
        return "ocel"
    if suffix == ".har":
        return "har"
    if suffix in (".xes", ".xml"):
        return "xes"
    if suffix in (".csv", ".tsv"):
        return "csv"
    with open(path, "rb") as f:
        head = f.read(_HEAD)
    if head.startswith(b"SQLite format 3"):
        return "ocel"
    text = head.decode("utf-8", errors="replace").lstrip()
    if text.startswith("<"):
        return "xes"
    if '"resourceSpans"' in text[:4096] or '"resource_spans"' in text[:4096]:
        return "otlp"
    if '"objectTypes"' in text or '"eventTypes"' in text:
        return "ocel"
    if '"entries"' in text and '"log"' in text[:200]:
        return "har"
    first = text.split("\n", 1)[0]
    try:
        line = json.loads(first)
    except ValueError:
        line = None
    if isinstance(line, dict):
        message = line.get("message") if isinstance(line.get("message"), dict) else line
        if message.get("jsonrpc") == "2.0":
            return "mcp"
        if "episode_id" in line and "turns" in line:
            return "trajectories"
    return "jsonl"


def read_logs(
    files: Iterable[str | os.PathLike[str]],
    report: ImportReport,
    *,
    format: str = "auto",
) -> Iterator[LogRecord]:
    """Records from every file in turn (streamed), each with its own or the given format;
    ``report`` gets a line per file with the format and counts."""
    for name in files:
        path = Path(name)
        if not path.is_file():
            raise SimgymError(f"log file not found: {path}")
        fmt = detect_format(path) if format == "auto" else format
        reader = READERS.get(fmt)
        read_before, records_before = report.read, report.records
        skipped_before = report.skipped_total
        try:
            for record in reader(path, report):
                report.records += 1
                yield record
        except RecursionError:  # a reader's JSON or XML nested beyond Python's stack
            raise SimgymError(
                f"{path}: nested too deeply to read (after {report.read - read_before} units)"
            ) from None
        report.files.append(
            {
                "path": str(path),
                "format": fmt,
                "read": report.read - read_before,
                "records": report.records - records_before,
                "skipped": report.skipped_total - skipped_before,
            }
        )
