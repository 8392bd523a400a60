"""The experience store: recorded real transitions in SQLite, found again by similarity.

A world model that sees how this kind of action really answered (the same command, the
same tool) copies the format and the error messages of the real world instead of
inventing them; this is the idea behind replay buffers of real experience (DreamGym).
The store serves :class:`simgym.core.grounding.ExperienceSource`: ``SimEnv`` calls
:meth:`ExperienceStore.similar` before every simulated action.

Why SQLite with FTS5: one file, no server, shared by any number of environments and
processes (WAL mode: readers never wait for the writer), and BM25 ranking good enough for
actions, whose similarity is mostly lexical (same command, same file, same arguments).

Layout: ``transitions`` holds the rows (domain, key, action, observation, source and a
UNIQUE content hash, so indexing the same file twice adds nothing); ``transitions_fts``
indexes each row's search terms (:func:`simgym.experience.keys.action_terms`) and a
``scope`` column of two opaque tokens, one for the domain and one for domain plus key.
Filtering by scope inside the FTS query keeps a lookup proportional to the rows of that
domain or key, not the whole store; the scope column has weight 0 in the ranking.

Retrieval (:meth:`ExperienceStore.similar`): rows of the same domain and key first (those
sharing words with the action ranked by BM25, then any others), filled up with rows of the
same domain and another key that share words. User text never reaches the FTS parser as
syntax: it is cut into letter/digit tokens, each quoted.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from simgym.core.grounding import Experience
from simgym.experience.keys import action_key, action_terms, tokens
from simgym.experience.sources import (
    ExperienceError,
    IndexReport,
    Transition,
    expand,
    iter_files,
)

SCHEMA_VERSION = 1
BATCH = 500  # rows per write transaction when indexing files
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS transitions (
    id INTEGER PRIMARY KEY,
    domain TEXT NOT NULL,
    key TEXT NOT NULL,
    action TEXT NOT NULL,
    observation TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT '',
    hash TEXT NOT NULL UNIQUE
);
CREATE INDEX IF NOT EXISTS transitions_domain_key ON transitions (domain, key);
CREATE VIRTUAL TABLE IF NOT EXISTS transitions_fts USING fts5(
    scope, terms, tokenize = 'unicode61'
);
"""
_SEARCH = """
SELECT t.id, t.action, t.observation, t.source, f.rank
FROM (
    SELECT rowid, rank FROM transitions_fts WHERE transitions_fts MATCH ?
    ORDER BY rank LIMIT ?
) AS f
JOIN transitions AS t ON t.id = f.rowid
ORDER BY f.rank, t.id
"""
_INSERT = (
    "INSERT OR IGNORE INTO transitions (domain, key, action, observation, source, hash) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)


class ExperienceStore:
    """An index of recorded transitions in one SQLite file (see the module docstring).

    Safe to share: each thread gets its own connection on first use, and the object
    pickles as its path, so worker processes reopen the same file. ``readonly=True``
    opens an existing store without ever writing to it.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, readonly: bool = False, timeout: float = 30.0
    ) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self.timeout = timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._prepare()

    # -- retrieval --------------------------------------------------------------------

    def similar(self, domain: str, action_text: str, *, k: int) -> list[Experience]:
        """The ``k`` recorded transitions of ``domain`` most like ``action_text``, best
        first: same key first, then other keys sharing words. Never raises on odd text."""
        if k <= 0 or not isinstance(domain, str) or not isinstance(action_text, str):
            return []
        if not domain or not action_text.strip():
            return []
        key = action_key(domain, action_text)
        words = " OR ".join(f'"{t}"' for t in tokens(action_terms(action_text)))
        found: list[Experience] = []
        seen: set[int] = set()
        if key:
            scope = f'{{scope}} : "{_scope_token("k", domain, key)}"'
            query = f"{scope} AND ({{terms}} : ({words}) OR {scope})" if words else scope
            self._search(query, k, found, seen, k)
        if len(found) < k and words:
            # Rows already found match again: ask for that many more.
            scope = f'{{scope}} : "{_scope_token("d", domain)}"'
            self._search(f"{scope} AND {{terms}} : ({words})", k + len(seen), found, seen, k)
        return found

    def _search(
        self, query: str, limit: int, found: list[Experience], seen: set[int], want: int
    ) -> None:
        """Run one FTS query (at most ``limit`` rows) and append new rows to ``found``
        until it holds ``want``."""
        try:
            rows = self._connection().execute(_SEARCH, (query, limit)).fetchall()
        except sqlite3.OperationalError as exc:
            if "fts5" in str(exc).lower():  # a query the parser refused: no examples
                return
            raise
        for row_id, action, observation, source, rank in rows:
            if row_id in seen or len(found) >= want:
                continue
            seen.add(row_id)
            score = round(-float(rank), 6) + 0.0  # bm25 is lower-is-better; -0.0 reads oddly
            found.append(Experience(action, observation, source, score))

    # -- adding -----------------------------------------------------------------------

    def add(self, domain: str, action_text: str, observation: str, source: str = "") -> bool:
        """Index one transition; False when the store already holds it."""
        self._check_writable()
        conn = self._connection()
        with _transaction(conn):
            return self._insert(conn, Transition(domain, action_text, observation, source))

    def add_transitions(
        self, transitions: Iterable[Transition], report: IndexReport | None = None
    ) -> IndexReport:
        """Index many transitions, a batch per transaction, counting into ``report``."""
        self._check_writable()
        report = report if report is not None else IndexReport()
        conn = self._connection()
        batch: list[Transition] = []
        for item in transitions:
            batch.append(item)
            if len(batch) >= BATCH:
                self._write(conn, batch, report)
                batch = []
        if batch:
            self._write(conn, batch, report)
        return report

    def add_file(self, path: str | os.PathLike[str], *, domain: str | None = None) -> IndexReport:
        """Index a file or folder in any format :mod:`simgym.experience.sources` reads;
        ``domain`` overrides each record's domain (chat rows need it when they lack one)."""
        return self.add_files([path], domain=domain)

    def add_files(
        self, paths: Iterable[str | os.PathLike[str]], *, domain: str | None = None
    ) -> IndexReport:
        """Index many files and folders into one report (missing paths raise first)."""
        self._check_writable()
        paths = list(paths)
        for path in paths:
            expand(path)  # raises ExperienceError before anything is written
        start = time.perf_counter()
        report = IndexReport()
        self.add_transitions(iter_files(paths, report, domain=domain), report)
        report.seconds = time.perf_counter() - start
        return report

    def _write(
        self, conn: sqlite3.Connection, batch: list[Transition], report: IndexReport
    ) -> None:
        with _transaction(conn):
            for item in batch:
                if self._insert(conn, item):
                    report.added += 1
                    report.domains[item.domain] += 1
                else:
                    report.duplicates += 1

    def _check_writable(self) -> None:
        if self.readonly:
            raise ExperienceError(f"{self.path} is open read-only")

    def _insert(self, conn: sqlite3.Connection, item: Transition) -> bool:
        domain, action, observation, source = item
        if not isinstance(domain, str) or not domain.strip():
            raise ExperienceError("a transition needs a domain")
        if not isinstance(action, str) or not isinstance(observation, str):
            raise ExperienceError("a transition's action and observation must be text")
        domain = domain.strip()
        action = action.strip()
        # As the contract's parser leaves an observation, so one transition recorded two
        # ways (a trajectory, its exported row) is one row.
        observation = observation.strip("\n").rstrip()
        key = action_key(domain, action)
        digest = hashlib.sha256(
            "\x00".join((domain, action, observation)).encode("utf-8", "surrogatepass")
        ).hexdigest()
        cursor = conn.execute(_INSERT, (domain, key, action, observation, source or "", digest))
        if cursor.rowcount != 1:
            return False
        scope = f"{_scope_token('d', domain)} {_scope_token('k', domain, key)}"
        conn.execute(
            "INSERT INTO transitions_fts (rowid, scope, terms) VALUES (?, ?, ?)",
            (cursor.lastrowid, scope, action_terms(action)),
        )
        return True

    # -- looking at it ----------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Rows per domain."""
        rows = self._connection().execute(
            "SELECT domain, COUNT(*) FROM transitions GROUP BY domain ORDER BY domain"
        )
        return {domain: count for domain, count in rows}

    def keys(self, domain: str, *, limit: int = 20) -> dict[str, int]:
        """The most common keys of a domain and their row counts."""
        rows = self._connection().execute(
            "SELECT key, COUNT(*) AS n FROM transitions WHERE domain = ? "
            "GROUP BY key ORDER BY n DESC, key LIMIT ?",
            (domain, limit),
        )
        return {key: count for key, count in rows}

    def __len__(self) -> int:
        return int(self._connection().execute("SELECT COUNT(*) FROM transitions").fetchone()[0])

    def __repr__(self) -> str:
        mode = ", readonly=True" if self.readonly else ""
        return f"ExperienceStore({str(self.path)!r}{mode})"

    # -- connections ------------------------------------------------------------------

    def close(self) -> None:
        """Close every thread's connection; a later call opens a fresh one."""
        with self._lock:
            connections, self._connections = self._connections, []
            self._local = threading.local()
        for conn in connections:
            conn.close()

    def __enter__(self) -> ExperienceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "readonly": self.readonly, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], readonly=state["readonly"], timeout=state["timeout"])  # type: ignore[misc]

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def _open(self) -> sqlite3.Connection:
        if self.readonly:
            uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
            conn = sqlite3.connect(
                uri, uri=True, timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA query_only = 1")
        else:
            conn = sqlite3.connect(
                self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    def _prepare(self) -> None:
        """Create the schema when the file has none yet, then check its version. Opening
        an existing store writes nothing, so many environments can open one at once."""
        if self.readonly and not self.path.is_file():
            raise ExperienceError(f"experience store not found: {self.path}")
        if not self.readonly:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = self._connection()
            if not self.readonly and not _has_schema(conn):
                conn.execute("PRAGMA journal_mode = WAL")  # persistent: readers inherit it
                with _transaction(conn):
                    if not _has_schema(conn):  # another process may have just made it
                        _create_schema(conn)
            row = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
        except sqlite3.DatabaseError as exc:
            self.close()
            raise ExperienceError(f"{self.path} is not an experience store ({exc})") from None
        if row is None or row[0] != str(SCHEMA_VERSION):
            self.close()
            raise ExperienceError(
                f"{self.path}: experience store schema {row[0] if row else '?'}, "
                f"this simgym reads {SCHEMA_VERSION}"
            )


def open_store(path: str | os.PathLike[str], *, readonly: bool | None = None) -> ExperienceStore:
    """Open (or create) a store. ``readonly`` defaults to True for a file that exists and
    cannot be written, so a shared, write-protected index opens as it is."""
    path = Path(path)
    if readonly is None:
        readonly = path.is_file() and not os.access(path, os.W_OK)
    return ExperienceStore(path, readonly=readonly)


def build_store(
    out: str | os.PathLike[str],
    files: Iterable[str | os.PathLike[str]],
    *,
    domain: str | None = None,
) -> dict[str, Any]:
    """Index ``files`` into the store at ``out`` (created if needed) and report: what
    :class:`IndexReport` counts, plus ``store`` (path), ``rows`` (per domain, after) and
    ``total``."""
    with ExperienceStore(out) as store:
        report = store.add_files(files, domain=domain).to_dict()
        rows = store.stats()
    return {"store": str(out), **report, "rows": rows, "total": sum(rows.values())}


# -- helpers ------------------------------------------------------------------------------


def _has_schema(conn: sqlite3.Connection) -> bool:
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'transitions_fts'")
    return found.fetchone() is not None


def _create_schema(conn: sqlite3.Connection) -> None:
    """The tables of an empty file; a file that holds other tables is not ours to change."""
    if conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]:
        raise sqlite3.DatabaseError("it holds other tables")
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute("INSERT INTO meta (name, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
    conn.execute(  # the scope column only filters, it never ranks
        "INSERT INTO transitions_fts (transitions_fts, rank) VALUES ('rank', 'bm25(0.0, 1.0)')"
    )


def _scope_token(kind: str, *parts: str) -> str:
    """An opaque, tokenizer-proof token for a domain (``d``) or a domain's key (``k``)."""
    digest = hashlib.blake2b("\x00".join(parts).encode("utf-8", "surrogatepass"), digest_size=8)
    return kind + digest.hexdigest()


class _transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (or ``ROLLBACK``) on an autocommit connection:
    the write lock is taken up front, so two writing processes wait instead of failing."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.conn.execute("COMMIT" if kind is None else "ROLLBACK")
