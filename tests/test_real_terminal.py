"""Real terminal and swe backends in a bubblewrap sandbox: isolation, a real episode end to
end (recorded, exported), and the swe tools. Needs `bwrap` and `tmux` (apt-get install
bubblewrap tmux); skipped where the kernel refuses the sandbox's namespaces."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

import simgym
import simgym.domains.swe  # noqa: F401  (registers the swe domain)
from simgym.core import contract
from simgym.data.export import AWB_FIELDS, export_files, read_rows
from simgym.real.cgroup import cgroup_problem
from simgym.real.sandbox import Limits, Sandbox, SandboxError, bwrap_problem
from simgym.real.shell import ShellSession
from simgym.real.swe import RealSWE
from simgym.real.terminal import RealTerminal, keystroke_batches
from simgym.rollout.record import record

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=str(bwrap_problem()))

SCENARIO = {
    "user": "dev",
    "hostname": "devbox",
    "files": {
        "/home/dev/notes.txt": "buy milk\ncall the bank\n",
        "/home/dev/project/": "",
        "/home/dev/project/main.py": 'print("hello from main")\n',
        "/opt/tools/run.sh": "#!/bin/sh\necho tool ran\n",
    },
}


def keys(text: str, duration: float = 1) -> list[dict]:
    return [{"keystrokes": text, "duration": duration}]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- a real episode through SimEnv, recorded and exported ----------------------------------


async def test_real_episode_recorded_and_exported(tmp_path: Path) -> None:
    out = tmp_path / "real.jsonl"
    executor = RealTerminal()
    with simgym.TrajectoryWriter(out) as writer:
        env = simgym.make(
            "terminal",
            world_model=executor,
            scenario=SCENARIO,
            writer=writer,
            validation_retries=0,
        )
        first = await env.reset("Look around the project")
        assert first.text == "dev@devbox:~$"  # the scenario's user, host and home

        steps = [
            keys("ls\n"),
            keys("cd project\n"),
            keys("pwd; cat main.py\n"),
            keys("sleep 100\n", 1),
            keys("C-c"),
            keys('ls /nonexistent; echo "rc=$?"\n'),
            keys("/opt/tools/run.sh\n"),
            keys("exit\n"),
        ]
        started = time.perf_counter()
        results = [await env.step(action) for action in steps]
        elapsed = time.perf_counter() - started
        screens = [r.observation.text for r in results]

    assert screens[0].splitlines() == ["dev@devbox:~$ ls", "notes.txt  project", "dev@devbox:~$"]
    assert screens[1].splitlines()[-1] == "dev@devbox:~/project$"  # cd changed the prompt
    assert "/home/dev/project" in screens[2] and "hello from main" in screens[2]
    assert screens[2].splitlines()[-1] == "dev@devbox:~/project$"  # and it persisted
    assert screens[3].splitlines()[-1] == "dev@devbox:~/project$ sleep 100"  # still running
    assert screens[4].splitlines()[-2:] == ["^C", "dev@devbox:~/project$"]
    assert "No such file or directory" in screens[5] and "rc=2" in screens[5]
    assert "tool ran" in screens[6]  # a '#!' scenario file is executable
    assert "exit" in screens[7]
    assert results[-1].done and all(r.observation.kind == "observation" for r in results)
    assert elapsed < 8  # the finished commands did not wait out their durations

    (trajectory,) = simgym.read_trajectories(out)
    assert trajectory.done and trajectory.world_model["backend"] == "real-terminal"
    assert [t.observation.text for t in trajectory.turns] == screens
    assert trajectory.initial_observation.text == "dev@devbox:~$"
    assert executor.session is None  # the sandbox was torn down at the end

    awb = tmp_path / "awb.jsonl"
    assert export_files([out], awb, "awb") == len(steps)
    rows = [json.loads(line) for line in awb.read_text().splitlines()]
    assert all(tuple(row) == AWB_FIELDS for row in rows)
    for k, row in enumerate(rows, 1):
        assert row["task"] == "terminal" and row["turn_idx"] == k
        assert row["total_turns"] == len(steps)
        assert len(row["prompt"]) == k and len(row["response"]) == k
        assert row["response"][-1] == contract.assistant_message(screens[k - 1])["content"]
        assert contract.action_text_of(row["current_prompt"]) == json.dumps(steps[k - 1])
        assert row["system_str"].startswith("You are the world model of a Linux terminal")
    assert "**Task:** Look around the project" in rows[0]["current_prompt"]
    assert len({row["id"] for row in rows}) == len(rows)

    sft = tmp_path / "sft.jsonl"
    assert export_files([out], sft, "sft") == 1
    (example,) = read_rows(sft)
    messages = example["messages"]
    assert [m["role"] for m in messages] == ["system"] + ["user", "assistant"] * len(steps)
    observed = [contract.parse_output(m["content"]).observation for m in messages[2::2]]
    assert observed == screens


# -- isolation -------------------------------------------------------------------------------


async def test_sandbox_cannot_reach_the_host(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret 42\n")
    target = tmp_path / "pwned.txt"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    host_root = set(os.listdir("/root")) if os.access("/root", os.R_OK) else set()

    session = ShellSession(
        Sandbox(files={"/root/mine.txt": "in the box\n"}, user="root", hostname="box")
    )
    try:
        assert await session.start() == "root@box:~#"
        base = session.sandbox.root.parent
        bwrap_pid = session._proc.pid

        async def run(command: str, wait: float = 3) -> str:
            return await session.send([(command + "\n", wait)])

        read = await run(f"cat {secret}; cat {Path(__file__).resolve()}")
        assert "host secret" not in read and read.count("No such file or directory") == 2

        listing = await run("ls -A /root")
        assert listing.splitlines()[1:-1] == ["mine.txt"]  # the box's /root, not the host's
        assert not (host_root - {"mine.txt"}) & set(listing.split())

        write = await run(f"echo pwned > {target}; touch /usr/pwned; echo ok > /etc/motd")
        assert "No such file or directory" in write and "Read-only file system" in write
        assert not target.exists() and not Path("/usr/pwned").exists()
        assert (session.sandbox.root / "etc" / "motd").read_text() == "ok\n"  # its own /etc

        net = await run(f'echo hi > /dev/tcp/127.0.0.1/{port}; echo "net=$?"')
        assert "net=1" in net
        with pytest.raises(TimeoutError):  # nothing reached the host's listener
            listener.accept()

        caps = await run(
            "grep CapEff /proc/self/status; id -u; hostname; ls /proc | grep -c '^[0-9]'"
        )
        assert caps.splitlines()[1].split() == ["CapEff:", "0" * 16]  # no capabilities
        assert caps.splitlines()[2:4] == ["0", "box"]
        assert int(caps.splitlines()[4]) < 10  # only the sandbox's own processes
    finally:
        await session.close()
        listener.close()
    assert sorted(os.listdir(tmp_path)) == ["secret.txt"]  # the host dir is unchanged
    assert not base.exists()  # the throw-away root is gone
    deadline = time.monotonic() + 5
    while _alive(bwrap_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(bwrap_pid)


async def test_a_command_past_its_time_limit_is_killed() -> None:
    session = ShellSession(Sandbox(user="dev", limits=Limits(command_s=1)))
    try:
        await session.start()
        started = time.perf_counter()
        slept = await session.send([("sleep 30; echo after\n", 10)])
        assert time.perf_counter() - started < 6
        assert slept.splitlines()[1:3] == ["Killed", "after"]  # the shell goes on after it
        assert slept.splitlines()[-1] == "dev@sandbox:~$"
        assert session.killed_commands == 1
    finally:
        await session.close()


async def test_a_command_past_its_cpu_limit_is_killed() -> None:
    session = ShellSession(Sandbox(user="dev", limits=Limits(cpu_s=1, command_s=60)))
    try:
        await session.start()
        spun = await session.send([("sh -c 'while :; do :; done'; echo \"cpu=$?\"\n", 30)])
        assert "CPU time limit exceeded" in spun and "cpu=152" in spun  # 128 + SIGXCPU
        raised = await session.send([('ulimit -H -t unlimited; echo "raise=$?"\n', 2)])
        assert "raise=1" in raised  # the hard limit cannot be lifted from inside
    finally:
        await session.close()


async def test_a_line_ending_in_a_semicolon_is_typed_whole() -> None:
    """tmux reads a final ';' of a send-keys argument as its own command separator: find's
    `\\;` and a case arm's `;;` must still reach the shell whole."""
    session = ShellSession(Sandbox(files={"/home/dev/a.txt": "a\n"}, user="dev"))
    try:
        await session.start()
        found = await session.send([("find . -name a.txt -exec echo found {} \\;\n", 3)])
        assert found.splitlines() == [
            "dev@sandbox:~$ find . -name a.txt -exec echo found {} \\;",
            "found ./a.txt",
            "dev@sandbox:~$",
        ]
        case = await session.send([("case x in x) echo yes;; esac\n", 3)])
        assert case.splitlines() == [
            "dev@sandbox:~$ case x in x) echo yes;; esac",
            "yes",
            "dev@sandbox:~$",
        ]
        # a line typed without Enter, ending in ';', then its Enter as a key
        split = await session.send([("echo one;", 0.2), ("Enter", 2)])
        assert split.splitlines()[-2:] == ["one", "dev@sandbox:~$"]
        assert "dev@sandbox:~$ echo one;" in split
    finally:
        await session.close()


