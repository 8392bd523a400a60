"""Sandboxes under a careless or hostile agent (issue 17): output that floods, processes and
memory that add up, a control channel the agent must not reach, scenarios that cannot be
built, cancellation, leftovers of a killed run, and the seccomp filter. Real sandboxes
(bwrap + tmux); skipped where the kernel refuses their namespaces."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

import simgym
import simgym.domains.swe  # noqa: F401  (registers the swe domain)
from simgym.real.cgroup import cgroup_problem
from simgym.real.sandbox import Limits, Sandbox, bwrap_problem
from simgym.real.seccomp_filter import seccomp_problem
from simgym.real.shell import ShellSession
from simgym.real.swe import RealSWE
from simgym.real.terminal import RealTerminal
from simgym.rollout.record import record

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=str(bwrap_problem()))
needs_cgroup = pytest.mark.skipif(cgroup_problem() is not None, reason=str(cgroup_problem()))

SWE = {
    "repo": "acme/calc",
    "root": "/workspace/calc",
    "commits": ["abc1234 Add calc"],
    "test_command": "python3 -m unittest -q",
    "files": {"calc.py": "def add(a, b):\n    return a + b\n"},
}


# Forks children that sleep until it has made N or the kernel refuses; prints how many it
# made and how many processes the sandbox shows.
FORK_STORM = (
    "import os, sys, time\n"
    "made = 0\n"
    "for _ in range(int(sys.argv[1])):\n"
    "    try:\n"
    "        pid = os.fork()\n"
    "    except OSError:\n"
    "        break\n"
    "    if pid == 0:\n"
    "        time.sleep(30)\n"
    "        os._exit(0)\n"
    "    made += 1\n"
    'print(made, len([p for p in os.listdir("/proc") if p.isdigit()]))\n'
)


def bash(command: str, timeout: float = 60) -> str:
    return json.dumps({"name": "bash", "arguments": {"command": command, "timeout": timeout}})


def keys(text: str, duration: float = 1) -> str:
    return json.dumps([{"keystrokes": text, "duration": duration}])


async def swe(limits: Limits) -> RealSWE:
    executor = RealSWE(limits=limits)
    await executor.start_episode(SWE, simgym.Task(id="t", domain="swe", instruction="x"))
    return executor


def our_sandbox_dirs() -> set[str]:
    prefix = f"simgym-sandbox-{os.getpid()}-"
    return {p.name for p in Path(tempfile.gettempdir()).glob(prefix + "*")}


def bwrap_children() -> list[int]:
    """bwrap processes whose parent is this test process (sandboxes still running)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
            if b"bwrap" in cmd and ppid == os.getpid():
                found.append(int(entry))
    return found


def control_loop_pid(bwrap_pid: int) -> int:
    """The host pid of the sandbox's control loop (a descendant of the outer bwrap)."""
    family, found = {bwrap_pid}, True
    while found:
        found = False
        for entry in os.listdir("/proc"):
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
            if ppid in family and int(entry) not in family:
                family.add(int(entry))
                found = True
                if b"control.sh" in Path(f"/proc/{entry}/cmdline").read_bytes():
                    return int(entry)
    raise AssertionError("no control loop found")


# -- 1. output capped while it streams --------------------------------------------------------


async def test_swe_output_is_capped_while_it_streams() -> None:
    executor = await swe(Limits(output_chars=2000, output_drain_mb=16))
    try:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
        started = time.perf_counter()
        shown = await executor.run_action(bash("yes | head -c 500M"))
        elapsed = time.perf_counter() - started
        growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        # The old code read all 500 MB before cutting it (the host grew by over 1 GB).
        assert growth_mb < 40, f"host peak RSS grew by {growth_mb:.0f} MB"
        assert "[output truncated: the command printed more than 16 MB and was stopped]" in shown
        assert len(shown) < 2500 and shown.startswith("y\ny\n")
        assert elapsed < 20  # stopped at the drain limit, not run to its end
        small = await executor.run_action(bash("seq 1 3000"))  # over output_chars, under the drain
        assert small.startswith("1\n2\n") and "more bytes not shown]" in small
        assert (await executor.run_action(bash("echo ok"))).startswith("ok")  # next turn works
    finally:
        await executor.aclose()


# -- 2. totals over all processes (cgroups) ---------------------------------------------------


@needs_cgroup
async def test_process_count_is_capped_across_the_sandbox() -> None:
    executor = await swe(Limits(processes=40))
    try:
        shown = await executor.run_action(bash(f"python3 -c '{FORK_STORM}' 200"))
        forked, alive = (int(n) for n in shown.split()[:2])
        # The old code let all 200 children run (no process limit applies to root).
        assert forked < 40 and alive <= 40, shown
        assert (await executor.run_action(bash("echo ok"))).startswith("ok")
    finally:
        await executor.aclose()


