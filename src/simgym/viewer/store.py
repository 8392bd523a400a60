"""The episode index: trajectory JSONL files summarised into SQLite, one row an episode,
with an FTS5 table over each episode's task, actions and observations.

Files are read once; each file's indexed byte offset is kept, so a refresh reads only what
was appended since (a run that is still writing shows its new episodes on the next page
load). A file that shrank was rewritten: its rows are dropped and it is read again. The
episode itself is read back from its file by byte offset when a page asks for it, so the
index holds summaries only, and pages never carry more than one page of rows.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simgym.core.errors import SimgymError
from simgym.core.safeload import MAX_DEPTH, loads_json
from simgym.core.types import Trajectory


class UnreadableEpisode(SimgymError):
    """An indexed line that cannot be shown as an episode (see :meth:`Index.trajectory`)."""


SCHEMA_VERSION = 1
# Text per episode that goes into the full-text index (long screens are cut, not dropped).
SEARCH_CHARS = 100_000
_BATCH = 1_000

_SCHEMA = f"""
PRAGMA user_version = {SCHEMA_VERSION};
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, offset INTEGER NOT NULL DEFAULT 0,
    lines INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS episodes (
    id INTEGER PRIMARY KEY, file_id INTEGER NOT NULL, offset INTEGER NOT NULL,
    length INTEGER NOT NULL, line INTEGER NOT NULL, episode_id TEXT, task_id TEXT,
    instruction TEXT, domain TEXT, agent TEXT, world_model TEXT, group_id TEXT,
    sample INTEGER, turns INTEGER, total_reward REAL, done INTEGER, truncated INTEGER,
    error TEXT, errors INTEGER, faults TEXT, tokens INTEGER, latency REAL
);
CREATE INDEX IF NOT EXISTS ep_domain ON episodes(domain);
CREATE INDEX IF NOT EXISTS ep_agent ON episodes(agent);
CREATE INDEX IF NOT EXISTS ep_wm ON episodes(world_model);
CREATE INDEX IF NOT EXISTS ep_group ON episodes(group_id);
CREATE INDEX IF NOT EXISTS ep_eid ON episodes(episode_id);
CREATE INDEX IF NOT EXISTS ep_task ON episodes(file_id, task_id);
CREATE VIRTUAL TABLE IF NOT EXISTS search USING fts5(body);
"""

_COLUMNS = (
    "id, file_id, line, episode_id, task_id, instruction, domain, agent, world_model, "
    "group_id, sample, turns, total_reward, done, truncated, error, errors, faults, tokens, "
    "latency"
)


# The list's sortable columns: a name in ?sort= to the SQL it sorts by (a whitelist:
# nothing from the URL reaches the SQL text).
SORTS = {
    "id": "e.id",
    "task": "e.task_id",
    "domain": "e.domain",
    "agent": "e.agent",
    "wm": "e.world_model",
    "turns": "e.turns",
    "reward": "e.total_reward",
    "tokens": "e.tokens",
    "file": "e.file_id, e.line",
}
# Marks around a search hit in a snippet: control characters, escaped HTML never has them.
HIT_START, HIT_END = "\x02", "\x03"


@dataclass
class Filters:
    """What the episode list is narrowed to; blank fields do not filter."""

    q: str = ""  # full-text search over task, actions and observations
    domain: str = ""
    task: str = ""  # a substring of the task id or instruction
    rmin: float | None = None
    rmax: float | None = None
    status: str = ""  # done | truncated | open (neither)
    errors: str = ""  # yes | no
    faults: str = ""  # yes | no | a fault's name
    agent: str = ""
    wm: str = ""
    group: str = ""
    file: int | None = None
    sort: str = ""  # a column of SORTS, "-" before it for descending; blank: file order

    def order(self) -> str:
        """The list's ORDER BY: the chosen column (ties by row), else the files' order."""
        column = SORTS.get(self.sort.lstrip("-"))
        if column is None:
            return "e.id"
        way = "DESC" if self.sort.startswith("-") else "ASC"
        return f"{column} {way}, e.id {way}"

    @classmethod
    def from_params(cls, params: dict[str, str]) -> Filters:
        out = cls()
        for f in fields(cls):
            raw = (params.get(f.name) or "").strip()
            if not raw:
                continue
            if f.name in ("rmin", "rmax"):
                try:
                    setattr(out, f.name, float(raw))
                except ValueError:
                    continue
            elif f.name == "file":
                setattr(out, f.name, int(raw) if raw.isdigit() else None)
            else:
                setattr(out, f.name, raw[:500])
        return out

    def params(self) -> dict[str, str]:
        """The non-blank fields, as a query string would carry them."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value not in (None, ""):
                out[f.name] = f"{value:g}" if isinstance(value, float) else str(value)
        return out

    def where(self) -> tuple[str, list[Any]]:
        """A SQL condition over ``episodes e`` and its arguments."""
        sql: list[str] = []
        args: list[Any] = []
        for column, value in (
            ("domain", self.domain),
            ("agent", self.agent),
            ("world_model", self.wm),
            ("group_id", self.group),
        ):
            if value:
                sql.append(f"e.{column} = ?")
                args.append(value)
        if self.file is not None:
            sql.append("e.file_id = ?")
            args.append(self.file)
        if self.task:
            sql.append("(e.task_id LIKE ? ESCAPE '\\' OR e.instruction LIKE ? ESCAPE '\\')")
            pattern = "%" + _like_escape(self.task) + "%"
            args += [pattern, pattern]
        if self.rmin is not None:
            sql.append("e.total_reward >= ?")
            args.append(self.rmin)
        if self.rmax is not None:
            sql.append("e.total_reward <= ?")
            args.append(self.rmax)
        status = {
            "done": "e.done = 1",
            "truncated": "e.truncated = 1",
            "open": "e.done = 0 AND e.truncated = 0",
        }.get(self.status)
        if status:
            sql.append(status)
        if self.errors in ("yes", "no"):
            sql.append("e.errors > 0" if self.errors == "yes" else "e.errors = 0")
        if self.faults == "yes":
            sql.append("e.faults != ''")
        elif self.faults == "no":
            sql.append("e.faults = ''")
        elif self.faults:
            sql.append("(' ' || e.faults || ' ') LIKE ? ESCAPE '\\'")
            args.append("% " + _like_escape(self.faults) + " %")
        match = fts_query(self.q)
        if match:
            sql.append("e.id IN (SELECT rowid FROM search WHERE search MATCH ?)")
            args.append(match)
        return (" AND ".join(sql) or "1"), args


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def fts_query(text: str) -> str:
    """A user's search words as an FTS5 query: every word must occur (a word may be a
    prefix with a trailing ``*``); quotes and operators in the text are taken literally."""
    terms = []
    for word in text.split():
        prefix = word.endswith("*") and len(word) > 1
        word = word.rstrip("*") if prefix else word
        if word:
            terms.append('"' + word.replace('"', '""') + '"' + ("*" if prefix else ""))
    return " ".join(terms)


