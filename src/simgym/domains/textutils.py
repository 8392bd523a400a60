"""The text tools of a shell as pure functions: grep's patterns, sort, uniq, cut, tr and
sed's simplest scripts, as GNU coreutils, grep and sed behave in the C.UTF-8 locale (the
one simgym's real sandbox sets: byte order, no collation).

:mod:`simgym.domains.shell` runs them on the ledger's files and on pipes. Anything these
functions do not reproduce exactly (a POSIX class they do not know, a sed command beyond
``s``, ``p``, ``d`` and ``q``, a sort key with options) raises :class:`Uncertain`, and the
line is left to the world model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from simgym.core.patterns import Pattern, PatternError, PatternTimeout, compile_pattern


class Uncertain(Exception):
    """The tool's output is not reproduced here exactly."""


# -- patterns (grep, sed) -----------------------------------------------------------------

_CLASSES = {
    "alpha": "A-Za-z", "digit": "0-9", "alnum": "A-Za-z0-9", "upper": "A-Z", "lower": "a-z",
    "space": " \\t\\n\\r\\f\\v", "blank": " \\t", "punct": "!-/:-@\\[-`{-~", "xdigit": "0-9A-Fa-f",
}  # fmt: skip


def to_python(pattern: str, *, extended: bool) -> str:
    """A POSIX basic (or, ``extended``, ERE) regular expression in Python's syntax."""
    out: list[str] = []
    i = 0
    in_class = False
    while i < len(pattern):
        ch = pattern[i]
        if in_class:
            if pattern.startswith("[:", i):
                end = pattern.find(":]", i)
                name = pattern[i + 2 : end] if end > 0 else ""
                if name not in _CLASSES:
                    raise Uncertain(f"character class [:{name}:]")
                out.append(_CLASSES[name])
                i = end + 2
                continue
            if ch == "]" and out[-1] not in ("[", "[^"):
                in_class = False
            out.append("\\\\" if ch == "\\" else ch)
            i += 1
            continue
        if ch == "[":
            in_class = True
            if pattern.startswith("[^", i):
                out.append("[^")
                i += 2
            else:
                out.append("[")
                i += 1
            if i < len(pattern) and pattern[i] == "]":
                out.append("\\]")
                i += 1
            continue
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if not extended and nxt in "|(){}+?":
                out.append(nxt)  # BRE's escaped operators are Python's plain ones
            elif nxt in "<>":
                out.append("\\b")
            elif nxt.isdigit() or nxt in "wWsSbB.*[]^$\\/":
                out.append("\\" + nxt)
            else:
                out.append(re.escape(nxt))
            i += 2
            continue
        if not extended and ch in "|(){}+?":
            out.append("\\" + ch)  # plain in a BRE
        elif ch == "*" and (not out or out[-1] in ("^", "(", "|")):
            out.append("\\*")  # a leading star is literal
        else:
            out.append(ch)
        i += 1
    if in_class:
        raise Uncertain("unterminated bracket expression")
    return "".join(out)


@dataclass(frozen=True)
class Matcher:
    """grep's idea of a match for one or more patterns. The agent writes the patterns, so
    they run in bounded time (:mod:`simgym.core.patterns`: RE2, or a backtracking engine
    with a time limit); one that runs out of time is uncertain, and a real run decides."""

    pattern: Pattern

    @classmethod
    def build(
        cls,
        patterns: Sequence[str],
        *,
        extended: bool = False,
        fixed: bool = False,
        ignore_case: bool = False,
        word: bool = False,
        line: bool = False,
    ) -> Matcher:
        parts = [re.escape(p) if fixed else to_python(p, extended=extended) for p in patterns]
        body = "|".join(f"(?:{p})" for p in parts)
        if word:
            body = rf"(?<!\w)(?:{body})(?!\w)"
        if line:
            body = rf"^(?:{body})$"
        try:
            return cls(compile_pattern(body, ignore_case=ignore_case, timeout_s=0.5))
        except PatternError as exc:
            raise Uncertain(f"pattern: {exc}") from exc

    def hits(self, line: str) -> bool:
        try:
            return self.pattern.search(line) is not None
        except PatternTimeout as exc:
            raise Uncertain(str(exc)) from exc

    def parts(self, line: str) -> list[str]:
        """``grep -o``: each non-empty match, left to right."""
        found, pos = [], 0
        while pos <= len(line):
            try:
                match = self.pattern.search_from(line, pos)
            except PatternTimeout as exc:
                raise Uncertain(str(exc)) from exc
            if match is None:
                break
            if match.group(0):
                found.append(match.group(0))
            pos = match.end() if match.end() > match.start() else match.end() + 1
        return found


