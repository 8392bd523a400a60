"""Consoles for the command line that do not cut what they print in a pipe.

rich sizes its output to the terminal. When the output is a pipe or a file it has no
terminal to measure and assumes 80 columns, so typer's ``--help`` and simgym's tables cut
option names and headers to fit (``--agent-model-p…``, ``dom…``): exactly where output is
read by scripts, grep or a log, the names are lost. Where the stream is not a terminal,
the consoles here use ``$COLUMNS`` when it is set, else :data:`PIPE_WIDTH` for simgym's
own output and :data:`HELP_WIDTH` for ``--help``. On a terminal, rich measures it as
before (a wider layout would be wrapped again by the terminal and garble the boxes).
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from rich.console import Console

# Every simgym help screen fits in 120 columns without cutting an option name; its boxed
# panels span the whole width, so wider would only pad them.
HELP_WIDTH = 120
# Tables are sized to their content, not to the console, so a wide console costs them
# nothing; `simgym run`'s eleven-column summary needs about 150 columns.
PIPE_WIDTH = 200


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (ValueError, OSError):  # a closed or detached stream
        return False


def width_for(stream: TextIO | None, default: int = PIPE_WIDTH) -> int | None:
    """The width to render for ``stream``: None on a terminal (rich measures it, and
    honours ``$COLUMNS``), else ``$COLUMNS`` if it is a positive number, else
    ``default``."""
    if _is_terminal(stream):
        return None
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return default


def make_console(*, stderr: bool = False, **options: Any) -> Console:
    """A rich console for stdout (or stderr) sized by :func:`width_for`. The width is
    fixed when the console is made, as rich does with the terminal's."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=width_for(stream), **options)


def size_help_output() -> None:
    """Make typer's ``--help`` (printed by a console typer builds itself, sized by
    ``typer.rich_utils.MAX_WIDTH``) follow :func:`width_for` for stdout, unless the user
    chose a width with ``$TERMINAL_WIDTH``, which typer reads."""
    try:
        import typer.rich_utils as rich_utils
    except ImportError:  # typer without rich: help is plain text, nothing is cut
        return
    if not os.environ.get("TERMINAL_WIDTH"):
        rich_utils.MAX_WIDTH = width_for(sys.stdout, HELP_WIDTH)
