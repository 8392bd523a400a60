"""A small shell over the hidden state's files: what a command line certainly does.

The terminal and swe domains keep their machine's files in the hidden state ledger
(``{"files": {path: content, "dir/": ""}, "cwd": ..., "env": {...}}``). For the commands
whose output follows from those files alone (``pwd``, ``cd``, ``ls``, ``cat``, ``echo`` with
``>``/``>>``, ``touch``, ``mkdir``, ``rm``, ``cp``, ``mv``, ``head``, ``tail``, ``wc -l``,
``export``, ...) :func:`run_line` computes the exact output and the changes to the files,
as bash with GNU coreutils would. For anything else (pipes, programs, compilers) it says
what it can — the contents of the files the command names, the working directory — and
leaves the output to the world model.

Paths are absolute inside; a :class:`Files` view maps them to the ledger's keys, which
are absolute for the terminal and relative to the repository root for swe.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from simgym.domains import machine as declared
from simgym.domains import pyprint, textutils

SCREEN_WIDTH = 80
# Locales whose collation is byte order (the sandboxes run C.UTF-8).
C_LOCALES = frozenset({"C", "POSIX", "C.UTF-8", "C.utf8"})
# Programs that take over the screen when started without a script or file argument.
INTERACTIVE = frozenset(
    {"python", "python3", "ipython", "node", "irb", "mysql", "psql", "sqlite3", "top", "htop"}
)
PAGERS_AND_EDITORS = frozenset({"vim", "vi", "nano", "less", "more", "man", "emacs"})
# Programs that only read files; any other program simgym does not run may write in the
# directory it runs in, so what is there afterwards is no longer certain.
READ_ONLY = frozenset(
    """grep egrep fgrep rg find ps df du env date uname which whereis type id groups uptime
    free less more man diff cmp sort uniq cut stat file history clear sleep ping tree column
    jq md5sum sha1sum sha256sum lsb_release ip ss netstat journalctl dmesg lscpu nproc awk
    top htop w who last locale printf test [ basename dirname realpath readlink seq yes
    nl od xxd hexdump strings tac rev fold expand fmt""".split()
)
EDITORS = frozenset({"vim", "vi", "nano", "emacs", "sed", "perl", "truncate", "patch", "dd"})
MODE_CHANGERS = frozenset({"chmod", "chown", "chgrp", "setfacl"})
# A Linux machine's own directories: they exist whatever the scenario lists, and what is
# in them is more than the ledger holds (a scenario may still describe files there).
SYSTEM_DIRS = frozenset(
    """/bin /boot /dev /etc /lib /lib32 /lib64 /media /mnt /opt /proc /root /run /sbin
    /snap /srv /sys /tmp /usr /var""".split()
)
# Options that make an otherwise read-only program write or delete (find -delete, sort -o).
WRITING_OPTIONS = re.compile(
    r"\bfind\b[^;&|]*\s-(?:delete|exec|execdir|ok|okdir|fprint0?|fprintf|fls)\b"
    r"|\bsort\b[^;&|]*\s-o\b"
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


class _Unknown(Exception):
    """The command's output is not determined by the files (the model must render it)."""


class _Waits(Exception):
    """The command reads the keyboard (no pipe, no ``<``): at a terminal the line stops
    there, and no prompt comes back until keys end it."""


class _Session:
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
        self.unknown |= self.system
        self.modes: dict[str, int] = {}  # permission bits where not 0o644 (absolute paths)
        self.local: set[str] = set()  # variables set but not exported (children miss them)
        self.machine: declared.Machine | None = None  # processes, disks, memory, packages
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
            raise _Unknown

    def require(self, program: str) -> None:
        """Leave ``program`` to the model when the scenario lists programs without it: a
        list that leaves it out may be incomplete, so "command not found" would be a guess."""
        if self.programs is not None and program not in self.programs:
            raise _Unknown

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
            raise _Unknown
        return self.content[path]

    def uncertain(self, path: str) -> None:
        """A program simgym does not run may have made ``path`` under a directory it touched:
        its absence is not certain."""
        while True:
            if path in self.unknown:
                raise _Unknown
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
                raise _Unknown
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
        return sorted(names, key=_ls_key)

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
            raise _Unknown  # outside what the ledger describes, or changed by a program


def run_line(
    line: str,
    entries: dict[str, str],
    *,
    cwd: str,
    home: str,
    env: dict[str, str] | None = None,
    root: str = "/",
    user: str = "user",
    host: str = "localhost",
    unknown: list[str] | tuple[str, ...] = (),
    clock: datetime | None = None,
    keyboard: bool = False,
    uname: dict[str, str] | None = None,
    programs: Iterable[str] | None = None,
    modes: dict[str, int] | None = None,
    certain: bool = True,
    local_vars: Iterable[str] = (),
    machine: declared.Machine | None = None,
    locale: str = "C.UTF-8",
) -> ShellResult:
    """What ``line`` does to these files; see the module docstring. ``unknown`` lists the
    ledger keys that programs simgym does not run have touched (files of unknown content,
    directories of unknown listing): nothing certain is said about them. ``clock`` is the
    machine's time, shown as every file's time by ``ls -l`` and printed by ``date`` (without
    it both are left to the model); ``uname`` holds what ``uname`` prints beyond the kernel
    name, host name and OS, by long option (``kernel-release``, ``kernel-version``,
    ``machine``, ``processor``, ``hardware-platform``). ``programs``, when given, lists
    the installed programs: one it leaves out (git, python3) is the model's to render. With
    ``keyboard`` (an interactive
    terminal), a command that reads its input with nothing feeding it waits for the keys:
    the output so far is certain and ``foreground`` names the program (no prompt comes
    back). ``modes`` holds permission bits by ledger key where they are not 0o644 (``ls
    -l`` shows them). ``certain=False``: nothing of the line is run (a pasted block the
    shell does not read here), only what it may touch is marked unknown."""
    files = Files(entries, root)
    given = {files.abs(k) for k in unknown}
    system = {d for d in SYSTEM_DIRS if root == "/" and home != d and not home.startswith(d + "/")}
    session = _Session(files, cwd, env or {}, home, set(given), clock, system, uname, programs)
    session.keyboard = keyboard
    session.modes = {files.abs(k): v for k, v in (modes or {}).items()}
    session.local = set(local_vars)
    session.machine = machine
    session.locale = locale
    session.env.setdefault("HOME", home)
    session.env.setdefault("USER", user)
    session.env.setdefault("PWD", cwd)
    text = _joined(line.strip())
    outputs: list[str] = []
    try:
        commands = _commands(text) if certain else None
    except (_Unknown, ValueError):
        commands = None
    if commands is None:
        certain = False
    if commands is None:
        _describe_unknown(session, text)
    else:
        status = 0
        for connector, command in commands:
            if connector == "&&" and status != 0 or connector == "||" and status == 0:
                continue
            try:
                # bash expands each command as it runs it, after the ones before it
                out, status = _pipeline(session, command, user=user, host=host)
                outputs.append(out)
            except _Waits:
                session.result.foreground = _stage(command[0], session.env)[0][0]
                break
            except (_Unknown, ValueError, textutils.Uncertain):
                certain = False
                _describe_unknown(session, text)
                break
        session.result.status = status
    result = session.result
    if session.unknown != given | system:
        result.unknown = sorted(session.unknown - (system - given))
    if session.cwd != cwd:
        result.cwd = session.cwd
    if session.local != set(local_vars):
        result.local_vars = sorted(session.local)
    if certain:
        result.output = "".join(outputs)
    return result


def reads_on(line: str) -> bool:
    """Whether bash, given ``line`` at its prompt, shows its continuation prompt and reads
    another line: a quote left open, a backslash at the very end (it escapes the
    newline), or a here-document whose closing word has not come yet. A comment ends the
    line, quotes and backslash in it included."""
    return bool(open_heredocs(line)) or bool(_scan(without_heredoc_bodies(line)).open)


HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][\w.-]*)\1")


