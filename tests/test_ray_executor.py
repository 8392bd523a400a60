"""The Ray executor on a local Ray instance: the same episodes, keys, rewards and
observations as the local executor (replay backend), resume, and every way a run can fail
without losing an episode."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import simgym
from simgym.core.errors import ScenarioError, SimgymError, UnknownDomainError
from simgym.rollout.runner import RolloutConfig, arollout
from simgym.rollout.scripted import load_specs

ray = pytest.importorskip("ray")

from simgym.rollout.ray_executor import RayExecutor  # noqa: E402

pytestmark = pytest.mark.usefixtures("local_ray")

ROOT = Path(__file__).resolve().parent.parent
DEVSET = ROOT / "devset"

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
    "state": {"customers": [{"id": "C-1", "name": "Ana"}, {"id": "C-2", "name": "Rui"}]},
}


def call(customer: str) -> dict:
    return {"name": "get_customer", "arguments": {"customer_id": customer}}


# Task id -> (expected answer, the agent's script). Some answers are wrong, so rewards
# differ between episodes; scripts differ in length and in their actions.
EPISODES = {
    "one-call": ("Ana", [call("C-1"), {"answer": "Ana"}]),
    "two-calls": ("Rui", [call("C-1"), call("C-2"), {"answer": "Rui"}]),
    "wrong": ("Ana", [call("C-2"), {"answer": "Rui"}]),
    "no-answer": ("Ana", [call("C-1"), call("C-1")]),
    "long": ("Rui", [call("C-1"), call("C-2"), call("C-1"), call("C-2"), {"answer": "Rui"}]),
}
SCRIPTS = {task_id: script for task_id, (_, script) in EPISODES.items()}


def tasks(ids=None) -> list[simgym.Task]:
    return [
        simgym.Task(
            id=task_id,
            domain="mcp",
            instruction="Look the customer up.",
            scenario=SCENARIO,
            metadata={"answer": answer},
        )
        for task_id, (answer, _) in EPISODES.items()
        if ids is None or task_id in ids
    ]


def recorded_world(messages) -> str:
    """A deterministic world: the action it saw and how many came before it."""
    actions = [m for m in messages if m["role"] == "user"]
    seen = actions[-1]["content"].split("**Action:**")[-1].strip()
    observation = json.dumps({"seen": seen, "turn": len(actions)})
    return f"<predicted_observation>{observation}</predicted_observation>"


def crashing_world(messages, *, marker: str | None = None) -> str:
    """Kills its own process on a call for C-9: every time, or (with ``marker``) only
    the first time in the whole test, which it notes by creating the marker file."""
    if "C-9" in messages[-1]["content"]:
        if marker is None or not os.path.exists(marker):
            if marker is not None:
                Path(marker).touch()
            os._exit(1)
    return recorded_world(messages)


async def gated_world(messages, *, gate: str) -> str:
    """Holds a call for C-9 until the ``gate`` file exists (at most a minute)."""
    if "C-9" in messages[-1]["content"]:
        for _ in range(1200):
            if os.path.exists(gate):
                break
            await asyncio.sleep(0.05)
    return recorded_world(messages)


def pid_world(messages) -> str:
    return f"<predicted_observation>{json.dumps({'pid': os.getpid()})}</predicted_observation>"


async def meeting_world(messages, *, folder: str) -> str:
    """``pid_world``, but a call waits (at most a minute) until two worker processes have
    called: a worker that starts late on a busy machine would otherwise find the queue
    already drained by the first one."""
    Path(folder, str(os.getpid())).touch()
    for _ in range(1200):
        if len(os.listdir(folder)) >= 2:
            break
        await asyncio.sleep(0.05)
    else:  # no second worker: later calls go straight through (the test then fails)
        Path(folder, "gave-up").touch()
    return pid_world(messages)


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance for the module (it takes seconds to start)."""
    ray.init(num_cpus=2, include_dashboard=False, logging_level="warning")
    # The worlds above travel to the workers inside the config; the workers cannot
    # import this test module, so its functions go by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    ray.shutdown()


