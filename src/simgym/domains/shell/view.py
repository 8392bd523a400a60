"""The shell's view of the ledger's files while a command line runs (:class:`Shell`), what
the line certainly did (:class:`ShellResult`), and the two ways a command gives up:
:class:`Unknown` (only the world model can say) and :class:`Waits` (it reads the keyboard).

Paths are absolute inside; a :class:`Files` view maps them to the ledger's keys, which
are absolute for the terminal and relative to the repository root for swe.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simgym.domains.shell.declared import Machine

# Locales whose collation is byte order (the sandboxes run C.UTF-8).
C_LOCALES = frozenset({"C", "POSIX", "C.UTF-8", "C.utf8"})
# A Linux machine's own directories: they exist whatever the scenario lists, and what is
# in them is more than the ledger holds (a scenario may still describe files there).
SYSTEM_DIRS = frozenset(
    """/bin /boot /dev /etc /lib /lib32 /lib64 /media /mnt /opt /proc /root /run /sbin
    /snap /srv /sys /tmp /usr /var""".split()
)


@dataclass
class Files:
    """The ledger's files as a tree of absolute paths. ``root`` is where relative ledger
    keys live ("/" for a terminal whose keys are absolute)."""

    entries: dict[str, str]
    root: str = "/"

    def key(self, path: str) -> str:
        if self.root == "/":
            return path
        rel = posixpath.relpath(path, self.root)
        return rel

    def abs(self, key: str) -> str:
        return posixpath.normpath(posixpath.join(self.root, key.rstrip("/") or "."))

    def files(self) -> dict[str, str]:
        return {self.abs(k): v for k, v in self.entries.items() if not k.endswith("/")}

    def dirs(self) -> set[str]:
        found = {self.root, "/"}
        for key in self.entries:
            path = self.abs(key)
            if key.endswith("/"):
                found.add(path)
            parent = posixpath.dirname(path)
            while parent not in found:
                found.add(parent)
                parent = posixpath.dirname(parent)
        return found

    def in_scope(self, path: str) -> bool:
        return self.root == "/" or path == self.root or path.startswith(self.root + "/")


@dataclass
class ShellResult:
    """What one command line certainly does. ``output`` is the exact text it prints (None
    when only the world model can say); ``changes`` maps absolute paths to new content or
    None (deleted); ``cwd``/``env`` are set when they change."""

    output: str | None = None
    changes: dict[str, str | None] = field(default_factory=dict)
    new_dirs: list[str] = field(default_factory=list)
    cwd: str | None = None
    env: dict[str, str | None] = field(default_factory=dict)
    facts: list[str] = field(default_factory=list)
    expect: list[str] = field(default_factory=list)
    forbid: list[str] = field(default_factory=list)
    foreground: str | None = None  # an interactive program the line started
    unknown: list[str] | None = None  # the new list of uncertain paths, when it grew
    local_vars: list[str] | None = None  # the shell's variables not exported, when changed
    modes: dict[str, int | None] = field(default_factory=dict)  # new permission bits
    status: int = 0  # the exit status of the last command that ran

    def patch_for(self, entries: dict[str, str], root: str = "/") -> dict[str, Any]:
        """The changes as a JSON merge patch on a ledger holding ``entries``."""
        return self.patch(Files(entries, root))

    def patch(self, files: Files) -> dict[str, Any]:
        """The changes as a JSON merge patch on the ledger."""
        out: dict[str, Any] = {}
        entries: dict[str, Any] = {}
        for path, content in self.changes.items():
            entries[files.key(path)] = content
        for path in self.new_dirs:
            entries[files.key(path).rstrip("/") + "/"] = ""
        if entries:
            out["files"] = entries
        if self.cwd is not None:
            out["cwd"] = self.cwd
        if self.env:
            out["env"] = self.env
        if self.foreground:
            out["foreground"] = self.foreground
        if self.unknown is not None:
            out["unknown"] = [files.key(p) for p in self.unknown]
        if self.local_vars is not None:
            out["local_vars"] = self.local_vars
        if self.modes:
            out["modes"] = {files.key(p): m for p, m in self.modes.items()}
        return out


class Unknown(Exception):
    """The command's output is not determined by the files (the model must render it)."""


class Waits(Exception):
    """The command reads the keyboard (no pipe, no ``<``): at a terminal the line stops
    there, and no prompt comes back until keys end it."""