def _label(info: dict[str, Any], *keys: str) -> str:
    parts = [str(info[k]) for k in keys if isinstance(info.get(k), str | int) and info.get(k)]
    return "/".join(parts)


def _action_text(turn: dict[str, Any]) -> str:
    text = turn.get("action_text")
    if text:
        return str(text)
    action = turn.get("action")
    return json.dumps(action, ensure_ascii=False) if action else ""


def summarize(data: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """An episode's row in the index and its searchable text."""
    task = data.get("task") if isinstance(data.get("task"), dict) else {}
    turns = [t for t in data.get("turns") or [] if isinstance(t, dict)]
    faults: list[str] = []
    tokens = 0
    latency = 0.0
    errors = 1 if data.get("error") else 0
    body = [str(task.get("instruction") or ""), str(data.get("answer") or "")]
    for turn in turns:
        fault = turn.get("perturbation")
        if isinstance(fault, dict) and fault.get("fault"):
            name = str(fault["fault"]).replace(" ", "_")
            if name not in faults:
                faults.append(name)
        usage = turn.get("usage") if isinstance(turn.get("usage"), dict) else {}
        tokens += int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
        latency += float(turn.get("latency_s") or 0.0)
        observation = turn.get("observation") if isinstance(turn.get("observation"), dict) else {}
        if turn.get("error") or observation.get("error"):
            errors += 1
        body.append(_action_text(turn))
        body.append(str(observation.get("text") or ""))
    agent = data.get("agent") if isinstance(data.get("agent"), dict) else {}
    wm = data.get("world_model") if isinstance(data.get("world_model"), dict) else {}
    row = {
        "episode_id": str(data.get("episode_id") or ""),
        "task_id": str(task.get("id") or ""),
        "instruction": str(task.get("instruction") or "")[:300],
        "domain": str(data.get("domain") or ""),
        "agent": _label(agent, "name") or _label(agent, "policy", "model"),
        "world_model": _label(wm, "backend", "model") or _label(wm, "name"),
        "group_id": data.get("group_id"),
        "sample": data.get("sample") if isinstance(data.get("sample"), int) else None,
        "turns": len(turns),
        "total_reward": float(data.get("total_reward") or 0.0),
        "done": bool(data.get("done")),
        "truncated": bool(data.get("truncated")),
        "error": str(data.get("error") or "")[:300],
        "errors": errors,
        "faults": " ".join(faults),
        "tokens": tokens,
        "latency": round(latency, 3),
    }
    return row, "\n".join(body)[:SEARCH_CHARS]


class Index:
    """The SQLite index over some trajectory files. Safe to share between threads."""

    def __init__(self, files: Sequence[str | os.PathLike[str]], db: str | os.PathLike[str]):
        self.files = [Path(f).resolve() for f in files]
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(db), check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        if self._db.execute("PRAGMA user_version").fetchone()[0] not in (0, SCHEMA_VERSION):
            raise SimgymError(f"{db}: an index of another version; delete it to rebuild")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = OFF")
        self._db.executescript(_SCHEMA)
        self.file_ids: dict[Path, int] = {}
        with self._db:
            for path in self.files:
                self._db.execute("INSERT OR IGNORE INTO files(path) VALUES (?)", (str(path),))
                fid = self._db.execute(
                    "SELECT id FROM files WHERE path = ?", (str(path),)
                ).fetchone()[0]
                self.file_ids[path] = fid
        self.skipped = 0  # lines that were no trajectory
        self.behind = False  # the last refresh stopped before the end of a file
        self._indexing = threading.Lock()

    # -- indexing ---------------------------------------------------------------------
    def refresh(self, budget_s: float | None = None) -> int:
        """Index what was appended to the files since the last refresh; the number of new
        episodes. With ``budget_s``, stop after about that long (the rest waits for the
        next refresh: :attr:`behind` says so). A refresh already running elsewhere (the
        app's background indexer) makes this one return 0 at once."""
        if not self._indexing.acquire(blocking=False):
            return 0
        try:
            deadline = None if budget_s is None else time.perf_counter() + budget_s
            added = 0
            self.behind = False
            for path, fid in self.file_ids.items():
                added += self._refresh_file(path, fid, deadline)
            return added
        finally:
            self._indexing.release()

    @property
    def indexing(self) -> bool:
        """Is a refresh running now?"""
        return self._indexing.locked()

    def _refresh_file(self, path: Path, fid: int, deadline: float | None) -> int:
        with self._lock:
            offset, lines = self._db.execute(
                "SELECT offset, lines FROM files WHERE id = ?", (fid,)
            ).fetchone()
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return 0
        if size < offset:  # rewritten: start again
            with self._lock, self._db:
                self._db.execute(
                    "DELETE FROM search WHERE rowid IN (SELECT id FROM episodes WHERE file_id=?)",
                    (fid,),
                )
                self._db.execute("DELETE FROM episodes WHERE file_id = ?", (fid,))
            offset, lines = 0, 0
        if size == offset:
            return 0
        added = 0
        rows: list[tuple[Any, ...]] = []
        texts: list[str] = []
        with open(path, "rb") as f:
            f.seek(offset)
            for raw in f:
                complete = raw.endswith(b"\n")
                start = offset
                if raw.strip():
                    try:
                        data = loads_json(raw, max_depth=2 * MAX_DEPTH)
                        if not isinstance(data, dict):
                            raise ValueError("not an object")
                    except ValueError:
                        if not complete:  # a line still being written: read it next time
                            break
                        self.skipped += 1
                    else:
                        row, text = summarize(data)
                        rows.append((fid, start, len(raw), lines + 1, *row.values()))
                        texts.append(text)
                offset += len(raw)
                lines += 1
                if len(rows) >= _BATCH:
                    added += self._insert(fid, rows, texts, offset, lines)
                    rows, texts = [], []
                    if deadline is not None and time.perf_counter() > deadline:
                        self.behind = True
                        return added
        added += self._insert(fid, rows, texts, offset, lines)
        return added

    def _insert(
        self, fid: int, rows: list[tuple[Any, ...]], texts: list[str], offset: int, lines: int
    ) -> int:
        with self._lock, self._db:
            if rows:
                cursor = self._db.execute("SELECT coalesce(max(id), 0) FROM episodes")
                first = cursor.fetchone()[0] + 1
                ids = range(first, first + len(rows))
                self._db.executemany(
                    "INSERT INTO episodes(id, file_id, offset, length, line, episode_id, "
                    "task_id, instruction, domain, agent, world_model, group_id, sample, "
                    "turns, total_reward, done, truncated, error, errors, faults, tokens, "
                    "latency) VALUES (" + ", ".join("?" * 22) + ")",
                    [(i, *row) for i, row in zip(ids, rows, strict=True)],
                )
                self._db.executemany(
                    "INSERT INTO search(rowid, body) VALUES (?, ?)",
                    zip(ids, texts, strict=True),
                )
            self._db.execute(
                "UPDATE files SET offset = ?, lines = ? WHERE id = ?", (offset, lines, fid)
            )
        return len(rows)

    # -- queries ----------------------------------------------------------------------
    def _all(self, sql: str, args: Iterable[Any] = ()) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._db.execute(sql, list(args)).fetchall()]

    def count(self, filters: Filters | None = None) -> int:
        where, args = (filters or Filters()).where()
        with self._lock:
            return self._db.execute(
                f"SELECT count(*) FROM episodes e WHERE {where}", args
            ).fetchone()[0]

    def page(self, filters: Filters, page: int = 1, per_page: int = 50) -> list[dict[str, Any]]:
        """One page of episode rows, in the filters' order (default: oldest first). With
        a search, each row's ``hit`` is a snippet of the text that matched, the words
        between :data:`HIT_START` and :data:`HIT_END`."""
        where, args = filters.where()
        page = max(1, page)
        match = fts_query(filters.q)
        hit = (
            ", (SELECT snippet(search, 0, char(2), char(3), '…', 12) FROM search "
            "WHERE search MATCH ? AND rowid = e.id) AS hit"
            if match
            else ""
        )
        return self._all(
            f"SELECT {_COLUMNS}{hit} FROM episodes e WHERE {where} "
            f"ORDER BY {filters.order()} LIMIT ? OFFSET ?",
            [*([match] if match else []), *args, per_page, (page - 1) * per_page],
        )

    def row(self, rowid: int) -> dict[str, Any] | None:
        rows = self._all(f"SELECT {_COLUMNS} FROM episodes e WHERE e.id = ?", [rowid])
        return rows[0] if rows else None

    def trajectory(self, rowid: int) -> Trajectory | None:
        """The episode itself, read back from its file. A line that is JSON but no valid
        trajectory (it is listed from what it holds) raises :class:`UnreadableEpisode`
        naming the file, the line and the first problems."""
        with self._lock:
            found = self._db.execute(
                "SELECT f.path, e.offset, e.length, e.line FROM episodes e JOIN files f "
                "ON f.id = e.file_id WHERE e.id = ?",
                (rowid,),
            ).fetchone()
        if found is None:
            return None
        where = f"{Path(found[0]).name}:{found[3]}"
        try:
            with open(found[0], "rb") as f:
                f.seek(found[1])
                raw = f.read(found[2])
            return Trajectory.model_validate(loads_json(raw, max_depth=2 * MAX_DEPTH))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(episode)'}: {err['msg']}"
                for err in exc.errors()[:3]
            )
            more = exc.error_count() - 3
            raise UnreadableEpisode(
                f"{where} is not a valid trajectory: {problems}"
                + (f" (and {more} more)" if more > 0 else "")
            ) from None
        except (OSError, ValueError) as exc:  # the file changed under the index
            raise UnreadableEpisode(f"{where} cannot be read back: {exc}") from None

    def neighbours(self, rowid: int, filters: Filters) -> tuple[int | None, int | None]:
        """The previous and next episode in the filtered list."""
        where, args = filters.where()
        with self._lock:
            prev = self._db.execute(
                f"SELECT max(e.id) FROM episodes e WHERE {where} AND e.id < ?", [*args, rowid]
            ).fetchone()[0]
            nxt = self._db.execute(
                f"SELECT min(e.id) FROM episodes e WHERE {where} AND e.id > ?", [*args, rowid]
            ).fetchone()[0]
        return prev, nxt

    def find_episode(self, episode_id: str, file_name: str | None = None) -> int | None:
        """The row of an episode id (in a file of that name, when given)."""
        rows = self._all(
            "SELECT e.id, f.path FROM episodes e JOIN files f ON f.id = e.file_id "
            "WHERE e.episode_id = ? ORDER BY e.id",
            [episode_id],
        )
        for row in rows:
            if file_name is None or Path(row["path"]).name == Path(file_name).name:
                return row["id"]
        return rows[0]["id"] if rows else None

    def distinct(self, column: str) -> list[str]:
        """The values a filter can take (domain, agent, world_model)."""
        assert column in ("domain", "agent", "world_model")
        rows = self._all(
            f"SELECT DISTINCT {column} AS v FROM episodes WHERE {column} != '' ORDER BY v LIMIT 200"
        )
        return [r["v"] for r in rows]

    def fault_names(self) -> list[str]:
        rows = self._all("SELECT DISTINCT faults FROM episodes WHERE faults != '' LIMIT 500")
        return sorted({name for r in rows for name in r["faults"].split()})

    def file_name(self, file_id: int) -> str:
        for path, fid in self.file_ids.items():
            if fid == file_id:
                return path.name
        return "?"

    # -- groups and sim-vs-real pairs -------------------------------------------------
    def groups(self, page: int = 1, per_page: int = 50) -> list[dict[str, Any]]:
        """GRPO groups: episodes that share a group id, with their reward spread."""
        return self._all(
            "SELECT group_id, count(*) AS samples, min(domain) AS domain, "
            "avg(total_reward) AS mean, min(total_reward) AS low, max(total_reward) AS high, "
            "min(id) AS first FROM episodes WHERE group_id IS NOT NULL AND group_id != '' "
            "GROUP BY group_id ORDER BY first LIMIT ? OFFSET ?",
            [per_page, (max(1, page) - 1) * per_page],
        )

    def group(self, group_id: str) -> list[dict[str, Any]]:
        return self._all(
            f"SELECT {_COLUMNS} FROM episodes e WHERE e.group_id = ? ORDER BY e.sample, e.id",
            [group_id],
        )

    def group_members(self, group_id: str) -> list[tuple[dict[str, Any], Any]]:
        """A group's rows with their trajectories (rows whose episode cannot be read
        back any more are left out)."""
        members = []
        for row in self.group(group_id):
            try:
                trajectory = self.trajectory(row["id"])
            except UnreadableEpisode:  # its own page says why
                continue
            if trajectory is not None:
                members.append((row, trajectory))
        return members

    def pairs(self) -> list[tuple[int, int]]:
        """(simulated, real) file ids: ``OUT.jsonl`` and ``OUT.real.jsonl`` of
        ``simgym run --compare real``, both given."""
        by_name = {p.name: fid for p, fid in self.file_ids.items()}
        out = []
        for path, fid in self.file_ids.items():
            if path.name.endswith(".real.jsonl"):
                sim = by_name.get(path.name[: -len(".real.jsonl")] + ".jsonl")
                if sim is not None:
                    out.append((sim, fid))
        return out

    def counterpart(self, rowid: int) -> tuple[int, int] | None:
        """(simulated row, real row) for an episode of a compared pair of files."""
        row = self.row(rowid)
        if row is None:
            return None
        for sim, real in self.pairs():
            if row["file_id"] in (sim, real):
                other = real if row["file_id"] == sim else sim
                found = self._all(
                    "SELECT id FROM episodes WHERE file_id = ? AND task_id = ? ORDER BY id DESC "
                    "LIMIT 1",
                    [other, row["task_id"]],
                )
                if found:
                    a, b = rowid, found[0]["id"]
                    return (a, b) if row["file_id"] == sim else (b, a)
        return None

    def compared(self, sim: int, real: int, page: int = 1, per_page: int = 50) -> list[dict]:
        """Episodes of the simulated file with a real twin (by task id)."""
        return self._all(
            "SELECT s.id AS sim, max(r.id) AS real, s.task_id, s.domain, s.turns, "
            "s.instruction FROM episodes s JOIN episodes r ON r.file_id = ? AND "
            "r.task_id = s.task_id WHERE s.file_id = ? GROUP BY s.id ORDER BY s.id "
            "LIMIT ? OFFSET ?",
            [real, sim, per_page, (max(1, page) - 1) * per_page],
        )

    def close(self) -> None:
        with self._lock:
            self._db.close()