@pytest.fixture(scope="module")
def recording(tmp_path_factory, local_ray) -> Path:
    """The episodes run once against the deterministic world, for the replay backend."""
    path = tmp_path_factory.mktemp("recording") / "recorded.jsonl"
    recorded = simgym.rollout(
        tasks(),
        agent="scripted",
        agent_options={"by_task": SCRIPTS},
        world_model=simgym.FunctionWorldModel(recorded_world),
        out=path,
    )
    assert len(recorded) == len(EPISODES)
    return path


def replay_settings(recording: Path) -> dict:
    return dict(
        agent="scripted",
        agent_options={"by_task": SCRIPTS},
        world_model="replay",
        world_model_options={"trajectories": str(recording)},
        group_size=3,
        concurrency=2,
    )


def outcome(trajectory: simgym.Trajectory) -> dict:
    """Everything an episode produced, minus ids, clocks and latencies."""
    return {
        "key": trajectory.key,
        "group": trajectory.group_id,
        "seed": trajectory.seed,
        "domain": trajectory.domain,
        "answer": trajectory.answer,
        "done": trajectory.done,
        "truncated": trajectory.truncated,
        "error": trajectory.error,
        "reward": trajectory.total_reward,
        "parts": trajectory.reward_parts,
        "initial": trajectory.initial_observation.text if trajectory.initial_observation else None,
        "turns": [
            (t.action_text, t.observation.text, t.error, t.error_type) for t in trajectory.turns
        ],
        "world_model": trajectory.world_model,
        "agent": trajectory.agent,
        "agent_messages": trajectory.agent_messages,
    }


def by_key(trajectories) -> dict[str, dict]:
    return {t.key: outcome(t) for t in trajectories}


async def test_ray_runs_the_same_episodes_as_local(recording, tmp_path):
    settings = replay_settings(recording)
    local = await arollout(tasks(), **settings)
    out = tmp_path / "ray.jsonl"
    remote = await arollout(
        tasks(), executor="ray", executor_options={"num_workers": 2}, out=out, **settings
    )
    assert len(remote) == len(local) == 3 * len(EPISODES)
    assert by_key(remote) == by_key(local)
    # the replay really reproduced the recording, and rewards tell right from wrong
    assert {t.total_reward for t in remote} == {0.0, 1.0}
    assert not any(t.error for t in remote)
    ran = by_key(remote)
    assert ran["long#2"]["turns"][3][1] == json.dumps({"seen": json.dumps(call("C-2")), "turn": 4})
    # what went to the file is what came back, and Ray (started by the fixture) still runs
    assert by_key(simgym.read_trajectories(out)) == ran
    assert ray.is_initialized()


async def test_devset_replays_identically_on_ray():
    """The 60 real devset episodes (five domains) through the replay backend."""
    specs = load_specs(sorted((DEVSET / "episodes").glob("*/*.yaml")))
    settings = dict(
        agent="scripted",
        agent_options={"by_task": {s.task.id: s.actions for s in specs}},
        world_model="replay",
        world_model_options={"trajectories": str(DEVSET / "trajectories.jsonl")},
        concurrency=4,
    )
    task_list = [s.task for s in specs]
    local = await arollout(task_list, **settings)
    remote = await arollout(
        task_list, executor="ray", executor_options={"num_workers": 2}, **settings
    )
    assert len(remote) == len(local) == len(specs) == 60
    assert by_key(remote) == by_key(local)
    assert {t.domain for t in remote} == {"mcp", "search", "swe", "terminal", "web"}
    # the replay found every recorded observation
    assert not any(turn.error_type == "world_model" for t in remote for turn in t.turns)


async def test_episodes_spread_over_workers(tmp_path):
    many = [
        simgym.Task(id=f"t{i}", domain="mcp", instruction="Look.", scenario=SCENARIO)
        for i in range(24)
    ]
    runs = await arollout(
        many,
        agent="scripted",
        agent_options={"actions": [call("C-1"), {"answer": "x"}]},
        world_model="function",
        world_model_options={"fn": functools.partial(meeting_world, folder=str(tmp_path))},
        executor="ray",
        executor_options={"num_workers": 2},
        concurrency=1,
    )
    pids = {json.loads(t.turns[0].observation.text)["pid"] for t in runs}
    assert len(runs) == 24 and len(pids) == 2 and os.getpid() not in pids


