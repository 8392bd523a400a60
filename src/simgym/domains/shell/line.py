"""A small shell over the hidden state's files: what a command line certainly does.

The terminal and swe domains keep their machine's files in the hidden state ledger
(``{"files": {path: content, "dir/": ""}, "cwd": ..., "env": {...}}``). For the commands
whose output follows from those files alone (``pwd``, ``cd``, ``ls``, ``cat``, ``echo`` with
``>``/``>>``, ``touch``, ``mkdir``, ``rm``, ``cp``, ``mv``, ``head``, ``tail``, ``wc -l``,
``export``, ...) :func:`run_line` computes the exact output and the changes to the files,
as bash with GNU coreutils would. For anything else (pipes, programs, compilers) it says
what it can — the contents of the files the command names, the working directory — and
leaves the output to the world model.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterable
from datetime import datetime

from simgym.domains import textutils
from simgym.domains.shell.declared import Machine
from simgym.domains.shell.facts import describe_unknown
from simgym.domains.shell.parse import Quoted, join_lines, parse_stage, split_commands
from simgym.domains.shell.table import RUNNERS
from simgym.domains.shell.view import SYSTEM_DIRS, Files, Shell, ShellResult, Unknown, Waits, ls_key


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
    machine: Machine | None = None,
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
    session = Shell(files, cwd, env or {}, home, set(given), clock, system, uname, programs)
    session.keyboard = keyboard
    session.modes = {files.abs(k): v for k, v in (modes or {}).items()}
    session.local = set(local_vars)
    session.machine = machine
    session.locale = locale
    session.env.setdefault("HOME", home)
    session.env.setdefault("USER", user)
    session.env.setdefault("PWD", cwd)
    text = join_lines(line.strip())
    outputs: list[str] = []
    try:
        commands = split_commands(text) if certain else None
    except (Unknown, ValueError):
        commands = None
    if commands is None:
        certain = False
    if commands is None:
        describe_unknown(session, text)
    else:
        status = 0
        for connector, command in commands:
            if connector == "&&" and status != 0 or connector == "||" and status == 0:
                continue
            try:
                # bash expands each command as it runs it, after the ones before it
                out, status = _pipeline(session, command, user=user, host=host)
                outputs.append(out)
            except Waits:
                session.result.foreground = parse_stage(command[0], session.env)[0][0]
                break
            except (Unknown, ValueError, textutils.Uncertain):
                certain = False
                describe_unknown(session, text)
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


# -- commands -----------------------------------------------------------------------


def _pipeline(session: Shell, stages: list[str], *, user: str, host: str) -> tuple[str, int]:
    """Run ``a | b | c``: each stage reads the one before it; what the terminal shows
    (the last stage's output, every stage's errors) and the last stage's status. A
    stage that writes errors before the last makes the interleaving uncertain."""
    session.unordered = False
    shown, status, data = "", 0, None
    parsed = [parse_stage(stage, session.env) for stage in stages]
    session.pipeline = [words for words, _ in parsed]
    for position, (words, redirects) in enumerate(parsed):
        session.stdin = data
        session.to_terminal = position == len(stages) - 1
        try:
            out, err, status = _run(session, words, redirects, user=user, host=host)
        finally:
            session.stdin, session.to_terminal = None, True
        if position < len(stages) - 1 and err:
            raise Unknown
        data, shown = out, out + err
    if session.unordered:
        raise Unknown  # in the order the file system lists its entries, which is not known
    return shown, status


def _run(
    session: Shell, words: list[str], redirects: list[tuple[str, str]], *, user: str, host: str
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
    command = RUNNERS.get(name)
    if command is None:
        raise Unknown
    if any(op not in (">", ">>", "<") for op, _ in redirects):
        raise Unknown
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
            raise Unknown
        if path in session.dirs:
            return "", err + f"bash: {target}: Is a directory\n", 1
        if not session.is_dir(posixpath.dirname(path)):
            return "", err + f"bash: {target}: No such file or directory\n", 1
        before = session.read(path) if op == ">>" and session.has(path) else ""
        session.unknown.discard(path)  # written whole: its content is known again
        session.write(path, before + out)
        return "", err, status
    return out, err, status


def _glob(session: Shell, words: list[str]) -> list[str]:
    out = []
    for word in words:
        if isinstance(word, Quoted):
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
            out.extend(sorted(matches, key=ls_key) or [word])
        else:
            out.append(word)
    return out
