"""``simgym experience``: build, query and inspect experience stores (recorded real
transitions that grounding shows the world model as examples; see simgym.experience)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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
    from simgym.experience.__main__ import print_build
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
    from simgym.experience.__main__ import print_query
    from simgym.experience.store import open_store

    with open_store(store, readonly=True) as opened:
        print_query(opened.similar(domain, action, k=k), _console, chars=chars)


@experience_app.command("stats")
@friendly_errors
def stats(store: Annotated[Path, typer.Argument(help="an experience store")]) -> None:
    """Rows per domain."""
    from simgym.experience.__main__ import print_stats
    from simgym.experience.store import open_store

    with open_store(store, readonly=True) as opened:
        print_stats(opened.stats(), _console)