@needs_cgroup
async def test_memory_is_capped_across_processes() -> None:
    executor = await swe(Limits(memory_mb=400))
    try:
        # Three processes of 200 MB: each is under RLIMIT_AS, together over the total.
        grab = "python3 -c 'import time; b = bytearray(200 << 20); b[::4096] = b\"x\" * len(b[::4096]); time.sleep(2)'"
        shown = await executor.run_action(
            bash(
                f"for i in 1 2 3; do {grab} & done; fails=0; "
                "for j in 1 2 3; do wait -n || fails=$((fails + 1)); done; echo fails=$fails"
            )
        )
        assert "fails=0" not in shown, shown  # the old code let all three live
        assert (await executor.run_action(bash("echo ok"))).startswith("ok")
    finally:
        await executor.aclose()


@needs_cgroup
async def test_terminal_background_jobs_end_with_the_episode_and_cgroup_is_removed() -> None:
    session = ShellSession(Sandbox(files={}, limits=Limits(processes=64)))
    await session.start()
    group = session.sandbox.cgroup
    assert group is not None
    await session.send([("(sleep 1000 &) ; nohup sleep 1000 >/dev/null 2>&1 &\n", 1)])
    inside = group.pids()
    assert len(inside) >= 5  # control loop, tmux, shell and two sleeps
    await session.close()
    assert not any(os.path.exists(f"/proc/{pid}") for pid in inside)
    assert not any(d.exists() for d in group.dirs)  # the group itself is gone


@needs_cgroup
async def test_terminal_process_storm_ends_its_turn_and_the_next_turn_works() -> None:
    session = ShellSession(
        Sandbox(files={"/tmp/storm.py": FORK_STORM}, limits=Limits(processes=40))
    )
    await session.start()
    try:
        shown = await session.send([("python3 /tmp/storm.py 300\n", 5)])
        # The old code let all 300 children live and said nothing.
        assert shown.endswith(
            "[simgym: the sandbox reached its limit of 40 processes; every process in it was stopped]"
        ), shown
        assert session.sandbox.cgroup is not None
        assert session.sandbox.cgroup.pids("agent") == set()
        after = await session.send([("echo next-$((6 * 7))\n", 1)])
        assert "next-42" in after  # a fresh shell took the turn
    finally:
        await session.close()


