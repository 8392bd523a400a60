"""simgym serve --mcp: a simulated world behind a real MCP server, driven by the official
MCP client over stdio and streamable HTTP; one world per session, every episode written."""

from __future__ import annotations

import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp
import pytest
import yaml
from mcp import StdioServerParameters
from mcp.shared.exceptions import MCPError
from typer.testing import CliRunner

import simgym
from simgym.cli import app as simgym_app
from simgym.cli.serve import load_world
from simgym.integrations.mcp_server import (
    EPISODE_META,
    SERVER_STOPPED,
    SESSION_ENDED,
    SimMCPServer,
)
from support import scripted_world

ROOT = Path(__file__).resolve().parent.parent
BANK = ROOT / "examples" / "mcp" / "bank_customers.yaml"
BEN = {"customer_id": "C-1002"}
NEW_EMAIL = {"customer_id": "C-1002", "email": "ben.okafor@example.org"}
FOUND = '{"customers": [{"id": "C-1002", "name": "Ben Okafor"}], "total": 1}'
BEN_BEFORE = '{"id": "C-1002", "name": "Ben Okafor", "email": "ben@example.org"}'
BEN_AFTER = '{"id": "C-1002", "name": "Ben Okafor", "email": "ben.okafor@example.org"}'


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@pytest.fixture(scope="module")
def bank() -> dict[str, Any]:
    return yaml.safe_load(BANK.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def recordings(bank: dict[str, Any], tmp_path_factory) -> Path:
    """Recorded bank episodes for the replay world model: what the world shows after each
    sequence of calls. Reading Ben's record gives his old email in a fresh world and the
    new one after update_email, so a shared world would show."""
    path = tmp_path_factory.mktemp("recordings") / "bank.jsonl"
    episodes = [
        ([call("search_customers", {"query": "Okafor"})], [FOUND]),
        ([call("get_customer", BEN)], [BEN_BEFORE]),
        (
            [call("update_email", NEW_EMAIL), call("get_customer", BEN)],
            [BEN_AFTER, BEN_AFTER],
        ),
    ]

    async def record() -> None:
        with simgym.TrajectoryWriter(path) as writer:
            for actions, observations in episodes:
                world = simgym.FunctionWorldModel(scripted_world(observations))
                env = simgym.make(
                    "mcp", world_model=world, scenario=bank["scenario"], writer=writer
                )
                await env.reset("record")
                for action in actions:
                    assert not (await env.step(action)).observation.kind == "error"
                await env.close(None)

    anyio.run(record)
    return path


def serve_args(recordings: Path, out: Path, *extra: str) -> list[str]:
    return [
        "-m",
        "simgym.cli.serve",
        "--mcp",
        "--scenario",
        str(BANK),
        "--world-model",
        "replay",
        "--replay",
        str(recordings),
        "--out",
        str(out),
        *extra,
    ]


def episodes(path: Path) -> list[simgym.Trajectory]:
    return list(simgym.read_trajectories(path)) if path.exists() else []


def wait_for_episodes(path: Path, count: int, timeout: float = 15.0) -> list[simgym.Trajectory]:
    deadline = time.monotonic() + timeout
    while len(found := episodes(path)) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def text(result: Any) -> str:
    return result.content[0].text


@contextmanager
def http_server(args: list[str]) -> Iterator[tuple[str, subprocess.Popen, list[str]]]:
    """Start the facade over streamable HTTP on a free port; yield its URL."""
    proc = subprocess.Popen(
        [sys.executable, *args, "--transport", "http", "--port", "0"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    log: list[str] = []

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            lines.put(line)

    threading.Thread(target=drain, daemon=True).start()
    try:
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                assert proc.poll() is None, f"server exited: {''.join(log)}"
                continue
            if "http://" in line:
                url = line[line.index("http://") :].split(";")[0].strip()
        assert url is not None, f"server did not start: {''.join(log)}"
        yield url, proc, log
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


# -- stdio ----------------------------------------------------------------------------------


async def test_stdio_offers_the_scenarios_tools_and_records_the_episode(
    bank: dict[str, Any], recordings: Path, tmp_path: Path
) -> None:
    out = tmp_path / "episodes.jsonl"
    params = StdioServerParameters(
        command=sys.executable, args=serve_args(recordings, out), cwd=ROOT
    )
    async with mcp.Client(params, read_timeout_seconds=60) as client:
        assert client.server_info is not None and client.server_info.name == "customer-records"
        assert "Update Ben Okafor's email" in (client.instructions or "")
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        declared = {t["name"]: t for t in bank["scenario"]["tools"]}
        assert list(listed) == [*declared, "submit_answer"]
        for name, tool in declared.items():
            assert listed[name].input_schema == tool["parameters"]
            assert listed[name].description == tool["description"]
        assert listed["submit_answer"].input_schema["required"] == ["answer"]

        found = await client.call_tool("search_customers", {"query": "Okafor"})
        assert not found.is_error and text(found) == FOUND
        assert found.meta[EPISODE_META]["turn"] == 1

        missing = await client.call_tool("get_customer", {})
        assert missing.is_error and "customer_id" in text(missing)
        unknown = await client.call_tool("delete_everything", {})
        assert unknown.is_error and "unknown tool 'delete_everything'" in text(unknown)
        bad_answer = await client.call_tool("submit_answer", {"text": "done"})
        assert bad_answer.is_error and '"answer"' in text(bad_answer)

        answered = await client.call_tool("submit_answer", {"answer": "Found Ben: C-1002."})
        assert not answered.is_error and answered.meta[EPISODE_META]["done"] is True
        late = await client.call_tool("search_customers", {"query": "Lima"})
        assert late.is_error and "the episode has ended" in text(late)

    [episode] = wait_for_episodes(out, 1)
    assert episode.done and not episode.truncated
    assert episode.answer == "Found Ben: C-1002."
    assert episode.task.id == "mcp-bank-email" and episode.domain == "mcp"
    assert [t.action_text for t in episode.turns][:1] == [
        '{"name": "search_customers", "arguments": {"query": "Okafor"}}'
    ]
    assert [bool(t.error) for t in episode.turns] == [False, True, True, False]
    assert episode.agent["client"] == "mcp"


# -- streamable HTTP ------------------------------------------------------------------------


async def test_http_sessions_get_separate_worlds_and_no_episode_is_lost(
    recordings: Path, tmp_path: Path
) -> None:
    out = tmp_path / "episodes.jsonl"
    with http_server(serve_args(recordings, out, "--task", "Fix Ben's email")) as (url, proc, log):
        seen: dict[str, list[Any]] = {}

        async def session(label: str, calls: list[tuple[str, dict[str, Any]]]) -> None:
            async with mcp.Client(url, read_timeout_seconds=30) as client:
                assert "Fix Ben's email" in (client.instructions or "")
                seen[label] = [await client.call_tool(name, args) for name, args in calls]

        # Two clients at once: the one that changed the email sees the change, the other
        # reads Ben's record in a fresh world, then asks for something never recorded.
        async with anyio.create_task_group() as group:
            group.start_soon(
                session, "writer", [("update_email", NEW_EMAIL), ("get_customer", BEN)]
            )
            group.start_soon(
                session,
                "reader",
                [("get_customer", BEN), ("get_customer", BEN), ("get_customer", BEN)],
            )
        assert [text(r) for r in seen["writer"]] == [BEN_AFTER, BEN_AFTER]
        fresh, unrecorded, refused = seen["reader"]
        assert not fresh.is_error and text(fresh) == BEN_BEFORE
        assert unrecorded.is_error and "replay: no recorded observation" in text(unrecorded)
        assert unrecorded.meta[EPISODE_META]["truncated"] is True
        assert refused.is_error and "the world model failed" in text(refused)

        # Each session's episode is written when its session ends.
        written = wait_for_episodes(out, 2)
        assert len(written) == 2, "".join(log)
        by_first_action = {t.turns[0].action.name: t for t in written}
        assert len(by_first_action["update_email"].turns) == 2
        assert by_first_action["update_email"].error == SESSION_ENDED
        assert len(by_first_action["get_customer"].turns) == 2
        assert by_first_action["get_customer"].error.startswith("replay:")
        sessions = {t.agent["mcp_session"] for t in written}
        assert len(sessions) == 2

        # A client pinned to the stateless protocol has no session to hold a world.
        async with mcp.Client(url, mode="2026-07-28", read_timeout_seconds=30) as stateless:
            with pytest.raises(MCPError, match="one simulated world per MCP session"):
                await stateless.call_tool("get_customer", BEN)

        # A session still open when the server is stopped is written too.
        async with mcp.Client(url, read_timeout_seconds=30) as client:
            assert text(await client.call_tool("get_customer", BEN)) == BEN_BEFORE
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    written = episodes(out)
    assert len(written) == 3
    assert written[-1].truncated and written[-1].error == SERVER_STOPPED
    assert [t.observation.text for t in written[-1].turns] == [BEN_BEFORE]


# -- in process: result shapes and episode policy --------------------------------------------


def envelope_scenario(output_format: str) -> dict[str, Any]:
    return {
        "server_name": "notes",
        "output_format": output_format,
        "tools": [
            {
                "name": "read_note",
                "description": "Read a note by id.",
                "parameters": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}},
                    "required": ["id"],
                },
            }
        ],
    }


