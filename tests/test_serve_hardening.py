"""simgym's servers under a careless user, a hostile agent and outside clients (issue 17):
tokens, session and size limits, no empty episodes, errors that keep internals from the
agent, the task's reward from the CLI, OpenEnv's own clients, and fail-fast Ray addresses.
Real servers on loopback (uvicorn, the MCP SDK's client, openenv-core's clients)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import mcp
import pytest
import yaml
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.generic_client import GenericEnvClient
from openenv.core.mcp_client import MCPToolClient
from test_openenv import echo_world, episodes, serving, wait_for_episodes
from typer.testing import CliRunner

import simgym
from conftest import free_port
from simgym.cli import app as simgym_app
from simgym.integrations.mcp_server import EPISODE_META, SESSION_ENDED, SimMCPServer
from simgym.integrations.openenv_client import SimgymEnvClient, with_token
from simgym.integrations.openenv_server import (
    SERVER_STOPPED,
    SimgymAction,
    create_openenv_app,
)
from support import scripted_world

ROOT = Path(__file__).resolve().parent.parent
BANK = ROOT / "examples" / "mcp" / "bank_customers.yaml"
BANK_SCENARIO = yaml.safe_load(BANK.read_text(encoding="utf-8"))["scenario"]
BEN = '{"id": "C-1002", "name": "Ben Okafor", "email": "ben@example.org"}'
TOKEN = "s3cret-token"


@contextmanager
def served(args: list[str], env: dict[str, str] | None = None) -> Iterator[tuple[str, Any]]:
    """``python -m simgym.cli.serve ARGS --port 0`` in its own process; yield the URL it
    announces and the process."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "simgym.cli.serve", *args, "--port", "0"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
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
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                assert proc.poll() is None, "server exited:\n" + "".join(log)
                continue
            found = re.search(r"(http://127\.0\.0\.1:\d+(?:/mcp)?)", line)
            url = found.group(1) if found else None
        assert url, "no address announced:\n" + "".join(log)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def refused_world_model() -> Any:
    """The openai backend pointed at a port nothing listens on."""
    port = free_port()  # bound and released: nothing listens there now
    return simgym.world_model(
        "openai", base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout=1, max_retries=2
    )