def _can_unshare_mounts() -> bool:
    try:
        probe = ["unshare", "--mount", "--propagation", "private", "true"]
        return subprocess.run(probe, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(
    os.geteuid() != 0 or not _can_unshare_mounts(),
    reason="needs root and a private mount namespace to hide the cgroup tree",
)
def test_without_writable_cgroups_a_clear_message_and_rlimit_fallback() -> None:
    """The cgroup tree hidden under an empty tmpfs (a private mount namespace): the host
    says why it falls back, and every sandbox gets a process rlimit instead."""
    probe = (
        "import asyncio, logging\n"
        "logging.basicConfig(format='%(message)s')\n"
        "from simgym.real.sandbox import Limits, Sandbox, isolation\n"
        "print(isolation()['totals'])\n"
        "sandbox = Sandbox(files={}, limits=Limits(processes=77)).build()\n"
        "print(sandbox.cgroup, asyncio.run(sandbox.exec('ulimit -u')).output.strip())\n"
        "sandbox.destroy()\n"
    )
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            'mount -t tmpfs none /sys/fs/cgroup && exec "$0" -c "$1"',
            sys.executable,
            probe,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    totals, limits = done.stdout.splitlines()
    assert totals.startswith("rlimits only") and "cgroup limits unavailable" in totals
    assert limits == "None 77"  # no cgroup; RLIMIT_NPROC set from Limits.processes
    assert "sandbox totals: rlimits only" in done.stderr  # said once, as a warning


async def test_swe_episode_time_bounds_every_command() -> None:
    executor = await swe(Limits(episode_s=3))
    try:
        assert (await executor.run_action(bash("echo ok"))).startswith("ok")
        started = time.perf_counter()
        shown = await executor.run_action(bash("sleep 60", timeout=60))
        assert time.perf_counter() - started < 10  # cut at the episode's end, not at 60 s
        assert "[exit code: 124]" in shown
        with pytest.raises(simgym.WorldModelError, match="episode's time is over"):
            await executor.run_action(bash("echo again"))
    finally:
        await executor.aclose()


# -- 3. the control channel -------------------------------------------------------------------


async def test_control_nonce_is_not_readable_inside() -> None:
    session = ShellSession(Sandbox(files={}))
    await session.start()
    try:
        out = "/tmp/proc-dump"
        await session.send(
            [(f"cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ > {out} 2>/dev/null; echo done\n", 2)]
        )
        dumped = (session.sandbox.root / out.lstrip("/")).read_bytes()
        assert b"/run/simgym/control.sh" in dumped  # the control loop's command line was read
        assert session._nonce.encode() not in dumped  # ...without the nonce (old: argv)
        # The control loop's pipes to the host cannot be opened from inside.
        shown = await session.send([("echo x > /proc/1/fd/1; echo rc=$?\n", 1)])
        assert "Permission denied" in shown and "rc=1" in shown
    finally:
        await session.close()


async def test_screen_text_cannot_end_a_control_answer() -> None:
    """Even a nonce that leaked could not forge the end of an answer on the screen: the
    answers are length-framed. (The old loop ended an answer at the first line holding
    "NONCE RC", and every later screen was one answer stale.)"""
    session = ShellSession(Sandbox(files={}))
    await session.start()
    try:
        nonce = session._nonce
        await session.send([(f"printf '\\n{nonce} 0\\n{nonce} 1 0 0\\n'\n", 1)])
        for word in ("alpha", "beta"):
            shown = await session.send([(f"echo {word}\n", 1)])
            assert shown.splitlines()[-2:] == [word, "user@sandbox:~$"]
    finally:
        await session.close()


async def test_lost_sync_is_recorded_as_an_error(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    executor = RealTerminal()
    with simgym.TrajectoryWriter(out) as writer:
        env = simgym.make("terminal", world_model=executor, writer=writer, validation_retries=0)
        await env.reset("look")
        assert "hello" in (await env.step(keys("echo hello\n"))).observation.text
        # Bytes the control loop never sent (written by the host, which alone can).
        assert executor.session is not None and executor.session._proc is not None
        target = control_loop_pid(executor.session._proc.pid)
        with open(f"/proc/{target}/fd/1", "w") as pipe:
            pipe.write("junk that is not an answer\n")
        result = await env.step(keys("echo world\n"))
        assert "lost sync" in (result.observation.text + str(result.info))
        await env.close()
    (trajectory,) = simgym.read_trajectories(out)
    assert any(turn.error and "lost sync" in turn.error for turn in trajectory.turns)
    assert not any("world" in t.observation.text.split("\n")[-1] for t in trajectory.turns[1:])


# -- 4. scenarios that cannot be built, cancellation, leftovers -------------------------------


def test_record_survives_scenarios_that_cannot_be_built(tmp_path: Path) -> None:
    bad = {
        "file-over-dir": {"/etc": "a"},
        "nul-in-name": {"/home/user/a\x00b": "x"},
        "long-name": {"/home/user/" + "n" * 300: "x"},
        "through-symlink": {"/etc/localtime/x": "x"},
    }
    files = []
    for name, scenario_files in bad.items():
        path = tmp_path / f"{name}.json"
        path.write_text(
            json.dumps(
                {
                    "domain": "terminal",
                    "task": {"id": name, "instruction": "x"},
                    "scenario": {"files": scenario_files},
                    "actions": ["echo hi"],
                }
            )
        )
        files.append(path)
    good = tmp_path / "good.json"
    good.write_text(
        json.dumps(
            {
                "domain": "terminal",
                "task": {"id": "good", "instruction": "x"},
                "scenario": {"files": {"/home/user/a.txt": "fine\n"}},
                "actions": ["cat a.txt"],
            }
        )
    )
    out = tmp_path / "out.jsonl"
    before = our_sandbox_dirs()
    record([*files, good], out, concurrency=3)
    written = {t.task.id: t for t in simgym.read_trajectories(out)}
    assert set(written) == {*bad, "good"}  # every episode written, none took the run down
    for name in bad:
        error = written[name].error or ""
        assert error.startswith("the episode's world could not be built"), (name, error)
        assert "Traceback" not in error
    assert "fine" in written["good"].turns[0].observation.text
    assert written["good"].error is None
    assert our_sandbox_dirs() == before and bwrap_children() == []


async def test_cancelled_start_always_reaps() -> None:
    before = our_sandbox_dirs()
    cancelled = 0
    for delay in (0.0, 0.01, 0.03, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.6):
        session = ShellSession(Sandbox(files={}))
        task = asyncio.ensure_future(session.start())
        await asyncio.sleep(delay)
        if task.done():  # started before the cancel came
            await session.close()
            continue
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not session.running
        cancelled += 1
    assert cancelled >= 5  # cancellations landed in several phases of the start
    # a repository's start, cancelled part-way (on tmpfs it may finish within 50 ms: the
    # earlier delays make sure one cancellation lands before it does)
    landed = 0
    for delay in (0.0, 0.01, 0.05):
        executor = RealSWE()
        task = asyncio.ensure_future(
            executor.start_episode(SWE, simgym.Task(id="t", domain="swe", instruction="x"))
        )
        await asyncio.sleep(delay)
        if not task.done():
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            landed += 1
        await executor.aclose()
    assert landed >= 1
    await asyncio.sleep(0.2)
    assert bwrap_children() == []  # no sandbox left running under init
    assert our_sandbox_dirs() == before


def test_ctrl_c_during_record_kills_and_deletes_every_sandbox(tmp_path: Path) -> None:
    files = []
    for n in range(3):
        path = tmp_path / f"slow{n}.json"
        path.write_text(
            json.dumps(
                {
                    "domain": "terminal",
                    "task": {"id": f"slow{n}", "instruction": "x"},
                    "scenario": {"files": {}},
                    "actions": [[{"keystrokes": "sleep 60\n", "duration": 60}]],
                }
            )
        )
        files.append(str(path))
    child = subprocess.Popen(
        [sys.executable, "-m", "simgym", "record", *files, "--out", str(tmp_path / "o.jsonl")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    prefix = f"simgym-sandbox-{child.pid}-"
    deadline = time.monotonic() + 60
    while not list(Path(tempfile.gettempdir()).glob(prefix + "*")):
        assert time.monotonic() < deadline and child.poll() is None
        time.sleep(0.1)
    time.sleep(1.5)  # shells started, commands running
    child.send_signal(signal.SIGINT)
    # The old code hung here for good; closing three sandboxes takes ~2 s on an idle
    # machine, and much longer on a loaded one (CI runs beside other jobs).
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130 and "interrupted" in err
    time.sleep(0.5)
    assert not list(Path(tempfile.gettempdir()).glob(prefix + "*"))
    running = subprocess.run(["pgrep", "-f", prefix], capture_output=True, text=True).stdout
    assert running.split() == [], running


def test_leftovers_of_a_killed_run_are_reclaimed_at_next_start(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import asyncio, os, sys, time
        from simgym.real.sandbox import Sandbox
        from simgym.real.shell import ShellSession
        async def main():
            session = ShellSession(Sandbox(files={"/home/user/a": "x"}))
            await session.start()
            await session.send([("sleep 1000 &\\n", 1)])
            group = session.sandbox.cgroup
            print(session.sandbox.root.parent, group.dirs[0] if group else "", flush=True)
            time.sleep(1000)
        asyncio.run(main())
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    base, _, group = child.stdout.readline().strip().partition(" ")
    assert Path(base).is_dir()
    child.send_signal(signal.SIGKILL)  # no chance to clean up
    child.wait()
    # The next run's first sandbox reclaims what the killed one left.
    subprocess.run(
        [
            sys.executable,
            "-c",
            "from simgym.real.sandbox import Sandbox; Sandbox(files={}).build().destroy()",
        ],
        check=True,
        timeout=60,
    )
    assert not Path(base).exists()
    if group:
        assert not Path(group).exists()


# -- 5. seccomp -------------------------------------------------------------------------------


@pytest.mark.skipif(seccomp_problem() is not None, reason=str(seccomp_problem()))
async def test_seccomp_denies_kernel_interfaces() -> None:
    probe = textwrap.dedent("""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        calls = {"ptrace": (101, 0, 0, 0, 0), "keyctl": (250, 0, -3, 0, 0),
                 "io_uring_setup": (425, 1, 0), "unshare": (272, 0x20000)}
        for name, args in calls.items():
            rc = libc.syscall(*args)
            print(name, rc, os.strerror(ctypes.get_errno()) if rc < 0 else "ok")
        print(open("/proc/self/status").read().split("Seccomp:")[1].split()[0])
    """)
    sandbox = Sandbox(files={"/tmp/probe.py": probe}).build()
    try:
        result = await sandbox.exec("python3 /tmp/probe.py")
    finally:
        sandbox.destroy()
    lines = result.output.splitlines()
    for name in ("ptrace", "keyctl", "io_uring_setup", "unshare"):
        assert f"{name} -1 Operation not permitted" in lines, result.output
    assert lines[-1] == "2"  # filter mode
    plain = await Sandbox(files={}).build().exec("echo fine; ls / | head -1; sleep 0.1 & wait")
    assert plain.output.startswith("fine\n") and plain.exit_code == 0  # ordinary work is fine