def lines_of(text: str) -> list[str]:
    """A text's lines without their newlines (a last line without one still counts)."""
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def joined(lines: Sequence[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


# -- sort, uniq ---------------------------------------------------------------------------

_NUMBER = re.compile(r"\s*(-?\d+(?:\.\d*)?|-?\.\d+)")


def _numeric(text: str) -> float:
    match = _NUMBER.match(text)
    return float(match.group(1)) if match else 0.0


def _field(line: str, number: int, separator: str | None) -> str:
    """Sort key field ``number`` (1-based) to the end of the line, as ``-k N`` takes it:
    with ``-t`` fields split at the separator, else each field keeps its leading blanks."""
    if separator is not None:
        return separator.join(line.split(separator)[number - 1 :])
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=\S))\s*\S", line)]
    return line[starts[number - 1] :] if number <= len(starts) else ""


def sort_lines(
    lines: Sequence[str],
    *,
    reverse: bool = False,
    numeric: bool = False,
    unique: bool = False,
    fold: bool = False,
    key: int | None = None,
    separator: str | None = None,
) -> list[str]:
    """``sort``: by the key (the whole line, or field ``key`` to the end), numerically or
    by bytes, ties broken by the whole line's bytes; ``reverse`` reverses both."""

    def sort_key(line: str) -> tuple:
        part = _field(line, key, separator) if key else line
        if numeric:
            first: object = _numeric(part)
        else:
            first = (part.upper() if fold else part).encode()
        return (first, line.encode())

    ordered = sorted(lines, key=sort_key, reverse=reverse)
    if not unique:
        return ordered
    out: list[str] = []
    for line in ordered:
        if not out or sort_key(out[-1])[0] != sort_key(line)[0]:
            out.append(line)
    return out


def uniq_lines(
    lines: Sequence[str], *, count: bool = False, repeated: bool = False, single: bool = False
) -> list[str]:
    """``uniq``: adjacent equal lines as one; ``-c`` counts (``%7d``), ``-d`` keeps only the
    repeated, ``-u`` only the unrepeated."""
    groups: list[tuple[str, int]] = []
    for line in lines:
        if groups and groups[-1][0] == line:
            groups[-1] = (line, groups[-1][1] + 1)
        else:
            groups.append((line, 1))
    if repeated:
        groups = [g for g in groups if g[1] > 1]
    if single:
        groups = [g for g in groups if g[1] == 1]
    return [f"{n:>7} {line}" if count else line for line, n in groups]


# -- cut, tr ------------------------------------------------------------------------------


def parse_ranges(spec: str) -> list[tuple[int, int | None]]:
    """``1,3-5,7-`` as 1-based inclusive ranges (None: to the end)."""
    ranges: list[tuple[int, int | None]] = []
    for part in spec.split(","):
        match = re.fullmatch(r"(\d*)(-?)(\d*)", part)
        if match is None or part in ("", "-"):
            raise Uncertain(f"cut list {spec!r}")
        start, dash, end = match.groups()
        low = int(start) if start else 1
        high = (int(end) if end else None) if dash else low
        if low < 1:
            raise Uncertain(f"cut list {spec!r}")
        ranges.append((low, high))
    return ranges


def _chosen(count: int, ranges: list[tuple[int, int | None]]) -> list[int]:
    return [i for i in range(1, count + 1) if any(lo <= i <= (hi or count) for lo, hi in ranges)]


def cut_line(
    line: str, ranges: list[tuple[int, int | None]], *, delimiter: str | None, chars: bool
) -> str | None:
    """One line of ``cut -f`` (``delimiter``, default tab) or ``cut -c``; None: the line
    is dropped (never, here: a line without the delimiter is printed whole, as GNU does)."""
    if chars:
        return "".join(line[i - 1] for i in _chosen(len(line), ranges))
    sep = delimiter if delimiter is not None else "\t"
    if sep not in line:
        return line
    fields = line.split(sep)
    return sep.join(fields[i - 1] for i in _chosen(len(fields), ranges))


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "f": "\f", "v": "\v", "0": "\0"}


def _tr_set(spec: str) -> list[str]:
    chars: list[str] = []
    i = 0
    while i < len(spec):
        ch = spec[i]
        if ch == "\\" and i + 1 < len(spec):
            if spec[i + 1] not in _ESCAPES:
                raise Uncertain(f"tr escape \\{spec[i + 1]}")
            chars.append(_ESCAPES[spec[i + 1]])
            i += 2
            continue
        if ch == "[" and (spec.startswith("[:", i) or spec.startswith("[=", i)):
            raise Uncertain("tr class")
        if i + 2 < len(spec) and spec[i + 1] == "-":
            chars.extend(chr(c) for c in range(ord(ch), ord(spec[i + 2]) + 1))
            i += 3
            continue
        chars.append(ch)
        i += 1
    return chars


