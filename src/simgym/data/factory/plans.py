"""An episode's plan from the run's seed, the domain and the episode's number (one
generator per domain), so a plan is a pure function of those.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from simgym.data.factory.common import EpisodePlan, FactoryError
from simgym.data.factory.context import FactoryContext
from simgym.data.factory.mcp import plan_mcp
from simgym.data.factory.search import plan_search
from simgym.data.factory.swe import plan_swe
from simgym.data.factory.terminal import plan_terminal
from simgym.data.factory.web import plan_web

PLANNERS: dict[str, Callable[[random.Random, FactoryContext, str], EpisodePlan]] = {
    "terminal": plan_terminal,
    "swe": plan_swe,
    "mcp": plan_mcp,
    "search": plan_search,
    "web": plan_web,
}


def episode_id(domain: str, seed: int, index: int) -> str:
    return f"{domain}-{seed}-{index:06d}"


def plan_episode(domain: str, seed: int, index: int, context: FactoryContext) -> EpisodePlan:
    """Episode ``index`` of ``domain`` for run ``seed``: the same arguments give the same
    task, scenario and program."""
    if domain not in PLANNERS:
        raise FactoryError(f"no generator for domain {domain!r}; available: {', '.join(PLANNERS)}")
    rng = random.Random(f"{seed}:{domain}:{index}")
    plan = PLANNERS[domain](rng, context, episode_id(domain, seed, index))
    plan.index = index
    plan.task.metadata["factory"] = {"seed": seed, "index": index}
    return plan
