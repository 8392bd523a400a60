"""Business worlds from operation logs: a company's logs (OpenTelemetry traces, OCEL and
XES process logs, HAR captures, MCP JSON-RPC logs, simgym trajectories, flat JSONL/CSV)
read as one stream of :class:`LogRecord`, and turned by :func:`build_world` into a folder
that describes the company's systems: interface, entities, mined rules, sessions.

    from simgym.logs import ImportReport, build_world, read_logs
    report = ImportReport()
    build_world(read_logs(["traces.jsonl"], report), "world/", report=report)
"""

from __future__ import annotations

from simgym.logs.model import ImportReport, LogRecord, ObjectRef, parse_time
from simgym.logs.registry import FORMATS, READERS, detect_format, read_logs
from simgym.logs.world import build_world

__all__ = [
    "FORMATS",
    "READERS",
    "ImportReport",
    "LogRecord",
    "ObjectRef",
    "build_world",
    "detect_format",
    "parse_time",
    "read_logs",
]
