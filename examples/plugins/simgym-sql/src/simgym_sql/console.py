"""The sqlite3 shell's part of a turn, run for real on Python's sqlite3: one input line
(SQL statements, or one dot-command) against a connection, printed the way the
``sqlite3`` command-line shell 3.40 prints it on a terminal.

:func:`run_line` answers with an :class:`Outcome`: the text, whether the text is exact
(what the shell would print, byte for byte, minus the CSV mode's carriage returns), and
whether the line changed the database. A text is not exact where the shell prints what
this module does not reproduce: the caret under a syntax error, ``.help``, output modes
other than list, csv, column and line, a view's ``.schema`` comment.
"""

from __future__ import annotations

import math
import re
import sqlite3
from dataclasses import dataclass, field

MODES = ("list", "csv", "column", "line")
# Results that depend on more than the tables: the clock, chance, the connection's history
NONDETERMINISTIC = re.compile(
    r"\b(random|randomblob|changes|total_changes|last_insert_rowid|current_time|"
    r"current_date|current_timestamp)\b|'now'",
    re.IGNORECASE,
)
_WIDTH = 80  # .tables lays names out in columns across this many characters


@dataclass
class Settings:
    """What the shell carries from one line to the next: what its dot-commands set, and
    the start of a statement still waiting for its ``;`` (the shell then prompts with
    ``   ...> `` and runs it when a later line completes it)."""

    mode: str = "list"
    headers: bool = False
    pending: str = ""


@dataclass
class Outcome:
    text: str
    exact: bool = True
    changed: list[str] = field(default_factory=list)  # statements that changed the database
    error: str | None = None  # the first line of an error the shell prints
    final: bool = False  # .quit / .exit


def connect() -> sqlite3.Connection:
    """A connection in autocommit mode: BEGIN, COMMIT and ROLLBACK are the user's."""
    return sqlite3.connect(":memory:", isolation_level=None)


def format_value(value: object) -> str:
    """A value as the shell prints it (NULL as nothing, REAL with ``%!.15g``)."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, float):
        if math.isinf(value):
            return "Inf" if value > 0 else "-Inf"
        text = f"{value:.15g}"
        mantissa, e, exponent = text.partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        return mantissa + (e + exponent if e else "")
    return str(value)


def split_statements(text: str) -> tuple[list[str], str]:
    """The complete statements of ``text`` in order, and what follows the last one (a
    statement not yet ended by ``;``, which the shell waits to see completed)."""
    statements: list[str] = []
    start = 0
    for i, char in enumerate(text):
        if char == ";" and sqlite3.complete_statement(text[start : i + 1]):
            statements.append(text[start : i + 1].strip())
            start = i + 1
    return [s for s in statements if s.strip(" ;\n\t")], text[start:].strip()


def _csv(value: str, is_null: bool) -> str:
    if is_null:
        return ""
    if value == "" or any(ord(c) < 0x21 or ord(c) >= 0x7F or c in "\"'," for c in value):
        return '"' + value.replace('"', '""') + '"'
    return value


def render_rows(
    headers: list[str], rows: list[tuple[object, ...]], settings: Settings
) -> list[str]:
    """The lines one result prints in the current output mode."""
    if not rows:
        return []
    cells = [[format_value(v) for v in row] for row in rows]
    if settings.mode == "line":
        width = max(5, *(len(h) for h in headers))  # the shell pads names to 5 at least
        out: list[str] = []
        for n, row in enumerate(cells):
            if n:
                out.append("")
            out += [f"{h:>{width}} = {v}" for h, v in zip(headers, row, strict=True)]
        return out
    if settings.mode == "column":
        widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
        lines = [["-" * w for w in widths]]
        lines = [list(headers), *lines] if settings.headers else []
        lines += cells
        return ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
    if settings.mode == "csv":
        out = [",".join(_csv(h, False) for h in headers)] if settings.headers else []
        for row, raw in zip(cells, rows, strict=True):
            out.append(",".join(_csv(c, v is None) for c, v in zip(row, raw, strict=True)))
        return out
    out = ["|".join(headers)] if settings.headers else []
    return out + ["|".join(row) for row in cells]


def _error_line(exc: sqlite3.Error) -> tuple[str, bool]:
    """The shell's first error line, and whether that line is all it prints."""
    message = str(exc)
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.IntegrityError) or (code is not None and code & 0xFF != 1):
        primary = (code or 0) & 0xFF
        return f"Runtime error: {message} ({primary})", True
    # A statement that does not prepare: the shell adds the statement and a caret under
    # the offending token for a syntax error, whose place this module cannot know.
    return f"Parse error: {message}", not message.startswith("near ")


