"""What a declared machine is: its processes, disks, memory, packages and sessions
(pydantic models, checked strictly), and the shipped Debian 12 profile.

``default_profile()`` is a small Debian 12 server recorded on a real machine by
``scripts/record_machine_profile.py`` (what was recorded and what was chosen is said in
the profile's ``notes``); ``default_uname()`` gives that machine's ``uname`` fields. What
the machine's programs print about it is :mod:`simgym.domains.shell.machine`'s.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable
from functools import lru_cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# (stdout, stderr, exit status)
Result = tuple[str, str, int]
# What the caller knows of a path on the machine: "dir", "file" (not executable), "exec"
# (an executable file), "missing", or None when it does not know.
PathKind = Callable[[str], str | None]

_STAT = re.compile(r"[DRSTtWXZIP][<N]?L?s?l?\+?")
_START = re.compile(r"\d\d:\d\d|[A-Z][a-z]{2}\d\d|\d{4}")
_TTY = re.compile(r"\?|pts/\d+|tty\d+|ttyS\d+|console")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _cpu_seconds(value: Any) -> Any:
    """``time`` as ps prints it ("M:SS" in ``ps aux``, "[DD-]HH:MM:SS" in ``ps -ef``) or
    a number of seconds."""
    if isinstance(value, str):
        text = value.strip()
        if m := re.fullmatch(r"(\d+):([0-5]\d)", text):
            return int(m[1]) * 60 + int(m[2])
        if m := re.fullmatch(r"(?:(\d+)-)?(\d\d):([0-5]\d):([0-5]\d)", text):
            days = int(m[1] or 0)
            return ((days * 24 + int(m[2])) * 60 + int(m[3])) * 60 + int(m[4])
        raise ValueError(f"time {value!r} is neither M:SS, [DD-]HH:MM:SS nor seconds")
    return value


class Process(_Strict):
    """One process as ``ps aux`` shows it."""

    user: str = Field(min_length=1, description="the effective user's name")
    pid: int = Field(gt=0)
    ppid: int = Field(0, ge=0, description="the parent's pid (ps -ef); 0 for pid 1 and 2")
    cpu: float = Field(0.0, ge=0, description="%CPU as ps computes it (time over lifetime)")
    mem: float | None = Field(
        None, ge=0, le=99.9, description="%MEM; None: rss over the memory total, as ps does"
    )
    vsz: int = Field(0, ge=0, description="virtual size, KiB")
    rss: int = Field(0, ge=0, description="resident size, KiB")
    tty: str = Field("?", description="'?' or pts/N, ttyN, ttySN, console")
    stat: str = Field("S", description="state and flags in ps's order: S<Lsl+ ...")
    start: str = Field(description="START as ps prints it: HH:MM (today), MmmDD, or YYYY")
    time: int = Field(0, ge=0, description="CPU time in seconds (or 'M:SS' / 'HH:MM:SS')")
    command: str = Field(min_length=1, description="the arguments; '[name]' for a kernel thread")
    comm: str | None = Field(
        None, description="the command name (ps -e's CMD); None: from the command"
    )

    _seconds = field_validator("time", mode="before")(_cpu_seconds)

    @field_validator("stat")
    @classmethod
    def _stat(cls, value: str) -> str:
        if not _STAT.fullmatch(value):
            raise ValueError(f"stat {value!r} is not a ps STAT (state, then <N L s l + in order)")
        return value

    @field_validator("start")
    @classmethod
    def _start(cls, value: str) -> str:
        if not _START.fullmatch(value):
            raise ValueError(f"start {value!r} is not HH:MM, MmmDD or YYYY")
        return value

    @field_validator("tty")
    @classmethod
    def _tty(cls, value: str) -> str:
        if not _TTY.fullmatch(value):
            raise ValueError(f"tty {value!r} is not '?', pts/N, ttyN, ttySN or console")
        return value

    @field_validator("user")
    @classmethod
    def _user(cls, value: str) -> str:
        if any(c.isspace() for c in value):
            raise ValueError("a user name has no spaces")
        return value

    @property
    def name(self) -> str:
        """The kernel's name for it (15 characters at most but for kernel threads), as
        ``ps -e`` shows it."""
        if self.comm:
            return self.comm
        return command_name(self.command)


def command_name(command: str) -> str:
    """The comm a command line most likely has: "[kthreadd]" -> "kthreadd",
    "/usr/sbin/sshd -D" -> "sshd", "-bash" -> "bash", "sshd: dev@pts/0" -> "sshd"."""
    if command.startswith("[") and command.endswith("]"):
        return command[1:-1]  # a kernel thread: workqueue workers' names run longer
    first = command.split()[0]
    base = posixpath.basename(first.rstrip(":")) or first
    return base.lstrip("-")[:15] or base[:15]


class Mount(_Strict):
    """One line of ``df``: a mounted file system, sizes in 1K blocks."""

    filesystem: str = Field(min_length=1, description="the source: /dev/vda1, tmpfs, udev ...")
    type: str = Field(min_length=1, description="ext4, tmpfs, devtmpfs, vfat ...")
    size: int = Field(ge=0)
    used: int = Field(ge=0)
    avail: int = Field(ge=0)
    mounted_on: str

    @field_validator("mounted_on")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("a mount point is an absolute path")
        return posixpath.normpath(value) if value != "/" else value

    @model_validator(mode="after")
    def _fits(self) -> Mount:
        if self.used + self.avail > self.size:
            raise ValueError(
                f"{self.mounted_on}: used + avail ({self.used + self.avail}) exceed size "
                f"({self.size}); blocks reserved for root make the sum smaller, never larger"
            )
        return self


class Memory(_Strict):
    """What ``free`` reads from /proc/meminfo, in kB (KiB)."""

    total: int = Field(gt=0)
    used: int | None = Field(None, description="None: total - available, as procps 4 counts")
    free: int = Field(ge=0)
    shared: int = Field(0, ge=0)
    buff_cache: int = Field(0, ge=0, description="buffers + page cache + reclaimable slab")
    buffers: int | None = Field(None, ge=0, description="the buffers part (free -w); optional")
    available: int = Field(ge=0)
    swap_total: int = Field(0, ge=0)
    swap_used: int = Field(0, ge=0)
    swap_free: int | None = Field(None, ge=0, description="None: swap_total - swap_used")

    @model_validator(mode="after")
    def _consistent(self) -> Memory:
        if self.available > self.total:
            raise ValueError("available exceeds total")
        if self.free > self.total:
            raise ValueError("free exceeds total")
        used = self.total - self.available
        if self.used is None:
            self.used = used
        elif self.used != used:
            raise ValueError(
                f"used must be total - available ({used}), as procps 4's free computes it"
            )
        if self.buffers is not None and self.buffers > self.buff_cache:
            raise ValueError("buffers exceed buff_cache")
        if self.swap_used > self.swap_total:
            raise ValueError("swap_used exceeds swap_total")
        if self.swap_free is None:
            self.swap_free = self.swap_total - self.swap_used
        elif self.swap_free != self.swap_total - self.swap_used:
            raise ValueError("swap_free must be swap_total - swap_used")
        return self


class Package(_Strict):
    """An installed package (``dpkg -l``) and the programs it puts on the PATH."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9+.-]+$")
    version: str = Field(min_length=1)
    architecture: str = "amd64"
    description: str = Field(description="the one-line synopsis dpkg -l shows")
    programs: list[str] = Field(
        default_factory=list, description="absolute paths of its programs (for which)"
    )
    status: str = Field("ii", pattern=r"^[uihrp][ncHUFWti][ R]?$")
    multi_arch: str | None = Field(
        None, pattern=r"^(same|foreign|allowed|no)$", description="'same': dpkg -l shows name:arch"
    )

    @property
    def shown_name(self) -> str:
        """The name as dpkg -l shows it (name:arch for a Multi-Arch: same package)."""
        return f"{self.name}:{self.architecture}" if self.multi_arch == "same" else self.name

    @field_validator("programs")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        for path in value:
            if not path.startswith("/") or path.endswith("/"):
                raise ValueError(f"program {path!r} is not an absolute file path")
        return value

    @field_validator("description")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if "\n" in value:
            raise ValueError("the synopsis is one line")
        return value


