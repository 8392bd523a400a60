"""The Ray executor on a real two-node cluster: a head and a worker node started with
``ray start`` on this machine (their own ports and temp dir), the driver joining by
address. Episodes are spread over both nodes and come back exactly as the local executor
plays them for the same seeds.

Slow: two Ray nodes take tens of seconds to start on a small machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import simgym
from simgym.rollout.runner import arollout
from simgym.rollout.scripted import load_specs

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
DEVSET = ROOT / "devset"
RAY = Path(sys.executable).with_name("ray")


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (held open together so none repeats)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def node_args(ports: list[int], temp_dir: str) -> list[str]:
    """Every port a node listens on, named, so two nodes (and other sessions' Ray) on one
    machine never collide; worker processes get a range of their own."""
    manager, objects, client, agent, agent_grpc, metrics, runtime_env, low = ports
    return [
        "--num-cpus=1",
        f"--node-manager-port={manager}",
        f"--object-manager-port={objects}",
        f"--ray-client-server-port={client}",
        f"--dashboard-agent-listen-port={agent}",
        f"--dashboard-agent-grpc-port={agent_grpc}",
        f"--metrics-export-port={metrics}",
        f"--runtime-env-agent-port={runtime_env}",
        f"--min-worker-port={low}",
        f"--max-worker-port={low + 40}",
        f"--temp-dir={temp_dir}",
        "--disable-usage-stats",
        "--block",  # in the foreground: stopping this process stops the node
    ]


def worker_range() -> int:
    """The first of 41 free consecutive ports (a node's worker range)."""
    for _ in range(200):
        (low,) = free_ports(1)
        if low + 40 > 65535:
            continue
        with contextlib.ExitStack() as stack:
            try:
                for port in range(low, low + 41):
                    s = stack.enter_context(socket.socket())
                    s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return low
    raise RuntimeError("no free port range for Ray workers")


def wait_for_port(port: int, process: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"ray start exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the Ray head did not listen on {port} in {timeout:g} s")


def stop(process: subprocess.Popen, temp_dir: str) -> None:
    """Stop one node we started: its ``ray start --block`` process, then any process of
    this cluster still alive (found by its temp dir, so no other Ray is touched)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(30)
    leftovers = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if any(temp_dir in part for part in proc.info["cmdline"] or ()):
                leftovers.append(proc)
    for proc in leftovers:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(leftovers, timeout=10)


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[str]:
    """A head and a worker node (one CPU each) on this machine; yields the address."""
    # Ray's socket paths live under the temp dir and must stay short: not tmp_path.
    temp_dir = tempfile.mkdtemp(prefix="sgray", dir="/tmp")
    gcs, *head_ports = free_ports(8)
    head_ports.append(worker_range())
    # Token authentication off on both nodes, as for this driver (whose Ray read its
    # settings at import): a token file another Ray left in ~/.ray must not lock us out.
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_AUTH_TOKEN_PATH", None)
    head = subprocess.Popen(
        [str(RAY), "start", "--head", f"--port={gcs}", "--include-dashboard=false"]
        + node_args(head_ports, temp_dir),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    nodes = [head]
    address = f"127.0.0.1:{gcs}"
    try:
        wait_for_port(gcs, head)
        worker_ports = free_ports(7) + [worker_range()]
        worker = subprocess.Popen(
            [str(RAY), "start", f"--address={address}"] + node_args(worker_ports, temp_dir),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        nodes.append(worker)
        ray.init(address=address, logging_level="warning")
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        deadline = time.monotonic() + 180
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("the worker node did not join the cluster")
            time.sleep(0.5)
        yield address
    finally:
        with contextlib.suppress(Exception):
            ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        ray.shutdown()
        for process in reversed(nodes):
            stop(process, temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


async def node_world(messages, *, folder: str) -> str:
    """The id of the Ray node that rendered the step; a call waits (at most a minute)
    until workers on two nodes have called, so a late node still gets episodes."""
    node = ray.get_runtime_context().get_node_id()
    Path(folder, node).touch()
    for _ in range(1200):
        if len(os.listdir(folder)) >= 2:
            break
        await asyncio.sleep(0.05)
    return f"<predicted_observation>{json.dumps({'node': node})}</predicted_observation>"


def outcome(trajectory: simgym.Trajectory) -> dict:
    """What an episode produced, minus ids, clocks and latencies."""
    return {
        "key": trajectory.key,
        "seed": trajectory.seed,
        "answer": trajectory.answer,
        "done": trajectory.done,
        "truncated": trajectory.truncated,
        "error": trajectory.error,
        "reward": trajectory.total_reward,
        "parts": trajectory.reward_parts,
        "turns": [(t.action_text, t.observation.text, t.error) for t in trajectory.turns],
        "agent_messages": trajectory.agent_messages,
    }


async def test_two_nodes_spread_episodes_and_match_local(two_nodes, tmp_path):
    alive = [n for n in ray.nodes() if n["Alive"]]
    assert len(alive) == 2 and ray.cluster_resources()["CPU"] == 2

    # spread: one worker a node (a worker takes a CPU, a node has one)
    task = simgym.Task(id="n", domain="mcp", instruction="?", scenario=SCENARIO)
    many = [task.model_copy(update={"id": f"n{i}"}) for i in range(12)]
    runs = await arollout(
        many,
        agent="scripted",
        agent_options={"actions": [CALL, {"answer": "x"}]},
        world_model="function",
        world_model_options={"fn": functools.partial(node_world, folder=str(tmp_path))},
        executor="ray",
        executor_options={"num_workers": 2, "address": two_nodes},
        concurrency=2,
    )
    nodes = {json.loads(t.turns[0].observation.text)["node"] for t in runs}
    assert len(runs) == 12 and nodes == {n["NodeID"] for n in alive}

    # identical: the 60 devset episodes (five domains), replayed, seeded as the local run
    specs = load_specs(sorted((DEVSET / "episodes").glob("*/*.yaml")))
    settings = dict(
        agent="scripted",
        agent_options={"by_task": {s.task.id: s.actions for s in specs}},
        world_model="replay",
        world_model_options={"trajectories": str(DEVSET / "trajectories.jsonl")},
        concurrency=4,
        seed=7,
    )
    task_list = [s.task for s in specs]
    local = await arollout(task_list, **settings)
    remote = await arollout(
        task_list, executor="ray", executor_options={"num_workers": 2}, **settings
    )
    assert len(remote) == len(local) == 60
    assert {t.key: outcome(t) for t in remote} == {t.key: outcome(t) for t in local}
    assert not any(turn.error_type == "world_model" for t in remote for turn in t.turns)
    assert ray.is_initialized()  # the executor joined the test's connection, left it up


CALL = {"name": "get_customer", "arguments": {"customer_id": "C-1"}}
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
    "state": {"customers": [{"id": "C-1", "name": "Ana"}]},
}
