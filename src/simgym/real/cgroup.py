"""Kernel control groups for sandboxes: a limit on the *sum* of what a sandbox's processes use.

rlimits are per process (three 1.5 GB processes each stay under ``RLIMIT_AS``) and
``RLIMIT_NPROC`` does not apply to root, so the totals come from cgroups: one group per
sandbox, with ``pids.max`` (no fork bomb reaches the host's pid table), ``memory.max`` and
``memory.swap.max`` (the sum of every process's memory, no swapping out of it) and
``cpu.max`` (a share of the machine's cores).

Two layouts exist in the wild. On a unified (v2) hierarchy, the group is made under this
process's own group (a child ``simgym`` holds every sandbox; v2 forbids processes in a
group whose controllers are handed down, so when this process sits in the group that must
hand them down it moves itself into a leaf ``simgym-host`` first). Hosts still on the
hybrid layout (v2 mounted with no controllers, the controllers on v1 hierarchies) get the
same limits through the v1 files. Where neither is writable, :func:`cgroup_problem` says
why and the sandbox falls back to rlimits.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_V1_CONTROLLERS = ("pids", "memory", "cpu")  # the v1 hierarchies whose files we set
_CPU_PERIOD_US = 100_000


@dataclass(frozen=True)
class CgroupLimits:
    """Totals for one sandbox's processes."""

    processes: int
    memory_mb: int
    cpus: float


@dataclass(frozen=True)
class _Layout:
    version: int  # 2, or 1 for the split hierarchy
    parents: dict[str, Path]  # controller ("unified" for v2) -> directory holding sandboxes


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, filesystem type, super options) of every cgroup mount."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and tail and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[4], tail[0], tail[-1] if len(tail) >= 3 else ""))
    return found


def _own_paths() -> dict[str, str]:
    """Controller name ("" for v2) -> this process's group path, from /proc/self/cgroup."""
    own: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            for name in names.split(",") if names else [""]:
                own[name] = path
    return own


def _v2_layout() -> tuple[_Layout | None, str]:
    mount = next((m for m, kind, _ in _mounts() if kind == "cgroup2"), None)
    if mount is None:
        return None, "no cgroup2 hierarchy is mounted"
    own = Path(mount) / _own_paths().get("", "/").lstrip("/")
    available = set((own / "cgroup.controllers").read_text().split()) if own.exists() else set()
    missing = {"pids", "memory", "cpu"} - available
    if missing:
        return None, f"the cgroup2 hierarchy at {mount} lacks controllers {sorted(missing)}"
    wanted = "+pids +memory +cpu"
    try:
        _write(own / "cgroup.subtree_control", wanted)
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            return None, f"cannot hand controllers down in {own}: {exc.strerror}"
        # "No internal processes": this process must leave the group it hands down from.
        leaf = own / "simgym-host"
        try:
            leaf.mkdir(exist_ok=True)
            _write(leaf / "cgroup.procs", str(os.getpid()))
            _write(own / "cgroup.subtree_control", wanted)
        except OSError as exc2:
            return None, f"cannot hand controllers down in {own}: {exc2.strerror}"
    parent = own / "simgym"
    try:
        parent.mkdir(exist_ok=True)
        _write(parent / "cgroup.subtree_control", wanted)
    except OSError as exc:
        return None, f"cannot create {parent}: {exc.strerror}"
    return _Layout(2, {"unified": parent}), ""


def _v1_layout() -> tuple[_Layout | None, str]:
    mounts = {
        name: point
        for point, kind, options in _mounts()
        if kind == "cgroup"
        for name in options.split(",")
        if name in _V1_CONTROLLERS
    }
    missing = set(_V1_CONTROLLERS) - set(mounts)
    if missing:
        return None, f"no cgroup v1 hierarchy for {sorted(missing)}"
    own = _own_paths()
    parents: dict[str, Path] = {}
    for name in _V1_CONTROLLERS:
        parent = Path(mounts[name]) / own.get(name, "/").lstrip("/") / "simgym"
        try:
            parent.mkdir(exist_ok=True)
        except OSError as exc:
            return None, f"cannot create {parent}: {exc.strerror}"
        parents[name] = parent
    return _Layout(1, parents), ""


@lru_cache(maxsize=1)
def _layout() -> tuple[_Layout | None, str]:
    v2, why2 = _v2_layout()
    if v2 is not None:
        return v2, ""
    v1, why1 = _v1_layout()
    if v1 is not None:
        return v1, ""
    return None, f"{why2}; {why1}"


def cgroup_problem() -> str | None:
    """Why sandboxes get no cgroup here (None when they do)."""
    layout, why = _layout()
    return None if layout is not None else f"cgroup limits unavailable ({why})"


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


