"""simgym served to OpenEnv: a real uvicorn server with openenv-core's HTTP/WebSocket
server, driven by openenv-core's own client (SimgymEnvClient subclasses it) and by plain
HTTP; one simulated world per session, every episode written."""

from __future__ import annotations

import asyncio
import json
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
import pytest
import uvicorn
import yaml
from websockets.asyncio.client import connect

import simgym
from conftest import free_port
from simgym.integrations.openenv_client import SimgymEnvClient
from simgym.integrations.openenv_server import (
    SERVER_STOPPED,
    SESSION_ENDED,
    SimgymAction,
    create_openenv_app,
)
from support import scripted_world

ROOT = Path(__file__).resolve().parent.parent
BANK = yaml.safe_load((ROOT / "examples" / "mcp" / "bank_customers.yaml").read_text())
BEN = '{"id": "C-1002", "name": "Ben Okafor", "email": "ben@example.org"}'
BEN_ID = {"customer_id": "C-1002"}


def echo_world(messages: list[dict[str, str]]) -> str:
    """A terminal that answers each command with how many actions this world has seen and
    the last one, so a world that leaked between sessions would show."""
    actions = [m["content"] for m in messages if m["role"] == "user"]
    typed = re.findall(r'"keystrokes": "([^"]*)', actions[-1])
    shown = typed[0].replace("\\n", "") if typed else "?"
    return (
        "<predicted_observation>\n"
        f"dev@devbox:~$ {shown}\nseen {len(actions)}: {shown}\ndev@devbox:~$ "
        "\n</predicted_observation>"
    )


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Run ``app`` on a real uvicorn server on loopback; yield its base URL. Stopping runs
    the app's shutdown (which writes open episodes)."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        assert not thread.is_alive(), "server did not stop"


def episodes(path: Path) -> list[simgym.Trajectory]:
    return list(simgym.read_trajectories(path)) if path.exists() else []


