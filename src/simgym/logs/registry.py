"""Which reader reads a file: the ``READERS`` registry (format name -> "module:attr"),
detection by extension and first bytes, and :func:`read_logs` over many files."""

from __future__ import annotations

import importlib
import inspect
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from simgym.core.errors import SimgymError
from simgym.core.registry import Registry
from simgym.logs.mapping import FieldMap
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
    group="simgym.log_readers",  # installed plugins add formats by entry point
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


def _reads_map(reader: Reader) -> bool:
    try:
        return "mapping" in inspect.signature(reader).parameters
    except (TypeError, ValueError):
        return False


def _note_looked_for(
    fmt: str, reader: Reader, report: ImportReport, mapping: FieldMap | None
) -> None:
    """Tell the report where this format's reader looks for each field (a reader module's
    ``LOOKS_FOR``), so a field never found can be explained."""
    module = importlib.import_module(getattr(reader, "__module__", "") or "builtins")
    looks: dict[str, str] = getattr(module, "LOOKS_FOR", {}) or {}
    for field, where in looks.items():
        report.look(field, f"{fmt}: {where}")
    if mapping is not None:
        for field in ("body", "actor", "role", "session"):
            if getattr(mapping, field):
                report.look(field, f"--map {field}: {', '.join(getattr(mapping, field))}")
        if mapping.objects:
            report.look("objects", "--map objects: " + ", ".join(mapping.objects.values()))


def _together(reader: Reader) -> Callable[..., Iterator[LogRecord]] | None:
    """A reader module's ``read_together`` (files of its format read as one), if any."""
    module = importlib.import_module(getattr(reader, "__module__", "") or "builtins")
    return getattr(module, "read_together", None)


def read_logs(
    files: Iterable[str | os.PathLike[str]],
    report: ImportReport,
    *,
    format: str = "auto",
    mapping: FieldMap | None = None,
) -> Iterator[LogRecord]:
    """Records from every file in turn (streamed), each with its own or the given format;
    ``report`` gets a line per file with the format and counts. A format whose reader
    module has ``read_together`` (OTLP: one call's spans may sit in several files) reads
    all its files as one, at the first one's turn. ``mapping`` (a mapping file's
    :class:`FieldMap`) is handed to every reader; a format whose reader cannot use one is
    an error, never silently read without it."""
    paths: list[tuple[Path, str]] = []
    for name in files:
        path = Path(name)
        if not path.is_file():
            raise SimgymError(f"log file not found: {path}")
        paths.append((path, detect_format(path) if format == "auto" else format))
    grouped: set[str] = set()
    for path, fmt in paths:
        reader = READERS.get(fmt)
        if mapping is not None and not _reads_map(reader):
            raise SimgymError(f"{path}: the {fmt} reader does not read a mapping file (--map)")
        _note_looked_for(fmt, reader, report, mapping)
        together = _together(reader)
        if together is not None:
            if fmt not in grouped:
                grouped.add(fmt)
                group = [p for p, f in paths if f == fmt]
                yield from _read_group(together, group, fmt, report, mapping)
            continue
        yield from _read_one(reader, path, fmt, report, mapping)


def _read_group(
    together: Callable[..., Iterator[LogRecord]],
    group: list[Path],
    fmt: str,
    report: ImportReport,
    mapping: FieldMap | None,
) -> Iterator[LogRecord]:
    counts: dict[str, dict[str, int]] = {}
    extra = {"mapping": mapping} if mapping is not None else {}
    try:
        for record in together(group, report, counts, **extra):
            report.records += 1
            yield record
    except RecursionError:
        raise SimgymError(f"{', '.join(map(str, group))}: nested too deeply to read") from None
    for path in group:
        row = counts.get(str(path), {"read": 0, "records": 0, "skipped": 0})
        report.files.append(
            {
                "path": str(path),
                "format": fmt,
                "read": row["read"],
                "records": row["records"],
                "skipped": row["skipped"],
            }
        )


def _read_one(
    reader: Reader, path: Path, fmt: str, report: ImportReport, mapping: FieldMap | None
) -> Iterator[LogRecord]:
    units = reader(path, report, mapping=mapping) if mapping is not None else reader(path, report)
    read_before, records_before = report.read, report.records
    skipped_before = report.skipped_total
    try:
        for record in units:
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
