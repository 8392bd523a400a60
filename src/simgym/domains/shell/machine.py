"""A declared machine: its processes, disks, memory and packages, and what Debian 12's own
programs print about them.

A simulated terminal whose ``ps aux``, ``df -h`` or ``free -m`` the world model invents
teaches an agent a machine that changes every time it looks. A :class:`Machine` declares
those facts once; :func:`answer` prints them as the real programs of Debian 12 (bookworm)
do -- procps-ng 4.0.2 (``ps``, ``free``), GNU coreutils 9.1 (``df``, ``nproc``), dpkg 1.21
(``dpkg -l``) and debianutils 5.7 (``which``) -- column widths, rounding and exit status
included, and says ``None`` for every option it does not model, so the world model renders
those.

The formats were taken from those programs' sources at the Debian 12 versions and checked
against the real programs (tests/test_machine.py runs them over a faked ``/proc`` and
``/proc/meminfo``, and over tmpfs mounts of chosen sizes).

``default_profile()`` is a small Debian 12 server recorded on a real machine by
``scripts/record_machine_profile.py`` (what was recorded and what was chosen is said in
the profile's ``notes``); ``default_uname()`` gives that machine's ``uname`` fields.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from datetime import datetime

from simgym.domains.shell.declared import (
    Machine,
    Memory,
    Mount,
    Package,
    PathKind,
    Process,
    Result,
    Session,
    command_name,
    default_profile,
    default_uname,
)
from simgym.domains.shell.ps import ps_output
from simgym.domains.shell.reports import (
    df_output,
    dpkg_output,
    free_output,
    human_readable,
    nproc_output,
    os_release_output,
    which_output,
)

__all__ = [
    "Machine",
    "Memory",
    "Mount",
    "Package",
    "PathKind",
    "Process",
    "Result",
    "Session",
    "answer",
    "command_name",
    "default_profile",
    "default_uname",
    "human_readable",
]

# Locales whose number formats are the C locale's (a '.' decimal point, no grouping).
_PLAIN_LOCALES = frozenset({"C", "POSIX", "C.UTF-8", "C.utf8", "en_US.UTF-8", "en_US.utf8"})

# -- answer ------------------------------------------------------------------------------


def answer(
    argv: Sequence[str],
    machine: Machine,
    *,
    user: str,
    cwd: str,
    now: datetime | None = None,
    width: int | None = None,
    height: int | None = None,
    env: Mapping[str, str] | None = None,
    forks: int = 0,
    pipeline: Sequence[Sequence[str]] = (),
    path_kind: PathKind | None = None,
) -> Result | None:
    """What one command prints on ``machine`` and its exit status, or None when the command
    or one of its options is not modelled (the world model renders it then).

    ``argv``: the command's words after the shell's expansion and quote removal.
    ``user``/``cwd``: who runs it, where. ``now``: the machine's clock (START of the shell
    and of ``ps``; without it the formats that show START answer None). ``width``/
    ``height``: the terminal's size when the output goes to the terminal, None when it goes
    to a pipe or file (``ps`` cuts lines at the width, ``dpkg -l`` pages). ``env``: the
    shell's environment (PATH for ``which``, COLUMNS, LC_ALL/LANG, PAGER). ``forks``: how
    many processes the session started before this command (``ps`` gets pid shell+1+forks).
    ``pipeline``: the other commands of ``ps``'s pipeline (``grep sshd`` in ``ps aux | grep
    sshd``), which ``ps`` sees running. ``path_kind``: what the caller's file ledger knows
    of a path ("dir", "file", "exec", "missing", or None for unknown); without it every
    path ``df`` is given exists and only the declared programs are on the PATH.
    """
    if not argv:
        return None
    env = dict(env or {})
    if not _plain_locale(machine, env):
        return None
    name = posixpath.basename(argv[0])
    args = list(argv[1:])
    if name == "ps":
        return ps_output(args, machine, user, now, width, env, forks, pipeline)
    if name == "df":
        return df_output(args, machine, cwd, path_kind)
    if name == "free":
        return free_output(args, machine)
    if name == "which":
        return which_output(args, machine, user, cwd, env, path_kind)
    if name in ("dpkg", "dpkg-query"):
        return dpkg_output(args, machine, width, height, env)
    if name == "nproc":
        return nproc_output(args, machine, env)
    if name == "cat":
        return os_release_output(args, machine, cwd, path_kind)
    return None


def _plain_locale(machine: Machine, env: Mapping[str, str]) -> bool:
    for var in ("LC_ALL", "LC_NUMERIC", "LANG"):
        if env.get(var):
            return env[var] in _PLAIN_LOCALES
    return machine.locale in _PLAIN_LOCALES