async def test_a_slow_episode_holds_only_its_own_slot(tmp_path):
    """Jobs go out as slots free up: while one episode waits, the other worker plays
    every other episode (with fixed shards, some would wait behind the slow one)."""
    gate = tmp_path / "gate"
    slow = simgym.Task(id="slow", domain="mcp", instruction="?", scenario=SCENARIO)
    fast = [
        simgym.Task(id=f"fast{i}", domain="mcp", instruction="?", scenario=SCENARIO)
        for i in range(6)
    ]
    order: list[str] = []

    def on_done(trajectory):
        order.append(trajectory.key)
        if len(order) == len(fast):  # every fast episode is in: let the slow one end
            gate.touch()

    await arollout(
        [slow, *fast],
        agent="scripted",
        agent_options={"actions": [call("C-1")], "by_task": {"slow": [call("C-9")]}},
        world_model="function",
        world_model_options={"fn": functools.partial(gated_world, gate=str(gate))},
        executor="ray",
        executor_options={"num_workers": 2},
        concurrency=1,
        on_done=on_done,
    )
    assert order[-1] == "slow" and sorted(order[:-1]) == sorted(t.id for t in fast)


async def test_resume_with_ray_runs_only_missing_episodes(recording, tmp_path):
    out = tmp_path / "runs.jsonl"
    settings = dict(replay_settings(recording), executor="ray", out=out)
    first = await arollout(tasks({"one-call", "wrong"}), **settings)
    assert len(first) == 6
    again = await arollout(tasks(), **settings)
    assert sorted(t.key for t in again) == sorted(
        f"{task_id}#{s}" for task_id in ("two-calls", "no-answer", "long") for s in range(3)
    )
    written = [t.key for t in simgym.read_trajectories(out)]
    assert sorted(written) == sorted(f"{i}#{s}" for i in EPISODES for s in range(3))
    assert await arollout(tasks(), **settings) == []


async def test_bad_domain_fails_before_dispatch(recording, tmp_path):
    out = tmp_path / "never.jsonl"
    bad = [*tasks(), simgym.Task(id="odd", domain="no-such-domain", instruction="?")]
    with pytest.raises(UnknownDomainError, match="no-such-domain"):
        await arollout(bad, executor="ray", out=out, **replay_settings(recording))
    assert not out.exists()


async def test_a_worker_that_cannot_build_stops_the_run_with_its_reason(tmp_path):
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(SimgymError, match="could not build the rollout.*not found"):
        await arollout(
            tasks(),
            agent="scripted",
            agent_options={"by_task": SCRIPTS},
            world_model="replay",
            world_model_options={"trajectories": str(missing)},
            executor="ray",
        )


async def test_episodes_of_a_dead_worker_are_retried_on_another(tmp_path):
    marker = tmp_path / "crashed-once"
    doomed = dict(EPISODES, crash=("Ana", [call("C-1"), call("C-9"), {"answer": "Ana"}]))
    crash_tasks = [
        simgym.Task(id=i, domain="mcp", instruction="?", scenario=SCENARIO, metadata={"answer": a})
        for i, (a, _) in doomed.items()
    ]
    settings = dict(
        agent="scripted",
        agent_options={"by_task": {i: s for i, (_, s) in doomed.items()}},
        world_model="function",
        world_model_options={"fn": functools.partial(crashing_world, marker=str(marker))},
        concurrency=3,
    )
    remote = await arollout(
        crash_tasks, executor="ray", executor_options={"num_workers": 2}, **settings
    )
    assert marker.exists()  # a worker really died
    local = await arollout(crash_tasks, **settings)  # the marker keeps this one alive
    assert by_key(remote) == by_key(local)
    assert len(remote) == len(doomed) and not any(t.error for t in remote)


