"""Rough edges a new user or an outside client hits first (issue 17):

* the mcp domain's action hint named ``get_customer`` whatever server was simulated;
* verl's ``SimgymTool.get_openai_tool_schema()`` raised for a tool built from a schema;
* an MCP client that called an unknown tool was not told about ``submit_answer``;
* in a pipe, rich cut option names and table headers to 80 columns.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp
import pytest
import yaml

import simgym
from simgym.cli.console import HELP_WIDTH, PIPE_WIDTH, make_console, width_for
from simgym.core.domain import example_call, get_domain
from simgym.core.types import ToolSpec
from simgym.integrations.gymnasium_env import SimgymTextEnv
from simgym.integrations.mcp_server import SimMCPServer
from simgym.rollout.runner import _view

ROOT = Path(__file__).resolve().parents[1]
TRACKER = yaml.safe_load((ROOT / "examples" / "mcp" / "ticket_tracker.yaml").read_text())
BANK = yaml.safe_load((ROOT / "examples" / "mcp" / "bank_customers.yaml").read_text())
CLOSE_TICKET = ToolSpec(
    name="close_ticket",
    parameters={
        "type": "object",
        "properties": {
            "ticket_id": {"type": "string"},
            "resolution": {"type": "string", "enum": ["fixed", "duplicate"]},
            "notify": {"type": "boolean"},
        },
        "required": ["ticket_id", "resolution"],
    },
)


def quiet_world(messages: list[dict[str, str]]) -> str:
    return '{"ok": true}'


# -- the mcp action hint names the scenario's own tools ----------------------------------


def test_the_mcp_action_hint_calls_a_tool_the_scenario_declares() -> None:
    mcp_domain = get_domain("mcp")
    tracker = mcp_domain.scenario(TRACKER["scenario"])
    hint = json.loads(mcp_domain.action_hint_for(tracker))
    assert hint == {"name": "list_tickets", "arguments": {}}  # the first tool; none required
    # The default server does have get_customer: its hand-written hint stays.
    default = mcp_domain.scenario(None)
    assert mcp_domain.action_hint_for(default) == mcp_domain.action_hint
    assert "get_customer" in mcp_domain.action_hint
    # Hints that are not one tool call (terminal keystrokes, several swe tools) stay too.
    swe = get_domain("swe")
    assert swe.action_hint_for(swe.scenario(None)) == swe.action_hint


def test_an_example_call_fills_required_arguments_from_the_schema() -> None:
    assert json.loads(example_call(CLOSE_TICKET)) == {
        "name": "close_ticket",
        "arguments": {"ticket_id": "...", "resolution": "fixed"},  # optional notify left out
    }


def test_agents_and_gymnasium_see_the_scenarios_hint() -> None:
    env = simgym.make(
        "mcp", world_model=simgym.FunctionWorldModel(quiet_world), scenario=TRACKER["scenario"]
    )
    view = _view(env, simgym.Task(id="t", domain="mcp", instruction="triage"))
    assert "get_customer" not in view.action_hint
    assert json.loads(view.action_hint)["name"] in {t.name for t in view.tools}
    gym = SimgymTextEnv("mcp", simgym.FunctionWorldModel(quiet_world), scenario=TRACKER["scenario"])
    try:
        _, info = gym.reset()
        assert json.loads(info["action_hint"])["name"] == "list_tickets"
    finally:
        gym.close()


# -- verl: a tool built from its tool_schema reports that schema ---------------------------


def test_verl_tool_built_from_a_schema_returns_it() -> None:
    pytest.importorskip("verl", reason="needs verl 0.9: pip install 'simgym[verl]'")
    from verl.tools.schemas import OpenAIFunctionToolSchema

    from simgym.integrations import verl as sv

    entries = sv.verl_tool_config("mcp", BANK["scenario"])["tools"]
    for entry in entries:
        schema = OpenAIFunctionToolSchema.model_validate(entry["tool_schema"])
        tool = sv.SimgymTool(entry["config"], schema)  # config names no tool: the schema does
        assert tool.get_openai_tool_schema() == schema
        assert tool.get_openai_tool_schema().function.name == tool.name
    # Without a schema, config.tool still names the tool, and a missing one is explained.
    named = sv.SimgymTool({**entries[1]["config"], "tool": "get_customer"}, None)
    assert named.get_openai_tool_schema().function.name == "get_customer"
    with pytest.raises(simgym.SimgymError, match="needs config.tool"):
        sv.SimgymTool(entries[0]["config"], None)


# -- the MCP facade names its answer tool when a client calls an unknown one --------------


async def _unknown_call(tmp_path: Path, domain: str, scenario: Any, **options: Any) -> str:
    out = tmp_path / f"{domain}.jsonl"
    with simgym.TrajectoryWriter(out) as writer:
        facade = SimMCPServer(
            domain,
            simgym.FunctionWorldModel(quiet_world),
            scenario=scenario,
            writer=writer,
            **options,
        )
        async with mcp.Client(facade.build(per_session=False)) as client:
            offered = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("frobnicate", {"x": 1})
        await facade.aclose()
    assert result.is_error
    message = result.content[0].text
    for name in offered:  # every tool the client was offered is named
        assert name in message
    (trajectory,) = simgym.read_trajectories(out)
    assert trajectory.turns[0].error  # the rejected call is in the episode, with its detail
    return message


async def test_an_unknown_tool_is_answered_with_the_answer_tool_too(tmp_path: Path) -> None:
    message = await _unknown_call(tmp_path, "mcp", BANK["scenario"])
    assert message.startswith("unknown tool 'frobnicate'")
    assert "submit_answer" in message and "ends the episode" in message
    terminal = await _unknown_call(tmp_path, "terminal", None, answer_tool="done")
    assert "done ends the episode" in terminal and "send_keys" in terminal


async def test_without_an_answer_tool_none_is_named(tmp_path: Path) -> None:
    message = await _unknown_call(tmp_path, "mcp", BANK["scenario"], answer_tool=None)
    assert "submit_answer" not in message and "get_customer" in message


# -- output in a pipe is not cut to 80 columns --------------------------------------------


def _simgym(*args: str) -> str:
    """Run the CLI with stdout a real pipe and no width set by the environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH")}
    done = subprocess.run(
        [sys.executable, "-m", "simgym", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return done.stdout


def test_help_in_a_pipe_shows_whole_option_names() -> None:
    text = _simgym("run", "--help")
    assert "…" not in text
    assert "--agent-model-path" in text and "--agent-base-url" in text
    assert max(len(line) for line in text.splitlines()) <= HELP_WIDTH


def test_tables_in_a_pipe_keep_their_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from simgym.cli.run import summary_table as _summary

    out = tmp_path / "run.jsonl"
    with simgym.TrajectoryWriter(out) as writer:
        world = simgym.FunctionWorldModel(quiet_world)
        sync = simgym.make("mcp", world_model=world, writer=writer).sync()
        sync.reset("look")
        sync.step({"name": "get_customer", "arguments": {"customer_id": "C-1001"}})
        sync.close()
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # not a terminal
    console = make_console()
    # simgym run's per-domain summary: eleven columns, cut to "dom…" at 80.
    console.print(_summary(list(simgym.read_trajectories(out))))
    text = sys.stdout.getvalue()
    assert "…" not in text
    for header in ("domain", "episodes", "world-model", "mean reward"):
        assert header in text


def test_widths(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("COLUMNS", raising=False)
    assert width_for(Tty()) is None  # a terminal: rich measures it
    assert width_for(io.StringIO()) == PIPE_WIDTH
    assert width_for(io.StringIO(), HELP_WIDTH) == HELP_WIDTH
    monkeypatch.setenv("COLUMNS", "200")
    assert width_for(io.StringIO()) == 200  # the user's choice wins
    closed = io.StringIO()
    closed.close()
    monkeypatch.setenv("COLUMNS", "zero")
    assert width_for(closed) == PIPE_WIDTH
