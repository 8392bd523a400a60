"""The same cases on real backends: which cases can run for real, and playing them there.

A case runs for real when its world can be built for real on this machine:

``terminal``  a bubblewrap sandbox built from the scenario's files (needs ``bwrap``);
``swe``       the repository checked out in a bubblewrap sandbox;
``mcp``       the bundled customer-records MCP server (a scenario whose ``server_name`` is
              ``customer-records``, whose tools the server has and whose ``state`` is the
              server's tables), its database seeded with the scenario's state, planted
              text included;
``web``       a bundled site in headless Chromium (a scenario whose ``real_site`` names
              it, e.g. the ``shop``); its final state is the page shown last (URL, title,
              tree), as the web ledger holds it.

The temptations are written into the scenario before it is built, so the real world holds
them too. Each episode gets a fresh world; at its end the backend reads the world's state
back (``live_state``: the sandbox's files, the records database), and the minefields are
checked on that, not on anything simgym simulated. An episode whose world could not be
built is recorded with its error, never counted as safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simgym.agents.base import Agent
from simgym.core.errors import SimgymError
from simgym.core.types import Trajectory
from simgym.rewards.base import Reward
from simgym.rollout.episode import EpisodeJob
from simgym.rollout.executors import EpisodeRunner, OnDone
from simgym.safety.cases import SafetyCase

REAL_DOMAINS = ("terminal", "swe", "mcp", "web")
RECORDS_SERVER = "customer-records"  # the bundled server's name (records.SERVER_NAME)
RECORDS_TOOLS = frozenset(
    {
        "search_customers",
        "get_customer",
        "update_email",
        "list_accounts",
        "list_tickets",
        "create_ticket",
    }
)
RECORDS_TABLES = frozenset({"customers", "accounts", "tickets"})
# One try per turn (a real action must not run twice); the ledger is not what is checked.
REAL_ENV_OPTIONS: dict[str, Any] = {"validation_retries": 0, "grounding": "off"}


def real_problem(case: SafetyCase) -> str | None:
    """Why ``case`` cannot run on a real backend here (None: it can)."""
    if case.domain not in REAL_DOMAINS:
        return f"no real backend for {case.domain} cases"
    if case.domain in ("terminal", "swe"):
        from simgym.real.sandbox import bwrap_problem

        return bwrap_problem()
    if case.domain == "web":
        return _web_problem(case)
    if case.world is not None:
        return "business-world cases run on the twin only"
    scenario = case.scenario if isinstance(case.scenario, dict) else {}
    if scenario.get("server_name") != RECORDS_SERVER:
        return f"mcp cases run for real on the bundled {RECORDS_SERVER} server only"
    tools = {t.get("name") for t in scenario.get("tools") or [] if isinstance(t, dict)}
    shortcut = case.adversarial.shortcut
    if shortcut is not None and shortcut.tool:
        tools.add(shortcut.tool.get("name"))
    missing = sorted(str(t) for t in tools - RECORDS_TOOLS)
    if missing:
        return f"the {RECORDS_SERVER} server has no tool(s) {missing}"
    tables = sorted(set(scenario.get("state") or {}) - RECORDS_TABLES)
    if tables:
        return f"the {RECORDS_SERVER} server has no table(s) {tables}"
    return None


def _web_problem(case: SafetyCase) -> str | None:
    scenario = case.scenario if isinstance(case.scenario, dict) else {}
    site = scenario.get("real_site")
    if not site:
        return "web cases run for real only on a bundled site (a scenario with real_site)"
    from simgym.real.web import CHROMIUM, SITES_DIR

    if not (SITES_DIR / str(site)).is_dir():
        return f"no bundled site {site!r}"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM}"
    return None


def split_real(cases: list[SafetyCase]) -> tuple[list[SafetyCase], dict[str, str]]:
    """The cases that run for real, and why each other one does not (id -> reason)."""
    runs, skipped = [], {}
    for case in cases:
        problem = real_problem(case)
        if problem is None:
            runs.append(case)
        else:
            skipped[case.id] = problem
    return runs, skipped


def real_backend(domain: str) -> Any:
    """A fresh real backend for one episode of ``domain``."""
    if domain == "terminal":
        from simgym.real.terminal import RealTerminal

        return RealTerminal()
    if domain == "swe":
        from simgym.real.swe import RealSWE

        return RealSWE()
    if domain == "mcp":
        from simgym.real.mcp import RealMCP

        return RealMCP(seed_from_scenario=True)
    if domain == "web":
        from simgym.real.web import RealWeb

        return RealWeb()
    raise SimgymError(f"no real backend for {domain} cases")


class FreshWorlds:
    """An executor (:class:`simgym.rollout.executors.Executor`) that plays each episode
    in a world of its own: a new real backend per episode, torn down after it, at most
    ``concurrency`` at a time. A world that cannot be built costs its episode, recorded
    with the error, not the run."""

    def __init__(
        self,
        agent: Agent,
        reward: Reward,
        *,
        max_turns: int = 12,
        concurrency: int = 2,
        backend: Callable[[str], Any] = real_backend,
    ) -> None:
        self.agent = agent
        self.reward = reward
        self.max_turns = max_turns
        self.concurrency = max(1, concurrency)
        self.backend = backend

    async def run(self, jobs: list[EpisodeJob], on_done: OnDone) -> None:
        gate = asyncio.Semaphore(self.concurrency)

        async def one(job: EpisodeJob) -> None:
            async with gate:
                trajectory = await self.play(job)
            on_done(trajectory)

        async with asyncio.TaskGroup() as group:
            for job in jobs:
                group.create_task(one(job))

    async def play(self, job: EpisodeJob) -> Trajectory:
        """One episode in a fresh real world."""
        world = self.backend(job.task.domain or "")
        runner = EpisodeRunner(
            world_model=world,
            agent=self.agent,
            reward=self.reward,
            max_turns=self.max_turns,
            env_options=REAL_ENV_OPTIONS,
        )
        try:
            return await runner.run(job)
        except (SimgymError, ValidationError, OSError) as exc:
            return _failed(job, world, exc)
        finally:
            # Shielded: a cancelled run still tears this world down.
            with contextlib.suppress(Exception):
                await asyncio.shield(world.aclose())
            abandon = getattr(world, "abandon", None)
            if abandon is not None:
                abandon()


def _failed(job: EpisodeJob, world: Any, exc: BaseException) -> Trajectory:
    """The record of an episode whose real world could not be built or reached."""
    error = f"the real world failed: {exc}"
    return Trajectory(
        task=job.task,
        domain=job.task.domain or "",
        scenario=dict(job.task.scenario or {}),
        world_model=world.describe(),
        group_id=job.task.id if job.sample is not None else None,
        sample=job.sample,
        truncated=True,
        error=error,
        finished_at=time.time(),
        metrics={"error": error},
    )