def without_heredoc_bodies(text: str) -> str:
    """``text`` without the lines of its here-documents' bodies (quotes in them are text)."""
    kept: list[str] = []
    until: list[str] = []
    for line in text.split("\n"):
        if until:
            if line.strip() == until[0]:
                until.pop(0)
            continue
        kept.append(line)
        until.extend(m.group(2) for m in HEREDOC.finditer(line))
    return "\n".join(kept)


def open_heredocs(text: str) -> list[str]:
    """The closing words of the here-documents ``text`` opens and does not close."""
    until: list[str] = []
    for line in text.split("\n"):
        if until:
            if line.strip() == until[0] or line.lstrip("\t") == until[0]:
                until.pop(0)
            continue
        until.extend(m.group(2) for m in HEREDOC.finditer(line))
    return until


# -- parsing ------------------------------------------------------------------------

_VAR = re.compile(r"\$(\w+|\{\w+\})")
# ${VAR:-word} ${VAR-word} (a default) and ${VAR:+word} ${VAR+word} (an alternative)
_VAR_OR = re.compile(r"\$\{(\w+)(:?)([-+])([^}$`]*)\}")


def _substitute(match: re.Match[str], env: dict[str, str]) -> str:
    name, colon, op, word = match.groups()
    value = env.get(name)
    is_set = value is not None and (value != "" or not colon)
    if op == "-":
        return value if is_set and value is not None else word
    return word if is_set else ""


def _expand(text: str, env: dict[str, str]) -> str:
    """$VAR, ${VAR}, ${VAR:-word} and ${VAR:+word} outside single quotes, as bash expands
    them; other parameter forms (``${#VAR}``, ``$#``, ``$@``) are left to the model."""
    out, quote = [], None
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "'" and quote != '"':
            quote = None if quote == "'" else "'"
        elif ch == '"' and quote != "'":
            quote = None if quote == '"' else '"'
        elif ch == "$" and quote != "'":
            match = _VAR.match(text, i)
            if match:
                name = match.group(1).strip("{}")
                out.append(env.get(name, ""))
                i = match.end()
                continue
            match = _VAR_OR.match(text, i)
            if match:
                out.append(_substitute(match, env))
                i = match.end()
                continue
            if text[i + 1 : i + 2] in ("(", "?", "$", "!", "{", "#", "@", "*", "-"):
                raise _Unknown
        elif ch == "`" and quote != "'":
            raise _Unknown
        out.append(ch)
        i += 1
    return "".join(out)


# bash's metacharacters: they end a word, so a "#" right after one starts a comment.
_BREAKS = frozenset(" \t\n;&|()<>")


class OpenQuote(ValueError):
    """A command line that leaves a quote open: bash would read on (interactively) or
    refuse it (``bash -c``). A ValueError, so that callers that give up on one still do."""

    def __init__(self, line: str, quote: str, at: int) -> None:
        kind = "single" if quote == "'" else "double"
        super().__init__(f"unterminated {kind} quote ({quote}) at column {at + 1} of {line!r}")
        self.quote, self.at = quote, at


@dataclass(frozen=True)
class _Scan:
    """How bash's quoting reads a line: the positions of its bare characters (outside
    quotes, not escaped) before any comment, where that comment starts, the backslashes
    that join a line to the next, and what the line leaves open: ``'`` or ``"`` (a quote,
    opened at ``opened``), ``\\`` (a final backslash) or nothing."""

    bare: list[int]
    end: int
    joins: list[int]
    open: str = ""
    opened: int = -1


def _scan(line: str) -> _Scan:
    """The one reading of quotes, backslashes and comments that the parser shares."""
    bare: list[int] = []
    joins: list[int] = []
    quote, opened, i = "", -1, 0
    boundary = True  # at a word's start, where "#" begins a comment
    while i < len(line):
        ch = line[i]
        if quote == "'":
            quote = "" if ch == "'" else quote  # nothing escapes inside single quotes
        elif ch == "\\":
            if i + 1 == len(line) and not quote:
                return _Scan(bare, len(line), joins, "\\", i)
            if line[i + 1 : i + 2] == "\n":
                joins.append(i)  # bash drops a backslash-newline before reading words
            i += 1
        elif quote == '"':
            quote = "" if ch == '"' else quote
        elif ch in "'\"":
            quote, opened = ch, i
        elif ch == "#" and boundary:
            return _Scan(bare, i, joins)
        else:
            bare.append(i)
        boundary = bool(bare) and bare[-1] == i and ch in _BREAKS
        i += 1
    return _Scan(bare, len(line), joins, quote, opened if quote else -1)


def _joined(line: str) -> str:
    """``line`` with its backslash-newlines removed, as bash removes them (outside single
    quotes) before it reads the words: ``echo ab\\`` then ``cd`` is ``echo abcd``."""
    cuts = _scan(line).joins
    starts = [0, *(c + 2 for c in cuts)]
    return "".join(line[a:b] for a, b in zip(starts, [*cuts, len(line)], strict=True))


def _commands(line: str) -> list[tuple[str, list[str]]]:
    """The line's commands, unexpanded, each with the connector before it (``;``, ``&&``,
    ``||``) and split into the stages of its pipe. Background jobs are left to the model
    (:class:`_Unknown`); a quote left open raises :class:`OpenQuote`. A final backslash
    stays (``bash -c 'echo a\\'`` prints it); at a prompt :func:`reads_on` reads on."""
    scan = _scan(line)
    if scan.open in ("'", '"'):
        raise OpenQuote(line, scan.open, scan.opened)
    commands: list[tuple[str, list[str]]] = []
    stages: list[str] = []
    connector, start, skip = ";", 0, -1
    for i in scan.bare:
        ch = line[i]
        if i <= skip or ch not in ";&|":
            continue
        pair = line[i : i + 2]
        if pair in ("&&", "||"):
            joined, width = pair, 2
        elif ch == ";":
            joined, width = ";", 1
        elif ch == "&" and i > 0 and line[i - 1] in "<>":
            continue  # 2>&1, &>: a redirection, not a job
        elif ch == "|":
            stages.append(line[start:i])
            start = i + 1
            continue
        else:
            raise _Unknown  # a background job
        _close(commands, connector, stages, line[start:i])
        connector, start, stages, skip = joined, i + width, [], i + width - 1
    _close(commands, connector, stages, line[start : scan.end])
    return commands


def _close(
    commands: list[tuple[str, list[str]]], connector: str, stages: list[str], last: str
) -> None:
    parts = [*stages, last]
    if any(not p.strip() for p in parts) and (stages or last.strip()):
        if stages:
            raise _Unknown  # `a |` or `| b`: bash waits for more, or refuses
        return
    if last.strip():
        commands.append((connector, parts))


class _Quoted(str):
    """A word that was quoted on the command line: bash does not expand globs in it."""