def tr_text(text: str, set1: str, set2: str | None, *, delete: bool, squeeze: bool) -> str:
    """``tr SET1 SET2``, ``tr -d SET1``, ``tr -s SET1`` (ranges and backslash escapes)."""
    first = _tr_set(set1)
    if delete:
        if squeeze or set2 is not None:
            raise Uncertain("tr -d with a second set")
        gone = set(first)
        return "".join(c for c in text if c not in gone)
    if set2 is None:
        if not squeeze:
            raise Uncertain("tr without a second set")
        table: dict[str, str] = {}
        squeezed = set(first)
    else:
        second = _tr_set(set2)
        if not second:
            raise Uncertain("tr with an empty second set")
        second += [second[-1]] * (len(first) - len(second))
        table = {a: b for a, b in zip(first, second, strict=False)}
        squeezed = set(second) if squeeze else set()
    out: list[str] = []
    for ch in text:
        mapped = table.get(ch, ch)
        if out and mapped in squeezed and out[-1] == mapped:
            continue
        out.append(mapped)
    return "".join(out)


# -- sed ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SedError(Exception):
    """A script GNU sed refuses, with its message."""

    message: str


@dataclass(frozen=True)
class _Command:
    first: int | str | None  # a line number, "$", or None (every line)
    last: int | str | None
    name: str  # "s", "p", "d", "q"
    regex: re.Pattern[str] | None = None
    replacement: str = ""
    count_all: bool = False
    print_after: bool = False


def _address(text: str) -> tuple[int | str | None, int | str | None, str]:
    match = re.match(r"(\d+|\$)?(?:,(\d+|\$))?", text)
    assert match is not None
    one, two = match.groups()
    first = int(one) if one and one != "$" else one
    last = int(two) if two and two != "$" else two
    return first, last, text[match.end() :]


def parse_sed(script: str) -> list[_Command]:
    """One ``-e`` script: ``[addr[,addr]]p``, ``d``, ``q`` and ``s/re/text/[g][p]``
    commands separated by ``;`` or newlines."""
    commands: list[_Command] = []
    rest = script.strip()
    while rest:
        first, last, rest = _address(rest)
        if not rest:
            raise SedError(f"sed: -e expression #1, char {len(script)}: missing command")
        name, rest = rest[0], rest[1:]
        if name in "pdq":
            commands.append(_Command(first, last, name))
        elif name == "s":
            if not rest:
                raise SedError(
                    f"sed: -e expression #1, char {len(script)}: unterminated `s' command"
                )
            delim = rest[0]
            parts = _split_unescaped(rest[1:], delim)
            if len(parts) < 3:
                raise SedError(
                    f"sed: -e expression #1, char {len(script)}: unterminated `s' command"
                )
            pattern, replacement, tail = parts[0], parts[1], delim.join(parts[2:])
            flags = re.match(r"[gp]*", tail)
            assert flags is not None
            rest = tail[flags.end() :]
            try:
                regex = re.compile(to_python(pattern, extended=False))
            except re.error as exc:
                raise Uncertain(f"sed pattern: {exc}") from exc
            commands.append(
                _Command(
                    first,
                    last,
                    "s",
                    regex,
                    _replacement(replacement),
                    "g" in flags.group(0),
                    "p" in flags.group(0),
                )  # fmt: skip
            )
        else:
            raise Uncertain(f"sed command {name!r}")
        rest = rest.lstrip()
        if rest[:1] in (";", "\n"):
            rest = rest[1:].lstrip()
        elif rest:
            raise Uncertain(f"sed script {script!r}")
    return commands


def _split_unescaped(text: str, delim: str) -> list[str]:
    parts, current, i = [], [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            current.append(nxt if nxt == delim else text[i : i + 2])
            i += 2
            continue
        if text[i] == delim:
            parts.append("".join(current))
            current = []
        else:
            current.append(text[i])
        i += 1
    parts.append("".join(current))
    return parts


def _replacement(text: str) -> str:
    """sed's replacement (``&``, ``\\1``) in Python's ``re.sub`` form."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append(f"\\{nxt}" if nxt.isdigit() else "\n" if nxt == "n" else nxt)
            i += 2
            continue
        out.append("\\g<0>" if ch == "&" else "\\\\" if ch == "\\" else ch)
        i += 1
    return "".join(out)


def run_sed(commands: list[_Command], text: str, *, quiet: bool) -> str:
    """The script over the text's lines, as ``sed [-n]`` prints them."""
    lines = lines_of(text)
    out: list[str] = []
    total = len(lines)
    for number, line in enumerate(lines, start=1):
        deleted = False
        for command in commands:
            if not _selected(command, number, total):
                continue
            if command.name == "p":
                out.append(line)
            elif command.name == "d":
                deleted = True
                break
            elif command.name == "q":
                if not quiet:
                    out.append(line)
                return joined(out)
            elif command.name == "s":
                assert command.regex is not None
                new, n = command.regex.subn(
                    command.replacement, line, count=0 if command.count_all else 1
                )
                line = new
                if n and command.print_after:
                    out.append(line)
        if not deleted and not quiet:
            out.append(line)
    return joined(out)


def _selected(command: _Command, number: int, total: int) -> bool:
    def at(address: int | str | None) -> int | None:
        return total if address == "$" else address if isinstance(address, int) else None

    first, last = at(command.first), at(command.last)
    if first is None:
        return True
    if last is None:
        return number == first
    return first <= number <= max(first, last)
