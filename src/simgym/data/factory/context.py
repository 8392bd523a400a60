"""What the generators share, built once per run (:class:`FactoryContext`): the records
server's scenario, the search index's pages and the generated web sites.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgym.data.factory.common import FactoryError
from simgym.data.factory.sites import Site, write_sites


@dataclass(frozen=True)
class SearchTopic:
    """A page of the real index, with the names documented on it (for queries)."""

    url: str
    title: str
    module: str
    names: tuple[str, ...]


def search_topics(index_path: str | os.PathLike[str]) -> list[SearchTopic]:
    """Pages of the search index and the names each documents (``## name(...)`` headings)."""
    import re

    conn = sqlite3.connect(f"file:{Path(index_path)}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT url, title, substr(body, 1, 8000) FROM pages ORDER BY url"
        ).fetchall()
    finally:
        conn.close()
    topics = []
    for url, title, body in rows:
        names = []
        for heading in re.findall(r"^## (?:class )?([\w.]+)", body, re.MULTILINE):
            name = heading.rsplit(".", 1)[-1]
            if name and not name.startswith("_") and name not in names:
                names.append(name)
        module = url.rsplit("/", 1)[-1].removesuffix(".html") if "/library/" in url else ""
        names = [n for n in names if n != module.rsplit(".", 1)[-1]]
        topics.append(SearchTopic(url, title, module, tuple(names[:12])))
    return topics


@dataclass
class FactoryContext:
    """What the generators share, built once per run: the records server's tools, the
    search index's pages and the generated web sites."""

    mcp_scenario: dict[str, Any] | None = None
    search_topics: list[SearchTopic] = field(default_factory=list)
    sites: list[Site] = field(default_factory=list)
    sites_root: Path = Path(".")

    @classmethod
    async def abuild(
        cls, domains: Iterable[str], *, work: str | os.PathLike[str], seed: int, web_sites: int = 24
    ) -> FactoryContext:
        """Read what the requested domains need; generated sites go under ``work/sites``."""
        wanted = set(domains)
        context = cls(sites_root=Path(work) / "sites")
        if "mcp" in wanted:
            from simgym.real.mcp_import import scenario_from_server
            from simgym.real.mcp_servers.records import TOOL_MAP, build_server

            with tempfile.TemporaryDirectory(prefix="simgym-factory-") as folder:
                server = build_server(Path(folder) / "records.db")
                scenario = await scenario_from_server(server=server)
            # how the tools touch the tables (its search matches phones ignoring spaces):
            # without it the recorded facts would guess, and a phone search "found nothing"
            # in the facts while the server listed the customer
            context.mcp_scenario = {**scenario, "tool_map": TOOL_MAP}
        if "search" in wanted:
            from simgym.real.search import build_index

            path = await asyncio.to_thread(build_index)
            context.search_topics = search_topics(path)
        if "web" in wanted:
            if web_sites < 1:
                raise FactoryError("web needs at least one generated site")
            context.sites = write_sites(context.sites_root, seed, web_sites)
        return context

    @classmethod
    def build(cls, domains: Iterable[str], **options: Any) -> FactoryContext:
        """Blocking :meth:`abuild`."""
        return asyncio.run(cls.abuild(domains, **options))
