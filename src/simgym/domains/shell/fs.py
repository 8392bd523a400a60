"""The shell's file and environment commands over the ledger: ``pwd``, ``cd``, ``ls``,
``cat``, ``echo``, ``touch``, ``mkdir``, ``rm``, ``rmdir``, ``cp``, ``mv``, ``head``,
``tail``, ``wc``, ``export``, ``unset``, ``printenv``, ``truncate`` and ``shred``, each
printing what bash with GNU coreutils prints. Each takes ``(shell, args, user, host)`` and
returns ``(stdout, stderr, status)``; the table (:mod:`simgym.domains.shell.table`) names
them.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable

from simgym.domains.shell.options import short_flags
from simgym.domains.shell.view import Shell, Unknown, ls_key, stdin_of

SCREEN_WIDTH = 80


def run_pwd(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    return session.cwd + "\n", "", 0


def run_cd(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    if len(args) > 1:
        return "", "bash: cd: too many arguments\n", 1
    target = args[0] if args else "~"
    if target == "-":
        raise Unknown
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


def run_ls(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    session.collate()
    flags, operands = short_flags(args, "aA1Fpl")
    long = "l" in flags
    if long and session.clock is None:
        raise Unknown
    errors, blocks, status = [], [], 0
    targets = operands or ["."]
    files_shown, dirs_shown = [], []
    for name in targets:
        path = session.path(name)
        session.check_scope(path)
        if path == "/" and session.files.root == "/":
            raise Unknown  # the whole machine's top level: more than the ledger holds
        if session.has(path):
            files_shown.append(name)
        elif session.is_dir(path):
            dirs_shown.append((name, path))
        else:
            errors.append(f"ls: cannot access '{name}': No such file or directory\n")
            status = 2
    if files_shown:
        shown = sorted(files_shown, key=ls_key)
        if long:
            blocks.append(_long(session, [(n, session.path(n)) for n in shown], user, None))
        else:
            blocks.append(_columns(shown, "1" in flags or not session.to_terminal))
    for name, path in sorted(dirs_shown, key=lambda shown: ls_key(shown[0])):
        session.listable(path)
        names = session.children(path)
        if "a" in flags:
            names = sorted([".", "..", *names], key=ls_key)
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


def _is_dir(session: Shell, directory: str, name: str) -> bool:
    return session.is_dir(posixpath.normpath(posixpath.join(directory, name)))


def _long(session: Shell, rows: list[tuple[str, str]], user: str, directory: str | None) -> str:
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


def run_cat(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, operands = short_flags(args, "")
    if not operands:
        return stdin_of(session), "", 0
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


def run_echo(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    newline = True
    while args and args[0] in ("-n", "-e", "-E"):
        if args[0] == "-e":
            raise Unknown
        newline = newline and args[0] != "-n"
        args = args[1:]
    return " ".join(args) + ("\n" if newline else ""), "", 0


def run_touch(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, operands = short_flags(args, "")
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


def run_mkdir(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, operands = short_flags(args, "p")
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


def run_rm(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, operands = short_flags(args, "rRfv")
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
        raise Unknown
    return "", "".join(err), status


def run_rmdir(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, operands = short_flags(args, "")
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


def copy_or_move(move: bool) -> Callable[[Shell, list[str], str, str], tuple[str, str, int]]:
    verb = "mv" if move else "cp"

    def run(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
        flags, operands = short_flags(args, "fn" if move else "f")
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
                raise Unknown  # moving a directory tree: left to the model
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


def _in_system_dir(session: Shell, path: str) -> bool:
    """Whether ``path`` is, or is right inside, one of the machine's own directories
    (``/tmp``): they exist and take files, but what is in them is not known."""
    return path in session.system or posixpath.dirname(path) in session.system


def _into_system_dir(
    session: Shell, sources: list[str], destination: str, move: bool
) -> tuple[str, str, int]:
    """``mv``/``cp`` of files into a system directory (``mv app.log /tmp/``): the
    destination's content is not known (it may be a directory that takes the file), but a
    moved file is certainly gone from where it was, as it is on the real machine."""
    paths = [session.path(name) for name in sources]
    for path in paths:
        session.check_scope(path)
        if not session.has(path):
            raise Unknown  # a directory tree, or nothing: the errors are left to the model
    for path in paths:
        if move:
            session.remove(path)
        if destination not in session.system:
            session.unknown.add(destination)
        session.unknown.add(posixpath.join(destination, posixpath.basename(path)))
    return "", "", 0


def head_tail(tail: bool) -> Callable[[Shell, list[str], str, str], tuple[str, str, int]]:
    verb = "tail" if tail else "head"

    def run(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
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
                raise Unknown
            else:
                operands.append(arg)
            i += 1
        if not operands:
            lines = stdin_of(session).splitlines(keepends=True)
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


def run_wc(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, operands = short_flags(args, "lwc")
    if len(flags) != 1 or len(operands) > 1:
        raise Unknown
    if not operands:
        counted = _count(stdin_of(session), flags.pop())
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


def run_export(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    if not args:
        raise Unknown
    for arg in args:
        key, sep, value = arg.partition("=")
        session.local.discard(key)
        if not sep:
            continue
        session.env[key] = value
        session.result.env[key] = value
    return "", "", 0


def run_unset(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    for key in args:
        session.env.pop(key, None)
        session.local.discard(key)
        session.result.env[key] = None
    return "", "", 0


def run_printenv(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    if not args:
        raise Unknown  # the full environment holds variables the state does not list
    values = [session.env[a] for a in args if a in session.env and a not in session.local]
    return "".join(v + "\n" for v in values), "", 0 if len(values) == len(args) else 1


def run_truncate(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
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
            raise Unknown
        else:
            operands.append(arg)
    if size != "0":
        raise Unknown
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


def run_shred(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
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
            raise Unknown
        else:
            operands.append(arg)
    if not remove:
        raise Unknown
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
