"""The search domain for real: a full-text engine over an offline corpus in SQLite FTS5.

:class:`RealSearch` is a world-model backend that does not predict: ``web_search`` runs
each query against a real index (ranked with BM25, snippets cut by FTS5) and
``web_extractor`` returns the stored page, in exactly the observation formats of the
:mod:`simgym.domains.search` domain::

    env = simgym.make("search", world_model="real-search")

The corpus is the Python documentation this interpreter carries, so it needs no network:
the reference topics of ``pydoc_data.topics`` and the docstrings of the standard library's
modules, with their public classes and functions, read from the source files with ``ast``
(nothing is imported, so no module's import-time side effects run). Pages get stable
docs.python.org-style URLs, e.g. ``https://docs.python.org/3/library/json.html``.

The index is built once into a cache file (``~/.cache/simgym/search-index-3.11.sqlite``)
and then opened read-only. A scenario's own ``documents`` join the corpus for their
episode: the index is copied into memory and they are added there, so they are ranked
with the same statistics as every other page and vanish when the episode ends.
"""

from __future__ import annotations

import ast
import os
import re
import sqlite3
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from simgym.core.domain import get_domain
from simgym.core.errors import SimgymError, WorldModelError
from simgym.core.types import Action, Task
from simgym.domains.search import url_key  # the domain's own URL comparison
from simgym.domains.search_ground import Result, results_section  # the domain's layout
from simgym.real.base import RealExecutor

BACKEND_NAME = "real-search"
INDEX_VERSION = "1"  # bump when the corpus or the schema changes: old caches are rebuilt
DOCS_BASE = "https://docs.python.org/3"
SNIPPET_TOKENS = 24
MAX_PAGE_CHARS = 20_000
# Standard-library trees that are tests, demos, tools or vendored code, not the library.
SKIPPED_PACKAGES = frozenset(
    {"test", "idlelib", "lib2to3", "site-packages", "turtledemo", "ensurepip", "pydoc_data"}
)

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE VIRTUAL TABLE pages USING fts5(
    title, body, url UNINDEXED, key UNINDEXED, date UNINDEXED, summary UNINDEXED,
    tokenize = 'porter unicode61'
);
"""
# Column weights for bm25 (title, body): a word in the title says more than one in the text.
RANK = "bm25(pages, 8.0, 1.0)"


@dataclass(frozen=True)
class Page:
    """One document of the corpus."""

    url: str
    title: str
    body: str
    date: str = ""
    summary: str = ""  # a fixed snippet (scenario documents may give one)


# -- the corpus ----------------------------------------------------------------------------


def topic_pages() -> Iterator[Page]:
    """The language reference sections that ``help('TOPIC')`` shows."""
    from pydoc_data.topics import topics

    for key, text in sorted(topics.items()):
        lines = [line for line in text.strip().splitlines() if line.strip()]
        title = lines[0].strip() if lines else key
        # Drop the reST underline below the heading.
        body = "\n".join(
            lines[2:] if len(lines) > 1 and set(lines[1].strip()) <= set("*=-") else lines[1:]
        )
        yield Page(f"{DOCS_BASE}/reference/topics/{key}.html", title, body.strip() or title)


def _stdlib_sources() -> Iterator[tuple[str, Path]]:
    """``(module name, source file)`` for public top-level modules, packages and their
    direct submodules."""
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.glob("*.py")):
        yield path.stem, path
    for init in sorted(root.glob("*/__init__.py")):
        package = init.parent.name
        if package in SKIPPED_PACKAGES or not package.isidentifier():
            continue
        yield package, init
        for path in sorted(init.parent.glob("*.py")):
            if path.name != "__init__.py":
                yield f"{package}.{path.stem}", path


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    try:
        return f"{node.name}({ast.unparse(node.args)})"
    except Exception:  # a syntax tree unparse does not know: the name alone will do
        return f"{node.name}(...)"


def module_page(name: str, source: str) -> Page | None:
    """A module's page from its source: docstring, then each public class and function
    with its signature and docstring. None for a module with nothing documented."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    doc = ast.get_docstring(tree) or ""
    sections = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if node.name.startswith("_"):
            continue
        text = ast.get_docstring(node) or ""
        if isinstance(node, ast.ClassDef):
            heading = f"class {name}.{node.name}"
        else:
            heading = f"{name}.{_signature(node)}"
        sections.append(f"## {heading}\n\n{text}".rstrip())
    if not doc and not sections:
        return None
    # The docstring's first sentence names the module, when it is short enough to be a title.
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    first = paragraph.split(". ")[0].rstrip(".")
    title = f"{name} — {first}" if first and len(first) <= 80 else f"{name} module"
    body = "\n\n".join(part for part in (doc.strip(), *sections) if part)
    return Page(f"{DOCS_BASE}/library/{name}.html", title, body)


