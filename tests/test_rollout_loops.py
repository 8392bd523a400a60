"""Which event loop a blocking rollout runs on: asyncio's, or uvloop when asked for."""

from __future__ import annotations

import asyncio

import pytest

import simgym
from simgym.core.errors import SimgymError
from simgym.rollout.loops import LOOP_ENV, loop_factory, loop_name, run_on_loop

uvloop = pytest.importorskip("uvloop")

SCENARIO = {
    "server_name": "records",
    "tools": [
        {
            "name": "get_customer",
            "description": "Fetch one customer by id.",
            "parameters": {
                "type": "object",
                "properties": {"customer_id": {"type": "string"}},
                "required": ["customer_id"],
            },
        }
    ],
}


def loop_kind_world(messages) -> str:
    """The observation names the class of the loop that asked."""
    return f'<predicted_observation>{{"loop": "{type(asyncio.get_running_loop()).__module__}"}}'


def run(event_loop: str | None) -> list[simgym.Trajectory]:
    tasks = [
        simgym.Task(id=f"t{i}", domain="mcp", instruction="?", scenario=SCENARIO) for i in range(3)
    ]
    return simgym.rollout(
        tasks,
        agent="scripted",
        agent_options={
            "actions": [
                {"name": "get_customer", "arguments": {"customer_id": "C-1"}},
                {"answer": "x"},
            ]
        },
        world_model=simgym.FunctionWorldModel(loop_kind_world),
        event_loop=event_loop,
    )


def test_names_resolve_from_the_argument_then_the_environment(monkeypatch):
    monkeypatch.delenv(LOOP_ENV, raising=False)
    assert loop_name() == "asyncio" and loop_factory() is None
    assert loop_name("auto") == "uvloop"  # installed here
    monkeypatch.setenv(LOOP_ENV, "uvloop")
    assert loop_name() == "uvloop" and loop_factory() is uvloop.new_event_loop
    assert loop_name("asyncio") == "asyncio"  # the argument wins
    with pytest.raises(SimgymError, match="unknown event loop 'trio'"):
        loop_name("trio")


def test_rollout_runs_on_uvloop_only_when_asked(monkeypatch):
    monkeypatch.delenv(LOOP_ENV, raising=False)
    on_uv = run("uvloop")
    plain = run(None)
    assert len(on_uv) == len(plain) == 3
    assert {t.turns[0].observation.text for t in on_uv} == {'{"loop": "uvloop"}'}
    assert {t.turns[0].observation.text for t in plain} == {'{"loop": "asyncio.unix_events"}'}
    assert all(t.answer == "x" and not t.error for t in on_uv)


async def test_from_inside_a_running_loop_it_runs_on_a_thread_of_its_own():
    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert run_on_loop(which(), uvloop.new_event_loop) == "uvloop"

    async def fails() -> None:
        raise ValueError("inside")

    with pytest.raises(ValueError, match="inside"):
        run_on_loop(fails(), uvloop.new_event_loop)
