"""What keeps many episodes in flight healthy: the per-group bound, first-come slots,
and the collector settings a rollout runs under."""

from __future__ import annotations

import asyncio
import gc
import json
from collections import Counter

import pytest
from test_rollout import CALL, MCP_SCENARIO  # beside this file

import simgym
from simgym.core.errors import SimgymError
from simgym.rollout.executors import quiet_gc
from simgym.rollout.runner import arollout


def tasks(count: int) -> list[simgym.Task]:
    """Tasks whose servers have different names, so a world model can tell them apart."""
    return [
        simgym.Task(
            id=f"t{i}",
            domain="mcp",
            instruction="Who is C-1?",
            scenario={**MCP_SCENARIO, "server_name": f"server-{i}"},
        )
        for i in range(count)
    ]


async def test_group_concurrency_bounds_each_group_and_all_finish():
    now: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    total = {"now": 0, "peak": 0}

    async def world(messages):
        group = next(n for n in ("server-0", "server-1", "server-2") if n in messages[0]["content"])
        now[group] += 1
        total["now"] += 1
        peak[group] = max(peak[group], now[group])
        total["peak"] = max(total["peak"], total["now"])
        await asyncio.sleep(0.01)
        now[group] -= 1
        total["now"] -= 1
        return f"<predicted_observation>{json.dumps({'ok': True})}</predicted_observation>"

    runs = await arollout(
        tasks(3),
        agent="scripted",
        agent_options={"actions": [CALL, CALL, {"answer": "Ana"}]},
        world_model=simgym.FunctionWorldModel(world),
        group_size=6,
        group_concurrency=2,
        concurrency=5,
    )
    assert len(runs) == 18 and all(t.done for t in runs)
    assert set(peak) == {"server-0", "server-1", "server-2"}
    assert max(peak.values()) == 2  # never more than two of one group at once
    assert total["peak"] == 5  # yet every slot was used: the three groups share them


async def test_group_concurrency_is_refused_by_ray():
    with pytest.raises(SimgymError, match="group_concurrency"):
        await arollout(tasks(1), world_model="local", executor="ray", group_concurrency=1)


def test_quiet_gc_restores_the_collector_and_nests():
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    with quiet_gc(young=12_345):
        assert gc.get_threshold()[0] == max(12_345, before[0])
        assert gc.get_freeze_count() > frozen  # the heap from before the run is frozen
        with quiet_gc(young=99):  # an inner rollout leaves the outer one's settings
            assert gc.get_threshold()[0] == max(12_345, before[0])
        assert gc.get_threshold()[0] == max(12_345, before[0])
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