class Shell:
    """The shell's view while one command line runs: files change as commands go."""

    def __init__(
        self,
        files: Files,
        cwd: str,
        env: dict[str, str],
        home: str,
        unknown: set[str],
        clock: datetime | None = None,
        system: set[str] | frozenset[str] = frozenset(),
        uname: dict[str, str] | None = None,
        programs: Iterable[str] | None = None,
    ) -> None:
        self.files = files
        # the installed programs the scenario declares; None: undeclared, taken as present
        self.programs = None if programs is None else frozenset(programs)
        # every file's time in `ls -l` and what `date` prints; None: both are unknown
        self.clock = clock
        self.uname = dict(uname or {})  # uname's fields beyond -s, -n and -o, by long option
        self.content = files.files()
        self.dirs = files.dirs()
        self.unknown = unknown  # files whose content, and directories whose listing, are unknown
        self.cwd = cwd
        self.env = dict(env)
        self.home = home
        # the machine's own directories (SYSTEM_DIRS): they exist, their content unknown
        self.system = set(system)
        self.dirs |= self.system
        # the shell stands in its working directory, and the user has a home: both exist
        # even where the ledger holds no file under them
        for place in (cwd, home):
            while place and place not in self.dirs:
                self.dirs.add(place)
                place = posixpath.dirname(place)
        self.unknown |= self.system
        self.modes: dict[str, int] = {}  # permission bits where not 0o644 (absolute paths)
        self.local: set[str] = set()  # variables set but not exported (children miss them)
        self.machine: Machine | None = None  # processes, disks, memory, packages
        self.locale = "C.UTF-8"  # how ls, sort and globs collate
        self.pipeline: list[list[str]] = []  # the running pipe's commands (ps lists them)
        self.stdin: str | None = None  # what a pipe or `<` feeds the running command
        self.keyboard = False  # a terminal's keyboard is the input when nothing feeds it
        self.unordered = False  # the output follows the file system's listing order
        self.to_terminal = True  # where the running command's output goes (ls's layout)
        self.result = ShellResult()

    def collate(self) -> None:
        """Order names and lines as the machine's locale does: simgym knows the C
        locales' byte order; another locale's collation is left to a real run."""
        if self.locale not in C_LOCALES:
            raise Unknown

    def require(self, program: str) -> None:
        """Leave ``program`` to the model when the scenario lists programs without it: a
        list that leaves it out may be incomplete, so "command not found" would be a guess."""
        if self.programs is not None and program not in self.programs:
            raise Unknown

    # -- paths --------------------------------------------------------------------

    def path(self, name: str) -> str:
        if name == "~" or name.startswith("~/"):
            name = self.home + name[1:]
        return posixpath.normpath(posixpath.join(self.cwd, name))

    def exists(self, path: str) -> bool:
        return self.has(path) or self.is_dir(path)

    def is_dir(self, path: str) -> bool:
        if path in self.dirs:
            return True
        if path not in self.content:
            self.uncertain(path)
        return False

    def has(self, path: str) -> bool:
        """Whether ``path`` is a file; raises when only an unknown program could say."""
        if path in self.content:
            return True
        if path not in self.dirs:
            self.uncertain(path)
        return False

    def read(self, path: str) -> str:
        if path in self.unknown:
            raise Unknown
        return self.content[path]

    def uncertain(self, path: str) -> None:
        """A program simgym does not run may have made ``path`` under a directory it touched:
        its absence is not certain."""
        while True:
            if path in self.unknown:
                raise Unknown
            parent = posixpath.dirname(path)
            if parent == path:
                return
            path = parent

    def listable(self, directory: str) -> None:
        """Raise unless what ``directory`` holds is known: a program no code ran, working
        in it or above it, may have written anywhere below (Python's ``__pycache__``)."""
        probe = directory
        while True:
            if probe in self.unknown and probe not in self.system:
                raise Unknown
            parent = posixpath.dirname(probe)
            if parent == probe:
                return
            probe = parent

    def children(self, directory: str) -> list[str]:
        prefix = directory.rstrip("/") + "/"
        names = set()
        for path in [*self.content, *self.dirs]:
            if path.startswith(prefix) and path != directory:
                names.add(path[len(prefix) :].split("/", 1)[0])
        return sorted(names, key=ls_key)

    def write(self, path: str, content: str) -> None:
        self.content[path] = content
        self.result.changes[path] = content
        self.unknown.discard(path)  # a certain write: what is there is known again

    def set_mode(self, path: str, mode: int | None) -> None:
        """A file's permission bits change (None: back to none recorded)."""
        if self.modes.get(path) != mode:
            if mode is None:
                self.modes.pop(path, None)
            else:
                self.modes[path] = mode
            self.result.modes[path] = mode

    def remove(self, path: str) -> None:
        for existing in [p for p in self.content if p == path or p.startswith(path + "/")]:
            del self.content[existing]
            self.result.changes[existing] = None
            self.set_mode(existing, None)
        for directory in [d for d in self.dirs if d == path or d.startswith(path + "/")]:
            self.dirs.discard(directory)
            self.result.changes[directory.rstrip("/") + "/"] = None

    def mkdir(self, path: str) -> None:
        self.dirs.add(path)
        self.result.new_dirs.append(path)

    def check_scope(self, path: str) -> None:
        if not self.files.in_scope(path) or path in self.unknown:
            raise Unknown  # outside what the ledger describes, or changed by a program


def ls_key(name: str) -> bytes:
    """GNU ls sorts by the locale's collation; in C.UTF-8, the locale the machines run,
    that is byte order (``README`` before ``inventory.csv``)."""
    return name.encode("utf-8", errors="surrogateescape")


def stdin_of(session: Shell) -> str:
    """What a pipe or ``<`` feeds the command; without one it waits for the keyboard."""
    if session.stdin is None:
        raise Waits if session.keyboard else Unknown
    return session.stdin


def input_of(session: Shell, operands: list[str]) -> str:
    """What a filter reads: its files one after another, or the pipe. A missing file or a
    directory makes the output uncertain here (each tool words that error its own way)."""
    if not operands:
        return stdin_of(session)
    texts = []
    for name in operands:
        path = session.path(name)
        session.check_scope(path)
        if not session.has(path):
            raise Unknown
        texts.append(session.read(path))
    return "".join(texts)