async def test_an_episode_that_kills_every_worker_comes_back_failed():
    doomed = dict(EPISODES, crash=("Ana", [call("C-9"), {"answer": "Ana"}]))
    crash_tasks = [
        simgym.Task(id=i, domain="mcp", instruction="?", scenario=SCENARIO, metadata={"answer": a})
        for i, (a, _) in doomed.items()
    ]
    runs = await arollout(
        crash_tasks,
        agent="scripted",
        agent_options={"by_task": {i: s for i, (_, s) in doomed.items()}},
        world_model="function",
        world_model_options={"fn": crashing_world},
        executor="ray",
        executor_options={"num_workers": 2},
        concurrency=1,  # one episode per worker: a crash takes no neighbour with it
    )
    assert sorted(t.key for t in runs) == sorted(doomed)
    failed = {t.key: t for t in runs if t.error}
    assert list(failed) == ["crash"]
    crash = failed["crash"]
    assert crash.truncated and not crash.done and "died (2 tries)" in crash.error
    assert crash.metrics["executor_error"] == crash.error and crash.seed is not None
    assert {t.answer for t in runs if t.key == "one-call"} == {"Ana"}


async def test_an_episode_that_raises_stops_the_run_like_local(recording):
    broken = simgym.Task(
        id="broken", domain="mcp", instruction="?", scenario={"tools": "not a list"}
    )
    settings = replay_settings(recording)
    with pytest.raises(ScenarioError) as local:
        await arollout([broken], **settings)
    with pytest.raises(ScenarioError) as remote:
        await arollout([broken], executor="ray", **settings)
    assert str(remote.value) == str(local.value)
    notes = "\n".join(remote.value.__notes__)
    assert re.search(r"episode broken#\d failed on a ray worker", notes)
    assert "ScenarioError" in notes  # the worker's traceback came along


def test_options_are_checked(local_ray):
    config = RolloutConfig(world_model="replay")
    with pytest.raises(SimgymError, match="unknown ray executor option.*num_worker"):
        RayExecutor(config, num_worker=2)
    with pytest.raises(SimgymError, match="at least 1"):
        RayExecutor(config, num_workers=0)
    # the cluster has 2 CPUs: three one-CPU workers cannot be placed
    with pytest.raises(SimgymError, match="3 ray workers x 1 CPU do not fit"):
        RayExecutor(config, num_workers=3)._pool_size(10)
    assert RayExecutor(config)._pool_size(10) == 2
    assert RayExecutor(config, num_cpus=0.5)._pool_size(3) == 3
    assert RayExecutor(config, num_cpus=0)._pool_size(10) == 2  # one a CPU by default


async def test_missing_ray_is_a_clear_error(recording, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets when absent
    with pytest.raises(SimgymError, match=r"pip install 'simgym\[ray\]'"):
        await arollout(tasks(), executor="ray", **replay_settings(recording))


def test_cli_runs_on_a_ray_it_starts_and_stops(tmp_path):
    """`simgym run --executor ray` starts its own local Ray and matches `--executor local`."""
    files = sorted(str(p) for p in (DEVSET / "episodes" / "mcp").glob("*.yaml"))
    written = {}
    for executor in ("local", "ray"):
        out = tmp_path / f"{executor}.jsonl"
        script = (
            "import sys, ray\n"
            "from simgym.cli import main\n"
            "try:\n"
            "    main()\n"
            "except SystemExit as exc:\n"
            "    assert not exc.code, exc.code\n"
            "assert not ray.is_initialized(), 'the Ray this run started is still up'\n"
        )
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        proc = subprocess.run(
            [sys.executable, "-c", script, "run", *files, "--out", str(out)]
            + ["-w", "replay", "--replay", str(DEVSET / "trajectories.jsonl")]
            + ["--executor", executor],
            capture_output=True,
            text=True,
            timeout=240,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        written[executor] = by_key(simgym.read_trajectories(out))
    assert len(written["ray"]) == len(files) == 12
    assert written["ray"] == written["local"]
