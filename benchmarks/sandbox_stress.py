"""Sandbox stress: an output flood, a process storm and a memory storm against the real swe
and terminal backends, recorded through SimEnv like any episode.

    .venv/bin/python benchmarks/sandbox_stress.py            # about a minute on 2 cores

For each storm it prints the host process's resident memory (now and its peak so far),
the most processes seen in the sandbox's agent leaf (its cgroup polled every 20 ms; the
leaf that carries the limit; 0 where cgroups are unavailable) against the limit set, what
the turn recorded (the failure the agent sees: a truncation note, fork errors, an exit
code, a kill), and whether the next turn worked. It exits non-zero when a check fails:
host RSS over 300 MB, processes over the limit, a storm without a recorded failure, or a
next turn that does not work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from results import save

import simgym
import simgym.domains  # noqa: F401  (registers the built-in domains)
from simgym.real.cgroup import cgroup_problem
from simgym.real.sandbox import Limits, Sandbox
from simgym.real.seccomp_filter import seccomp_problem
from simgym.real.swe import RealSWE
from simgym.real.terminal import RealTerminal

HOST_RSS_LIMIT_MB = 300
PROCESSES = 64
MEMORY_MB = 512
SWE = {
    "repo": "acme/stress",
    "root": "/workspace/stress",
    "commits": ["abc1234 Start"],
    "test_command": "true",
    "files": {"README": "stress\n"},
}
# Three processes of 300 MB: each under the per-process RLIMIT_AS, together over MEMORY_MB.
MEMORY_STORM = (
    "for i in 1 2 3; do python3 -c 'import time; b = bytearray(300 << 20); "
    "b[::4096] = bytes(len(b[::4096])); time.sleep(3)' & done; wait"
)
FORK_BOMB = "bomb() { bomb | bomb & }; bomb"


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident memory of this process in MB."""
    current = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            current = int(line.split()[1]) / 1024
    return current, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def host_processes() -> int:
    return sum(1 for entry in os.listdir("/proc") if entry.isdigit())


def inside_count(sandbox: Sandbox | None) -> int:
    if sandbox is None:
        return 0
    if sandbox.cgroup is not None:
        return len(sandbox.cgroup.pids("agent"))  # the leaf that carries the limit
    return 0


def refusals(sandbox: Sandbox | None) -> int:
    """Forks the kernel refused so far for the sandbox's process limit (pids.events)."""
    if sandbox is None or sandbox.cgroup is None:
        return 0
    return sandbox.cgroup.process_limit_hits()


async def watched(
    sandbox_of: Callable[[], Sandbox | None], run: Awaitable[simgym.StepResult]
) -> tuple[simgym.StepResult, str]:
    """Run one step while counting the sandbox's processes; (result, "most seen (forks
    refused)"). A storm can end between two polls: the refusals show it hit the limit."""
    most = 0
    before = refusals(sandbox_of())
    task = asyncio.ensure_future(run)
    while not task.done():
        most = max(most, inside_count(sandbox_of()))
        await asyncio.sleep(0.02)
    return task.result(), f"{most} ({refusals(sandbox_of()) - before} refused)"


def bash(command: str, timeout: float = 10) -> dict:
    return {"name": "bash", "arguments": {"command": command, "timeout": timeout}}


def keys(text: str, duration: float = 1) -> list[dict]:
    return [{"keystrokes": text, "duration": duration}]