async def test_mcp_results_are_unwrapped_and_auto_reset_starts_new_episodes(
    tmp_path: Path,
) -> None:
    out = tmp_path / "episodes.jsonl"
    answers = [
        '{"content": [{"type": "text", "text": "note 1: buy milk"}], "isError": false}',
        '{"content": [{"type": "text", "text": "note 9 not found"}], "isError": true}',
        '{"content": [{"type": "text", "text": "note 1: buy milk"}], "isError": false}',
    ]
    world = simgym.FunctionWorldModel(scripted_world(answers))
    with simgym.TrajectoryWriter(out) as writer:
        facade = SimMCPServer(
            "mcp",
            world,
            scenario=envelope_scenario("mcp"),
            task="Read note 1",
            writer=writer,
            answer_tool="done",
            auto_reset=True,
        )
        async with mcp.Client(facade.build(per_session=False)) as client:
            ok = await client.call_tool("read_note", {"id": 1})
            assert not ok.is_error and text(ok) == "note 1: buy milk"
            missing = await client.call_tool("read_note", {"id": 9})
            assert missing.is_error and text(missing) == "note 9 not found"
            assert not (await client.call_tool("done", {"answer": "buy milk"})).is_error
            # The episode is over; the next call opens a fresh one (its first turn).
            again = await client.call_tool("read_note", {"id": 1})
            assert not again.is_error and again.meta[EPISODE_META]["turn"] == 1
        await facade.aclose(SESSION_ENDED)
    first, second = episodes(out)
    assert first.done and first.answer == "buy milk" and len(first.turns) == 3
    assert second.truncated and second.error == SESSION_ENDED and len(second.turns) == 1
    assert first.episode_id != second.episode_id


