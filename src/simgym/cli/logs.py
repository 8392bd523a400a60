"""``simgym logs``: turn a company's operation logs into a business world folder, and
look inside one (see simgym.logs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from simgym.cli.console import make_console
from simgym.cli.errors import friendly_errors

_FORMATS = "auto|otlp|ocel|xes|har|mcp|trajectories|jsonl|csv"

logs_app = typer.Typer(
    help="Business worlds from operation logs: import OpenTelemetry (otlp), OCEL 2.0 "
    "(ocel), XES (xes), HAR (har), MCP JSON-RPC (mcp), simgym trajectories "
    "(trajectories) and flat jsonl/csv logs into a world folder, and inspect it.",
    no_args_is_help=True,
)
_console = make_console()


@logs_app.command("import")
@friendly_errors
def import_logs(
    files: Annotated[list[Path], typer.Argument(help="log files, read as streams")],
    out: Annotated[Path, typer.Option("--out", "-o", help="the world folder to write")],
    format: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help=f"{_FORMATS}: otlp = OpenTelemetry OTLP JSON lines (Collector file "
            "exporter); ocel = OCEL 2.0 JSON or SQLite; xes = IEEE 1849 XES; har = HAR 1.2; "
            "mcp = MCP JSON-RPC lines; trajectories = simgym trajectory JSONL; jsonl/csv = "
            "flat rows (session,time,actor,role,operation,method,route,request,status,"
            "response); auto detects each file's format",
        ),
    ] = "auto",
    mask_key: Annotated[
        str, typer.Option(help="key of the pseudonyms: the same key gives the same ones")
    ] = "simgym",
) -> None:
    """Read log files and write a business world: interface, entities, rules, sessions."""
    from simgym.core.errors import SimgymError
    from simgym.logs import FORMATS, ImportReport, build_world, read_logs

    if format != "auto" and format not in FORMATS:
        raise SimgymError(f"unknown format {format!r}; one of {_FORMATS}")
    report = ImportReport()
    manifest = build_world(read_logs(files, report, format=format), out, report=report)
    for source in report.files:
        _console.print(
            f"{escape(source['path'])} [dim]({source['format']})[/]: read {source['read']}, "
            f"records {source['records']}, skipped {source['skipped']}",
            highlight=False,
        )
    counts = manifest["counts"]
    _console.print(
        f"[bold]{escape(str(out))}[/]: {counts['records']} records, {counts['sessions']} "
        f"sessions, {counts['operations']} operations, {counts['entity_types']} entity types; "
        f"skipped {report.skipped_total}",
        highlight=False,
    )
    for reason, n in report.skipped.most_common():
        _console.print(f"  skipped {n}: {escape(reason)}", highlight=False)


@logs_app.command("inspect")
@friendly_errors
def inspect(
    world: Annotated[Path, typer.Argument(help="a world folder written by `simgym logs import`")],
) -> None:
    """Show a world's operations, entity types and mined rules."""
    from simgym.core.errors import SimgymError

    try:
        manifest = json.loads((world / "manifest.json").read_text())
        interface = json.loads((world / "interface.json").read_text())
        entities = json.loads((world / "entities.json").read_text())
        rules = json.loads((world / "rules.json").read_text())
    except (OSError, ValueError) as exc:
        raise SimgymError(f"not a logs world folder: {world} ({exc})") from None
    counts = manifest.get("counts", {})
    _console.print(
        f"[bold]{escape(str(world))}[/]: {counts.get('records', 0)} records, "
        f"{counts.get('sessions', 0)} sessions, created {manifest.get('created_at', '?')}",
        highlight=False,
    )
    perf = {row["operation"]: row for row in rules.get("performance", [])}
    ops = Table(title="operations")
    for column in ("operation", "calls", "arguments", "statuses", "error rate", "p50 ms"):
        ops.add_column(column)
    for op in interface.get("operations", []):
        schema = op.get("arguments") or {}
        required = set(schema.get("required", []))
        args = ", ".join(
            f"{k}{'' if k in required else '?'}" for k in (schema.get("properties") or {})
        )
        row = perf.get(op["name"], {})
        ops.add_row(
            escape(op["name"]),
            str(op.get("calls", 0)),
            escape(args),
            escape(" ".join(f"{k}×{v}" for k, v in op.get("statuses", {}).items())),
            f"{row.get('error_rate', 0):.0%}",
            str(row.get("p50_ms", "")),
        )
    _console.print(ops)
    types = Table(title="entity types")
    for column in ("type", "objects", "fields"):
        types.add_column(column)
    for name, info in entities.get("types", {}).items():
        fields = ", ".join((info.get("fields") or {}).get("properties", {}))
        types.add_row(escape(name), str(info.get("count", 0)), escape(fields))
    _console.print(types)
    table = Table(title="rules")
    table.add_column("kind")
    table.add_column("rule")
    table.add_column("count")
    for otype, cycle in rules.get("life_cycles", {}).items():
        for t in cycle.get("transitions", []):
            rule = f"{otype}: {t['from']} → {t['to']}"
            table.add_row("transition", escape(rule), str(t["count"]))
        for t in cycle.get("refused", []):
            rule = f"{otype}: {t['operation']} refused in {t['from']} ({t['status']})"
            table.add_row("refused", escape(rule), str(t["count"]))
    for p in rules.get("permissions", []):
        allowed = ", ".join(p.get("allowed_roles", [])) or "-"
        rule = f"{p['operation']}: role {p['role']} denied {p['status']} (allowed: {allowed})"
        table.add_row("permission", escape(rule), str(p["count"]))
    for r in rules.get("required_fields", []):
        rule = f"{r['operation']}: {r['field']} required ({r['status']})"
        table.add_row("required", escape(rule), str(r["count"]))
    _console.print(table)
