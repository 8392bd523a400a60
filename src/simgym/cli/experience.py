"""``simgym experience``: build, query and inspect experience stores (recorded real
transitions that grounding shows the world model as examples; see simgym.experience)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from simgym.cli.console import make_console
from simgym.cli.errors import friendly_errors

experience_app = typer.Typer(
    help="Experience stores: recorded real transitions, retrieved as examples for the "
    "world model (use with --experience on play and run).",
    no_args_is_help=True,
)
_console = make_console()
_errors = make_console(stderr=True)


@experience_app.command("build")
@friendly_errors
def build(
    out: Annotated[Path, typer.Argument(help="the store file to create or extend")],
    files: Annotated[
        list[Path],
        typer.Argument(
            help="trajectory JSONL, AgentWorldBench rows, SFT rows, factory output folders"
        ),
    ],
    domain: Annotated[
        str | None, typer.Option(help="domain for files whose lines do not name one")
    ] = None,
) -> None:
    """Index recorded transitions; rerunning on the same files adds nothing."""
    from simgym.core.errors import SimgymError
    from simgym.experience.store import build_store

    report = build_store(out, files, domain=domain)
    print_build(report, _errors)
    if not report["transitions"]:  # an empty store is no store: say so, and fail
        problems = report.get("problems") or []
        first = f" (first: {problems[0]})" if problems else ""
        raise SimgymError(
            f"no transition found in {len(report['files'])} file(s): {report['lines']} lines "
            f"read, {report['malformed']} malformed{first}"
        )


@experience_app.command("query")
@friendly_errors
def query(
    store: Annotated[Path, typer.Argument(help="an experience store")],
    domain: Annotated[str, typer.Argument(help="terminal, mcp, swe, ...")],
    action: Annotated[str, typer.Argument(help="the action text, as the world model sees it")],
    k: Annotated[int, typer.Option("-k", help="how many transitions")] = 3,
    chars: Annotated[int, typer.Option(help="characters of each observation to show")] = 400,
) -> None:
    """Show the transitions a world model would be given for ACTION."""
    from simgym.experience.store import open_store

    with open_store(store, readonly=True) as opened:
        print_query(opened.similar(domain, action, k=k), _console, chars=chars)


@experience_app.command("stats")
@friendly_errors
def stats(store: Annotated[Path, typer.Argument(help="an experience store")]) -> None:
    """Rows per domain."""
    from simgym.experience.store import open_store

    with open_store(store, readonly=True) as opened:
        print_stats(opened.stats(), _console)


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