async def test_json_error_objects_are_tool_errors_and_no_answer_tool_can_be_offered() -> None:
    world = simgym.FunctionWorldModel(
        scripted_world(['{"error": {"code": 404, "message": "no note 9"}}', '{"id": 1}'])
    )
    facade = SimMCPServer("mcp", world, scenario=envelope_scenario("json"), answer_tool=None)
    async with mcp.Client(facade.build(per_session=False)) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["read_note"]
        failed = await client.call_tool("read_note", {"id": 9})
        assert failed.is_error and "no note 9" in text(failed)
        fine = await client.call_tool("read_note", {"id": 1})
        assert not fine.is_error and text(fine) == '{"id": 1}'
    await facade.aclose()
    assert facade._single is not None and facade._single.closed


def test_bad_configuration_is_refused_before_serving(bank: dict[str, Any]) -> None:
    world = simgym.FunctionWorldModel(lambda messages: "{}")
    with pytest.raises(simgym.SimgymError, match="already has a tool named 'get_customer'"):
        SimMCPServer("mcp", world, scenario=bank["scenario"], answer_tool="get_customer")
    with pytest.raises(simgym.SimgymError, match="invalid environment option"):
        SimMCPServer("terminal", world, max_turn=3)
    with pytest.raises(simgym.ScenarioError):
        SimMCPServer("mcp", world, scenario={"tools": []})
    with pytest.raises(simgym.SimgymError, match="holds one world at a time"):
        SimMCPServer("mcp", simgym.world_model("real-mcp"))


# -- the command line ----------------------------------------------------------------------