def mcp_client(url: str, token: str | None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    return mcp.Client(transport, read_timeout_seconds=30)


def run_serve(*args: str) -> Any:
    return CliRunner().invoke(simgym_app, ["serve", *args])


# -- 1. tokens ----------------------------------------------------------------------------


def test_listening_beyond_loopback_needs_a_token(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SIMGYM_TOKEN", raising=False)
    out = str(tmp_path / "out.jsonl")
    for mode in (["--mcp", "--transport", "http"], ["--openenv"]):
        result = run_serve(*mode, "-d", "terminal", "--out", out, "--host", "0.0.0.0")
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1, result.output
        assert "refusing to listen on 0.0.0.0 without a token" in lines[0]
        assert "--token" in lines[0] and "SIMGYM_TOKEN" in lines[0]
    assert not Path(out).exists()
    # Other misuses are one clear line too.
    for args, message in (
        (["--mcp", "--reward", "exact"], "apply to --openenv only"),
        (["--mcp", "--transport", "http", "--max-sessions", "0"], "--max-sessions must be"),
    ):
        result = run_serve(*args, "-d", "terminal", "--out", out)
        assert result.exit_code == 2 and message in result.output, result.output


async def test_mcp_over_http_requires_the_token_from_the_environment(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    args = ["--mcp", "--transport", "http", "-d", "mcp", "--scenario", str(BANK)]
    args += ["--world-model", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    with served([*args, "--out", str(out)], env={"SIMGYM_TOKEN": TOKEN}) as (url, _):
        async with httpx.AsyncClient(timeout=30) as http:
            bare = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert bare.status_code == 401 and "token" in bare.json()["detail"]
            wrong = await http.post(url, json={}, headers={"Authorization": "Bearer not-the-token"})
            assert wrong.status_code == 401
        with pytest.raises(Exception):  # noqa: B017 (the SDK's own error for an HTTP 401)
            async with mcp_client(url, None) as client:
                await client.list_tools()
        async with mcp_client(url, TOKEN) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert "get_customer" in names and "submit_answer" in names


async def test_openenv_requires_the_token_over_http_and_websocket(tmp_path: Path) -> None:
    app = create_openenv_app(
        "terminal", simgym.FunctionWorldModel(echo_world), task="Look", token=TOKEN
    )
    with serving(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            assert (await http.post("/reset", json={})).status_code == 401
            assert (await http.get("/health")).status_code == 401
            ok = await http.post("/reset", json={}, headers={"Authorization": f"Bearer {TOKEN}"})
            assert ok.status_code == 200 and ok.json()["observation"]["instruction"] == "Look"
        with pytest.raises(ConnectionError):
            async with SimgymEnvClient(base_url=url) as env:
                await env.reset()
        async with SimgymEnvClient(base_url=url, token=TOKEN) as env:
            assert (await env.reset()).observation.instruction == "Look"
        # OpenEnv's stock client takes only a URL: the token rides in its user info.
        async with GenericEnvClient(base_url=with_token(url, TOKEN)) as generic:
            first = await generic.reset()
            assert first.observation["instruction"] == "Look"


# -- 2. MCP over HTTP: a session cap and idle sessions ----------------------------------------


async def test_mcp_sessions_are_capped_and_idle_ones_end(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    recordings = tmp_path / "rec.jsonl"
    with simgym.TrajectoryWriter(recordings) as writer:
        env = simgym.make(
            "mcp",
            world_model=simgym.FunctionWorldModel(scripted_world([BEN])),
            scenario=BANK_SCENARIO,
            writer=writer,
        )
        await env.reset("record")
        await env.step({"name": "get_customer", "arguments": {"customer_id": "C-1002"}})
        await env.close(None)
    args = ["--mcp", "--transport", "http", "--scenario", str(BANK), "-w", "replay"]
    args += ["--replay", str(recordings), "--out", str(out)]
    args += ["--max-sessions", "1", "--session-idle-timeout", "2"]
    with served(args) as (url, _):
        # A client that leaves without ending its session (no DELETE), as a crashed one.
        leaving = streamable_http_client(url, terminate_on_close=False)
        async with mcp.Client(leaving, read_timeout_seconds=30) as first:
            seen = await first.call_tool("get_customer", {"customer_id": "C-1002"})
            assert seen.content[0].text == BEN
            # The only session is taken: a second client is refused (HTTP 503).
            async with httpx.AsyncClient(timeout=30) as http:
                second = await http.post(
                    url,
                    json={
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": "2025-06-18",
                            "capabilities": {},
                            "clientInfo": {"name": "t", "version": "1"},
                        },
                    },
                    headers={"Accept": "application/json, text/event-stream"},
                )
            assert second.status_code == 503, second.text
        # Idle past the timeout, the abandoned session ends and its episode is written ...
        [episode] = wait_for_episodes(out, 1, timeout=20)
        assert episode.truncated and episode.error == SESSION_ENDED
        # ... and the freed room takes a new session.
        async with mcp.Client(url, read_timeout_seconds=30) as again:
            assert [t.name for t in (await again.list_tools()).tools][:1] == ["search_customers"]


# -- 3. OpenEnv: bounded messages, no empty episodes --------------------------------------------


async def test_openenv_bounds_message_sizes_and_writes_no_empty_episodes(
    tmp_path: Path,
) -> None:
    out = tmp_path / "episodes.jsonl"
    app = create_openenv_app(
        "terminal",
        simgym.FunctionWorldModel(echo_world),
        task="Look",
        writer=simgym.TrajectoryWriter(out),
    )
    huge = "x" * (5 * 1024 * 1024)
    with serving(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            too_big = await http.post("/reset", json={"task": {"instruction": huge}})
            assert too_big.status_code == 413 and "limit" in too_big.json()["detail"]
            # Each POST /reset builds, resets and drops an environment: nothing to write.
            for _ in range(3):
                assert (await http.post("/reset", json={})).status_code == 200
        async with SimgymEnvClient(base_url=url) as env:
            with pytest.raises(RuntimeError, match="message too large"):
                await env.reset(task={"instruction": huge})
            # The session goes on after a refused message.
            assert (await env.reset()).observation.instruction == "Look"
            await env.step("ls")
        written = wait_for_episodes(out, 1)
        time.sleep(0.5)  # any stray empty episode would be written by now
    written = episodes(out)
    assert [len(e.turns) for e in written] == [1]
    assert out.stat().st_size < 100_000


async def test_empty_episodes_can_be_kept(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    app = create_openenv_app(
        "terminal",
        simgym.FunctionWorldModel(echo_world),
        writer=simgym.TrajectoryWriter(out),
        keep_empty_episodes=True,
    )
    with serving(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        assert http.post("/reset", json={}).status_code == 200
        written = wait_for_episodes(out, 1)
    assert len(written) == 1 and written[0].turns == []


# -- 4. errors the agent sees keep internals out ---------------------------------------------


async def test_openenv_agent_sees_connection_refused_without_the_url(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    app = create_openenv_app(
        "terminal", refused_world_model(), task="Look", writer=simgym.TrajectoryWriter(out)
    )
    with serving(app) as url:
        async with SimgymEnvClient(base_url=url, message_timeout_s=120) as env:
            await env.reset()
            failed = await env.step("ls")
            seen = failed.observation
            assert seen.kind == "error" and failed.done
            shown = " ".join([seen.text, seen.error or "", str(seen.info)])
            assert "connection refused" in shown
            assert "timed out" not in shown
            assert "127.0.0.1" not in shown and "http://" not in shown
            later = await env.step("ls")
            assert "world model failed" in later.observation.error
            assert "127.0.0.1" not in later.observation.error
        [episode] = wait_for_episodes(out, 1)
    # The trajectory keeps the whole story.
    assert "http://127.0.0.1:" in episode.turns[0].error
    assert "connection refused" in episode.turns[0].error


async def test_mcp_agent_sees_connection_refused_without_the_url(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    with simgym.TrajectoryWriter(out) as writer:
        facade = SimMCPServer("mcp", refused_world_model(), scenario=BANK_SCENARIO, writer=writer)
        async with mcp.Client(facade.build(per_session=False)) as client:
            failed = await client.call_tool("get_customer", {"customer_id": "C-1002"})
            later = await client.call_tool("get_customer", {"customer_id": "C-1002"})
        await facade.aclose()
    assert failed.is_error
    assert "connection refused" in failed.content[0].text
    for result in (failed, later):
        assert "127.0.0.1" not in result.content[0].text
        assert "http://" not in result.content[0].text
    assert "world model failed" in later.content[0].text
    [episode] = episodes(out)
    assert "http://127.0.0.1:" in episode.turns[0].error


def broken_world(messages: list[dict[str, str]]) -> str:
    """A defect inside the world model, whose message holds internals."""
    raise KeyError("/srv/secret/config.yaml at http://10.1.2.3:9000")


async def test_a_server_defect_shows_the_agent_only_its_kind(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    with simgym.TrajectoryWriter(out) as writer:
        facade = SimMCPServer(
            "mcp", simgym.FunctionWorldModel(broken_world), scenario=BANK_SCENARIO, writer=writer
        )
        async with mcp.Client(facade.build(per_session=False)) as client:
            failed = await client.call_tool("get_customer", {"customer_id": "C-1002"})
            later = await client.call_tool("get_customer", {"customer_id": "C-1002"})
        await facade.aclose()
        app = create_openenv_app(
            "terminal", simgym.FunctionWorldModel(broken_world), task="Look", writer=writer
        )
        with serving(app) as url:
            async with SimgymEnvClient(base_url=url) as env:
                await env.reset()
                stepped = (await env.step("ls")).observation
            wait_for_episodes(out, 2)
    shown = [failed.content[0].text, later.content[0].text, stepped.text, stepped.error]
    assert failed.is_error and "KeyError" in shown[0] and "KeyError" in shown[2]
    for text in shown:
        assert "secret" not in text and "10.1.2.3" not in text
    assert all("/srv/secret/config.yaml" in e.error for e in episodes(out))


# -- 5. serve --reward: the task's reference reward by default -------------------------------


def test_serve_openenv_scores_with_the_tasks_reward(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    episode_file = tmp_path / "episode.yaml"
    episode_file.write_text(
        yaml.safe_dump(
            {
                "domain": "mcp",
                "task": {
                    "id": "ben-email",
                    "instruction": "What is Ben's email?",
                    "metadata": {"answer": "ben@example.org"},
                },
                "scenario": BANK_SCENARIO,
            }
        ),
        encoding="utf-8",
    )
    # The answer needs no world model: one that is never reached is enough.
    base = ["--openenv", "--scenario", str(episode_file), "-w", "openai"]
    base += ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    for extra, answer, expected in (
        ([], "ben@example.org", 1.0),  # no --reward: the task's own (exact on its answer)
        (["--reward", "exact"], "ben@example.org ", 1.0),
        (["--reward", "f1"], "it is ben@example.org", None),
    ):
        with served([*base, "--out", str(out), *extra]) as (url, _):
            with SimgymEnvClient(base_url=url).sync() as env:
                env.reset()
                final = env.step(SimgymAction(answer=answer))
        assert final.done
        if expected is None:
            assert 0.0 < final.reward < 1.0 and set(final.observation.reward_parts) == {"f1"}
        else:
            assert final.reward == expected
    rewards = [e.total_reward for e in episodes(out)]
    assert rewards[:2] == [1.0, 1.0] and 0.0 < rewards[2] < 1.0


# -- 6. OpenEnv's own clients --------------------------------------------------------------------


async def test_openenv_generic_client_sees_what_was_wrong() -> None:
    app = create_openenv_app("terminal", simgym.FunctionWorldModel(echo_world), task="Look")
    with serving(app) as url:
        async with GenericEnvClient(base_url=url) as generic:
            await generic.reset()
            with pytest.raises(RuntimeError, match="exactly one of name") as caught:
                await generic.step({"name": "send_keys", "text": "ls"})
            assert "VALIDATION_ERROR" in str(caught.value)
            with pytest.raises(RuntimeError, match="call_tool needs a tool_name"):
                await generic.step({"type": "call_tool"})


async def test_openenv_mcp_tool_client_lists_and_calls_tools(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    app = create_openenv_app(
        "mcp",
        simgym.FunctionWorldModel(scripted_world([BEN])),
        scenario=BANK_SCENARIO,
        task={"id": "t", "instruction": "Ben's email?", "metadata": {"answer": "ben@example.org"}},
        reward="exact",
        writer=simgym.TrajectoryWriter(out),
    )
    with serving(app) as url:
        async with MCPToolClient(base_url=url) as tools:
            listed = await tools.list_tools()
            assert [t.name for t in listed] == [
                "search_customers",
                "get_customer",
                "update_email",
                "submit_answer",
            ]
            assert listed[1].input_schema["required"] == ["customer_id"]
            # No reset: like any MCP client, the first call starts the episode.
            assert await tools.call_tool("get_customer", customer_id="C-1002") == BEN
            with pytest.raises(RuntimeError, match="customer_id.*invalid_args"):
                await tools.call_tool("get_customer", id=7)
            with pytest.raises(RuntimeError, match="drop_table"):
                await tools.call_tool("drop_table")
            done = await tools.step(
                CallToolAction(tool_name="submit_answer", arguments={"answer": "ben@example.org"})
            )
            assert done.done and done.reward == 1.0
            with pytest.raises(RuntimeError, match="the episode has ended"):
                await tools.call_tool("get_customer", customer_id="C-1002")
        [episode] = wait_for_episodes(out, 1)
    assert episode.answer == "ben@example.org" and episode.total_reward == 1.0
    assert [t.error_type for t in episode.turns] == [None, "action", "action", None]


# -- 7. MCP: a result that failed its format check is marked ------------------------------------


async def test_mcp_result_failing_its_format_check_is_marked() -> None:
    answers = iter(["not json at all", "still not json", BEN])  # one per world-model call

    def world(messages: list[dict[str, str]]) -> str:
        return f"<predicted_observation>{next(answers)}</predicted_observation>"

    world = simgym.FunctionWorldModel(world)
    facade = SimMCPServer("mcp", world, scenario=BANK_SCENARIO, validation_retries=1)
    async with mcp.Client(facade.build(per_session=False)) as client:
        odd = await client.call_tool("get_customer", {"customer_id": "C-1002"})
        fine = await client.call_tool("get_customer", {"customer_id": "C-1002"})
    await facade.aclose()
    problems = odd.meta[EPISODE_META]["format_problems"]
    assert problems and "not valid JSON" in problems[0]
    assert "format_problems" not in fine.meta[EPISODE_META]
    assert fine.content[0].text == BEN


# -- 8. OpenEnv shutdown: open episodes say the server stopped -----------------------------------


def test_openenv_shutdown_records_server_stopped(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    code = (
        "import simgym, sys\n"
        "sys.path.insert(0, 'tests')\n"
        "from test_openenv import echo_world\n"
        "from simgym.integrations.openenv_server import serve_openenv\n"
        "serve_openenv('terminal', world_model=simgym.FunctionWorldModel(echo_world), "
        f"task='Look', port=0, out={str(out)!r})\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+)", line)
        assert found, line + proc.stderr.read() if proc.poll() is not None else line
        with SimgymEnvClient(base_url=found.group(1)).sync() as env:
            env.reset()
            env.step("ls")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) in (0, -signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
    [episode] = episodes(out)
    assert episode.truncated and episode.error == SERVER_STOPPED


# -- 9. a dead Ray address fails fast ----------------------------------------------------------


def test_unreachable_ray_address_fails_fast_with_one_line(tmp_path: Path) -> None:
    files = sorted(str(p) for p in (ROOT / "devset" / "episodes" / "mcp").glob("*.yaml"))[:1]
    address = f"127.0.0.1:{free_port()}"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "simgym", "run", *files, "--out", str(tmp_path / "o.jsonl")]
        + ["-w", "replay", "--replay", str(ROOT / "devset" / "trajectories.jsonl")]
        + ["--executor", "ray", "--ray-address", address],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        cwd=ROOT,
    )
    assert time.monotonic() - started < 60
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    # The error is one line (the progress display above it is the run's own).
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert f"cannot reach the Ray cluster at {address}" in line
    assert "refused" in line.lower()