class SandboxCgroup:
    """One sandbox's group (one directory per controller on v1), with two leaves: ``agent``
    holds every process the agent can start and carries the limits; ``control`` holds the
    tmux server and the host's control loop, so a fork bomb or a memory hog inside cannot
    starve the channel the host uses to see and stop it. The group itself caps both
    together a little above the agent's limits. Create with :meth:`create`; processes join
    through :meth:`procs_files` (the sandbox's launcher writes its own pid there before it
    execs bwrap, so nothing runs outside the group even for a moment)."""

    LEAVES = ("agent", "control")
    _HEADROOM_PROCESSES = 32
    _HEADROOM_MB = 128

    def __init__(self, layout: _Layout, name: str) -> None:
        self.version = layout.version
        self.dirs = [parent / name for parent in layout.parents.values()]

    @classmethod
    def create(cls, name: str, limits: CgroupLimits) -> SandboxCgroup | None:
        """A new group with ``limits``; None where cgroups are not available."""
        layout, _ = _layout()
        if layout is None:
            return None
        group = cls(layout, name)
        try:
            for directory in group.dirs:
                directory.mkdir()
            if group.version == 2:
                _write(group.dirs[0] / "cgroup.subtree_control", "+pids +memory +cpu")
            for directory in group.dirs:
                for leaf in cls.LEAVES:
                    (directory / leaf).mkdir()
            group._set(limits)
        except OSError:
            group.remove()
            return None
        return group

    def _set(self, limits: CgroupLimits) -> None:
        memory = limits.memory_mb * 1024 * 1024
        total = CgroupLimits(
            limits.processes + self._HEADROOM_PROCESSES,
            limits.memory_mb + self._HEADROOM_MB,
            limits.cpus,
        )
        for where, what in ((self.dirs, total), (self.leaf("agent"), limits)):
            memory = what.memory_mb * 1024 * 1024
            if self.version == 2:
                (unified,) = where
                _write(unified / "pids.max", str(what.processes))
                _write(unified / "memory.max", str(memory))
                with contextlib.suppress(FileNotFoundError):  # kernels without swap accounting
                    _write(unified / "memory.swap.max", "0")
                continue
            pids, mem, _ = where
            _write(pids / "pids.max", str(what.processes))
            _write(mem / "memory.limit_in_bytes", str(memory))
            # memory+swap equal to memory: no swapping out of the limit (needs swapaccount)
            with contextlib.suppress(FileNotFoundError):
                _write(mem / "memory.memsw.limit_in_bytes", str(memory))
        quota = max(1000, int(limits.cpus * _CPU_PERIOD_US))
        if self.version == 2:
            _write(self.dirs[0] / "cpu.max", f"{quota} {_CPU_PERIOD_US}")
        else:
            _write(self.dirs[2] / "cpu.cfs_period_us", str(_CPU_PERIOD_US))
            _write(self.dirs[2] / "cpu.cfs_quota_us", str(quota))

    def leaf(self, name: str) -> list[Path]:
        return [directory / name for directory in self.dirs]

    def procs_files(self, leaf: str = "agent") -> list[str]:
        return [str(directory / "cgroup.procs") for directory in self.leaf(leaf)]

    def move(self, pid: int, leaf: str = "agent") -> None:
        """Put ``pid`` (and its threads) into ``leaf``."""
        for path in self.procs_files(leaf):
            with contextlib.suppress(OSError):
                _write(Path(path), str(pid))

    def pids(self, leaf: str | None = None) -> set[int]:
        """Every process in the group (or in one leaf) now."""
        found: set[int] = set()
        dirs = (
            self.leaf(leaf)
            if leaf
            else [
                d
                for directory in self.dirs
                for d in (directory, *(directory / n for n in self.LEAVES))
            ]
        )
        for directory in dirs:
            with contextlib.suppress(OSError):
                found |= {int(p) for p in (directory / "cgroup.procs").read_text().split()}
        return found

    def process_limit_hits(self) -> int:
        """How often a fork in the agent's leaf was refused for ``pids.max``."""
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in (self.leaf("agent")[0] / "pids.events").read_text().splitlines():
                if line.startswith("max "):
                    return int(line.split()[1])
        return 0

    def kill(self, *, leaf: str | None = None, timeout: float = 5.0) -> bool:
        """SIGKILL every process in the group, or in one leaf (background jobs included);
        True when it is empty."""
        if self.version == 2:
            target = self.leaf(leaf)[0] if leaf else self.dirs[0]
            with contextlib.suppress(OSError):
                _write(target / "cgroup.kill", "1")
        deadline = time.monotonic() + timeout
        while True:
            pids = self.pids(leaf)
            if not pids:
                return True
            if time.monotonic() > deadline:
                return False
            for pid in pids:  # a process forking meanwhile is caught on the next pass
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        """Kill what is left and delete the group's directories."""
        self.kill()
        for directory in self.dirs:
            for path in (*(directory / n for n in self.LEAVES), directory):
                for _ in range(50):  # the last exits are reaped asynchronously
                    try:
                        path.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.02)


def reclaim_stale(alive: set[str]) -> int:
    """Remove sandbox groups whose names are not in ``alive`` and whose owner process is
    gone (names start with the owner's pid); return how many."""
    layout, _ = _layout()
    if layout is None:
        return 0
    removed = 0
    for parent in layout.parents.values():
        for child in parent.iterdir() if parent.exists() else []:
            if not child.is_dir() or child.name in alive:
                continue
            owner = child.name.split("-", 1)[0]
            if owner.isdigit() and _pid_alive(int(owner)):
                continue
            group = SandboxCgroup(_Layout(layout.version, {"x": parent}), child.name)
            group.remove()
            removed += 1
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
