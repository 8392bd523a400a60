"""How bash reads a command line: quotes, backslashes and comments (:func:`scan_quotes`),
lines that read on (:func:`reads_on`, here-documents), the line split into commands and
pipe stages (:func:`split_commands`), and each stage expanded into words and
redirections (:func:`parse_stage`). What this does not model raises
:class:`~simgym.domains.shell.view.Unknown`, so the line is left to the world model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from simgym.domains.shell.view import Unknown


def reads_on(line: str) -> bool:
    """Whether bash, given ``line`` at its prompt, shows its continuation prompt and reads
    another line: a quote left open, a backslash at the very end (it escapes the
    newline), or a here-document whose closing word has not come yet. A comment ends the
    line, quotes and backslash in it included."""
    return bool(open_heredocs(line)) or bool(scan_quotes(without_heredoc_bodies(line)).open)


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
                raise Unknown
        elif ch == "`" and quote != "'":
            raise Unknown
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
class Scan:
    """How bash's quoting reads a line: the positions of its bare characters (outside
    quotes, not escaped) before any comment, where that comment starts, the backslashes
    that join a line to the next, and what the line leaves open: ``'`` or ``"`` (a quote,
    opened at ``opened``), ``\\`` (a final backslash) or nothing."""

    bare: list[int]
    end: int
    joins: list[int]
    open: str = ""
    opened: int = -1


def scan_quotes(line: str) -> Scan:
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
                return Scan(bare, len(line), joins, "\\", i)
            if line[i + 1 : i + 2] == "\n":
                joins.append(i)  # bash drops a backslash-newline before reading words
            i += 1
        elif quote == '"':
            quote = "" if ch == '"' else quote
        elif ch in "'\"":
            quote, opened = ch, i
        elif ch == "#" and boundary:
            return Scan(bare, i, joins)
        else:
            bare.append(i)
        boundary = bool(bare) and bare[-1] == i and ch in _BREAKS
        i += 1
    return Scan(bare, len(line), joins, quote, opened if quote else -1)


def join_lines(line: str) -> str:
    """``line`` with its backslash-newlines removed, as bash removes them (outside single
    quotes) before it reads the words: ``echo ab\\`` then ``cd`` is ``echo abcd``."""
    cuts = scan_quotes(line).joins
    starts = [0, *(c + 2 for c in cuts)]
    return "".join(line[a:b] for a, b in zip(starts, [*cuts, len(line)], strict=True))


def split_commands(line: str) -> list[tuple[str, list[str]]]:
    """The line's commands, unexpanded, each with the connector before it (``;``, ``&&``,
    ``||``) and split into the stages of its pipe. Background jobs are left to the model
    (:class:`Unknown`); a quote left open raises :class:`OpenQuote`. A final backslash
    stays (``bash -c 'echo a\\'`` prints it); at a prompt :func:`reads_on` reads on."""
    scan = scan_quotes(line)
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
            raise Unknown  # a background job
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
            raise Unknown  # `a |` or `| b`: bash waits for more, or refuses
        return
    if last.strip():
        commands.append((connector, parts))


class Quoted(str):
    """A word that was quoted on the command line: bash does not expand globs in it."""


def _tokens(text: str) -> list[str]:
    """Words and operators (``;`` ``&&`` ``||`` ``|`` ``&`` ``>`` ``>>`` ``<``) as bash
    reads them: quotes removed from words (a word that had any is a :class:`Quoted`),
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
            tokens.append(Quoted(value) if quoted else value)
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


def parse_stage(line: str, env: dict[str, str]) -> tuple[list[str], list[tuple[str, str]]]:
    """One command of a pipe (:func:`split_commands` split the line), expanded as bash expands
    it when it runs: its words and its redirections (``> file`` alone is the null
    command, redirected: it truncates). Operators left in it (from an expansion),
    subshells, here-docs and other descriptors' juggling are left to the model."""
    tokens = _tokens(_expand(line, env))
    words: list[str] = []
    redirects: list[tuple[str, str]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if isinstance(token, Quoted):
            words.append(token)
        elif re.fullmatch(r"\d*>>?|<", token):
            if i + 1 >= len(tokens):
                raise Unknown
            redirects.append((token, tokens[i + 1]))
            i += 1
        elif set(token) <= set(";&|<>"):
            raise Unknown
        else:
            words.append(token)
        i += 1
    if not (words or redirects):
        raise Unknown
    return words or [":"], redirects
