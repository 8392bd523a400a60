"""The real backends episodes run on: what is missing on this machine, the sandbox limits,
and slots (one backend per in-flight episode, reused across its episodes).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sqlite3
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from simgym.core.types import Task
from simgym.data.factory.common import EpisodePlan, FactoryError


def backend_problems(domains: Iterable[str]) -> dict[str, str]:
    """Why a domain's real backend cannot run here (domain -> reason); empty when all can."""
    problems: dict[str, str] = {}
    wanted = set(domains)
    if wanted & {"terminal", "swe"}:
        from simgym.real.sandbox import bwrap_problem

        problem = bwrap_problem()
        if problem:
            problems.update({d: problem for d in wanted & {"terminal", "swe"}})
    if "mcp" in wanted:
        try:
            import mcp  # noqa: F401
        except ImportError:
            problems["mcp"] = "the mcp SDK is not installed (pip install 'simgym[mcp]')"
    if "web" in wanted:
        from simgym.real.web import CHROMIUM

        try:
            import playwright.async_api  # noqa: F401
        except ImportError:
            problems["web"] = "Playwright is not installed (pip install 'simgym[web]')"
        else:
            if not Path(CHROMIUM).exists():
                problems["web"] = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if "search" in wanted:
        with contextlib.closing(sqlite3.connect(":memory:")) as conn:
            try:
                conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
            except sqlite3.OperationalError:
                problems["search"] = "this Python's SQLite has no FTS5"
    return problems


def factory_limits() -> Any:
    """Sandbox limits for factory episodes: tighter than interactive use, since no
    generated command should run long."""
    from simgym.real.sandbox import Limits

    return Limits(cpu_s=30, memory_mb=1024, command_s=30.0, episode_s=900.0, max_wait_s=10.0)


class _Slot:
    """One real backend; one episode at a time uses it, then the next."""

    def __init__(self, domain: str, executor: Any) -> None:
        self.domain = domain
        self.executor = executor

    async def prepare(self, plan: EpisodePlan) -> Task:
        return plan.task

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self.executor.aclose()


class _RecordsSlot(_Slot):
    """The records MCP server running over streamable HTTP for this slot's episodes; each
    episode gets a database seeded afresh (built aside, then moved into place), so a
    server process is started once per slot, not once per episode."""

    def __init__(self, workdir: Path, proc: subprocess.Popen[bytes], url: str) -> None:
        from simgym.real.mcp import RealMCP

        super().__init__("mcp", RealMCP(url=url))
        self.workdir = workdir
        self.proc = proc
        self.url = url

    @classmethod
    async def start(cls, workdir: Path, timeout: float = 60.0) -> _RecordsSlot:
        from simgym.real.mcp import records_command

        workdir.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        log = open(workdir / "server.log", "wb")  # noqa: SIM115 (the child writes to it)
        try:
            command = [*records_command(workdir / "records.db"), "--http", "--port", str(port)]
            proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                tail = (workdir / "server.log").read_text(errors="replace")[-500:]
                raise FactoryError(f"the records MCP server exited: {tail.strip()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    proc.kill()
                    raise FactoryError(
                        f"the records MCP server did not listen on port {port}"
                    ) from None
                await asyncio.sleep(0.1)
        return cls(workdir, proc, f"http://127.0.0.1:{port}/mcp")

    async def prepare(self, plan: EpisodePlan) -> Task:
        from simgym.real.mcp_servers.records import RecordsStore

        seed = int(plan.setup["db_seed"])

        def reseed() -> None:
            fresh = self.workdir / "next.db"
            fresh.unlink(missing_ok=True)
            RecordsStore(fresh, seed=seed)
            os.replace(fresh, self.workdir / "records.db")

        await asyncio.to_thread(reseed)
        return plan.task

    async def aclose(self) -> None:
        await super().aclose()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                await asyncio.to_thread(self.proc.wait, 10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class _WebSlot(_Slot):
    """A browser; before each episode the scenario gets the real first page (read once per
    site and start URL, since a fresh page always numbers its elements the same way)."""

    def __init__(self, executor: Any, first_pages: dict[tuple[str, str], tuple[str, str]]) -> None:
        super().__init__("web", executor)
        self.first_pages = first_pages

    async def prepare(self, plan: EpisodePlan) -> Task:
        from simgym.domains._gui import uitree

        task = plan.task
        key = (str(task.metadata.get("real_site")), str(task.scenario["start_url"]))
        if key not in self.first_pages:
            shown = await self.executor.start_episode(task.scenario, task)
            await self.executor.end_episode()
            headers, start = uitree.split_headers(shown)
            page = "\n".join(shown.splitlines()[start:])
            self.first_pages[key] = (headers.get("title", ""), page)
        title, page = self.first_pages[key]
        scenario = {**task.scenario, "title": title or task.scenario.get("title", ""), "page": page}
        return task.model_copy(update={"scenario": scenario})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Slots:
    """Idle backends per domain, created on demand (at most one per in-flight episode)."""

    def __init__(self, work: Path, limits: Any) -> None:
        self.work = work
        self.limits = limits
        self.idle: dict[str, list[_Slot]] = defaultdict(list)
        self.all: list[_Slot] = []
        self.first_pages: dict[tuple[str, str], tuple[str, str]] = {}
        self._made = 0

    async def acquire(self, domain: str) -> _Slot:
        """An idle backend of ``domain``, or a new one (which may fail to start)."""
        if self.idle[domain]:
            return self.idle[domain].pop()
        slot = await self._make(domain)
        self.all.append(slot)
        return slot

    async def _make(self, domain: str) -> _Slot:
        self._made += 1
        if domain == "terminal":
            from simgym.real.terminal import RealTerminal

            return _Slot(domain, RealTerminal(limits=self.limits))
        if domain == "swe":
            from simgym.real.swe import RealSWE

            return _Slot(domain, RealSWE(limits=self.limits))
        if domain == "search":
            from simgym.real.search import RealSearch

            return _Slot(domain, RealSearch())
        if domain == "mcp":
            return await _RecordsSlot.start(self.work / "mcp" / f"slot-{self._made}")
        if domain == "web":
            from simgym.real.web import RealWeb

            return _WebSlot(RealWeb(), self.first_pages)
        raise FactoryError(f"no real backend for domain {domain!r}")

    async def release(self, slot: _Slot, healthy: bool) -> None:
        if healthy:
            self.idle[slot.domain].append(slot)
            return
        # A backend that failed mid-episode may be in any state: replace it.
        self.all.remove(slot)
        await slot.aclose()

    async def aclose(self) -> None:
        slots, self.all = self.all, []
        self.idle.clear()
        for slot in slots:
            await slot.aclose()
