"""The ``simgym`` command: wiring only. Each command lives in a module of its own, and is
added here, one way; no command module imports this one."""

from __future__ import annotations

import os

import typer

from simgym.cli.bench import bench_app
from simgym.cli.console import size_help_output
from simgym.cli.data import export, record
from simgym.cli.doctor import doctor
from simgym.cli.experience import experience_app
from simgym.cli.factory import factory
from simgym.cli.logs import logs_app
from simgym.cli.mcp import mcp_app
from simgym.cli.play import domains, play
from simgym.cli.run import run
from simgym.cli.safety import safety_app
from simgym.cli.serve import serve
from simgym.cli.train import train_app
from simgym.cli.view import view
from simgym.cli.world import world_app

app = typer.Typer(
    help="Simulated agent environments driven by language world models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
size_help_output()  # --help in a pipe: wide enough that no option name is cut

for command in (domains, play, run, doctor, record, export, factory, serve, view):
    app.command()(command)
for group, name in (
    (bench_app, "bench"),
    (world_app, "world"),
    (train_app, "train"),
    (experience_app, "experience"),
    (mcp_app, "mcp"),
    (logs_app, "logs"),
    (safety_app, "safety"),
):
    app.add_typer(group, name=name)


def main() -> None:
    """Entry point of the ``simgym`` command."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    app()


if __name__ == "__main__":
    main()
