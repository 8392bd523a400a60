"""The flat form: one call a line (JSONL) or a row (CSV) with the columns

``session, time, actor, role, operation, method, route, request, status, response``

and optionally ``system``, ``error``, ``duration_ms``. ``time`` is ISO 8601 or epoch
seconds; ``operation`` is a tool or event name, or left empty for HTTP rows that give
``method`` and ``route`` (a template like "/loans/{id}", or a concrete path, which is
turned into one). ``request`` and ``response`` are JSON values in JSONL and JSON text in
CSV (text that is not JSON stays text). ``status`` is the HTTP status (a number);
``error`` true/false. Rows without an operation or route are skipped, with the reason."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

from simgym.logs.jsonstream import numbered_lines
from simgym.logs.model import (
    JSON,
    ImportReport,
    LogRecord,
    maybe_json,
    parse_time,
    query_arguments,
    route_objects,
    templatize,
)

COLUMNS = (
    "session",
    "time",
    "actor",
    "role",
    "operation",
    "method",
    "route",
    "request",
    "status",
    "response",
)


LOOKS_FOR = {
    "body": "columns request, response",
    "actor": "column actor",
    "role": "column role",
    "session": "column session",
    "objects": "route parameters and answers with an id (HTTP rows)",
}


def _text(value: JSON) -> str | None:
    return None if value in (None, "") else str(value)


def row_record(row: dict[str, JSON], source: str, *, parse_bodies: bool) -> LogRecord | str:
    method = _text(row.get("method"))
    route = _text(row.get("route"))
    operation = _text(row.get("operation"))
    path = _text(row.get("path"))
    if route and "{" not in route and (method or not operation):
        path, route = path or route, templatize(route)
    if not operation and not route:
        return "row without an operation or route"
    status_raw = row.get("status")
    try:
        status = int(status_raw) if status_raw not in (None, "") else None  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "status is not a number"
    request, response = row.get("request"), row.get("response")
    if request in (None, "") and method in ("GET", "get", "DELETE", "delete"):
        request = query_arguments(path)
    if parse_bodies:
        request = maybe_json(request) if request != "" else None
        response = maybe_json(response) if response != "" else None
    error = row.get("error")
    error = str(error).lower() in ("true", "1", "yes") if error not in (None, "") else False
    duration = row.get("duration_ms")
    op = route if method and route else (operation or route or "")
    session = _text(row.get("session"))
    return LogRecord(
        session=session or "default",
        operation=op,
        system=_text(row.get("system")) or ("http" if method else "tool"),
        time=parse_time(row.get("time")),
        actor=_text(row.get("actor")),
        role=_text(row.get("role")),
        method=method.upper() if method else None,
        arguments=request,
        status=status,
        error=error or (status is not None and status >= 500),
        response=response,
        objects=route_objects(op, path, response) if method and route else [],
        path=path if method else None,
        duration_ms=float(duration) if duration not in (None, "") else None,  # type: ignore[arg-type]
        source=source,
        attributes={} if session else {"session_from": "default"},
    )


def read_jsonl(path: Path, report: ImportReport) -> Iterator[LogRecord]:
    """Records from a flat JSONL file, one at a time."""
    for number, raw in numbered_lines(path):
        report.read += 1
        where = f"{path.name}:{number}"
        try:
            row = json.loads(raw)
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
            made = row_record(row, where, parse_bodies=False)
        except (ValueError, TypeError) as exc:
            made, where = "unreadable JSON line", f"{where}: {_first_line(exc)}"
        except RecursionError:
            made, where = "unreadable JSON line", f"{where}: nested too deeply"
        if isinstance(made, str):
            report.skip(made, where)
        else:
            yield made


def read_csv(path: Path, report: ImportReport) -> Iterator[LogRecord]:
    """Records from a flat CSV file with a header row, one at a time."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        for number, row in enumerate(csv.DictReader(f), 2):
            report.read += 1
            if None in row:  # more cells than the header names
                report.skip("row with more cells than columns")
                continue
            try:
                made = row_record(row, f"{path.name}:{number}", parse_bodies=True)
            except (ValueError, TypeError):
                made = "unreadable row"
            if isinstance(made, str):
                report.skip(made)
            else:
                yield made


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200] or type(exc).__name__