def stdlib_pages() -> Iterator[Page]:
    for name, path in _stdlib_sources():
        if any(part.startswith("_") for part in name.split(".")):
            continue  # private modules are not documented
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        page = module_page(name, source)
        if page is not None:
            yield page


def corpus() -> Iterator[Page]:
    """Every page of the offline corpus."""
    yield from topic_pages()
    yield from stdlib_pages()


# -- the index -----------------------------------------------------------------------------


def default_index_path() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return cache / "simgym" / f"search-index-{version}.sqlite"


def _stamp() -> str:
    return f"{INDEX_VERSION}:{sys.version}"


def _add_pages(conn: sqlite3.Connection, pages: Any) -> int:
    rows = [(p.title, p.body, p.url, url_key(p.url), p.date, p.summary) for p in pages]
    conn.executemany("INSERT INTO pages VALUES (?, ?, ?, ?, ?, ?)", rows)
    return len(rows)


def _index_is_current(path: Path) -> bool:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'stamp'").fetchone()
    except sqlite3.Error:
        return False
    return row is not None and row[0] == _stamp()


def build_index(path: str | Path | None = None, *, force: bool = False) -> Path:
    """Build the corpus index at ``path`` (default: the cache file) unless a current one is
    there; return its path. It is written under a temporary name and moved into place, so
    readers never see half an index."""
    target = Path(path) if path is not None else default_index_path()
    if not force and target.exists() and _index_is_current(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    conn = sqlite3.connect(partial)
    try:
        with conn:
            conn.executescript(SCHEMA)
            count = _add_pages(conn, corpus())
            conn.execute("INSERT INTO meta VALUES ('stamp', ?)", (_stamp(),))
            conn.execute("INSERT INTO meta VALUES ('pages', ?)", (str(count),))
        conn.execute("INSERT INTO pages(pages) VALUES ('optimize')")
        conn.commit()
    finally:
        conn.close()
    os.replace(partial, target)
    return target


def fts_terms(query: str) -> list[str]:
    """The words of a query, each quoted so FTS5 reads none of them as syntax."""
    words = re.findall(r"\w+", query.casefold())
    return [f'"{w}"' for w in dict.fromkeys(words)]


@dataclass(frozen=True)
class Hit:
    url: str
    title: str
    snippet: str
    date: str


class SearchIndex:
    """An open index: search and page lookup (one SQLite connection)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    @classmethod
    def open(cls, path: str | Path, extra: list[Page] | None = None) -> SearchIndex:
        """Open the index at ``path`` read-only; with ``extra`` pages, an in-memory copy
        that also holds them."""
        source = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True, check_same_thread=False)
        if not extra:
            return cls(source)
        memory = sqlite3.connect(":memory:", check_same_thread=False)
        try:
            source.backup(memory)
        finally:
            source.close()
        with memory:
            keys = [url_key(p.url) for p in extra]
            # A scenario page replaces a corpus page with the same URL.
            memory.executemany("DELETE FROM pages WHERE key = ?", [(k,) for k in keys])
            _add_pages(memory, extra)
        return cls(memory)

    def close(self) -> None:
        self.conn.close()

    def _match(self, expression: str, limit: int) -> list[Hit]:
        rows = self.conn.execute(
            f"SELECT url, title, summary, date, snippet(pages, 1, '', '', ' … ', "
            f"{SNIPPET_TOKENS}) FROM pages WHERE pages MATCH ? ORDER BY {RANK} LIMIT ?",
            (expression, limit),
        ).fetchall()
        return [
            Hit(url, title, " ".join((summary or cut).replace("## ", "").split()), date)
            for url, title, summary, date, cut in rows
        ]

    def search(self, query: str, limit: int) -> list[Hit]:
        """The best ``limit`` pages for a query: pages with every word first, then pages
        with some of them (as engines fill a short page of exact matches)."""
        terms = fts_terms(query)
        if not terms:
            return []
        hits = self._match(" AND ".join(terms), limit)
        if len(hits) < limit and len(terms) > 1:
            seen = {h.url for h in hits}
            more = self._match(" OR ".join(terms), limit + len(hits))
            hits += [h for h in more if h.url not in seen][: limit - len(hits)]
        return hits

    def page(self, url: str) -> Page | None:
        row = self.conn.execute(
            "SELECT url, title, body, date, summary FROM pages WHERE key = ? LIMIT 1",
            (url_key(url),),
        ).fetchone()
        return Page(*row) if row is not None else None


# -- observations --------------------------------------------------------------------------


def render_results(query: str, hits: list[Hit]) -> str:
    """One query's section in the domain's results format."""
    return results_section(query, [Result(h.title, h.url, h.snippet, h.date) for h in hits])


def render_page(page: Page, max_chars: int = MAX_PAGE_CHARS) -> str:
    """A page as markdown: its title heading, then its text (cut at ``max_chars``)."""
    body = page.body.strip() or page.summary.strip() or "(This page has no text.)"
    if len(body) > max_chars:
        body = body[:max_chars].rstrip() + "\n\n[... the rest of the page is cut ...]"
    return f"# {page.title}\n\n{body}"


def scenario_pages(world: Any, today: str) -> list[Page]:
    pages = []
    for doc in world.documents:
        date = doc.date.isoformat() if doc.date else ""
        body = doc.content.strip() or doc.snippet.strip()
        pages.append(Page(doc.url, doc.title, body, date if date <= today else "", doc.snippet))
    return pages


class RealSearch(RealExecutor):
    """A real full-text search engine behind the search domain's interface (see the
    module docstring).

    Args:
        index_path: the corpus index file (built there on first use); default the cache.
        max_page_chars: pages longer than this are cut by web_extractor.
    """

    name = BACKEND_NAME

    def __init__(
        self, *, index_path: str | Path | None = None, max_page_chars: int = MAX_PAGE_CHARS
    ) -> None:
        super().__init__()
        self.index_path = Path(index_path) if index_path is not None else default_index_path()
        self.max_page_chars = max_page_chars
        self.index: SearchIndex | None = None
        self.results_per_query = 5

    async def start_episode(self, scenario: BaseModel | dict[str, Any], task: Task) -> None:
        """Open the index, with the scenario's documents added for this episode. Returns
        None: the domain's own first observation stays the first screen."""
        await self.end_episode()
        world: Any = get_domain("search").scenario(scenario)
        self.results_per_query = world.results_per_query
        path = build_index(self.index_path)
        self.index = SearchIndex.open(path, scenario_pages(world, world.current_date.isoformat()))
        return None

    async def end_episode(self) -> None:
        index, self.index = self.index, None
        if index is not None:
            index.close()

    async def aclose(self) -> None:
        await self.end_episode()

    async def run_action(self, action_text: str) -> str:
        """Run the search or open the page."""
        if self.index is None:
            raise WorldModelError("the real search backend has no index: start_episode first")
        return self.execute(action_text)

    def execute(self, action_text: str) -> str:
        """The observation for one rendered action (searching and reading change nothing,
        so a retried turn gives the same answer)."""
        assert self.index is not None
        try:
            action = get_domain("search").validate_action(Action.parse(action_text), None)
        except (SimgymError, ValueError) as exc:
            return f"Error: 400 Bad Request: {exc}"
        if action.kind != "tool_call":
            return "Error: 400 Bad Request: not a tool call"
        if action.name == "web_search":
            sections = [
                render_results(q, self.index.search(q, self.results_per_query))
                for q in action.arguments["queries"]
            ]
            return "\n\n".join(sections)
        url = action.arguments["url"]
        page = self.index.page(url)
        if page is None:
            return f"Error: 404 Not Found for URL {url}"
        return render_page(page, self.max_page_chars)

    def describe(self) -> dict[str, Any]:
        return {"backend": BACKEND_NAME, "index": str(self.index_path), "engine": "sqlite-fts5"}
