"""Sandbox write storm: host disk and memory use while a command writes far more than the
sandbox's ``disk_mb``, recorded through SimEnv like any terminal episode.

    .venv/bin/python benchmarks/sandbox_disk.py                  # 6 x 500 MB into 256 MB
    .venv/bin/python benchmarks/sandbox_disk.py --disk-mb 128 --files 4 --file-mb 300

One turn of a real terminal episode (:class:`~simgym.real.terminal.RealTerminal`) runs
``--files`` ``dd`` writers at once, each writing ``--file-mb`` MB into the sandbox's /tmp
and home (``file_mb`` lets each file be that big: only the total is in question). While
it runs, a thread samples every 20 ms:

* the host temporary directory's file system (``statvfs``: what the issue measured, 6 x
  500 MB landing on the host's disk in 2.9 s before the limit existed);
* the host's shared memory (``Shmem`` in /proc/meminfo), where a tmpfs's pages live;
* the sandbox's own tmpfs (its used bytes against ``disk_mb``).

It prints the peak growth of each against the limit, what the turn recorded (its
observation metadata's ``sandbox_disk``, the "No space left on device" lines) and whether
the next turn works, and exits non-zero when host disk or memory grew by more than the
limit plus 32 MB of slack, the refusal was not recorded, or the next turn failed. Where
simgym cannot mount a tmpfs (not root), it says so and exits 2: there is no total limit to
measure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time

from results import save

import simgym
import simgym.domains  # noqa: F401  (registers the built-in domains)
from simgym.real.sandbox import Limits, disk_problem
from simgym.real.terminal import RealTerminal

SLACK_MB = 32


def _shmem_kb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1])
    return 0


def _disk_used(path: str) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


class Sampler(threading.Thread):
    """Peak growth of host disk (temp dir's file system), host shared memory, and the
    sandbox's own tmpfs, every 20 ms."""

    def __init__(self, backend: RealTerminal) -> None:
        super().__init__(daemon=True)
        self.backend = backend
        self.stop = threading.Event()
        self.tmp = tempfile.gettempdir()
        self.disk0, self.shmem0 = _disk_used(self.tmp), _shmem_kb()
        self.disk_peak = self.shmem_peak = self.sandbox_peak = 0
        self.samples = 0

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples += 1
            self.disk_peak = max(self.disk_peak, _disk_used(self.tmp) - self.disk0)
            self.shmem_peak = max(self.shmem_peak, (_shmem_kb() - self.shmem0) * 1024)
            session = self.backend.session
            usage = session.sandbox.disk_usage() if session is not None else None
            if usage is not None:
                self.sandbox_peak = max(self.sandbox_peak, usage[0])
            time.sleep(0.02)


async def storm(args: argparse.Namespace) -> int:
    limits = Limits(disk_mb=args.disk_mb, file_mb=args.file_mb + 16, command_s=120)
    backend = RealTerminal(limits=limits)
    env = simgym.make("terminal", world_model=backend, scenario={"user": "dev"}, max_turns=4)
    writers = " ".join(
        f"(dd if=/dev/zero of={where}/fill{i} bs=1M count={args.file_mb} 2>&1 | head -1) &"
        for i in range(args.files)
        for where in (("/tmp", "~")[i % 2],)
    )
    command = f"{writers} wait; df -m /tmp | tail -1"
    sampler = Sampler(backend)
    await env.reset("fill the disk")
    sampler.start()
    start = time.perf_counter()
    result = await env.step([{"keystrokes": command + "\n", "duration": 60}])
    seconds = time.perf_counter() - start
    sampler.stop.set()
    sampler.join()
    recorded = result.observation.metadata.get("sandbox_disk")
    after = await env.step([{"keystrokes": "rm -f /tmp/fill* ~/fill*; echo ok\n"}])
    await env.close()
    limit = args.disk_mb << 20
    mb = 1 << 20
    print(
        f"write storm: {args.files} writers x {args.file_mb} MB into disk_mb={args.disk_mb} "
        f"({seconds:.1f} s, {sampler.samples} samples)"
    )
    print(f"  host temp file system ({sampler.tmp}) peak growth: {sampler.disk_peak / mb:8.1f} MB")
    print(f"  host shared memory (tmpfs pages) peak growth:   {sampler.shmem_peak / mb:8.1f} MB")
    print(
        f"  sandbox tmpfs peak use:                          {sampler.sandbox_peak / mb:8.1f} MB"
        f" of {args.disk_mb} MB"
    )
    refusals = result.observation.text.count("No space left on device")
    print(
        f"  turn recorded: sandbox_disk={json.dumps(recorded)}; "
        f"'No space left on device' lines on screen: {refusals}"
    )
    print(f"  next turn: {'works' if 'ok' in after.observation.text else 'FAILED'}")
    problems = []
    for name, peak in (("host disk", sampler.disk_peak), ("host memory", sampler.shmem_peak)):
        if peak > limit + SLACK_MB * mb:
            problems.append(f"{name} grew {peak / mb:.0f} MB > {args.disk_mb} + {SLACK_MB} MB")
    if not recorded:
        problems.append("the refusal was not recorded on the turn")
    if "ok" not in after.observation.text:
        problems.append("the next turn did not work")
    for problem in problems:
        print(f"FAIL: {problem}")
    save(
        "sandbox_disk",
        summary={
            "disk_mb": args.disk_mb,
            "writers": args.files,
            "file_mb": args.file_mb,
            "seconds": round(seconds, 2),
            "host_disk_peak_mb": round(sampler.disk_peak / mb, 1),
            "host_shmem_peak_mb": round(sampler.shmem_peak / mb, 1),
            "sandbox_peak_mb": round(sampler.sandbox_peak / mb, 1),
            "refusals_on_screen": refusals,
            "recorded": bool(recorded),
            "next_turn_works": "ok" in after.observation.text,
            "problems": problems,
        },
        notes="A write storm far over the sandbox's disk_mb: host disk and memory must stay "
        "within the limit (plus slack), the refusal recorded on the turn, the next turn work.",
    )
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--disk-mb", type=int, default=256, help="the sandbox's limit")
    parser.add_argument("--files", type=int, default=6, help="writers at once")
    parser.add_argument("--file-mb", type=int, default=500, help="MB each writer writes")
    args = parser.parse_args(argv)
    problem = disk_problem()
    if problem is not None:
        print(f"no total disk limit on this host: {problem}")
        return 2
    return asyncio.run(storm(args))


if __name__ == "__main__":
    sys.exit(main())
