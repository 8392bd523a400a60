"""The shell's commands that report on the machine and the account: ``uname``, ``date``,
``id``, ``git`` outside a repository, ``python3`` printing literals, and the programs the
declared machine answers (``ps``, ``df``, ``free``, ``which``, ``dpkg -l``, ``nproc``;
:mod:`simgym.domains.shell.machine`)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from datetime import UTC

from simgym.domains import pyprint
from simgym.domains.shell import machine as declared
from simgym.domains.shell.view import Shell, Unknown

# uname's fields in the order GNU prints them, by short and long option. -s, -n and -o come
# from the scenario itself; the rest only when the scenario declares them (Session.uname).
_UNAME_FIELDS = (
    ("s", "kernel-name"),
    ("n", "nodename"),
    ("r", "kernel-release"),
    ("v", "kernel-version"),
    ("m", "machine"),
    ("p", "processor"),
    ("i", "hardware-platform"),
    ("o", "operating-system"),
)
_UNAME_LONG = {long: short for short, long in _UNAME_FIELDS}
# what a scenario may declare (Session.uname), by long option
UNAME_DECLARED = tuple(long for short, long in _UNAME_FIELDS if short in "rvmpi")


def run_uname(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    wanted: set[str] = set()
    everything = False
    for arg in args:
        if arg in ("-a", "--all"):
            everything = True
        elif arg.startswith("--") and arg[2:] in _UNAME_LONG:
            wanted.add(_UNAME_LONG[arg[2:]])
        elif arg.startswith("-") and len(arg) > 1 and set(arg[1:]) <= set("asnrvmpio"):
            everything |= "a" in arg
            wanted.update(arg[1:].replace("a", ""))
        else:
            raise Unknown  # an operand or an option uname does not have
    values = {"s": "Linux", "n": host, "o": "GNU/Linux"}
    values |= {short: session.uname[long] for short, long in _UNAME_FIELDS if long in session.uname}
    # -p and -i print "unknown" where the kernel does not say (Debian); -a leaves them out then
    values.setdefault("p", "unknown")
    values.setdefault("i", "unknown")
    if everything:
        shown = [k for k, _ in _UNAME_FIELDS if not (k in "pi" and values[k] == "unknown")]
    else:
        shown = [k for k, _ in _UNAME_FIELDS if k in (wanted or {"s"})]
    if any(k not in values for k in shown):
        raise Unknown  # a field the scenario does not declare: the model's to render
    # GNU prints the fields in its own order, whatever the order of the options
    return " ".join(values[k] for k in shown) + "\n", "", 0


# date +FORMAT conversions Python writes the way GNU date does (C.UTF-8 locale)
_DATE_CONVERSIONS = set("YmdHMSaAbBejyZzFTDRhIpu%")


def run_date(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    """The machine's clock (the same one `ls -l` shows), in UTC unless TZ says otherwise;
    a scenario without a clock (a recording of a real machine) leaves it to the model."""
    if session.clock is None or session.env.get("TZ") not in (None, "", "UTC", "UTC0"):
        raise Unknown
    now = session.clock.replace(tzinfo=UTC)
    form = "%a %b %e %H:%M:%S %Z %Y"
    for arg in args:
        if arg in ("-u", "--utc", "--universal"):
            continue
        if arg in ("-I", "--iso-8601", "--iso-8601=date"):
            form = "%Y-%m-%d"
        elif arg.startswith("+") and set(re.findall(r"%(.)", arg[1:])) <= _DATE_CONVERSIONS:
            form = arg[1:]
        else:
            raise Unknown
    return now.strftime(form) + "\n", "", 0


# git subcommands that need a repository: outside one, git refuses them in one line
_GIT_IN_A_REPOSITORY = frozenset(
    """status log add commit branch checkout switch show reset restore rm mv stash tag
    merge rebase push pull fetch remote rev-parse ls-files blame grep describe
    cherry-pick revert reflog""".split()
)
_NOT_A_REPOSITORY = "fatal: not a git repository (or any of the parent directories): .git\n"


def run_git(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    """Outside any repository git refuses what needs one; inside one, or with its own
    options before the subcommand, what it prints is the model's."""
    session.require("git")
    if not args or args[0] not in _GIT_IN_A_REPOSITORY:
        raise Unknown
    if any(key.startswith("GIT_") for key in session.env):
        raise Unknown  # GIT_DIR and friends point git elsewhere
    path = session.cwd
    if not session.is_dir(path):
        raise Unknown
    while True:
        if not session.files.in_scope(path):
            raise Unknown  # above a repository's root the ledger knows nothing (swe)
        # raises when a program simgym does not run may have made a .git here
        if session.exists(posixpath.join(path, ".git")):
            raise Unknown
        parent = posixpath.dirname(path)
        if parent == path:
            return "", _NOT_A_REPOSITORY, 128
        path = parent


def run_python(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    """A program that only prints literals prints them; any other is the model's."""
    session.require("python3")
    if len(args) >= 2 and args[0] == "-c":
        source = args[1]
    elif args and not args[0].startswith("-"):
        path = session.path(args[0])
        session.check_scope(path)
        if session.is_dir(path):
            raise Unknown  # a directory runs its __main__.py, or Python says it has none
        if not session.has(path):
            message = f"python3: can't open file '{path}': [Errno 2] No such file or directory\n"
            return "", message, 2
        source = session.read(path)
    else:
        raise Unknown  # the interactive interpreter, or options simgym does not model
    out = pyprint.literal_output(source)
    if out is None:
        raise Unknown
    return out, "", 0


# The terminal of the real backend (simgym.real.shell): what ps cuts its lines to.
TERMINAL_COLUMNS, TERMINAL_LINES = 160, 48


def declared_program(name: str) -> Callable[[Shell, list[str], str, str], tuple[str, str, int]]:
    """A program that reports on the machine, answered from the scenario's declared
    machine (:mod:`simgym.domains.machine`); the model's without one."""

    def run(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
        if session.machine is None:
            raise Unknown
        others = [w for w in session.pipeline if not (w and w[0] == name and w[1:] == args)]
        got = declared.answer(
            [name, *args],
            session.machine,
            user=user,
            cwd=session.cwd,
            now=session.clock,
            width=TERMINAL_COLUMNS if session.to_terminal else None,
            height=TERMINAL_LINES if session.to_terminal else None,
            env=session.env,
            pipeline=others,
            path_kind=lambda path: _path_kind(session, path),
        )
        if got is None:
            raise Unknown
        return got

    return run


def _path_kind(session: Shell, path: str) -> str | None:
    """What the state says is at ``path``: "dir", "exec", "file", "missing" or None."""
    path = session.path(path)
    if path in session.unknown:
        return None
    if path in session.dirs:
        return "dir"
    if path in session.content:
        return "exec" if session.modes.get(path, 0o644) & 0o111 else "file"
    parent = posixpath.dirname(path)
    if parent in session.dirs and parent not in session.unknown:
        return "missing"
    return None


def run_id(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    """The account as the sandboxes make it (the real backends' machines): the user in a
    group of its own, uid and gid 1000, or root."""
    number = 0 if user == "root" else 1000
    flags = "".join(a.lstrip("-") for a in args)
    if any(not a.startswith("-") for a in args) or set(flags) - set("ugGn"):
        raise Unknown  # another user's ids, or options simgym does not model
    if not flags:
        return f"uid={number}({user}) gid={number}({user}) groups={number}({user})\n", "", 0
    if len(set(flags) & set("ugG")) != 1:
        raise Unknown
    return (user if "n" in flags else str(number)) + "\n", "", 0