def test_scenario_paths_stay_inside_the_root() -> None:
    localtime = Path("/etc/localtime")
    before = localtime.read_bytes() if localtime.exists() else None
    sandbox = Sandbox(
        files={
            "/etc/localtime": "not a zone file",  # a copied host symlink: replaced, not followed
            "../../../../escape.txt": "stays in",
            "/usr/bin/evil": "skipped",
            "/usr/local/bin/tool": "#!/bin/sh\n",
            "rel/file.txt": "relative to the cwd",
        },
        user="dev",
    ).build()
    try:
        root = sandbox.root
        assert (root / "etc/localtime").read_text() == "not a zone file"
        assert (root / "escape.txt").read_text() == "stays in"
        assert (root / "home/dev/rel/file.txt").exists()
        assert os.access(root / "usr/local/bin/tool", os.X_OK)
        assert sandbox.skipped == ["/usr/bin/evil"]
    finally:
        sandbox.destroy()
    if before is not None:
        assert localtime.read_bytes() == before
    with pytest.raises(SandboxError):
        Sandbox(user="bad user")


# -- the executor's interface ------------------------------------------------------------------


def test_backends_by_name() -> None:
    env = simgym.make("terminal", world_model="real-terminal", limits=Limits(cpu_s=5))
    assert isinstance(env.world_model, RealTerminal) and env.world_model.limits.cpu_s == 5
    assert isinstance(simgym.make("swe", world_model="real-swe").world_model, RealSWE)


