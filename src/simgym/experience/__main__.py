"""``python -m simgym.experience``: build, query and inspect an experience store.

    python -m simgym.experience build OUT.db FILES... [--domain D] [--json]
    python -m simgym.experience query OUT.db DOMAIN ACTION [-k 3] [--chars 400]
    python -m simgym.experience stats OUT.db

Kept apart from the main ``simgym`` CLI (plain argparse, no typer) so it can be wired in
later without either depending on the other: :func:`main` takes ``argv`` and returns an
exit code, and every command is a thin layer over :func:`simgym.experience.build_store`
and :class:`simgym.experience.ExperienceStore`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from simgym.cli.console import make_console
from simgym.core.errors import SimgymError
from simgym.experience.store import build_store, open_store


def main(argv: Sequence[str] | None = None, *, console: Console | None = None) -> int:
    """Run one command; returns the exit code (1 on a reported error)."""
    console = console or make_console()
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            report = build_store(args.out, args.files, domain=args.domain)
            if args.json:
                console.print_json(json.dumps(report))
            else:
                print_build(report, console)
        elif args.command == "query":
            with open_store(args.store, readonly=True) as store:
                found = store.similar(args.domain, args.action, k=args.k)
            print_query(found, console, chars=args.chars)
        else:
            with open_store(args.store, readonly=True) as store:
                print_stats(store.stats(), console)
    except SimgymError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 1
    return 0


def print_build(report: dict[str, Any], console: Console) -> None:
    """The counts of a build: rows added per domain, then what was passed over."""
    table = Table(title=f"experience store {escape(report['store'])}")
    table.add_column("domain")
    table.add_column("added", justify="right")
    table.add_column("rows now", justify="right")
    for domain, rows in report["rows"].items():
        table.add_row(escape(domain), str(report["domains"].get(domain, 0)), str(rows))
    table.add_row("[b]total[/b]", f"[b]{report['added']}[/b]", f"[b]{report['total']}[/b]")
    console.print(table)
    counts = Table(show_header=False, box=None)
    counts.add_column(style="dim")
    counts.add_column(justify="right")
    counts.add_row("files", str(len(report["files"])))
    counts.add_row("lines read", str(report["lines"]))
    counts.add_row("transitions read", str(report["transitions"]))
    counts.add_row("already in the store", str(report["duplicates"]))
    counts.add_row("malformed lines", str(report["malformed"]))
    for reason, count in report["skipped"].items():
        counts.add_row(f"skipped: {escape(reason)}", str(count))
    counts.add_row("seconds", f"{report['seconds']:.2f}")
    console.print(counts)
    for problem in report["problems"]:
        console.print(f"[yellow]malformed:[/yellow] {escape(problem)}")


def print_query(found: Sequence[Any], console: Console, *, chars: int = 400) -> None:
    """The retrieved transitions, best first."""
    if not found:
        console.print("no similar transitions")
        return
    table = Table(show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("source")
    table.add_column("action")
    table.add_column("observation")
    for index, item in enumerate(found, 1):
        observation = item.observation
        if len(observation) > chars:
            observation = observation[:chars] + " ..."
        table.add_row(
            str(index),
            f"{item.score:.2f}",
            escape(item.source),
            escape(item.action),
            escape(observation),
        )
    console.print(table)


def print_stats(rows: dict[str, int], console: Console) -> None:
    """Rows per domain."""
    table = Table()
    table.add_column("domain")
    table.add_column("rows", justify="right")
    for domain, count in rows.items():
        table.add_row(escape(domain), str(count))
    table.add_row("[b]total[/b]", f"[b]{sum(rows.values())}[/b]")
    console.print(table)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m simgym.experience",
        description="Build and query an index of recorded real transitions.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="index trajectory, row or factory files")
    build.add_argument("out", help="the store (SQLite file), created if needed")
    build.add_argument("files", nargs="+", help="JSONL files or folders (factory output)")
    build.add_argument("--domain", help="the domain of every record (chat rows need one)")
    build.add_argument("--json", action="store_true", help="print the report as JSON")
    query = commands.add_parser("query", help="the transitions most like an action")
    query.add_argument("store")
    query.add_argument("domain")
    query.add_argument("action", help='the action as rendered, e.g. \'{"name": "ls"}\'')
    query.add_argument("-k", type=int, default=3, help="how many (default 3)")
    query.add_argument("--chars", type=int, default=400, help="observation characters shown")
    stats = commands.add_parser("stats", help="rows per domain")
    stats.add_argument("store")
    return parser


if __name__ == "__main__":
    sys.exit(main())