def run_sql(conn: sqlite3.Connection, text: str, settings: Settings) -> Outcome:
    """Run the statements of one input line, stopping at the first error, as the shell does."""
    lines: list[str] = []
    outcome = Outcome(text="")
    statements, settings.pending = split_statements(text)
    for statement in statements:
        before = (conn.total_changes, _schema_version(conn), conn.in_transaction)
        try:
            cursor = conn.execute(statement)
            rows = cursor.fetchall()
        except sqlite3.Warning:  # more than one statement where one was split: not ours
            outcome.exact = False
            break
        except sqlite3.Error as exc:
            line, whole = _error_line(exc)
            lines.append(line)
            outcome.error = line
            outcome.exact = outcome.exact and whole
            if (conn.total_changes, _schema_version(conn), conn.in_transaction) != before:
                outcome.changed.append(statement)  # a failed statement that still did work
            break
        if (conn.total_changes, _schema_version(conn), conn.in_transaction) != before:
            outcome.changed.append(statement)
        if cursor.description:
            headers = [d[0] for d in cursor.description]
            lines += render_rows(headers, rows, settings)
            if rows and settings.mode not in MODES:
                outcome.exact = False  # printed as list here; the shell's box, html, ...
        if NONDETERMINISTIC.search(statement):
            outcome.exact = False
    outcome.text = "\n".join(lines)
    return outcome


def _schema_version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA schema_version").fetchone()[0]


def run_dot(conn: sqlite3.Connection, line: str, settings: Settings) -> Outcome:
    """One dot-command. ``settings`` is changed in place by ``.mode`` and ``.headers``."""
    words = line.strip().split()
    command, args = words[0][1:], words[1:]
    if command and ("quit".startswith(command) or command == "exit"):
        return Outcome(text="", final=True)
    if command in ("headers", "header") and len(args) == 1 and args[0] in ("on", "off"):
        settings.headers = args[0] == "on"
        return Outcome(text="")
    if command == "mode" and len(args) == 1:
        settings.mode = args[0]
        if args[0] in ("column", "table", "box", "markdown"):
            settings.headers = True  # these modes switch headers on, and they stay on
        return Outcome(text="", exact=args[0] in MODES)
    if command == "tables" and len(args) <= 1:
        return Outcome(text=_tables(conn, args[0] if args else "%"))
    if command == "schema" and len(args) <= 1:
        query = (
            "SELECT sql, type FROM sqlite_master WHERE sql IS NOT NULL "
            "AND name NOT LIKE 'sqlite_%' AND tbl_name LIKE ? ORDER BY rowid"
        )
        found = conn.execute(query, (args[0] if args else "%",)).fetchall()
        # the shell comments a view with its columns: not reproduced here
        exact = all(kind != "view" for _, kind in found)
        return Outcome(text="\n".join(f"{sql};" for sql, _ in found), exact=exact)
    if len(command) >= 2 and any(known.startswith(command) for known in _KNOWN_DOTS):
        # a real command (the shell takes a prefix of one), or one of the above with
        # arguments this module does not follow: the world model renders it
        return Outcome(text="", exact=False)
    return Outcome(
        text=f'Error: unknown command or invalid arguments:  "{command}". Enter ".help" for help',
        error="unknown command",
    )


# Dot-commands the shell has that run_dot leaves to the world model.
_KNOWN_DOTS = frozenset(
    "archive auth backup bail binary cd changes check clone connection databases dbconfig "
    "dbinfo dump echo eqp excel expert explain filectrl fullschema help import imposter "
    "indexes limit lint load log nonce nullvalue once open output parameter print progress "
    "prompt read recover restore save scanstats selftest separator session sha3sum shell "
    "show stats system testcase testctrl timeout timer trace vfsinfo vfslist vfsname "
    "width headers mode tables schema".split()
)


def _tables(conn: sqlite3.Connection, pattern: str) -> str:
    names = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite_%' AND name LIKE ? ORDER BY 1",
            (pattern,),
        )
    ]
    if not names:
        return ""
    width = max(len(n) for n in names)
    columns = max(1, _WIDTH // (width + 2))
    rows = math.ceil(len(names) / columns)
    lines = []
    for r in range(rows):
        cells = [names[i] for i in range(r, len(names), rows)]
        lines.append("  ".join(c.ljust(width) for c in cells))
    return "\n".join(lines)


def run_line(conn: sqlite3.Connection, line: str, settings: Settings) -> Outcome:
    """One line typed at the prompt (``sqlite> ``, or ``   ...> `` while a statement
    waits for its end: the line then continues it)."""
    if settings.pending:
        return run_sql(conn, f"{settings.pending}\n{line}", settings)
    if line.lstrip().startswith("."):
        return run_dot(conn, line, settings)
    return run_sql(conn, line, settings)


def replay(setup: str, script: list[str]) -> sqlite3.Connection:
    """A fresh database holding what ``setup`` built and ``script`` then changed."""
    conn = connect()
    if setup.strip():
        conn.executescript(setup)
    for statement in script:
        try:
            conn.execute(statement)
        except sqlite3.Error:
            pass  # it failed the first time too, after doing what it kept
    return conn
