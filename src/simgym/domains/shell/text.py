"""The shell's text tools over files and pipes: ``grep``, ``find``, ``sort``, ``uniq``,
``cut``, ``tr`` and ``sed`` (:mod:`simgym.domains.textutils` does the text work, GNU
behaviour in the C.UTF-8 locale)."""

from __future__ import annotations

import fnmatch
import posixpath

from simgym.domains import textutils
from simgym.domains.shell.options import options
from simgym.domains.shell.view import Shell, Unknown, input_of, stdin_of


def run_grep(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    includes = [a.split("=", 1)[1] for a in args if a.startswith("--include=")]
    rest = [a for a in args if not a.startswith("--include=") and a != "--color=never"]
    flags, values, operands = options(rest, "EFGinvclowxhHrRqs", "e")
    patterns = [values["e"]] if "e" in values else operands[:1]
    if not patterns:
        raise Unknown
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
        raise Unknown  # searches "." and names files without "./"
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
    session: Shell, names: list[str], recursive: bool, includes: list[str]
) -> tuple[list[tuple[str, str]], str, int]:
    """(name as grep prints it, content) of what grep reads, its errors and status."""
    if not names:
        return [("(standard input)", input_of(session, []))], "", 0
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
            for inner in walk(session, path):
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


def walk(session: Shell, top: str) -> list[str]:
    """Every path below ``top`` (sorted; the real order is the file system's). A tree
    with unknown parts has unknown files in it: uncertain."""
    inside = top.rstrip("/") + "/"
    if top in session.unknown or any(u.startswith(inside) for u in session.unknown):
        raise Unknown
    found = [p for p in [*session.content, *session.dirs] if p.startswith(inside)]
    return sorted(found)


def run_find(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
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
            raise Unknown  # -exec, -newer, -o, -delete before a test...: left to the model
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
    session: Shell, start: str, tests: list[tuple[str, str]]
) -> list[tuple[str, str]] | None:
    """``(path, as find prints it)`` of what ``find START TESTS`` selects, in sorted order
    (the real order is the file system's); None when START does not exist."""
    path = session.path(start)
    session.check_scope(path)
    if not session.exists(path):
        return None
    selected = []
    for found in [path, *(walk(session, path) if path in session.dirs else [])]:
        depth = 0 if found == path else found[len(path.rstrip("/")) + 1 :].count("/") + 1
        if all(_find_test(session, found, depth, test, value) for test, value in tests):
            shown = start.rstrip("/") + found[len(path.rstrip("/")) :] if found != path else start
            selected.append((found, shown))
    return selected


def _find_delete(
    session: Shell, starts: list[str], tests: list[tuple[str, str]]
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
                raise Unknown  # the machine's own directories: not ours to say
            session.remove(found)
    return "", "".join(err), status


def _find_test(session: Shell, path: str, depth: int, test: str, value: str) -> bool:
    name = posixpath.basename(path) or path
    if test == "-name":
        return fnmatch.fnmatchcase(name, value)
    if test == "-iname":
        return fnmatch.fnmatchcase(name.lower(), value.lower())
    if test == "-type":
        if value not in ("f", "d"):
            raise Unknown
        return (path in session.dirs) == (value == "d")
    limit = int(value) if value.isdigit() else None
    if limit is None:
        raise Unknown
    return depth <= limit if test == "-maxdepth" else depth >= limit


def run_sort(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    session.collate()
    flags, values, operands = options(args, "rnufb", "kt")
    key = None
    if "k" in values:
        if not values["k"].isdigit():
            raise Unknown  # 2,3 or 2n: key ends and options are not reproduced
        key = int(values["k"])
    lines = textutils.sort_lines(
        textutils.lines_of(input_of(session, operands)),
        reverse="r" in flags,
        numeric="n" in flags,
        unique="u" in flags,
        fold="f" in flags,
        key=key,
        separator=values.get("t"),
    )
    session.unordered = False  # sorted: the input's order no longer shows
    return textutils.joined(lines), "", 0


def run_uniq(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, _, operands = options(args, "cdu", "")
    if len(operands) > 1:
        raise Unknown  # a second operand is the output file
    lines = textutils.uniq_lines(
        textutils.lines_of(input_of(session, operands)),
        count="c" in flags,
        repeated="d" in flags,
        single="u" in flags,
    )
    return textutils.joined(lines), "", 0


def run_cut(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, values, operands = options(args, "s", "dfc")
    if ("f" in values) == ("c" in values) or ("s" in flags):
        raise Unknown
    ranges = textutils.parse_ranges(values.get("f") or values["c"])
    delimiter = values.get("d")
    if delimiter is not None and len(delimiter) != 1:
        return "", "cut: the delimiter must be a single character\n", 1
    text = input_of(session, operands)
    lines = [
        textutils.cut_line(line, ranges, delimiter=delimiter, chars="c" in values)
        for line in textutils.lines_of(text)
    ]
    return textutils.joined([line for line in lines if line is not None]), "", 0


def run_tr(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, _, sets = options(args, "ds", "")
    if not 1 <= len(sets) <= 2:
        raise Unknown
    second = sets[1] if len(sets) == 2 else None
    text = textutils.tr_text(
        stdin_of(session), sets[0], second, delete="d" in flags, squeeze="s" in flags
    )
    return text, "", 0


def run_sed(session: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    flags, values, operands = options(args, "ni", "e")
    script = values.get("e")
    if script is None:
        if not operands:
            raise Unknown
        script, operands = operands[0], operands[1:]
    try:
        commands = textutils.parse_sed(script)
    except textutils.SedError as exc:
        return "", exc.message + "\n", 1
    quiet = "n" in flags
    if "i" not in flags:
        return textutils.run_sed(commands, input_of(session, operands), quiet=quiet), "", 0
    if not operands:
        raise Unknown
    for name in operands:
        path = session.path(name)
        session.check_scope(path)
        if not session.has(path):
            raise Unknown
        session.write(path, textutils.run_sed(commands, session.read(path), quiet=quiet))
    return "", "", 0