def _tokens(text: str) -> list[str]:
    """Words and operators (``;`` ``&&`` ``||`` ``|`` ``&`` ``>`` ``>>`` ``<``) as bash
    reads them: quotes removed from words (a word that had any is a :class:`_Quoted`),
    backslash escapes outside single quotes, ``#`` at a word's start ends the line."""
    tokens: list[str] = []
    word: list[str] = []
    quoted = started = False
    quote: str | None = None
    i = 0

    def finish() -> None:
        nonlocal word, quoted, started
        if started:
            value = "".join(word)
            tokens.append(_Quoted(value) if quoted else value)
        word, quoted, started = [], False, False

    while i < len(text):
        ch = text[i]
        if quote == "'":
            if ch == "'":
                quote = None
            else:
                word.append(ch)
        elif quote == '"':
            if ch == '"':
                quote = None
            elif ch == "\\" and text[i + 1 : i + 2] in ('"', "\\", "$", "`"):
                word.append(text[i + 1])
                i += 1
            else:
                word.append(ch)
        elif ch in "'\"":
            quote, quoted, started = ch, True, True
        elif ch == "\\" and i + 1 < len(text):
            word.append(text[i + 1])
            quoted = started = True
            i += 1
        elif ch in " \t\n":
            finish()
        elif ch == "#" and not started:
            break
        elif ch in ";&|<>":
            fd = "".join(word) if ch in "<>" and started and not quoted else ""
            if fd.isdigit():  # 2> file: a descriptor's redirection, not an argument
                word, started = [], False
            finish()
            pair = text[i : i + 2]
            if fd.isdigit():
                tokens.append(fd + (">>" if pair == ">>" else ch))
                i += 1 + (pair == ">>")
                continue
            if pair in ("&&", "||", ">>", "<<"):
                tokens.append(pair)
                i += 1
            else:
                tokens.append(ch)
        else:
            word.append(ch)
            started = True
        i += 1
    if quote is not None:
        raise ValueError("unterminated quote")
    finish()
    return tokens


