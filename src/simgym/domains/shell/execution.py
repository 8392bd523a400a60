"""Which command lines may run for real, and the :class:`~simgym.core.execution.Run` each
becomes (execution grounding, :mod:`simgym.core.execution`).

The shell over the ledger (:mod:`simgym.domains.shell.line`) decides what it can in
microseconds. A line it cannot decide runs for real when everything it may read is known:
its programs are on this host and neither reach the network nor report on the machine
itself (processes, disks, the kernel's log), every path it names is a file or directory
of the state (or the host's read-only system, or ``/tmp``), and no earlier program the
model rendered has left the directory it works in unknown. Otherwise the world model
renders it, as before.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable
from functools import lru_cache

from simgym.domains.shell.parse import reads_on, without_heredoc_bodies
from simgym.domains.shell.table import INTERACTIVE, MACHINE, NETWORK, PAGERS_AND_EDITORS
from simgym.domains.shell.view import C_LOCALES, SYSTEM_DIRS

# git subcommands that reach another machine.
GIT_NETWORK = frozenset({"clone", "fetch", "pull", "push", "ls-remote", "submodule", "remote"})
# Paths of the host's system that every machine has the same (read-only in the sandbox).
SHARED_PREFIXES = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/tmp/", "/var/tmp/")
SHARED_PATHS = frozenset(
    {
        "/dev/null",
        "/dev/zero",
        "/dev/stdin",
        "/dev/stdout",
        "/dev/stderr",
        "/dev/urandom",
        "/dev/random",
        "/tmp",
        "/var/tmp",
        "/usr",
        "/bin",
    }
)
_COMMAND_AFTER = frozenset(
    {
        ";",
        "&&",
        "||",
        "|",
        "&",
        "(",
        "then",
        "do",
        "else",
        "elif",
        "if",
        "while",
        "until",
        "!",
        "time",
        "{",
        "xargs",
        "exec",
        "nohup",
        "command",
        "builtin",
        "\n",
    }
)
_KEYWORDS = frozenset(
    """if then else elif fi for in do done while until case esac function select time
    { } ! [[ ]]""".split()
)
_BUILTINS = frozenset(
    """cd echo printf read export unset set shift test [ true false : . source alias unalias
    type hash pwd local declare typeset readonly return exit let eval trap umask
    getopts exec command builtin shopt ulimit history popd pushd dirs""".split()
)


def chunks(text: str) -> list[str]:
    """A pasted text as the command lines bash reads from it, one after another (a
    here-document's body and lines inside an open quote belong to their command)."""
    out: list[str] = []
    current: list[str] = []
    for line in text.split("\n"):
        current.append(line)
        if not reads_on("\n".join(current)):
            if "".join(current).strip():
                out.append("\n".join(current))
            current = []
    if current and "".join(current).strip():
        out.append("\n".join(current))
    return out


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text.replace("\n", " \n "), posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = False
    lexer.commenters = "#"
    out: list[str] = []
    for token in lexer:  # a quote left open raises ValueError: bash would not run it either
        # a command substitution's first word is a command: split at $( and backquotes
        opened = False
        for part in re.split(r"(\$\(|`)", token):
            if part in ("$(", "`"):
                out.append("(")
                opened = True
            elif part and opened and part != token and re.search(r"[\s)]", part):
                # inside double quotes the substitution is one token: its words again
                out.extend(_tokens(part))
            elif part:
                out.append(part)
    return out


def why_not(
    text: str,
    *,
    cwd: str,
    home: str,
    files: Iterable[str],
    unknown: Iterable[str] = (),
    programs: Iterable[str] | None = None,
    also: frozenset[str] = frozenset(),
) -> str | None:
    """Why ``text`` must not run for real (None: it may). ``files`` are the state's
    absolute paths (directories end in ``/``), ``unknown`` those an unrun program may
    have changed, ``programs`` the scenario's declared programs (None: undeclared),
    ``also`` programs the run provides beyond the host's (``python`` for ``python3``)."""
    try:
        tokens = _tokens(without_heredoc_bodies(text))
    except ValueError:
        return "a quote is left open"
    if not tokens:
        return "nothing to run"
    known = set(files)
    dirs = {p.rstrip("/") for p in known if p.endswith("/")}
    for path in [p for p in known if not p.endswith("/")] + sorted(dirs):
        parent = posixpath.dirname(path.rstrip("/"))
        while parent not in dirs and parent != "/":
            dirs.add(parent)
            parent = posixpath.dirname(parent)
    dirs.add("/")
    declared = None if programs is None else set(programs)
    at_command = True
    skip = 0
    for i, token in enumerate(tokens):
        word = token
        if skip:
            skip -= 1
            continue
        if at_command and i and tokens[i - 1] == "xargs" or at_command and word.startswith("-"):
            # xargs's own options before the command it runs (-n 1, -I {})
            if word.startswith("-"):
                skip = 1 if word in _XARGS_VALUED else 0
                continue
        if word in NETWORK or word in MACHINE:
            return f"{word} reports on other machines or on the machine itself"
        if word == "git" and i + 1 < len(tokens) and tokens[i + 1] in GIT_NETWORK:
            return "git reaches another machine"
        if re.match(r"^[a-z][\w+.-]*://", word):
            return "a URL: the network"
        if at_command and word not in _KEYWORDS and not re.match(r"^\w+=", word):
            problem = (
                None
                if word in also
                else _program(word, tokens[i + 1 :], cwd, known, dirs, declared)
            )
            if problem:
                return problem
        at_command = word in _COMMAND_AFTER or (at_command and re.match(r"^\w+=", word))
        problem = _path(word, cwd, home, known, dirs)
        if problem:
            return problem
    return _touches_unknown(tokens, cwd, home, unknown)


def _program(
    word: str,
    rest: list[str],
    cwd: str,
    known: set[str],
    dirs: set[str],
    declared: set[str] | None,
) -> str | None:
    if word in _BUILTINS or word in _KEYWORDS or set(word) <= set(";&|()<>\n"):
        return None  # the shell's own, or an operator (xargs with nothing to run)
    if "/" in word:
        path = posixpath.normpath(posixpath.join(cwd, word))
        # a file of the state, or none in a directory the state knows (bash says so)
        if path in known or path.startswith(("/usr/", "/bin/")):
            return None
        if posixpath.dirname(path) in dirs - {"/"} and path + "/" not in known:
            return None
        return f"{word} is not a file the state knows"
    args = [w for w in rest[:1] if w not in _COMMAND_AFTER]
    if word in PAGERS_AND_EDITORS or (word in INTERACTIVE and not args):
        return f"{word} takes over the screen"
    if declared is not None and word not in declared and word not in BASE_SYSTEM:
        return f"{word} is not among the scenario's programs"
    if _which(word) is None:
        return f"{word} is not installed on this host"
    return None


def _which(word: str) -> str | None:
    return shutil.which(word, path="/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")


def _path(word: str, cwd: str, home: str, known: set[str], dirs: set[str]) -> str | None:
    candidate = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
    if not (candidate.startswith(("/", "~/")) or candidate == "~"):
        return None  # a relative path stays under the working directory (checked below)
    if any(c in candidate for c in "*?[$"):
        candidate = re.split(r"[*?\[$]", candidate, maxsplit=1)[0]
    path = posixpath.normpath(home + candidate[1:] if candidate.startswith("~") else candidate)
    if path in SHARED_PATHS or path.startswith(SHARED_PREFIXES):
        return None
    if path in known or path in dirs or posixpath.dirname(path) in dirs - {"/"}:
        top = "/" + path.lstrip("/").split("/", 1)[0]
        if top in SYSTEM_DIRS and path not in known and path + "/" not in known:
            if not any(k.startswith(path.rstrip("/") + "/") for k in known):
                return f"{path} is part of the machine the state does not describe"
        return None
    return f"{path} is not in the state"


def _touches_unknown(tokens: list[str], cwd: str, home: str, unknown: Iterable[str]) -> str | None:
    """An unrun program left something unknown where this line works: nothing certain."""
    doubtful = [u.rstrip("/") for u in unknown if u.rstrip("/") not in SYSTEM_DIRS]
    if not doubtful:
        return None
    places = {cwd}
    for token in tokens:
        if "/" in token or token.startswith("~"):
            raw = home + token[1:] if token.startswith("~") else token
            places.add(posixpath.normpath(posixpath.join(cwd, raw)))
    for place in places:
        for path in doubtful:
            if place == path or place.startswith(path + "/") or path.startswith(place + "/"):
                return f"{path} was changed by a program no code ran"
    return None


# Programs every Debian machine has (coreutils, findutils, grep, sed, gawk/mawk, tar,
# gzip, diffutils, bash, util-linux's basics): a scenario's `programs` list need not name
# them.
BASE_SYSTEM = frozenset(
    """ls cat echo printf cp mv rm mkdir rmdir touch ln chmod head tail wc sort uniq cut tr
    sed awk gawk mawk grep egrep fgrep find xargs tee diff cmp comm join paste split csplit
    fold fmt nl od expand unexpand tac rev seq yes basename dirname realpath readlink stat
    du sha1sum sha256sum sha512sum md5sum base64 base32 cksum sum tar gzip gunzip zcat
    bzip2 xz unxz date sleep env printenv true false test expr factor numfmt shuf tsort
    column file which whoami hostname uname mktemp install truncate shred sync bash sh
    dash timeout nice strings hexdump xxd iconv locale getconf""".split()
)


_MISSING = re.compile(
    r"(?:^|\n)(?:bash: (?:line \d+: )?(\S+): command not found"
    r"|\S*python[\d.]*: No module named (\S+))"
)


def missing_program(output: str, status: int, declared: Iterable[str] = ()) -> str | None:
    """The program or Python module the run found missing where the scenario's machine
    has it (a declared program, or a module run with ``-m``): then the host, not the
    world, answered, and the run does not stand for it."""
    if status not in (1, 127):
        return None
    for match in _MISSING.finditer(output):
        program, module = match.group(1), match.group(2)
        if module:
            return module
        if program in set(declared):
            return program
    return None


# xargs options that take a value as the next word
_XARGS_VALUED = frozenset({"-n", "-I", "-L", "-P", "-d", "-s", "-E", "-a", "-i"})


@lru_cache(maxsize=64)
def locale_installed(name: str) -> bool:
    """Whether this host can run programs in locale ``name`` (glibc would fall back to C
    without a word, and sort and ls would answer in another order)."""
    if name in C_LOCALES:
        return True
    base, _, charset = name.partition(".")
    folded = base + ("." + charset.lower().replace("-", "") if charset else "")
    return (
        any(
            os.path.isdir(os.path.join("/usr/lib/locale", candidate))
            for candidate in {name, folded}
        )
        or os.path.isfile("/usr/lib/locale/locale-archive")
        and _in_archive(name)
    )


def _in_archive(name: str) -> bool:
    try:
        done = subprocess.run(["locale", "-a"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return False
    wanted = {name.lower().replace("-", ""), name.lower().replace("utf-8", "utf8")}
    return any(line.strip().lower().replace("-", "") in wanted for line in done.stdout.split())


# Programs whose output follows the file system rather than the files: the order a
# directory lists its entries in (find, grep -r, ls -U, tar's verbose listing) and the
# blocks a file takes (du). Real machines differ in both, so a run's output is a fact
# about what is printed, not the exact screen, unless a sort puts it in order.
_LISTING_ORDER = re.compile(
    r"(?:^|[;&|(`\s])(?:(?:find|du)\b|grep\s+(?:-\w*[rR]|--recursive|--dereference-recursive)"
    r"|egrep\s+-\w*[rR]|ls\s+-\w*[Uf]|tar\s+-?\w*v)"
)


def follows_the_file_system(text: str) -> bool:
    """Whether ``text`` prints something whose order or sizes come from the file system
    (see :data:`_LISTING_ORDER`) with no ``sort`` after it to fix them."""
    bare = without_heredoc_bodies(text)
    found = _LISTING_ORDER.search(bare)
    if found is None:
        return False
    if re.search(r"\bdu\b", bare[found.start() :]):
        return True  # sizes: a sort orders them, it does not make them the machine's
    return re.search(r"\|\s*sort\b", bare[found.end() :]) is None


def printed_in_file_system_order(text: str, output: str) -> bool:
    """Whether what ``text`` printed (``output``) may differ on another machine: it
    follows the file system (:func:`follows_the_file_system`) and either counts sizes
    (``du``) or lists more than one line, whose order is the file system's. One line has
    no order: ``find . -name x -exec wc -l {} \\;`` printing one file is exact."""
    if not follows_the_file_system(text):
        return False
    if re.search(r"\bdu\b", without_heredoc_bodies(text)):
        return True
    return len([line for line in output.splitlines() if line.strip()]) > 1