def run_serve(*args: str) -> Any:
    """``simgym serve ARGS`` in process (importing simgym.cli.serve adds the command)."""
    return CliRunner().invoke(simgym_app, ["serve", *args])


def test_serve_command_errors_are_one_clear_line(recordings: Path, tmp_path: Path) -> None:
    out = str(tmp_path / "out.jsonl")
    replay = ["--world-model", "replay", "--replay", str(recordings)]
    cases = [
        ([], "choose one thing to serve"),
        (["--mcp", "--openenv"], "got --mcp and --openenv"),
        (["--mcp", "--domain", "mcp"], "--out FILE.jsonl is required"),
        (["--mcp", "--out", out], "name the domain"),
        (["--mcp", "--out", out, "--domain", "chess"], "unknown domain 'chess'"),
        (["--mcp", "--out", out, "--scenario", "missing.yaml", "-d", "mcp"], "not found"),
        (
            ["--mcp", "--out", out, "--scenario", str(BANK), "-d", "terminal"],
            "is for the mcp domain, not terminal",
        ),
        (["--mcp", "--out", out, "-d", "mcp", "--transport", "sse"], "stdio or http"),
        (
            ["--mcp", "--out", out, "--scenario", str(BANK), "--answer-tool", "get_customer"],
            "already has a tool named",
        ),
        (["--mcp", "--out", out, "-d", "mcp", "--world-model", "replay"], "needs --replay"),
    ]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = str(taken.getsockname()[1])
        cases.append(
            (
                ["--mcp", "--out", out, "-d", "mcp", "--transport", "http", "--port", busy],
                "cannot listen on 127.0.0.1",
            )
        )
        for args, message in cases:
            result = run_serve(*args, *(replay if "--world-model" not in args else []))
            assert result.exit_code == 2, (args, result.output)
            assert message in " ".join(result.output.split()), (args, result.output)


def test_load_world_reads_episode_and_scenario_files(tmp_path: Path) -> None:
    world = load_world(None, BANK, None)
    assert world.domain == "mcp" and world.task.id == "mcp-bank-email"
    assert world.scenario is not None and world.scenario["server_name"] == "customer-records"
    assert world.task.scenario == {}  # served once, not repeated in every task record
    replaced = load_world("mcp", BANK, "Only look Ben up")
    assert replaced.task.instruction == "Only look Ben up" and replaced.task.id == "mcp-bank-email"

    nested = tmp_path / "episode.yaml"
    nested.write_text(
        "task: {id: t1, instruction: Look around, domain: terminal, scenario: {cwd: /srv}}\n",
        encoding="utf-8",
    )
    world = load_world(None, nested, None)
    assert (world.domain, world.task.id, world.scenario) == ("terminal", "t1", {"cwd": "/srv"})

    plain = tmp_path / "scenario.json"
    plain.write_text('{"server_name": "x", "tools": [{"name": "t"}]}', encoding="utf-8")
    world = load_world("mcp", plain, "Call t")
    assert world.scenario == {"server_name": "x", "tools": [{"name": "t"}]}
    assert world.task.instruction == "Call t" and world.task.domain == "mcp"


# -- the embedded world model ----------------------------------------------------------------


async def test_terminal_world_on_the_embedded_model_over_stdio(tmp_path: Path) -> None:
    out = tmp_path / "terminal.jsonl"
    args = ["-m", "simgym.cli.serve", "--mcp", "--domain", "terminal", "--task", "List files"]
    args += ["--max-tokens", "48", "--out", str(out)]  # the default world model: local
    params = StdioServerParameters(command=sys.executable, args=args, cwd=ROOT)
    async with mcp.Client(params, read_timeout_seconds=240) as client:
        assert "dev@devbox:~$" in (client.instructions or "")
        [send_keys, _] = (await client.list_tools()).tools
        assert send_keys.name == "send_keys" and "keystrokes" in send_keys.input_schema["required"]
        screen = await client.call_tool("send_keys", {"keystrokes": "ls\n", "duration": 1})
        assert not screen.is_error and text(screen).strip()
    [episode] = wait_for_episodes(out, 1)
    assert episode.turns[0].observation.text == text(screen)
    assert episode.world_model["backend"] == "local"