def _stage(line: str, env: dict[str, str]) -> tuple[list[str], list[tuple[str, str]]]:
    """One command of a pipe (:func:`_commands` split the line), expanded as bash expands
    it when it runs: its words and its redirections (``> file`` alone is the null
    command, redirected: it truncates). Operators left in it (from an expansion),
    subshells, here-docs and other descriptors' juggling are left to the model."""
    tokens = _tokens(_expand(line, env))
    words: list[str] = []
    redirects: list[tuple[str, str]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if isinstance(token, _Quoted):
            words.append(token)
        elif re.fullmatch(r"\d*>>?|<", token):
            if i + 1 >= len(tokens):
                raise _Unknown
            redirects.append((token, tokens[i + 1]))
            i += 1
        elif set(token) <= set(";&|<>"):
            raise _Unknown
        else:
            words.append(token)
        i += 1
    if not (words or redirects):
        raise _Unknown
    return words or [":"], redirects


# -- commands -----------------------------------------------------------------------


def _pipeline(session: _Session, stages: list[str], *, user: str, host: str) -> tuple[str, int]:
    """Run ``a | b | c``: each stage reads the one before it; what the terminal shows
    (the last stage's output, every stage's errors) and the last stage's status. A
    stage that writes errors before the last makes the interleaving uncertain."""
    session.unordered = False
    shown, status, data = "", 0, None
    parsed = [_stage(stage, session.env) for stage in stages]
    session.pipeline = [words for words, _ in parsed]
    for position, (words, redirects) in enumerate(parsed):
        session.stdin = data
        session.to_terminal = position == len(stages) - 1
        try:
            out, err, status = _run(session, words, redirects, user=user, host=host)
        finally:
            session.stdin, session.to_terminal = None, True
        if position < len(stages) - 1 and err:
            raise _Unknown
        data, shown = out, out + err
    if session.unordered:
        raise _Unknown  # in the order the file system lists its entries, which is not known
    return shown, status


def _run(
    session: _Session, words: list[str], redirects: list[tuple[str, str]], *, user: str, host: str
) -> tuple[str, str, int]:
    """One command: its output, its errors and its status (output redirected to a file
    is written there and not returned)."""
    words = _glob(session, words)
    name, args = words[0], words[1:]
    if "=" in name and not args and re.fullmatch(r"\w+=.*", name):
        key, _, value = name.partition("=")
        if key not in session.env or key in session.local:
            session.local.add(key)  # a new variable is the shell's own until exported
        session.env[key] = value
        session.result.env[key] = value
        return "", "", 0
    command = _COMMANDS.get(name)
    if command is None:
        raise _Unknown
    if any(op not in (">", ">>", "<") for op, _ in redirects):
        raise _Unknown
    for op, source in redirects:
        if op == "<":
            path = session.path(source)
            session.check_scope(path)
            if not session.has(path):
                return "", f"bash: {source}: No such file or directory\n", 1
            session.stdin = session.read(path)
    outputs = [(op, target) for op, target in redirects if op != "<"]
    if outputs:
        session.to_terminal = False
    out, err, status = command(session, args, user, host)
    if outputs:
        op, target = outputs[-1]
        path = session.path(target)
        if not session.files.in_scope(path):
            raise _Unknown
        if path in session.dirs:
            return "", err + f"bash: {target}: Is a directory\n", 1
        if not session.is_dir(posixpath.dirname(path)):
            return "", err + f"bash: {target}: No such file or directory\n", 1
        before = session.read(path) if op == ">>" and session.has(path) else ""
        session.unknown.discard(path)  # written whole: its content is known again
        session.write(path, before + out)
        return "", err, status
    return out, err, status


def _glob(session: _Session, words: list[str]) -> list[str]:
    out = []
    for word in words:
        if isinstance(word, _Quoted):
            out.append(str(word))
        elif any(c in word for c in "*?[") and not word.startswith("-"):
            session.collate()
            directory = session.path(posixpath.dirname(word) or ".")
            pattern = posixpath.basename(word)
            matches = [
                posixpath.join(posixpath.dirname(word), n) if posixpath.dirname(word) else n
                for n in session.children(directory)
                if fnmatch.fnmatchcase(n, pattern) and (pattern.startswith(".") or n[0] != ".")
            ]
            out.extend(sorted(matches, key=_ls_key) or [word])
        else:
            out.append(word)
    return out


def _flags(args: list[str], allowed: str) -> tuple[set[str], list[str]]:
    """Short flags (``-la``) and operands; an unknown flag makes the output uncertain."""
    flags, _, operands = _options(args, allowed, "")
    return flags, operands


def _pwd(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    return session.cwd + "\n", "", 0


def _cd(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    if len(args) > 1:
        return "", "bash: cd: too many arguments\n", 1
    target = args[0] if args else "~"
    if target == "-":
        raise _Unknown
    path = session.path(target)
    if path not in session.system:  # those exist, whatever is in them
        session.check_scope(path)
    if session.has(path):
        return "", f"bash: cd: {target}: Not a directory\n", 1
    if not session.is_dir(path):
        return "", f"bash: cd: {target}: No such file or directory\n", 1
    session.cwd = path
    session.env["PWD"] = path
    return "", "", 0


def _ls(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    session.collate()
    flags, operands = _flags(args, "aA1Fpl")
    long = "l" in flags
    if long and session.clock is None:
        raise _Unknown
    errors, blocks, status = [], [], 0
    targets = operands or ["."]
    files_shown, dirs_shown = [], []
    for name in targets:
        path = session.path(name)
        session.check_scope(path)
        if path == "/" and session.files.root == "/":
            raise _Unknown  # the whole machine's top level: more than the ledger holds
        if session.has(path):
            files_shown.append(name)
        elif session.is_dir(path):
            dirs_shown.append((name, path))
        else:
            errors.append(f"ls: cannot access '{name}': No such file or directory\n")
            status = 2
    if files_shown:
        shown = sorted(files_shown, key=_ls_key)
        if long:
            blocks.append(_long(session, [(n, session.path(n)) for n in shown], user, None))
        else:
            blocks.append(_columns(shown, "1" in flags or not session.to_terminal))
    for name, path in sorted(dirs_shown, key=lambda shown: _ls_key(shown[0])):
        session.listable(path)
        names = session.children(path)
        if "a" in flags:
            names = sorted([".", "..", *names], key=_ls_key)
        elif "A" not in flags:
            names = [n for n in names if not n.startswith(".")]
        marked = [
            n + "/" if ("F" in flags or "p" in flags) and _is_dir(session, path, n) else n
            for n in names
        ]
        if long:
            rows = [
                (m, posixpath.normpath(posixpath.join(path, n)))
                for m, n in zip(marked, names, strict=True)
            ]
            body = _long(session, rows, user, path)
        else:
            body = _columns(marked, "1" in flags or not session.to_terminal)
        if len(targets) > 1:
            body = f"{name}:\n{body}"
        blocks.append(body)
    return "\n".join(b for b in blocks), "".join(errors), status


def _is_dir(session: _Session, directory: str, name: str) -> bool:
    return session.is_dir(posixpath.normpath(posixpath.join(directory, name)))


def _long(session: _Session, rows: list[tuple[str, str]], user: str, directory: str | None) -> str:
    """``ls -l`` as GNU coreutils prints it: mode, links, owner, group, size, time, name,
    columns aligned, a ``total`` line (1K blocks) for a directory's listing. Files under the
    home belong to the user, the rest to root; every time is the machine's clock."""
    assert session.clock is not None
    home = session.home.rstrip("/")
    cells = []
    blocks = 0
    for shown, path in rows:
        if path in session.dirs:
            subdirs = sum(1 for d in session.dirs if d != "/" and posixpath.dirname(d) == path)
            mode = "drwxr-x---" if path == home and user != "root" else "drwxr-xr-x"
            links, size = 2 + subdirs, 4096
        else:
            content = session.read(path)
            size = len(content.encode("utf-8"))
            mode = "-" + _permissions(session.modes.get(path, 0o644))
            links = 1
        blocks += -(-size // 4096) * 4
        owner = user if path == home or path.startswith(home + "/") else "root"
        cells.append((mode, str(links), owner, owner, str(size), shown))
    when = f"{session.clock:%b} {session.clock.day:>2} {session.clock:%H:%M}"
    widths = [max(len(c[i]) for c in cells) for i in range(5)]
    lines = [f"total {blocks}"] if directory is not None else []
    for mode, links, owner, group, size, shown in cells:
        lines.append(
            f"{mode} {links:>{widths[1]}} {owner:<{widths[2]}} {group:<{widths[3]}} "
            f"{size:>{widths[4]}} {when} {shown}"
        )
    return "\n".join(lines) + "\n"


def _permissions(mode: int) -> str:
    """``rwxr-xr-x`` for 0o755."""
    return "".join(letter if mode & (1 << (8 - i)) else "-" for i, letter in enumerate("rwxrwxrwx"))


def _columns(names: list[str], one_per_line: bool) -> str:
    """GNU ls's output to a terminal: as many columns as fit, filled top to bottom."""
    if not names:
        return ""
    if one_per_line:
        return "".join(f"{n}\n" for n in names)
    quoted = [shlex.quote(n) if re.search(r"[^\w@%+=:,./-]", n) else n for n in names]
    for cols in range(len(quoted), 0, -1):
        rows = -(-len(quoted) // cols)
        cols = -(-len(quoted) // rows)
        grid = [quoted[c * rows : (c + 1) * rows] for c in range(cols)]
        widths = [max(len(n) for n in column) for column in grid]
        if sum(widths) + 2 * (len(widths) - 1) <= SCREEN_WIDTH or cols == 1:
            lines = []
            for r in range(rows):
                cells = [grid[c][r] for c in range(cols) if r < len(grid[c])]
                padded = [cell.ljust(widths[c]) for c, cell in enumerate(cells[:-1])]
                lines.append("  ".join([*padded, cells[-1]]))
            return "\n".join(lines) + "\n"
    return ""


def _ls_key(name: str) -> bytes:
    """GNU ls sorts by the locale's collation; in C.UTF-8, the locale the machines run,
    that is byte order (``README`` before ``inventory.csv``)."""
    return name.encode("utf-8", errors="surrogateescape")


def _cat(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, operands = _flags(args, "")
    if not operands:
        return _stdin(session), "", 0
    out, err, status = [], [], 0
    for name in operands:
        path = session.path(name)
        session.check_scope(path)
        if session.is_dir(path):
            err.append(f"cat: {name}: Is a directory\n")
            status = 1
        elif session.has(path):
            out.append(session.read(path))
        else:
            err.append(f"cat: {name}: No such file or directory\n")
            status = 1
    text = "".join(out)
    # Output and errors interleave on a terminal in command order; keep it simple: files
    # first is what a reader expects when only some are missing.
    return text, "".join(err), status


def _echo(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    newline = True
    while args and args[0] in ("-n", "-e", "-E"):
        if args[0] == "-e":
            raise _Unknown
        newline = newline and args[0] != "-n"
        args = args[1:]
    return " ".join(args) + ("\n" if newline else ""), "", 0


def _touch(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, operands = _flags(args, "")
    if not operands:
        return "", "touch: missing file operand\n", 1
    err, status = [], 0
    for name in operands:
        path = session.path(name)
        session.check_scope(path)
        if not session.is_dir(posixpath.dirname(path)):
            err.append(f"touch: cannot touch '{name}': No such file or directory\n")
            status = 1
        elif not session.exists(path):
            session.write(path, "")
    return "", "".join(err), status


def _mkdir(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, operands = _flags(args, "p")
    if not operands:
        return "", "mkdir: missing operand\n", 1
    err, status = [], 0
    for name in operands:
        path = session.path(name)
        session.check_scope(path)
        if session.exists(path):
            if "p" not in flags or session.has(path):
                err.append(f"mkdir: cannot create directory '{name}': File exists\n")
                status = 1
            continue
        parent = posixpath.dirname(path)
        if not session.is_dir(parent) and "p" not in flags:
            err.append(f"mkdir: cannot create directory '{name}': No such file or directory\n")
            status = 1
            continue
        missing = []
        while path not in session.dirs:
            missing.append(path)
            path = posixpath.dirname(path)
        for directory in reversed(missing):
            session.mkdir(directory)
    return "", "".join(err), status


def _rm(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, operands = _flags(args, "rRfv")
    if not operands:
        return "", "" if "f" in flags else "rm: missing operand\n", 0 if "f" in flags else 1
    err, status = [], 0
    for name in operands:
        path = session.path(name)
        session.check_scope(path)
        if session.is_dir(path):
            if not ({"r", "R"} & flags):
                err.append(f"rm: cannot remove '{name}': Is a directory\n")
                status = 1
                continue
        elif not session.has(path):
            if "f" not in flags:
                err.append(f"rm: cannot remove '{name}': No such file or directory\n")
                status = 1
            continue
        session.remove(path)
    if "v" in flags:
        raise _Unknown
    return "", "".join(err), status


def _rmdir(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, operands = _flags(args, "")
    err, status = [], 0
    for name in operands:
        path = session.path(name)
        session.check_scope(path)
        if not session.is_dir(path):
            what = "Not a directory" if session.has(path) else "No such file or directory"
            err.append(f"rmdir: failed to remove '{name}': {what}\n")
            status = 1
        elif session.children(path):
            err.append(f"rmdir: failed to remove '{name}': Directory not empty\n")
            status = 1
        else:
            session.remove(path)
    return "", "".join(err), status


def _copy_or_move(move: bool) -> Callable[[_Session, list[str], str, str], tuple[str, str, int]]:
    verb = "mv" if move else "cp"

    def run(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
        flags, operands = _flags(args, "fn" if move else "f")
        if len(operands) < 2:
            return (
                "",
                f"{verb}: missing destination file operand after '{operands[0]}'\n"
                if (operands)
                else f"{verb}: missing file operand\n",
                1,
            )
        *sources, target = operands
        destination = session.path(target)
        if "n" not in flags and _in_system_dir(session, destination):
            return _into_system_dir(session, sources, destination, move)
        session.check_scope(destination)
        into_dir = session.is_dir(destination)
        if len(sources) > 1 and not into_dir:
            return "", f"{verb}: target '{target}' is not a directory\n", 1
        err, status = [], 0
        for name in sources:
            source = session.path(name)
            session.check_scope(source)
            if session.is_dir(source):
                if not move:
                    err.append(f"cp: -r not specified; omitting directory '{name}'\n")
                    status = 1
                    continue
                raise _Unknown  # moving a directory tree: left to the model
            if not session.has(source):
                err.append(f"{verb}: cannot stat '{name}': No such file or directory\n")
                status = 1
                continue
            dest = (
                posixpath.join(destination, posixpath.basename(source)) if into_dir else destination
            )
            if not session.is_dir(posixpath.dirname(dest)):
                err.append(
                    f"{verb}: cannot create regular file '{target}': No such file or directory\n"
                )
                status = 1
                continue
            content = session.read(source)
            mode = session.modes.get(source)
            existed = session.has(dest)
            if move:
                session.remove(source)
                session.set_mode(dest, mode)  # a moved file keeps its permission bits
            elif not existed:  # a new copy: the source's bits less the umask (022)
                session.set_mode(dest, None if mode is None else mode & ~0o022)
            session.write(dest, content)
        return "", "".join(err), status

    return run


def _in_system_dir(session: _Session, path: str) -> bool:
    """Whether ``path`` is, or is right inside, one of the machine's own directories
    (``/tmp``): they exist and take files, but what is in them is not known."""
    return path in session.system or posixpath.dirname(path) in session.system


def _into_system_dir(
    session: _Session, sources: list[str], destination: str, move: bool
) -> tuple[str, str, int]:
    """``mv``/``cp`` of files into a system directory (``mv app.log /tmp/``): the
    destination's content is not known (it may be a directory that takes the file), but a
    moved file is certainly gone from where it was, as it is on the real machine."""
    paths = [session.path(name) for name in sources]
    for path in paths:
        session.check_scope(path)
        if not session.has(path):
            raise _Unknown  # a directory tree, or nothing: the errors are left to the model
    for path in paths:
        if move:
            session.remove(path)
        if destination not in session.system:
            session.unknown.add(destination)
        session.unknown.add(posixpath.join(destination, posixpath.basename(path)))
    return "", "", 0


def _head_tail(tail: bool) -> Callable[[_Session, list[str], str, str], tuple[str, str, int]]:
    verb = "tail" if tail else "head"

    def run(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
        count, operands = 10, []
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "-n" and i + 1 < len(args) and args[i + 1].isdigit():
                count, i = int(args[i + 1]), i + 2
                continue
            if re.fullmatch(r"-n?\d+", arg):
                count = int(arg.lstrip("-n"))
            elif arg.startswith("-"):
                raise _Unknown
            else:
                operands.append(arg)
            i += 1
        if not operands:
            lines = _stdin(session).splitlines(keepends=True)
            chosen = lines[-count:] if tail and count else [] if tail else lines[:count]
            return "".join(chosen), "", 0
        out, err, status = [], [], 0
        for name in operands:
            path = session.path(name)
            session.check_scope(path)
            if not session.has(path):
                reason = "Is a directory" if session.is_dir(path) else "No such file or directory"
                opener = "error reading" if session.is_dir(path) else "cannot open"
                err.append(f"{verb}: {opener} '{name}' for reading: {reason}\n")
                status = 1
                continue
            lines = session.read(path).splitlines(keepends=True)
            chosen = lines[-count:] if tail and count else [] if tail else lines[:count]
            if len(operands) > 1:
                out.append(("\n" if out else "") + f"==> {name} <==\n")
            out.append("".join(chosen))
        return "".join(out), "".join(err), status

    return run


def _wc(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, operands = _flags(args, "lwc")
    if len(flags) != 1 or len(operands) > 1:
        raise _Unknown
    if not operands:
        counted = _count(_stdin(session), flags.pop())
        session.unordered = False  # a count does not depend on the order
        return f"{counted}\n", "", 0
    name = operands[0]
    path = session.path(name)
    session.check_scope(path)
    if not session.has(path):
        return "", f"wc: {name}: No such file or directory\n", 1
    return f"{_count(session.read(path), flags.pop())} {name}\n", "", 0


def _count(text: str, what: str) -> int:
    if what == "l":
        return text.count("\n")
    return len(text.split()) if what == "w" else len(text.encode("utf-8"))


def _export(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    if not args:
        raise _Unknown
    for arg in args:
        key, sep, value = arg.partition("=")
        session.local.discard(key)
        if not sep:
            continue
        session.env[key] = value
        session.result.env[key] = value
    return "", "", 0


def _unset(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    for key in args:
        session.env.pop(key, None)
        session.local.discard(key)
        session.result.env[key] = None
    return "", "", 0


def _printenv(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    if not args:
        raise _Unknown  # the full environment holds variables the state does not list
    values = [session.env[a] for a in args if a in session.env and a not in session.local]
    return "".join(v + "\n" for v in values), "", 0 if len(values) == len(args) else 1


# -- text tools (simgym.domains.textutils does the work) -----------------------------------


def _stdin(session: _Session) -> str:
    """What a pipe or ``<`` feeds the command; without one it waits for the keyboard."""
    if session.stdin is None:
        raise _Waits if session.keyboard else _Unknown
    return session.stdin


def _input(session: _Session, operands: list[str]) -> str:
    """What a filter reads: its files one after another, or the pipe. A missing file or a
    directory makes the output uncertain here (each tool words that error its own way)."""
    if not operands:
        return _stdin(session)
    texts = []
    for name in operands:
        path = session.path(name)
        session.check_scope(path)
        if not session.has(path):
            raise _Unknown
        texts.append(session.read(path))
    return "".join(texts)


def _options(
    args: list[str], flags: str, valued: str
) -> tuple[set[str], dict[str, str], list[str]]:
    """Short options: ``flags`` take nothing, ``valued`` take a value (``-k2``, ``-k 2``);
    anything else (long options included) makes the output uncertain."""
    found: set[str] = set()
    values: dict[str, str] = {}
    operands: list[str] = []
    i, done = 0, False
    while i < len(args):
        arg = args[i]
        if done or not arg.startswith("-") or arg == "-":
            operands.append(arg)
        elif arg == "--":
            done = True
        elif arg.startswith("--"):
            raise _Unknown
        else:
            j = 1
            while j < len(arg):
                letter = arg[j]
                if letter in valued:
                    value = arg[j + 1 :] or (args[i + 1] if i + 1 < len(args) else None)
                    if value is None:
                        raise _Unknown
                    if not arg[j + 1 :]:
                        i += 1
                    values[letter] = value
                    break
                if letter not in flags:
                    raise _Unknown
                found.add(letter)
                j += 1
        i += 1
    return found, values, operands


def _grep(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    includes = [a.split("=", 1)[1] for a in args if a.startswith("--include=")]
    rest = [a for a in args if not a.startswith("--include=") and a != "--color=never"]
    flags, values, operands = _options(rest, "EFGinvclowxhHrRqs", "e")
    patterns = [values["e"]] if "e" in values else operands[:1]
    if not patterns:
        raise _Unknown
    names = operands if "e" in values else operands[1:]
    matcher = textutils.Matcher.build(
        patterns,
        extended="E" in flags,
        fixed="F" in flags,
        ignore_case="i" in flags,
        word="w" in flags,
        line="x" in flags,
    )
    recursive = bool(flags & {"r", "R"})
    if recursive and not names:
        raise _Unknown  # searches "." and names files without "./"
    sources, err, status = _grep_sources(session, names, recursive, includes)
    prefix = ("H" in flags or recursive or len(names) > 1) and "h" not in flags
    out, found_in = [], 0
    for name, text in sources:
        lines = textutils.lines_of(text)
        hits = [
            (n, line) for n, line in enumerate(lines, 1) if matcher.hits(line) != ("v" in flags)
        ]
        found_in += bool(hits)
        head = f"{name}:" if prefix else ""
        if "c" in flags:
            out.append(f"{head}{len(hits)}")
        elif "l" in flags:
            out += [name] if hits else []
        elif "o" in flags and "v" not in flags:
            for n, line in hits:
                number = f"{n}:" if "n" in flags else ""
                out += [f"{head}{number}{part}" for part in matcher.parts(line)]
        else:
            out += [f"{head}{n}:{line}" if "n" in flags else f"{head}{line}" for n, line in hits]
    if recursive and (len(sources) > 1 and "c" in flags or found_in > 1):
        session.unordered = True  # files in the order the directory lists them
    if "q" in flags:
        return "", "", 0 if found_in else status or 1
    return textutils.joined(out), "" if "s" in flags else err, status or (0 if found_in else 1)


def _grep_sources(
    session: _Session, names: list[str], recursive: bool, includes: list[str]
) -> tuple[list[tuple[str, str]], str, int]:
    """(name as grep prints it, content) of what grep reads, its errors and status."""
    if not names:
        return [("(standard input)", _input(session, []))], "", 0
    sources, errors, status = [], [], 0
    for name in names:
        path = session.path(name)
        session.check_scope(path)
        if session.has(path):
            sources.append((name, session.read(path)))
        elif session.is_dir(path):
            if not recursive:
                errors.append(f"grep: {name}: Is a directory\n")
                status = 2
                continue
            for inner in _walk(session, path):
                if inner in session.content and (
                    not includes
                    or any(fnmatch.fnmatchcase(posixpath.basename(inner), g) for g in includes)
                ):
                    shown = name.rstrip("/") + inner[len(path.rstrip("/")) :]
                    sources.append((shown, session.read(inner)))
        else:
            errors.append(f"grep: {name}: No such file or directory\n")
            status = 2
    return sources, "".join(errors), status


def _walk(session: _Session, top: str) -> list[str]:
    """Every path below ``top`` (sorted; the real order is the file system's). A tree
    with unknown parts has unknown files in it: uncertain."""
    inside = top.rstrip("/") + "/"
    if top in session.unknown or any(u.startswith(inside) for u in session.unknown):
        raise _Unknown
    found = [p for p in [*session.content, *session.dirs] if p.startswith(inside)]
    return sorted(found)


def _find(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    starts = []
    while args and not args[0].startswith(("-", "(", "!")):
        starts.append(args.pop(0))
    # A trailing -delete deletes what the tests select, and prints nothing.
    delete = bool(args) and args[-1] == "-delete"
    if delete:
        args = args[:-1]
    tests: list[tuple[str, str]] = []
    while args:
        test = args.pop(0)
        if test not in ("-name", "-iname", "-type", "-maxdepth", "-mindepth") or not args:
            raise _Unknown  # -exec, -newer, -o, -delete before a test...: left to the model
        tests.append((test, args.pop(0)))
    if delete:
        return _find_delete(session, starts or ["."], tests)
    out = []
    for start in starts or ["."]:
        found = _find_matches(session, start, tests)
        if found is None:
            return "", f"find: \u2018{start}\u2019: No such file or directory\n", 1
        out += [shown for _, shown in found]
    session.unordered = len(out) > 1
    return textutils.joined(out), "", 0


def _find_matches(
    session: _Session, start: str, tests: list[tuple[str, str]]
) -> list[tuple[str, str]] | None:
    """``(path, as find prints it)`` of what ``find START TESTS`` selects, in sorted order
    (the real order is the file system's); None when START does not exist."""
    path = session.path(start)
    session.check_scope(path)
    if not session.exists(path):
        return None
    selected = []
    for found in [path, *(_walk(session, path) if path in session.dirs else [])]:
        depth = 0 if found == path else found[len(path.rstrip("/")) + 1 :].count("/") + 1
        if all(_find_test(session, found, depth, test, value) for test, value in tests):
            shown = start.rstrip("/") + found[len(path.rstrip("/")) :] if found != path else start
            selected.append((found, shown))
    return selected


def _find_delete(
    session: _Session, starts: list[str], tests: list[tuple[str, str]]
) -> tuple[str, str, int]:
    """``find ... -delete`` as GNU find runs it: depth first (contents before their
    directory), a directory that is not empty by then left with an error."""
    err, status = [], 0
    for start in starts:
        selected = _find_matches(session, start, tests)
        if selected is None:
            err.append(f"find: \u2018{start}\u2019: No such file or directory\n")
            status = 1
            continue
        for found, shown in sorted(selected, key=lambda pair: -pair[0].count("/")):
            if found in session.dirs and session.children(found):
                err.append(f"find: cannot delete \u2018{shown}\u2019: Directory not empty\n")
                status = 1
                continue
            if found in session.system:
                raise _Unknown  # the machine's own directories: not ours to say
            session.remove(found)
    return "", "".join(err), status


def _truncate(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    """``truncate -s 0 FILE...`` (to empty; other sizes are left to the model)."""
    size, operands, create = None, [], True
    while args:
        arg = args.pop(0)
        if arg in ("-s", "--size") and args:
            size = args.pop(0)
        elif arg.startswith(("--size=", "-s")):
            size = arg.partition("=")[2] if arg.startswith("--") else arg[2:]
        elif arg in ("-c", "--no-create"):
            create = False
        elif arg.startswith("-"):
            raise _Unknown
        else:
            operands.append(arg)
    if size != "0":
        raise _Unknown
    if not operands:
        return "", "truncate: missing file operand\n", 1
    err, status = [], 0
    for name in operands:
        path = session.path(name)
        session.check_scope(path)
        if session.is_dir(path):
            err.append(f"truncate: cannot open '{name}' for writing: Is a directory\n")
            status = 1
        elif session.has(path) or create:
            if not session.is_dir(posixpath.dirname(path)):
                err.append(
                    f"truncate: cannot open '{name}' for writing: No such file or directory\n"
                )
                status = 1
                continue
            session.unknown.discard(path)  # written whole: its content is known again
            session.write(path, "")
    return "", "".join(err), status


def _shred(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    """``shred -u FILE...``: overwritten, then removed (without ``-u`` the file holds noise
    only the model can show)."""
    remove, operands = False, []
    while args:
        arg = args.pop(0)
        if arg in ("-n", "--iterations", "-s", "--size") and args:
            args.pop(0)
        elif arg == "--remove" or arg.startswith("--remove="):
            remove = True
        elif re.fullmatch(r"-[fuzx]+", arg):
            remove = remove or "u" in arg
        elif arg.startswith("-"):
            raise _Unknown
        else:
            operands.append(arg)
    if not remove:
        raise _Unknown
    err, status = [], 0
    for name in operands:
        path = session.path(name)
        session.check_scope(path)
        if not session.has(path):
            what = "Is a directory" if session.is_dir(path) else "No such file or directory"
            err.append(f"shred: {name}: failed to open for writing: {what}\n")
            status = 1
            continue
        session.remove(path)
    return "", "".join(err), status


def _find_test(session: _Session, path: str, depth: int, test: str, value: str) -> bool:
    name = posixpath.basename(path) or path
    if test == "-name":
        return fnmatch.fnmatchcase(name, value)
    if test == "-iname":
        return fnmatch.fnmatchcase(name.lower(), value.lower())
    if test == "-type":
        if value not in ("f", "d"):
            raise _Unknown
        return (path in session.dirs) == (value == "d")
    limit = int(value) if value.isdigit() else None
    if limit is None:
        raise _Unknown
    return depth <= limit if test == "-maxdepth" else depth >= limit


def _sort(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    session.collate()
    flags, values, operands = _options(args, "rnufb", "kt")
    key = None
    if "k" in values:
        if not values["k"].isdigit():
            raise _Unknown  # 2,3 or 2n: key ends and options are not reproduced
        key = int(values["k"])
    lines = textutils.sort_lines(
        textutils.lines_of(_input(session, operands)),
        reverse="r" in flags,
        numeric="n" in flags,
        unique="u" in flags,
        fold="f" in flags,
        key=key,
        separator=values.get("t"),
    )
    session.unordered = False  # sorted: the input's order no longer shows
    return textutils.joined(lines), "", 0


def _uniq(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, _, operands = _options(args, "cdu", "")
    if len(operands) > 1:
        raise _Unknown  # a second operand is the output file
    lines = textutils.uniq_lines(
        textutils.lines_of(_input(session, operands)),
        count="c" in flags,
        repeated="d" in flags,
        single="u" in flags,
    )
    return textutils.joined(lines), "", 0


def _cut(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, values, operands = _options(args, "s", "dfc")
    if ("f" in values) == ("c" in values) or ("s" in flags):
        raise _Unknown
    ranges = textutils.parse_ranges(values.get("f") or values["c"])
    delimiter = values.get("d")
    if delimiter is not None and len(delimiter) != 1:
        return "", "cut: the delimiter must be a single character\n", 1
    text = _input(session, operands)
    lines = [
        textutils.cut_line(line, ranges, delimiter=delimiter, chars="c" in values)
        for line in textutils.lines_of(text)
    ]
    return textutils.joined([line for line in lines if line is not None]), "", 0


def _tr(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, _, sets = _options(args, "ds", "")
    if not 1 <= len(sets) <= 2:
        raise _Unknown
    second = sets[1] if len(sets) == 2 else None
    text = textutils.tr_text(
        _stdin(session), sets[0], second, delete="d" in flags, squeeze="s" in flags
    )
    return text, "", 0


def _sed(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, values, operands = _options(args, "ni", "e")
    script = values.get("e")
    if script is None:
        if not operands:
            raise _Unknown
        script, operands = operands[0], operands[1:]
    try:
        commands = textutils.parse_sed(script)
    except textutils.SedError as exc:
        return "", exc.message + "\n", 1
    quiet = "n" in flags
    if "i" not in flags:
        return textutils.run_sed(commands, _input(session, operands), quiet=quiet), "", 0
    if not operands:
        raise _Unknown
    for name in operands:
        path = session.path(name)
        session.check_scope(path)
        if not session.has(path):
            raise _Unknown
        session.write(path, textutils.run_sed(commands, session.read(path), quiet=quiet))
    return "", "", 0


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


def _uname(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
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
            raise _Unknown  # an operand or an option uname does not have
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
        raise _Unknown  # a field the scenario does not declare: the model's to render
    # GNU prints the fields in its own order, whatever the order of the options
    return " ".join(values[k] for k in shown) + "\n", "", 0


# date +FORMAT conversions Python writes the way GNU date does (C.UTF-8 locale)
_DATE_CONVERSIONS = set("YmdHMSaAbBejyZzFTDRhIpu%")


def _date(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    """The machine's clock (the same one `ls -l` shows), in UTC unless TZ says otherwise;
    a scenario without a clock (a recording of a real machine) leaves it to the model."""
    if session.clock is None or session.env.get("TZ") not in (None, "", "UTC", "UTC0"):
        raise _Unknown
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
            raise _Unknown
    return now.strftime(form) + "\n", "", 0


# git subcommands that need a repository: outside one, git refuses them in one line
_GIT_IN_A_REPOSITORY = frozenset(
    """status log add commit branch checkout switch show reset restore rm mv stash tag
    merge rebase push pull fetch remote rev-parse ls-files blame grep describe
    cherry-pick revert reflog""".split()
)
_NOT_A_REPOSITORY = "fatal: not a git repository (or any of the parent directories): .git\n"


def _git(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    """Outside any repository git refuses what needs one; inside one, or with its own
    options before the subcommand, what it prints is the model's."""
    session.require("git")
    if not args or args[0] not in _GIT_IN_A_REPOSITORY:
        raise _Unknown
    if any(key.startswith("GIT_") for key in session.env):
        raise _Unknown  # GIT_DIR and friends point git elsewhere
    path = session.cwd
    if not session.is_dir(path):
        raise _Unknown
    while True:
        if not session.files.in_scope(path):
            raise _Unknown  # above a repository's root the ledger knows nothing (swe)
        # raises when a program simgym does not run may have made a .git here
        if session.exists(posixpath.join(path, ".git")):
            raise _Unknown
        parent = posixpath.dirname(path)
        if parent == path:
            return "", _NOT_A_REPOSITORY, 128
        path = parent


def _python(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    """A program that only prints literals prints them; any other is the model's."""
    session.require("python3")
    if len(args) >= 2 and args[0] == "-c":
        source = args[1]
    elif args and not args[0].startswith("-"):
        path = session.path(args[0])
        session.check_scope(path)
        if session.is_dir(path):
            raise _Unknown  # a directory runs its __main__.py, or Python says it has none
        if not session.has(path):
            message = f"python3: can't open file '{path}': [Errno 2] No such file or directory\n"
            return "", message, 2
        source = session.read(path)
    else:
        raise _Unknown  # the interactive interpreter, or options simgym does not model
    out = pyprint.literal_output(source)
    if out is None:
        raise _Unknown
    return out, "", 0


# The terminal of the real backend (simgym.real.shell): what ps cuts its lines to.
TERMINAL_COLUMNS, TERMINAL_LINES = 160, 48


def _declared(name: str) -> Callable[[_Session, list[str], str, str], tuple[str, str, int]]:
    """A program that reports on the machine, answered from the scenario's declared
    machine (:mod:`simgym.domains.machine`); the model's without one."""

    def run(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
        if session.machine is None:
            raise _Unknown
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
            raise _Unknown
        return got

    return run


def _path_kind(session: _Session, path: str) -> str | None:
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


def _id(session: _Session, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    """The account as the sandboxes make it (the real backends' machines): the user in a
    group of its own, uid and gid 1000, or root."""
    number = 0 if user == "root" else 1000
    flags = "".join(a.lstrip("-") for a in args)
    if any(not a.startswith("-") for a in args) or set(flags) - set("ugGn"):
        raise _Unknown  # another user's ids, or options simgym does not model
    if not flags:
        return f"uid={number}({user}) gid={number}({user}) groups={number}({user})\n", "", 0
    if len(set(flags) & set("ugG")) != 1:
        raise _Unknown
    return (user if "n" in flags else str(number)) + "\n", "", 0


_COMMANDS: dict[str, Callable[[_Session, list[str], str, str], tuple[str, str, int]]] = {
    "pwd": _pwd,
    "cd": _cd,
    "ls": _ls,
    "ll": lambda s, a, user, host: _ls(s, ["-alF", *a], user, host),  # Ubuntu's alias
    "cat": _cat,
    "echo": _echo,
    "touch": _touch,
    "mkdir": _mkdir,
    "rm": _rm,
    "rmdir": _rmdir,
    "cp": _copy_or_move(False),
    "mv": _copy_or_move(True),
    "head": _head_tail(False),
    "tail": _head_tail(True),
    "wc": _wc,
    "grep": _grep,
    "find": _find,
    "sort": _sort,
    "uniq": _uniq,
    "cut": _cut,
    "tr": _tr,
    "sed": _sed,
    "export": _export,
    "unset": _unset,
    "printenv": _printenv,
    "whoami": lambda s, a, user, host: (user + "\n", "", 0),
    "id": _id,
    "hostname": lambda s, a, user, host: (host + "\n", "", 0),
    "uname": _uname,
    "date": _date,
    "git": _git,
    "python3": _python,
    "true": lambda s, a, user, host: ("", "", 0),
    "false": lambda s, a, user, host: ("", "", 1),
    ":": lambda s, a, user, host: ("", "", 0),
    "truncate": _truncate,
    "shred": _shred,
    **{
        name: _declared(name)
        for name in ("ps", "df", "free", "which", "dpkg", "dpkg-query", "nproc")
    },
}

# The commands simgym always runs itself. python3 it runs only when what the program does is
# certain; otherwise it is a program like any other, which may have changed its directory.
_ALWAYS_RUN = frozenset(_COMMANDS) - {
    "python3",
    "ps",
    "df",
    "free",
    "which",
    "dpkg",
    "dpkg-query",
    "nproc",
}


def _describe_unknown(session: _Session, text: str) -> None:
    """Facts for a command simgym does not run: the files it names, where it runs."""
    result = session.result
    result.facts.append(f"working directory: {session.cwd}")
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        words = text.split()
    if words and words[0] in INTERACTIVE and len(words) == 1:
        result.foreground = words[0]
    if words and words[0] in PAGERS_AND_EDITORS:
        result.foreground = words[0]
    _mark_unknown(session, text, words)
    seen: set[str] = set()
    if (
        words
        and words[0] in ("ls", "ll", "dir", "tree", "find", "du")
        and not any(not w.startswith("-") for w in words[1:])
    ):
        words = [*words, "."]
    for word in words[1:]:
        if word.startswith("-") or "=" in word or len(seen) >= 4:
            continue
        path = session.path(word)
        if path in seen or not session.files.in_scope(path):
            continue
        seen.add(path)
        if path in session.system:
            result.facts.append(f"{path} is a directory of the system; its files are not known")
        elif path in session.unknown:
            result.facts.append(f"{path} was changed by a program: its content is not known")
        elif path in session.content:
            result.facts.append(file_fact(path, session.content[path]))
        elif path in session.dirs:
            result.facts.append(_directory_fact(session, path))


def _mark_unknown(session: _Session, text: str, words: list[str]) -> None:
    """Remember what a program simgym does not run may have changed: the files it
    redirects into or edits, and the directory it runs in unless it only reads."""
    for target in re.findall(r"(?:^|[^<&\d])>>?\s*([^\s;&|<>]+)", text):
        path = session.path(target)
        parent = posixpath.dirname(path)
        if (
            session.files.in_scope(path)
            and path not in session.content
            and path not in session.dirs
        ):
            if parent in session.dirs and parent not in session.unknown:
                session.write(path, "")  # bash creates it before the program runs
        session.unknown.add(path)
    programs = {w for w in re.split(r"[;&|]+", text) if w.strip()}
    names = {p.split()[0] for p in programs if p.split()}
    if names - READ_ONLY - _ALWAYS_RUN - {"git", "sudo"} or "sudo" in names:
        session.unknown.add(session.cwd)
    if WRITING_OPTIONS.search(text):
        # it may delete or rewrite any file below the directories it walks, not only add
        roots = {session.cwd}
        for word in words[1:]:
            if not word.startswith(("-", "(", ")", "{", ";", "!")) and "/" in word:
                roots.add(session.path(word))
        for root in roots:
            inside = root.rstrip("/") + "/"
            session.unknown.add(root)
            session.unknown.update(
                p for p in [*session.content, *session.dirs] if p.startswith(inside)
            )
    if "git" in names and not re.search(r"\bgit\s+(status|log|diff|show|branch|remote)\b", text):
        session.unknown.add(session.cwd)
    if names & MODE_CHANGERS:
        for word in words[1:]:
            if not word.startswith(("-", "+")) and session.path(word) in session.content:
                session.unknown.add(session.path(word))  # its mode, shown by ls -l
    if names & EDITORS:
        for word in words[1:]:
            path = session.path(word)
            if not word.startswith("-") and path in session.content:
                session.unknown.add(path)


def _directory_fact(session: _Session, path: str) -> str:
    """A directory's entries with their kinds and sizes (what ``ls -l`` would list)."""
    entries = []
    for name in session.children(path):
        full = posixpath.join(path, name)
        if session.is_dir(full):
            entries.append(f"{name}/ (directory)")
        else:
            entries.append(f"{name} ({len(session.content[full].encode('utf-8'))} bytes)")
    return f"directory {path} contains: {', '.join(entries) or '(nothing)'}"


def file_fact(path: str, content: str, limit: int = 1500) -> str:
    """A file's content as a fact line (long files are cut, and say so)."""
    body = content if len(content) <= limit else content[:limit] + "\n[... cut ...]\n"
    if not body:
        return f"file {path} exists and is empty"
    body = body if body.endswith("\n") else body + "\n"
    return f"file {path} contains:\n```\n{body}```"