class Session(_Strict):
    """The agent's own login: the shell ``ps`` shows beside the declared processes."""

    tty: str = "pts/0"
    command: str = "-bash"
    pid: int | None = Field(None, gt=0, description="None: after the highest declared pid")
    start: str | None = Field(None, description="START of the shell; None: the clock's HH:MM")
    via_ssh: bool | None = Field(
        None,
        description="show the 'sshd: USER [priv]' and 'sshd: USER@TTY' processes above the "
        "shell; None: when an sshd is among the declared processes",
    )
    # measured on Debian 12: an interactive bash and procps' ps
    vsz: int = 4724
    rss: int = 3788
    ps_vsz: int = 8548
    ps_rss: int = 4560

    @field_validator("tty")
    @classmethod
    def _tty(cls, value: str) -> str:
        if not _TTY.fullmatch(value) or value == "?":
            raise ValueError(f"tty {value!r} is not pts/N, ttyN, ttySN or console")
        return value

    @field_validator("start")
    @classmethod
    def _start(cls, value: str | None) -> str | None:
        if value is not None and not _START.fullmatch(value):
            raise ValueError(f"start {value!r} is not HH:MM, MmmDD or YYYY")
        return value


class Machine(_Strict):
    """The machine behind a simulated terminal, as its own programs report it."""

    processes: list[Process] = Field(default_factory=list)
    mounts: list[Mount] = Field(default_factory=list, description="df's lines, in mount order")
    memory: Memory | None = None
    packages: list[Package] = Field(default_factory=list)
    complete: bool = Field(
        False,
        description="the packages (and their programs) are all that is installed; when False "
        "a program or package not declared is left to the world model",
    )
    os_release: str = Field("", description="the text of /etc/os-release")
    locale: str = "C.UTF-8"
    cpus: int | None = Field(None, gt=0, description="what nproc prints")
    pid_max: int = Field(4194304, gt=1, description="/proc/sys/kernel/pid_max (ps's PID width)")
    merged_usr: bool = Field(True, description="/bin, /sbin, /lib are links into /usr")
    session: Session = Field(default_factory=Session)

    @model_validator(mode="after")
    def _unique(self) -> Machine:
        seen: set[int] = set()
        for process in self.processes:
            if process.pid in seen:
                raise ValueError(f"pid {process.pid} is declared twice")
            seen.add(process.pid)
        names = [p.name for p in self.packages]
        if len(set(names)) != len(names):
            raise ValueError("a package is declared twice")
        points = [m.mounted_on for m in self.mounts]
        if len(set(points)) != len(points):
            raise ValueError("a mount point is declared twice")
        if self.session.via_ssh and not self._sshd():
            raise ValueError("session.via_ssh needs an sshd among the processes")
        if self.session.pid is not None and self.session.pid in seen:
            raise ValueError("session.pid is a declared process's pid")
        return self

    def _sshd(self) -> Process | None:
        for process in self.processes:
            if process.name == "sshd" and process.user == "root":
                return process
        return None

    @property
    def os_name(self) -> str | None:
        """PRETTY_NAME from the os-release text."""
        for line in self.os_release.splitlines():
            if line.startswith("PRETTY_NAME="):
                return _unquote(line.split("=", 1)[1])
        return None

    def files(self) -> dict[str, str]:
        """The machine's files its declaration fixes, for a file ledger: /etc/os-release
        (on Debian a link to /usr/lib/os-release, which holds the same text)."""
        if not self.os_release:
            return {}
        return {"/etc/os-release": self.os_release, "/usr/lib/os-release": self.os_release}


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


# -- the shipped profile ---------------------------------------------------------------


@lru_cache(maxsize=1)
def _profile() -> dict[str, Any]:
    text = resources.files("simgym.domains").joinpath("profiles", "debian12.json").read_text()
    return json.loads(text)


def default_profile() -> Machine:
    """The shipped Debian 12 server (see the profile's ``notes`` for what was recorded on a
    real machine and what was chosen). A fresh copy each call."""
    return Machine.model_validate(_profile()["machine"])


def default_uname() -> dict[str, str]:
    """``uname`` fields of the profile's machine by long option (kernel-release,
    kernel-version, machine, processor, hardware-platform), as TerminalScenario.uname takes
    them."""
    return dict(_profile()["uname"])