def failure_of(text: str) -> str | None:
    """The failure a storm's observation shows, in a few words (None if it shows none)."""
    marks = [
        ("[output truncated", "output truncated"),
        ("[simgym: the sandbox reached its limit", "process limit: all stopped"),
        ("fork: Resource temporarily unavailable", "fork refused"),
        ("fork: retry", "fork refused"),
        ("Killed", "killed"),
        ("MemoryError", "MemoryError"),
        ("[exit code: 124]", "timed out (exit 124)"),
        ("[exit code: 137]", "killed (exit 137)"),
    ]
    found = [label for mark, label in marks if mark in text]
    return ", ".join(dict.fromkeys(found)) or None


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="trajectory file (default: a temp file)")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="simgym-stress-")) / "stress.jsonl"
    limits = Limits(processes=PROCESSES, memory_mb=MEMORY_MB, command_s=10, output_chars=20_000)
    print(f"limits: processes={PROCESSES} memory_mb={MEMORY_MB} command_s=10")
    print(f"cgroups: {cgroup_problem() or 'yes'}; seccomp: {seccomp_problem() or 'yes'}")
    now, peak = rss_mb()
    print(f"host processes before: {host_processes()}; host RSS now/peak: {now:.0f}/{peak:.0f} MB")
    rows: list[tuple[str, str, float, float, str, str | None, bool]] = []
    ok = True
    with simgym.TrajectoryWriter(out) as writer:
        swe = RealSWE(limits=limits)
        env = simgym.make("swe", world_model=swe, scenario=SWE, writer=writer, validation_retries=0)
        await env.reset("stress")
        storms = [
            ("output flood", bash("yes | head -c 500M")),
            ("process storm", bash(FORK_BOMB, timeout=8)),
            ("memory storm", bash(MEMORY_STORM)),
        ]
        for name, action in storms:
            started = time.perf_counter()
            result, most = await watched(lambda: swe.sandbox, env.step(action))
            took = time.perf_counter() - started
            after = await env.step(bash("echo next turn works"))
            works = after.observation.text.startswith("next turn works")
            rows.append(
                ("swe", name, took, rss_mb()[1], most, failure_of(result.observation.text), works)
            )
        await env.close()

        term = RealTerminal(limits=limits)
        env = simgym.make("terminal", world_model=term, writer=writer, validation_retries=0)
        await env.reset("stress")
        storms_t = [
            ("output flood", keys("yes\n", 15)),  # until command_s kills it
            ("process storm", keys(FORK_BOMB + "\n", 8)),
            ("memory storm", keys(MEMORY_STORM + "\n", 15)),
        ]
        for name, action in storms_t:
            started = time.perf_counter()
            result, most = await watched(
                lambda: term.session.sandbox if term.session else None, env.step(action)
            )
            took = time.perf_counter() - started
            await env.step(keys("C-c", 0.5))  # stop whatever is left in the foreground
            after = await env.step(keys("echo next-$((6 * 7))\n"))
            works = "next-42" in after.observation.text
            text = result.observation.text
            failure = failure_of(text)
            rows.append(("terminal", name, took, rss_mb()[1], most, failure, works))
        await env.close()

    print()
    print(
        f"{'backend':9} {'storm':14} {'seconds':>7} {'host peak RSS':>13} "
        f"{'procs inside: max (forks refused) / limit':>42}  recorded failure / next turn"
    )
    for backend, name, took, peak, most, failure, works in rows:
        print(
            f"{backend:9} {name:14} {took:7.1f} {peak:10.0f} MB {most:>32} / {PROCESSES:<7}"
            f"  {failure or 'NONE'} / {'works' if works else 'BROKEN'}"
        )
        ok &= peak < HOST_RSS_LIMIT_MB and int(most.split()[0]) <= PROCESSES and works
        ok &= failure is not None
    print()
    now, peak = rss_mb()
    print(f"host processes after: {host_processes()}; host RSS now/peak: {now:.0f}/{peak:.0f} MB")
    recorded = [json.loads(line) for line in out.read_text().splitlines()]
    print(
        f"trajectories recorded: {len(recorded)} in {out} "
        f"({sum(len(t['turns']) for t in recorded)} turns)"
    )
    print("PASS" if ok else "FAIL")
    save(
        "sandbox_stress",
        rows=[
            {
                "backend": backend,
                "storm": name,
                "seconds": round(took, 2),
                "host_peak_rss_mb": round(peak),
                "processes_inside": most,
                "process_limit": PROCESSES,
                "recorded_failure": failure,
                "next_turn_works": works,
            }
            for backend, name, took, peak, most, failure, works in rows
        ],
        summary={"pass": bool(ok), "trajectories": len(recorded)},
        notes="An output flood, a process storm and a memory storm against the real swe and "
        "terminal sandboxes; pass = host memory bounded, process limit held, the failure "
        "recorded and the next turn works.",
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
