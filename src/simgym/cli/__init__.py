"""The ``simgym`` command line: :mod:`simgym.cli.main` wires the command groups."""

from simgym.cli.main import app, main

__all__ = ["app", "main"]