def wait_for_episodes(path: Path, count: int, timeout: float = 15.0) -> list[simgym.Trajectory]:
    deadline = time.monotonic() + timeout
    while len(found := episodes(path)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def bank_app(out: Path, **options: Any) -> Any:
    world = simgym.FunctionWorldModel(scripted_world([BEN] * 3))
    task = {
        "id": "bank-1",
        "instruction": "What is Ben's email?",
        "metadata": {"answer": "ben@example.org"},
    }
    return create_openenv_app(
        "mcp",
        world,
        scenario=BANK["scenario"],
        task=task,
        writer=simgym.TrajectoryWriter(out),
        **{"reward": "exact", **options},
    )


async def test_mcp_episode_over_websocket(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    with serving(bank_app(out)) as url:
        async with SimgymEnvClient(base_url=url) as env:
            first = await env.reset(episode_id="mine-1")
            assert first.done is False
            assert first.observation.kind == "initial"
            assert "customer-records" in first.observation.text
            assert first.observation.instruction == "What is Ben's email?"
            tools = [t["function"]["name"] for t in first.observation.tools]
            assert tools == ["search_customers", "get_customer", "update_email"]
            state = await env.state()
            assert (state.episode_id, state.step_count, state.task_id) == ("mine-1", 0, "bank-1")
            assert "scenario" not in state.model_dump() and "Ana Lima" not in str(state)

            found = await env.step(SimgymAction(name="get_customer", arguments=BEN_ID))
            assert found.observation.kind == "observation"
            assert found.observation.text == BEN
            assert found.done is False and found.observation.turn == 1

            # Invalid arguments: an error observation, the episode goes on.
            bad = await env.step(SimgymAction(name="get_customer", arguments={"id": 7}))
            assert bad.done is False
            assert bad.observation.kind == "error"
            assert "customer_id" in bad.observation.error
            unknown = await env.step({"name": "drop_table", "arguments": {}})
            assert unknown.observation.kind == "error" and "drop_table" in unknown.observation.error
            # The domain's short form, as text; a malformed one is an error observation too.
            short = await env.step('get_customer {"customer_id": "C-1002"}')
            assert short.observation.text == BEN
            broken = await env.step('get_customer {"customer_id": ')
            assert broken.observation.kind == "error" and "JSON" in broken.observation.error

            final = await env.step(SimgymAction(answer="ben@example.org"))
            assert final.done is True and final.observation.truncated is False
            assert final.observation.kind == "answer"
            assert final.reward == 1.0 and final.observation.reward_parts == {"exact": 1.0}

            after = await env.step(SimgymAction(name="get_customer", arguments=BEN_ID))
            assert after.done is True and after.observation.kind == "error"
            assert "answer was submitted" in after.observation.error
            state = await env.state()
            assert state.done is True and state.step_count == 6 and state.total_reward == 1.0

    [episode] = episodes(out)
    assert episode.episode_id == "mine-1" and episode.answer == "ben@example.org"
    assert episode.total_reward == 1.0 and episode.reward_parts == {"exact": 1.0}
    assert [t.error_type for t in episode.turns] == [None, "action", "action", None, "action", None]
    assert episode.agent == {"name": "openenv-client"}


async def test_reset_by_a_served_tasks_text_keeps_its_reference(tmp_path: Path) -> None:
    """The README's ``reset(task="…")``: naming a served task by its exact text (or id)
    plays that task, reference answer included, so a right answer scores 1.0; a task of
    the client's own has no reference, and the last step says it could not be scored
    rather than passing a 0.0 off as a score."""
    out = tmp_path / "episodes.jsonl"
    with serving(bank_app(out, reward="task")) as url:
        async with SimgymEnvClient(base_url=url) as env:
            for named in ("What is Ben's email?", "  What is Ben's email?\n", "bank-1"):
                first = await env.reset(task=named)
                assert first.observation.info["task_id"] == "bank-1"
                assert first.observation.info["reference"] is True
                final = await env.step(SimgymAction(answer="ben@example.org"))
                assert final.done is True and final.reward == 1.0
                assert "reward_error" not in final.observation.info
            wrong = await env.reset(task="What is Ben's email?")
            assert wrong.observation.info["task_id"] == "bank-1"
            missed = await env.step(SimgymAction(answer="ana@example.org"))
            assert missed.reward == 0.0 and "reward_error" not in missed.observation.info

            own = await env.reset(task="Who is customer C-1001?")
            assert own.observation.info["task_id"] != "bank-1"
            assert own.observation.info["reference"] is False
            unscored = await env.step(SimgymAction(answer="Ana Lima"))
            assert unscored.done is True and unscored.reward is None
            assert "no reward defined" in unscored.observation.info["reward_error"]
    written = episodes(out)
    assert [e.total_reward for e in written] == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert written[-1].metrics["reward_details"]["error"].startswith("no reward defined")


def test_terminal_with_the_sync_client_truncates_at_max_turns(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    app = create_openenv_app(
        "terminal",
        simgym.FunctionWorldModel(echo_world),
        task="Look around",
        writer=simgym.TrajectoryWriter(out),
        max_turns=3,
    )
    with serving(app) as url, SimgymEnvClient(base_url=url).sync() as env:
        first = env.reset()
        assert first.observation.text == "dev@devbox:~$"
        assert [t["function"]["name"] for t in first.observation.tools] == ["send_keys"]
        listed = env.step(SimgymAction(text="ls -la"))
        assert "seen 1: ls -la" in listed.observation.text and listed.done is False
        keyed = env.step(SimgymAction(keystrokes=[{"keystrokes": "pwd\n", "duration": 0.5}]))
        assert "seen 2: pwd" in keyed.observation.text
        last = env.step({"name": "send_keys", "arguments": {"keystrokes": "whoami\n"}})
        assert "seen 3: whoami" in last.observation.text
        assert last.done is True and last.observation.truncated is True
        state = env.state()
        assert state.truncated is True and state.done is False and state.step_count == 3
        refused = env.step("ls")
        assert refused.observation.kind == "error" and "turn limit (3)" in refused.observation.error
    [episode] = episodes(out)
    assert episode.truncated and len(episode.turns) == 3


def test_sessions_do_not_share_a_world(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    app = create_openenv_app(
        "terminal", simgym.FunctionWorldModel(echo_world), writer=simgym.TrajectoryWriter(out)
    )

    async def two_sessions(url: str) -> tuple[list[str], list[str], set[str]]:
        async with SimgymEnvClient(base_url=url) as a, SimgymEnvClient(base_url=url) as b:
            await asyncio.gather(a.reset(), b.reset())
            seen_a = [(await a.step("echo one")).observation.text]
            seen_a.append((await a.step("echo two")).observation.text)
            seen_b = [(await b.step("echo three")).observation.text]
            ids = {(await a.state()).episode_id, (await b.state()).episode_id}
        return seen_a, seen_b, ids

    with serving(app) as url:
        seen_a, seen_b, ids = asyncio.run(two_sessions(url))
        assert "seen 2: echo two" in seen_a[1]
        assert "seen 1: echo three" in seen_b[0]  # b's world saw only its own action
        assert len(ids) == 2
        # Leaving ends a session; its unfinished episode is written, truncated.
        written = wait_for_episodes(out, 2)
    assert sorted(len(e.turns) for e in written) == [1, 2]
    assert all(e.truncated and e.error == SESSION_ENDED for e in written)


async def test_session_limit_and_reset_options(tmp_path: Path) -> None:
    app = create_openenv_app(
        "terminal",
        simgym.FunctionWorldModel(echo_world),
        task=[{"id": "t-a", "instruction": "A"}, {"id": "t-b", "instruction": "B"}],
        max_concurrent_envs=1,
    )
    with serving(app) as url:
        async with SimgymEnvClient(base_url=url) as env:
            assert (await env.reset(task_id="t-b")).observation.instruction == "B"
            assert (await env.reset(seed=2)).observation.instruction == "A"  # 2 % 2 tasks
            assert (await env.reset(seed=3)).observation.instruction == "B"
            own = await env.reset(task={"id": "mine", "instruction": "My own"})
            assert own.observation.instruction == "My own"
            assert (await env.state()).task_id == "mine"
            with pytest.raises(RuntimeError, match="unknown task_id 'nope'"):
                await env.reset(task_id="nope")
            with pytest.raises(RuntimeError, match="unknown reset option.*colour"):
                await env.reset(colour="red")
            with pytest.raises(RuntimeError, match="for domain 'mcp'"):
                await env.reset(task={"instruction": "x", "domain": "mcp"})
            # A second session is refused while the first holds the only world: the server
            # says so as soon as the socket opens, then closes it.
            async with connect(url.replace("http://", "ws://") + "/ws") as second:
                refusal = json.loads(await asyncio.wait_for(second.recv(), 30))
            assert refusal["type"] == "error" and refusal["data"]["code"] == "CAPACITY_REACHED"


def test_plain_http_endpoints() -> None:
    app = create_openenv_app("terminal", simgym.FunctionWorldModel(echo_world), task="Look")
    with serving(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        assert http.get("/health").json()["status"] == "healthy"
        schema = http.get("/schema").json()
        assert {"name", "arguments", "text", "keystrokes", "answer"} <= set(
            schema["action"]["properties"]
        )
        assert http.get("/metadata").json()["name"] == "simgym-terminal"
        reset = http.post("/reset", json={"seed": 4}).json()
        assert reset["observation"]["kind"] == "initial" and reset["done"] is False
        assert reset["observation"]["instruction"] == "Look"
        # /step has no episode (a fresh environment per request): an answer, not a 500.
        step = http.post("/step", json={"action": {"text": "ls"}})
        assert step.status_code == 200
        body = step.json()
        assert body["done"] is True and body["observation"]["kind"] == "error"
        assert "WebSocket" in body["observation"]["error"]
        bad_reset = http.post("/reset", json={"colour": "red"})
        assert bad_reset.status_code == 400 and "colour" in bad_reset.json()["detail"]
        two_kinds = http.post("/step", json={"action": {"name": "send_keys", "text": "ls"}})
        assert two_kinds.status_code == 422 and "exactly one" in two_kinds.text


def test_bad_configuration_fails_at_start_up() -> None:
    world = simgym.FunctionWorldModel(echo_world)
    with pytest.raises(simgym.SimgymError, match="ready world model instance"):
        create_openenv_app("terminal", world, base_url="http://x")
    with pytest.raises(simgym.SimgymError, match="session settings"):
        create_openenv_app("terminal", world, max_concurrent_envs=0)
    with pytest.raises(simgym.UnknownDomainError):
        create_openenv_app("spreadsheet", world)
    with pytest.raises(simgym.SimgymError, match="unique"):
        create_openenv_app("terminal", world, task=[{"id": "x"}, {"id": "x"}])
    with pytest.raises(ValueError, match="exactly one"):
        SimgymAction(text="ls", answer="done")
    with pytest.raises(ValueError, match="arguments belong to a tool call"):
        SimgymAction(text="ls", arguments={"a": 1})


def test_serve_openenv_with_the_local_world_model(tmp_path: Path, model_path: str) -> None:
    """The real entry point in its own process, the embedded model as the world, stopped
    with SIGTERM: the session's unfinished episode is written on the way out."""
    out = tmp_path / "episodes.jsonl"
    # A short prompt, one attempt and few tokens: the plumbing is under test, not the model.
    options = {
        "max_tokens": 24,
        "seed": 7,
        "validation_retries": 0,
        "system_prompt": "You simulate a Linux terminal. Answer a command with its screen.",
    }
    code = (
        "from simgym.integrations.openenv_server import serve_openenv\n"
        "serve_openenv('terminal', world_model='local', task='Look around', port=0, "
        f"out={str(out)!r}, max_turns=4, env_options={options!r})\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.PIPE, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    log: list[str] = []

    def drain() -> None:  # keep reading, so a chatty model cannot fill the pipe
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            lines.put(line)

    threading.Thread(target=drain, daemon=True).start()
    try:
        url = None
        deadline = time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                assert proc.poll() is None, "server exited:\n" + "".join(log)
                continue
            match = re.search(r"on (http://127\.0\.0\.1:\d+); episodes go to", line)
            url = match.group(1) if match else None
        assert url, "no address announced:\n" + "".join(log)
        with SimgymEnvClient(base_url=url, message_timeout_s=120).sync() as env:
            first = env.reset()
            assert first.observation.text.rstrip().endswith("$")
            result = env.step(SimgymAction(text="ls"))
            assert result.observation.turn == 1 and result.done is False
            if result.observation.kind == "error":  # a failed world model says why
                assert result.observation.error
            else:
                assert result.observation.kind == "observation"
                assert result.observation.text.strip()
            proc.send_signal(signal.SIGTERM)
            # uvicorn shuts down gracefully, then re-raises the signal it caught.
            assert proc.wait(60) in (0, -signal.SIGTERM), "".join(log)
    finally:
        if proc.poll() is None:
            proc.kill()
    [episode] = episodes(out)
    assert episode.truncated and episode.error in (SESSION_ENDED, SERVER_STOPPED)
    assert len(episode.turns) == 1 and episode.world_model["backend"] == "local"
