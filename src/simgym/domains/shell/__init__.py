"""The shell family, shared by the terminal and swe domains: a small bash over the hidden
state's files that says what a command line certainly does, and the path that runs the
lines it cannot decide for real.

- :mod:`~simgym.domains.shell.parse`: how bash reads a line (quotes, comments,
  here-documents, commands, pipes, expansions, redirections).
- :mod:`~simgym.domains.shell.view`: the ledger's files as the shell sees them while a
  line runs, and what the line did (:class:`ShellResult`).
- :mod:`~simgym.domains.shell.table`: one :class:`Command` record per program (how
  simgym runs it, what it may write, whether it only reads, ...); every classification
  set is generated from it. The bodies are in :mod:`~simgym.domains.shell.fs`,
  :mod:`~simgym.domains.shell.text` and :mod:`~simgym.domains.shell.system`, over the
  shared option parser :mod:`~simgym.domains.shell.options`.
- :mod:`~simgym.domains.shell.line`: :func:`run_line`, a line over the ledger.
- :mod:`~simgym.domains.shell.unknown` and :mod:`~simgym.domains.shell.facts`: what a
  program simgym does not run may have changed, and what the world model is told.
- :mod:`~simgym.domains.shell.machine` (with ``declared``, ``ps``, ``reports``): a
  declared machine and what Debian 12's ``ps``, ``df``, ``free``, ``which``, ``dpkg -l``
  and ``nproc`` print about it.
- :mod:`~simgym.domains.shell.execution` and :mod:`~simgym.domains.shell.exec_ground`:
  which lines may run for real in a sandbox, and the terminal's run of them.
"""

from __future__ import annotations

from simgym.domains.shell.facts import file_fact
from simgym.domains.shell.line import run_line
from simgym.domains.shell.parse import OpenQuote, open_heredocs, reads_on, without_heredoc_bodies
from simgym.domains.shell.system import UNAME_DECLARED
from simgym.domains.shell.table import (
    EDITORS,
    INTERACTIVE,
    MODE_CHANGERS,
    PAGERS_AND_EDITORS,
    READ_ONLY,
    TABLE,
    Command,
)
from simgym.domains.shell.unknown import WRITING_OPTIONS
from simgym.domains.shell.view import C_LOCALES, SYSTEM_DIRS, Files, ShellResult

__all__ = [
    "C_LOCALES",
    "EDITORS",
    "INTERACTIVE",
    "MODE_CHANGERS",
    "PAGERS_AND_EDITORS",
    "READ_ONLY",
    "SYSTEM_DIRS",
    "TABLE",
    "UNAME_DECLARED",
    "WRITING_OPTIONS",
    "Command",
    "Files",
    "OpenQuote",
    "ShellResult",
    "file_fact",
    "open_heredocs",
    "reads_on",
    "run_line",
    "without_heredoc_bodies",
]