def test_keystroke_batches() -> None:
    assert keystroke_batches('[{"keystrokes": "ls\\n", "duration": 2}]') == [("ls\n", 2.0)]
    assert keystroke_batches('[{"keystrokes": "C-c"}]') == [("C-c", 1.0)]
    assert keystroke_batches("echo plain") == [("echo plain\n", 1.0)]


async def test_a_retried_turn_is_not_run_twice() -> None:
    executor = RealTerminal()
    env = simgym.make("terminal", world_model=executor, scenario=SCENARIO)
    await env.reset()
    try:
        user = contract.user_message(1, json.dumps(keys("echo x >> log.txt\n")))
        messages = [*env.messages, user]
        first = await executor.predict(messages)
        again = await executor.predict(messages)
        assert again is first
        shown = await executor.predict(
            [
                *messages,
                contract.assistant_message(first.observation),
                contract.user_message(2, json.dumps(keys("wc -l < log.txt\n"))),
            ]
        )
        assert shown.observation.splitlines()[1] == "1"
    finally:
        await env.close()
    assert executor.session is None


async def test_simenv_hands_the_action_to_a_real_world_without_a_prompt() -> None:
    """The real path runs the rendered action directly: no prompt built and parsed back."""
    executor = RealTerminal()
    ran: list[str] = []
    original = executor.run_action

    async def spy(action_text: str) -> str:
        ran.append(action_text)
        return await original(action_text)

    async def no_predict(*args, **kwargs):
        raise AssertionError("SimEnv asked a real world to parse a prompt")

    executor.run_action = spy  # type: ignore[method-assign]
    executor.predict = no_predict  # type: ignore[method-assign]
    env = simgym.make("terminal", world_model=executor, scenario=SCENARIO)
    await env.reset()
    try:
        result = await env.step("echo direct")
        assert "direct" in result.observation.text.splitlines()[1]
        assert len(ran) == 1 and "echo direct" in ran[0]
        assert env.trajectory.turns[-1].attempts == 1
    finally:
        await env.close()


def test_record_runs_action_files(tmp_path: Path) -> None:
    spec = tmp_path / "episode.yaml"
    spec.write_text(
        "domain: terminal\n"
        "task: {id: rec-1, instruction: Count the notes}\n"
        'scenario: {user: ana, hostname: web01, files: {/home/ana/notes.txt: "a\\nb\\n"}}\n'
        "actions:\n  - wc -l notes.txt\n  - echo done\n"
    )
    out = tmp_path / "recorded.jsonl"
    (trajectory,) = record([spec], out)
    assert trajectory.turns[0].observation.text.splitlines() == [
        "ana@web01:~$ wc -l notes.txt",
        "2 notes.txt",
        "ana@web01:~$",
    ]
    assert record([spec], out) == []  # resumed: the task id is already recorded
    assert len(list(simgym.read_trajectories(out))) == 1


# -- swe -----------------------------------------------------------------------------------------

