"""The openai backend against a real llama.cpp server, and against a fault server for
the failures a real server cannot be made to produce on demand."""

import asyncio

import pytest

import simgym
from conftest import free_port
from simgym import OpenAIWorldModel, WorldModelError

MSGS = [
    {
        "role": "system",
        "content": "You simulate a Linux terminal. Answer inside <predicted_observation> tags.",
    },
    {
        "role": "user",
        "content": '### Turn 1\n\n**Action:**\n[{"keystrokes": "pwd\\n", "duration": 1}]',
    },
]


async def test_real_server_prediction_has_usage_and_latency(llama_server):
    wm = OpenAIWorldModel(base_url=llama_server, temperature=0.0, max_tokens=48)
    pred = await wm.predict(MSGS, seed=1)
    assert wm.model == "smollm2"  # resolved from the server's model list
    assert pred.raw and pred.observation  # parsed, with or without tags
    assert pred.usage.prompt_tokens > 20 and 0 < pred.usage.completion_tokens <= 48
    assert pred.latency_s > 0 and pred.finish_reason in ("stop", "length")
    await wm.aclose()


async def test_real_server_drives_a_terminal_episode(llama_server, tmp_path):
    out = tmp_path / "t.jsonl"
    writer = simgym.TrajectoryWriter(out)
    env = simgym.make(
        "terminal",
        world_model="openai",
        base_url=llama_server,
        temperature=0.0,
        max_tokens=64,
        writer=writer,
        max_turns=2,
        validation_retries=0,
    )
    await env.reset("look around")
    r1 = await env.step("ls")
    r2 = await env.step("cat notes.txt")
    assert r1.observation.kind == "observation" and r1.observation.text
    assert r2.truncated
    saved = next(simgym.read_trajectories(out))
    assert saved.world_model["backend"] == "openai" and saved.world_model["model"] == "smollm2"
    assert all(t.usage.completion_tokens > 0 for t in saved.turns)
    # the second request repeated the first one as its prefix
    assert saved.turns[1].usage.prompt_tokens > saved.turns[0].usage.prompt_tokens
    await env.world_model.aclose()


async def test_concurrency_limit_bounds_requests_in_flight(llama_server):
    wm = OpenAIWorldModel(base_url=llama_server, model="smollm2", max_tokens=4, max_concurrency=2)
    _, gate = wm.chat._client()
    peak = 0

    async def watch():
        nonlocal peak
        while True:
            peak = max(peak, 2 - gate._value)
            await asyncio.sleep(0.005)

    watcher = asyncio.create_task(watch())
    await asyncio.gather(*(wm.predict(MSGS) for _ in range(5)))
    watcher.cancel()
    await wm.aclose()
    assert peak == 2


async def test_server_down_is_a_clear_error():
    wm = OpenAIWorldModel(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", max_retries=0)
    with pytest.raises(WorldModelError, match="cannot reach world model"):
        await wm.predict(MSGS)


async def test_http_500_is_retried_then_reported(fault_server):
    base, hits = fault_server
    wm = OpenAIWorldModel(base_url=f"{base}/500/v1", model="m", max_retries=2)
    before = hits["500"]
    with pytest.raises(WorldModelError, match="HTTP 500"):
        await wm.predict(MSGS)
    assert hits["500"] - before == 3  # first try + 2 retries


async def test_http_429_is_retried(fault_server):
    base, hits = fault_server
    wm = OpenAIWorldModel(base_url=f"{base}/429/v1", model="m", max_retries=1)
    before = hits["429"]
    with pytest.raises(WorldModelError, match="HTTP 429"):
        await wm.predict(MSGS)
    assert hits["429"] - before == 2


async def test_slow_server_times_out(fault_server):
    base, _ = fault_server
    wm = OpenAIWorldModel(base_url=f"{base}/slow/v1", model="m", timeout=0.5, max_retries=0)
    with pytest.raises(WorldModelError, match="timed out"):
        await wm.predict(MSGS)


async def test_garbage_body_is_an_error(fault_server):
    base, _ = fault_server
    wm = OpenAIWorldModel(base_url=f"{base}/garbage/v1", model="m", max_retries=0)
    with pytest.raises(WorldModelError):
        await wm.predict(MSGS)


async def test_text_without_tags_falls_back_to_plain_text(fault_server):
    base, _ = fault_server
    env = simgym.make("terminal", world_model="openai", base_url=f"{base}/notags/v1", model="m")
    await env.reset()
    res = await env.step("ls")
    assert res.observation.text == "total 0\nuser@devbox:~$"
    assert env.trajectory.turns[-1].raw == "total 0\nuser@devbox:~$"
    await env.world_model.aclose()


async def test_failures_inside_an_episode_are_recorded(fault_server, tmp_path):
    base, _ = fault_server
    writer = simgym.TrajectoryWriter(tmp_path / "t.jsonl")
    env = simgym.make(
        "terminal",
        world_model="openai",
        base_url=f"{base}/500/v1",
        model="m",
        max_retries=0,
        writer=writer,
    )
    await env.reset()
    res = await env.step("ls")
    assert res.truncated and "HTTP 500" in res.observation.text
    saved = next(simgym.read_trajectories(tmp_path / "t.jsonl"))
    assert "HTTP 500" in saved.error
    await env.world_model.aclose()


def test_missing_base_url_is_explained():
    with pytest.raises(WorldModelError, match="needs a server"):
        OpenAIWorldModel()


async def test_reasoning_content_field_is_recorded(fault_server):
    base, _ = fault_server
    wm = OpenAIWorldModel(base_url=f"{base}/reasoning/v1", model="m")
    pred = await wm.predict(MSGS)
    assert pred.reasoning == "the ls ran"
    assert pred.observation == "done\nuser@devbox:~$" and pred.tagged
    await wm.aclose()


def test_sync_env_shares_one_client_across_steps(llama_server):
    wm = OpenAIWorldModel(base_url=llama_server, model="smollm2", max_tokens=16)
    env = simgym.make("terminal", world_model=wm, validation_retries=0).sync()
    env.reset()
    env.step("ls")
    env.step("pwd")
    assert len(wm.chat._per_loop) == 1  # one loop, one client: connections are reused
    assert [t.observation.kind for t in env.trajectory.turns] == ["observation"] * 2
    env.close()
    simgym.run_sync(wm.aclose())