SWE_SCENARIO = {
    "repo": "acme/calc",
    "root": "/workspace/calc",
    "commits": ["abc1234 Add calc"],
    "test_command": "python3 -m unittest -q",
    "files": {
        "calc.py": "def add(a, b):\n    return a - b\n",
        "test_calc.py": "import unittest\n\nfrom calc import add\n\n\n"
        "class AddTests(unittest.TestCase):\n    def test_add(self):\n"
        "        self.assertEqual(add(2, 3), 5)\n",
    },
}


async def test_real_swe_tools(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret 42\n")
    executor = RealSWE()
    env = simgym.make("swe", world_model=executor, scenario=SWE_SCENARIO, validation_retries=0)
    first = await env.reset("Fix add")
    assert first.text.startswith("Repository acme/calc at /workspace/calc")
    calls = [
        {"name": "list_dir", "arguments": {}},
        {"name": "read_file", "arguments": {"path": "calc.py", "start_line": 2}},
        {"name": "run_tests", "arguments": {}},
        {
            "name": "edit_file",
            "arguments": {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"},
        },
        {"name": "edit_file", "arguments": {"path": "calc.py", "old_str": "a * b", "new_str": "0"}},
        {"name": "run_tests", "arguments": {}},
        {"name": "write_file", "arguments": {"path": "docs/notes.md", "content": "fixed\n"}},
        {"name": "read_file", "arguments": {"path": "missing.py"}},
        {"name": "bash", "arguments": {"command": "cat /root/.bashrc /etc/shadow; exit 3"}},
        {"name": "bash", "arguments": {"command": f"ln -s {secret} leak.txt"}},
        {"name": "read_file", "arguments": {"path": "leak.txt"}},  # resolved inside the box
        {"name": "submit", "arguments": {}},
    ]
    results = [await env.step(call) for call in calls]
    out = [r.observation.text for r in results]
    trajectory = env.trajectory
    assert all(not turn.format_problems for turn in trajectory.turns), [
        (t.action_text, t.format_problems) for t in trajectory.turns
    ]
    assert out[0].splitlines() == [".git/", "calc.py", "test_calc.py"]
    assert out[1] == "     2      return a - b"
    assert "AssertionError: -1 != 5" in out[2] and out[2].endswith("[exit code: 1]")
    assert out[3] == "Edited calc.py\n     1  def add(a, b):\n     2      return a + b"
    assert out[4] == "Error: old_str not found in calc.py"
    assert out[5].endswith("OK\n[exit code: 0]")
    assert out[6] == "Created docs/notes.md (1 lines)"
    assert out[7] == "Error: file not found: missing.py"
    assert out[8].endswith("[exit code: 3]") and "No such file or directory" in out[8]
    assert out[10] == "Error: file not found: leak.txt" and "host secret" not in out[10]
    assert "-    return a - b\n+    return a + b" in out[11] and "docs/notes.md" in out[11]
    assert out[11].endswith("[submitted]") and results[-1].done
    assert executor.sandbox is None  # torn down when the episode ended


async def test_the_real_machine_runs_at_the_scenarios_clock() -> None:
    """The scenario's clock reaches the real shell (libfaketime): `date` starts at it and
    the scenario's files carry it, as the simulation shows them."""
    scenario = {"files": {"notes.txt": "hi\n"}, "clock": "2025-03-14T09:26:00"}
    env = simgym.make("terminal", world_model="real-terminal", scenario=scenario)
    await env.reset()
    shown = (
        await env.step("date +%Y-%m-%d; ls -l --time-style=+%F_%H:%M notes.txt")
    ).observation.text
    await env.close(None)
    assert "2025-03-14\n" in shown
    assert "2025-03-14_09:26 notes.txt" in shown


@pytest.mark.skipif(cgroup_problem() is not None, reason=str(cgroup_problem()))
async def test_the_shell_comes_back_after_a_process_storm_is_stopped():
    """Processes fill the limit and hold it, every process of the agent is killed, and the
    respawned shell must work: it used to inherit the old shell's libfaketime shared-memory
    name from tmux and die at start. (A fork bomb may die down on its own before the turn
    ends, and then nothing is stopped: sleeps that stay make the stop certain.)"""
    term = RealTerminal(limits=Limits(processes=32, memory_mb=512, command_s=10))
    env = simgym.make("terminal", world_model=term, validation_retries=0)
    await env.reset("stress")
    storm = "for i in $(seq 64); do sleep 60 & done\n"
    bomb = await env.step([{"keystrokes": storm, "duration": 3}])
    await env.step([{"keystrokes": "C-c", "duration": 0.5}])
    after = await env.step([{"keystrokes": "echo next-$((6 * 7))\n", "duration": 2}])
    await env.close()
    assert "every process in it was stopped" in bomb.observation.text
    assert "next-42" in after.observation.text
