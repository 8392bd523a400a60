"""A declared machine: its processes, disks, memory and packages, and what Debian 12's own
programs print about them.

A simulated terminal whose ``ps aux``, ``df -h`` or ``free -m`` the world model invents
teaches an agent a machine that changes every time it looks. A :class:`Machine` declares
those facts once; :func:`answer` prints them as the real programs of Debian 12 (bookworm)
do -- procps-ng 4.0.2 (``ps``, ``free``), GNU coreutils 9.1 (``df``, ``nproc``), dpkg 1.21
(``dpkg -l``) and debianutils 5.7 (``which``) -- column widths, rounding and exit status
included, and says ``None`` for every option it does not model, so the world model renders
those.

The formats were taken from those programs' sources at the Debian 12 versions and checked
against the real programs (tests/test_machine.py runs them over a faked ``/proc`` and
``/proc/meminfo``, and over tmpfs mounts of chosen sizes).

``default_profile()`` is a small Debian 12 server recorded on a real machine by
``scripts/record_machine_profile.py`` (what was recorded and what was chosen is said in
the profile's ``notes``); ``default_uname()`` gives that machine's ``uname`` fields.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
import shlex
import struct
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# (stdout, stderr, exit status)
Result = tuple[str, str, int]
# What the caller knows of a path on the machine: "dir", "file" (not executable), "exec"
# (an executable file), "missing", or None when it does not know.
PathKind = Callable[[str], str | None]

# Locales whose number formats are the C locale's (a '.' decimal point, no grouping).
_PLAIN_LOCALES = frozenset({"C", "POSIX", "C.UTF-8", "C.utf8", "en_US.UTF-8", "en_US.utf8"})
_STAT = re.compile(r"[DRSTtWXZIP][<N]?L?s?l?\+?")
_START = re.compile(r"\d\d:\d\d|[A-Z][a-z]{2}\d\d|\d{4}")
_TTY = re.compile(r"\?|pts/\d+|tty\d+|ttyS\d+|console")
# Sizes of the processes a session adds, measured on Debian 12 (bash 5.2, procps 4.0.2,
# grep 3.8, coreutils 9.1): VSZ and RSS in KiB.
_PIPE_SIZES = {"grep": (3760, 1900), "egrep": (3760, 1900), "fgrep": (3760, 1900)}
_OTHER_SIZE = (3060, 1760)
_SSHD_PRIV = (17356, 10880)
_SSHD_USER = (17616, 6884)


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


# -- answer ------------------------------------------------------------------------------


def answer(
    argv: Sequence[str],
    machine: Machine,
    *,
    user: str,
    cwd: str,
    now: datetime | None = None,
    width: int | None = None,
    height: int | None = None,
    env: Mapping[str, str] | None = None,
    forks: int = 0,
    pipeline: Sequence[Sequence[str]] = (),
    path_kind: PathKind | None = None,
) -> Result | None:
    """What one command prints on ``machine`` and its exit status, or None when the command
    or one of its options is not modelled (the world model renders it then).

    ``argv``: the command's words after the shell's expansion and quote removal.
    ``user``/``cwd``: who runs it, where. ``now``: the machine's clock (START of the shell
    and of ``ps``; without it the formats that show START answer None). ``width``/
    ``height``: the terminal's size when the output goes to the terminal, None when it goes
    to a pipe or file (``ps`` cuts lines at the width, ``dpkg -l`` pages). ``env``: the
    shell's environment (PATH for ``which``, COLUMNS, LC_ALL/LANG, PAGER). ``forks``: how
    many processes the session started before this command (``ps`` gets pid shell+1+forks).
    ``pipeline``: the other commands of ``ps``'s pipeline (``grep sshd`` in ``ps aux | grep
    sshd``), which ``ps`` sees running. ``path_kind``: what the caller's file ledger knows
    of a path ("dir", "file", "exec", "missing", or None for unknown); without it every
    path ``df`` is given exists and only the declared programs are on the PATH.
    """
    if not argv:
        return None
    env = dict(env or {})
    if not _plain_locale(machine, env):
        return None
    name = posixpath.basename(argv[0])
    args = list(argv[1:])
    if name == "ps":
        return _ps(args, machine, user, now, width, env, forks, pipeline)
    if name == "df":
        return _df(args, machine, cwd, path_kind)
    if name == "free":
        return _free(args, machine)
    if name == "which":
        return _which(args, machine, user, cwd, env, path_kind)
    if name in ("dpkg", "dpkg-query"):
        return _dpkg(args, machine, width, height, env)
    if name == "nproc":
        return _nproc(args, machine, env)
    if name == "cat":
        return _cat(args, machine, cwd, path_kind)
    return None


def _plain_locale(machine: Machine, env: Mapping[str, str]) -> bool:
    for var in ("LC_ALL", "LC_NUMERIC", "LANG"):
        if env.get(var):
            return env[var] in _PLAIN_LOCALES
    return machine.locale in _PLAIN_LOCALES


# -- ps (procps-ng 4.0.2) --------------------------------------------------------------

_OUTBUF = 2 * 64 * 1024
_SPACE_AMOUNT = 144
# (header, width, justification) of each column ps prints, from ps/output.c
_COLUMNS: dict[str, tuple[str, int, str]] = {
    "user": ("USER", 8, "user"),
    "uid_hack": ("UID", 8, "user"),
    "pid": ("PID", 5, "right"),
    "ppid": ("PPID", 5, "right"),
    "pcpu": ("%CPU", 4, "right"),
    "pmem": ("%MEM", 4, "right"),
    "vsz": ("VSZ", 6, "right"),
    "rss": ("RSS", 5, "right"),
    "tname": ("TTY", 8, "left"),
    "stat": ("STAT", 4, "left"),
    "start_time": ("START", 5, "right"),
    "stime": ("STIME", 5, "right"),
    "bsdtime": ("TIME", 6, "right"),
    "time": ("TIME", 8, "right"),
    "c": ("C", 2, "right"),
    "args": ("COMMAND", 27, "unlimited"),
    "cmd": ("CMD", 27, "unlimited"),
    "ucmd": ("CMD", 15, "unlimited"),
}
_FORMATS = {
    "sysv": ("pid", "tname", "time", "ucmd"),
    "sysv_f": ("uid_hack", "pid", "ppid", "c", "stime", "tname", "time", "cmd"),
    "bsd": ("pid", "tname", "stat", "bsdtime", "args"),
    "bsd_u": (
        "user", "pid", "pcpu", "pmem", "vsz", "rss", "tname", "stat", "start_time",
        "bsdtime", "args",
    ),
}  # fmt: skip


def _ps(
    args: list[str],
    machine: Machine,
    user: str,
    now: datetime | None,
    width: int | None,
    env: Mapping[str, str],
    forks: int,
    pipeline: Sequence[Sequence[str]],
) -> Result | None:
    parsed = _ps_options(args)
    if parsed is None or not machine.processes:
        return None  # an option not modelled, or no processes declared
    form, select, wide = parsed
    if "COLUMNS" in env:
        try:
            cols = int(env["COLUMNS"], 0)
        except ValueError:
            cols = 0
        if 0 < cols < _OUTBUF:
            width = cols
    screen = width if width is not None else _OUTBUF
    if wide == 1 and screen < 132:
        screen = 132
    elif wide > 1:
        screen = _OUTBUF
    columns = _FORMATS[form]
    if ("start_time" in columns or "stime" in columns) and now is None:
        return None
    if "pmem" in columns and machine.memory is None:
        return None
    table = _process_table(machine, user, ["ps", *args], now, forks, pipeline)
    known_users = {p.user for p in table} | {"root"}
    shown = []
    tty = machine.session.tty
    for process in table:
        verdict = select(process, user, tty, known_users)
        if verdict is None:
            return None
        if verdict:
            shown.append(process)
    specs = []
    for key in columns:
        header, col_width, just = _COLUMNS[key]
        if key in ("pid", "ppid"):  # as wide as pid_max is long (procps_pid_length)
            col_width = max(len(str(machine.pid_max)), len(header))
        specs.append((key, header, col_width, just))
    total = 0
    for i, (_key, _header, col_width, just) in enumerate(specs):
        last = i == len(specs) - 1
        total += (3 if just == "unlimited" and last else col_width) + (1 if i else 0)
    active = screen
    factor = 1
    while active < total and screen * factor < _OUTBUF // 2:
        factor += 1
        active = screen * factor
    lines = [_ps_line(specs, None, active, machine)]
    lines += [_ps_line(specs, p, active, machine) for p in shown]
    return "".join(line + "\n" for line in lines), "", 0 if shown else 1


def _ps_options(args: list[str]) -> tuple[str, Callable, int] | None:
    """(format, selection, w count) for the option forms modelled, else None."""
    unix_all = unix_full = False
    unix_wide = 0
    users: list[str] = []
    pids: list[str] = []
    bsd = ""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-aux", "-axu"):  # procps reads these as BSD aux (no user "x")
            bsd += "aux"
        elif arg.startswith("--") or arg == "-":
            return None
        elif arg.startswith("-"):
            j = 1
            while j < len(arg):
                flag = arg[j]
                if flag in "eA":
                    unix_all = True
                elif flag == "f":
                    unix_full = True
                elif flag == "w":
                    unix_wide += 1
                elif flag in "upU":
                    value = arg[j + 1 :]
                    if not value:
                        i += 1
                        if i >= len(args):
                            return None
                        value = args[i]
                    target = pids if flag == "p" else users
                    target.extend(v for v in re.split(r"[,\s]+", value) if v)
                    break
                else:
                    return None
                j += 1
        else:
            bsd += arg
        i += 1
    if bsd and (unix_all or unix_full or unix_wide or users or pids):
        return None
    if bsd:
        if set(bsd) - set("auxw"):
            return None
        a, x = "a" in bsd, "x" in bsd
        form = "bsd_u" if "u" in bsd else "bsd"

        def bsd_select(p: Process, user: str, tty: str, known: set[str]) -> bool | None:
            if a and x:
                return True
            if a:
                return p.tty != "?"
            if x:
                return p.user == user
            return p.user == user and p.tty != "?"

        return form, bsd_select, bsd.count("w")
    for pid in pids:
        if not pid.isdigit():
            return None
    form = "sysv_f" if unix_full else "sysv"
    wanted_pids = {int(p) for p in pids}

    def unix_select(p: Process, user: str, tty: str, known: set[str]) -> bool | None:
        if unix_all:
            return True
        if users or pids:
            for name in users:
                if name not in known and not (name.isdigit() and name == "0"):
                    return None  # a user the machine may or may not have
            return (
                (p.user in users) or (p.user == "root" and "0" in users) or (p.pid in wanted_pids)
            )
        return p.user == user and p.tty == tty

    return form, unix_select, unix_wide


def _process_table(
    machine: Machine,
    user: str,
    argv: list[str],
    now: datetime | None,
    forks: int,
    pipeline: Sequence[Sequence[str]],
) -> list[Process]:
    """The declared processes plus the session's: sshd's two for the login (when it came
    over ssh), the shell, ps itself and the rest of its pipeline, in pid order."""
    session = machine.session
    top = max((p.pid for p in machine.processes), default=1)
    sshd = machine._sshd()
    via_ssh = session.via_ssh if session.via_ssh is not None else sshd is not None
    shell_pid = session.pid or top + (4 if via_ssh else 1)
    clock = now.strftime("%H:%M") if now is not None else "00:00"
    started = session.start or clock
    rows = list(machine.processes)
    if via_ssh and sshd is not None:
        priv_vsz, priv_rss = _SSHD_PRIV
        user_vsz, user_rss = _SSHD_USER
        rows.append(
            Process(
                user="root", pid=max(shell_pid - 3, 1), ppid=sshd.pid, vsz=priv_vsz,
                rss=priv_rss, stat="Ss", start=started, command=f"sshd: {user} [priv]",
            )
        )  # fmt: skip
        rows.append(
            Process(
                user=user, pid=max(shell_pid - 1, 1), ppid=max(shell_pid - 3, 1), vsz=user_vsz,
                rss=user_rss, stat="S", start=started, command=f"sshd: {user}@{session.tty}",
            )
        )  # fmt: skip
        parent = max(shell_pid - 1, 1)
    else:
        parent = 1
    rows.append(
        Process(
            user=user, pid=shell_pid, ppid=parent, vsz=session.vsz, rss=session.rss,
            tty=session.tty, stat="Ss", start=started, command=session.command,
        )
    )  # fmt: skip
    ps_pid = shell_pid + 1 + forks
    rows.append(
        Process(
            user=user, pid=ps_pid, ppid=shell_pid, vsz=session.ps_vsz, rss=session.ps_rss,
            tty=session.tty, stat="R+", start=clock, command=" ".join(argv), comm="ps",
        )
    )  # fmt: skip
    for k, words in enumerate(pipeline, 1):
        if not words:
            continue
        vsz, rss = _PIPE_SIZES.get(posixpath.basename(words[0]), _OTHER_SIZE)
        rows.append(
            Process(
                user=user, pid=ps_pid + k, ppid=shell_pid, vsz=vsz, rss=rss, tty=session.tty,
                stat="S+", start=clock, command=" ".join(words),
            )
        )  # fmt: skip
    by_pid = {p.pid: p for p in rows}  # a declared pid wins over a synthesized one
    for p in machine.processes:
        by_pid[p.pid] = p
    return [by_pid[pid] for pid in sorted(by_pid)]


def _ps_cell(key: str, p: Process, machine: Machine, room: int) -> str:
    if key in ("user", "uid_hack"):
        if len(p.user) <= room:
            return p.user
        return p.user[: room - 1] + "+" if room >= 1 else p.user
    if key == "pid":
        return str(p.pid)
    if key == "ppid":
        return str(p.ppid)
    if key == "pcpu":
        permille = int(round(p.cpu * 10))
        return str(permille // 10) if permille > 999 else f"{permille // 10}.{permille % 10}"
    if key == "pmem":
        if p.mem is not None:
            permille = int(round(p.mem * 10))
        else:
            assert machine.memory is not None
            permille = p.rss * 1000 // machine.memory.total
        permille = min(permille, 999)
        return f"{permille // 10:2d}.{permille % 10}"
    if key == "vsz":
        return str(p.vsz)
    if key == "rss":
        return str(p.rss)
    if key == "tname":
        return p.tty
    if key == "stat":
        return p.stat
    if key in ("start_time", "stime"):
        return p.start
    if key == "bsdtime":
        return f"{p.time // 60:3d}:{p.time % 60:02d}"
    if key == "time":
        days, rest = divmod(p.time, 86400)
        hh, rest = divmod(rest, 3600)
        mm, ss = divmod(rest, 60)
        return (f"{days}-" if days else "") + f"{hh:02d}:{mm:02d}:{ss:02d}"
    if key == "c":
        return f"{min(int(p.cpu), 99):2d}"
    if key in ("args", "cmd"):
        return _escape(p.command)[: max(room, 0)]
    if key == "ucmd":
        return _escape(p.name)[: max(room, 0)]
    raise KeyError(key)


def _escape(text: str) -> str:
    return "".join("?" if ord(c) < 32 or ord(c) == 127 else c for c in text)


def _ps_line(
    specs: list[tuple[str, str, int, str]], p: Process | None, active: int, machine: Machine
) -> str:
    """One line as procps' show_one_proc lays it out: a column too wide for its width
    pushes the next ones right and later padding takes the overflow back."""
    out: list[str] = []
    correct = actual = dospace = 0
    for i, (key, header, col_width, just) in enumerate(specs):
        last = i == len(specs) - 1
        if not last:
            room = col_width
            tmpspace = 0
        else:
            tmpspace = correct - actual
            if tmpspace < 1:
                tmpspace = dospace
                room = active - actual - tmpspace
            else:
                room = active - max(correct, actual)
        room = max(0, min(room, _OUTBUF - 1))
        text = header if p is None else _ps_cell(key, p, machine, room)
        amount = len(text)
        if just == "right":
            leftpad = max(col_width - amount, 0)
        else:
            leftpad = 0
            if just == "unlimited" and active - actual - tmpspace < 1:
                text = text[:1]
        space = correct - actual + leftpad
        if space < 1:
            space = dospace
        space = min(space, _SPACE_AMOUNT)
        out.append(" " * space + text)
        if last:
            break
        actual += space + amount
        correct += col_width + 1
        dospace = 1
    return "".join(out)


# -- df (GNU coreutils 9.1) ------------------------------------------------------------

_PSEUDO_MOUNTS = ("/proc", "/sys", "/dev/pts", "/dev/mqueue", "/dev/hugepages")
_REMOTE_TYPES = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "sshfs", "afs", "ncpfs"})
_DF_MIN = {"source": 14, "fstype": 4, "size": 5, "used": 5, "avail": 5, "pcent": 4, "target": 0}


def human_readable(n: int, *, from_block: int, to_block: int, autoscale: bool, base: int) -> str:
    """gnulib's human_readable with df's options (ceiling rounding; with ``autoscale`` the
    suffixes K M G ... of ``base`` 1024, or k M G ... of 1000, and one decimal below 10)."""
    letters = "KMGTPEZYRQ"
    if to_block <= from_block and from_block % to_block == 0:
        amt, tenths, rounding = n * (from_block // to_block), 0, 0
    else:
        divisor = to_block // from_block
        r10 = (n % divisor) * 10
        r2 = (r10 % divisor) * 2
        amt = n // divisor
        tenths = r10 // divisor
        rounding = (0 < r2) if r2 < divisor else 2 + (divisor < r2)
    exponent = 0
    decimal = ""
    if autoscale and base <= amt:
        while True:
            r10 = (amt % base) * 10 + tenths
            r2 = (r10 % base) * 2 + (rounding >> 1)
            amt //= base
            tenths = r10 // base
            rounding = int((r2 + rounding) != 0) if r2 < base else 2 + int(base < r2 + rounding)
            exponent += 1
            if not (base <= amt and exponent < len(letters)):
                break
        if amt < 10:
            if rounding > 0:
                tenths += 1
                rounding = 0
                if tenths == 10:
                    amt += 1
                    tenths = 0
            if amt < 10:
                decimal = f".{tenths}"
                tenths = rounding = 0
    if tenths + rounding > 0:
        amt += 1
        if autoscale and amt == base and exponent < len(letters):
            exponent += 1
            decimal = ".0"
            amt = 1
    text = f"{amt}{decimal}"
    if autoscale and exponent:
        text += "k" if base == 1000 and exponent == 1 else letters[exponent - 1]
    return text


def _df(args: list[str], machine: Machine, cwd: str, path_kind: PathKind | None) -> Result | None:
    human = si = show_type = total = local = False
    block = 1024
    types: list[str] = []
    excluded: list[str] = []
    operands: list[str] = []
    i = 0
    only_operands = False
    while i < len(args):
        arg = args[i]
        if only_operands or not arg.startswith("-") or arg == "-":
            operands.append(arg)
        elif arg == "--":
            only_operands = True
        elif arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            if name == "human-readable" and not eq:
                human, si = True, False
            elif name == "si" and not eq:
                human, si = True, True
            elif name == "print-type" and not eq:
                show_type = True
            elif name == "total" and not eq:
                total = True
            elif name == "local" and not eq:
                local = True
            elif name in ("type", "exclude-type"):
                if not eq:
                    i += 1
                    if i >= len(args):
                        return None
                    value = args[i]
                (types if name == "type" else excluded).append(value)
            else:
                return None
        else:
            j = 1
            while j < len(arg):
                flag = arg[j]
                if flag == "h":
                    human, si = True, False
                elif flag == "H":
                    human, si = True, True
                elif flag == "k":
                    human, block = False, 1024
                elif flag == "m":
                    human, block = False, 1024 * 1024
                elif flag == "T":
                    show_type = True
                elif flag == "l":
                    local = True
                elif flag in "tx":
                    value = arg[j + 1 :]
                    if not value:
                        i += 1
                        if i >= len(args):
                            return None
                        value = args[i]
                    (types if flag == "t" else excluded).append(value)
                    break
                else:
                    return None
                j += 1
        i += 1
    if not machine.mounts:
        return None

    def wanted(mount: Mount) -> bool:
        if types and mount.type not in types:
            return False
        if mount.type in excluded:
            return False
        return not (local and _remote(mount))

    errors: list[str] = []
    rows: list[Mount] = []
    if operands:
        for operand in operands:
            path = posixpath.normpath(posixpath.join(cwd, operand))
            kind = path_kind(path) if path_kind is not None else "file"
            if kind is None:
                return None
            if kind == "missing":
                errors.append(f"df: {_quotef(operand)}: No such file or directory\n")
                continue
            mount = _mount_of(machine, path, operand)
            if mount is None:
                return None
            if wanted(mount):
                rows.append(mount)
    else:
        rows = [m for m in machine.mounts if m.size > 0 and wanted(m)]
    if not rows:
        if errors:
            return "", "".join(errors), 1
        if types or excluded or local:
            return "", "df: no file systems processed\n", 1
        return None
    fields = ["source"] + (["fstype"] if show_type else []) + ["size", "used", "avail", "pcent"]
    fields.append("target")
    if human:
        header = {"size": "Size", "avail": "Avail"}
    else:
        header = {"size": ("1K" if block == 1024 else "1M") + "-blocks", "avail": "Available"}
    header = {"source": "Filesystem", "fstype": "Type", "used": "Used", "pcent": "Use%"} | header
    header["target"] = "Mounted on"

    def number(kb: int) -> str:
        if human:
            return human_readable(
                kb, from_block=1024, to_block=1, autoscale=True, base=1000 if si else 1024
            )
        return human_readable(kb, from_block=1024, to_block=block, autoscale=False, base=1024)

    def cells(source: str, fstype: str, size: int, used: int, avail: int, target: str):
        pct = "-"
        if used + avail:
            nonroot = used + avail
            pct = f"{(used * 100 + nonroot - 1) // nonroot}%"  # rounded up, as df does
        values = {
            "source": source,
            "fstype": fstype,
            "size": number(size),
            "used": number(used),
            "avail": number(avail),
            "pcent": pct,
            "target": target,
        }
        return [values[f] for f in fields]

    table = [[header[f] for f in fields]]
    for m in rows:
        table.append(cells(m.filesystem, m.type, m.size, m.used, m.avail, m.mounted_on))
    if total:
        table.append(
            cells(
                "total", "-", sum(m.size for m in rows), sum(m.used for m in rows),
                sum(m.avail for m in rows), "-",
            )
        )  # fmt: skip
    widths = [max([_DF_MIN[f]] + [len(row[k]) for row in table]) for k, f in enumerate(fields)]
    lines = []
    for row in table:
        parts = []
        for k, f in enumerate(fields):
            cell = row[k]
            if f in ("source", "fstype", "target"):
                parts.append(cell if k == len(fields) - 1 else cell.ljust(widths[k]))
            else:
                parts.append(cell.rjust(widths[k]))
        lines.append(" ".join(parts) + "\n")
    return "".join(lines), "".join(errors), 1 if errors else 0


def _remote(mount: Mount) -> bool:
    return (
        mount.type in _REMOTE_TYPES
        or (":" in mount.filesystem and not mount.filesystem.startswith("/"))
        or mount.filesystem.startswith("//")
    )


def _mount_of(machine: Machine, path: str, operand: str) -> Mount | None:
    """The declared mount holding ``path`` (or mounted from the device ``operand``); None
    when the path is under a file system df does not list (/proc, /sys ...)."""
    for mount in machine.mounts:
        if operand.startswith("/dev/") and mount.filesystem == path:
            return mount
    best: Mount | None = None
    for mount in machine.mounts:
        point = mount.mounted_on
        if (path == point or point == "/" or path.startswith(point + "/")) and (
            best is None or len(point) > len(best.mounted_on)
        ):
            best = mount
    for pseudo in _PSEUDO_MOUNTS:
        if (path == pseudo or path.startswith(pseudo + "/")) and (
            best is None or len(best.mounted_on) < len(pseudo)
        ):
            return None
    return best


def _quotef(name: str) -> str:
    return name if re.fullmatch(r"[\w@%+=:,./-]+", name) else shlex.quote(name)


# -- free (procps-ng 4.0.2) ------------------------------------------------------------


def _float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


def _scale(size: int, exponent: int, human: bool, si: bool) -> str:
    """procps' scale_size: ``size`` in KiB as free prints it."""
    base = 1000 if si else 1024
    nbytes = size * 1024
    if not human:
        if exponent == 0:
            return str(nbytes // base)
        if exponent == 1:
            return str(nbytes)
        return str(int(nbytes / float(base) ** (exponent - 1)))
    text = f"{nbytes}B"
    if len(text) <= 4:
        return text
    for i, letter in enumerate("KMGTP", 1):
        value = nbytes / float(base) ** i
        if si:
            text = f"{_float32(value):.1f}{letter}"
            if len(text) <= 4:
                return text
            text = f"{int(value)}{letter}"
            if len(text) <= 4:
                return text
        else:
            text = f"{_float32(value):.1f}{letter}i"
            if len(text) <= 5:
                return text
            text = f"{int(value)}{letter}i"
            if len(text) <= 5:
                return text
    return text


def _free(args: list[str], machine: Machine) -> Result | None:
    memory = machine.memory
    if memory is None:
        return None
    exponent = 0
    human = si = wide = lohi = total = False
    units = 0
    long_units = {"bytes": (1, False), "kibi": (2, False), "mebi": (3, False),
                  "gibi": (4, False), "tebi": (5, False), "pebi": (6, False),
                  "kilo": (2, True), "mega": (3, True), "giga": (4, True),
                  "tera": (5, True), "peta": (6, True)}  # fmt: skip
    short_units = {"b": 1, "k": 2, "m": 3, "g": 4}
    for arg in args:
        if arg.startswith("--"):
            name = arg[2:]
            if name in long_units:
                units += 1
                exponent, unit_si = long_units[name]
                si = si or unit_si
            elif name == "human":
                human = True
            elif name == "si":
                si = True
            elif name == "wide":
                wide = True
            elif name == "lohi":
                lohi = True
            elif name == "total":
                total = True
            else:
                return None
        elif arg.startswith("-") and len(arg) > 1:
            for flag in arg[1:]:
                if flag in short_units:
                    units += 1
                    exponent = short_units[flag]
                elif flag == "h":
                    human = True
                elif flag == "w":
                    wide = True
                elif flag == "l":
                    lohi = True
                elif flag == "t":
                    total = True
                else:
                    return None
        else:
            return None
        if units > 1:
            return "", "free: Multiple unit options don't make sense.\n", 1
    if wide and memory.buffers is None:
        return None

    def row(label: str, values: Sequence[int]) -> str:
        cells = [_scale(v, exponent, human, si) for v in values]
        return label.ljust(9) + f"{cells[0]:>11}" + "".join(f" {c:>11}" for c in cells[1:]) + "\n"

    assert memory.used is not None and memory.swap_free is not None
    if wide:
        head = "               total        used        free      shared     buffers       cache   available"  # noqa: E501
        assert memory.buffers is not None
        cache = [memory.buffers, memory.buff_cache - memory.buffers]
    else:
        head = "               total        used        free      shared  buff/cache   available"
        cache = [memory.buff_cache]
    out = head + "\n"
    out += row("Mem:", [memory.total, memory.used, memory.free, memory.shared, *cache,
                        memory.available])  # fmt: skip
    if lohi:
        out += row("Low:", [memory.total, memory.total - memory.free, memory.free])
        out += row("High:", [0, 0, 0])
    out += row("Swap:", [memory.swap_total, memory.swap_used, memory.swap_free])
    if total:
        out += row(
            "Total:",
            [memory.total + memory.swap_total, memory.used + memory.swap_used,
             memory.free + memory.swap_free],
        )  # fmt: skip
    return out, "", 0


# -- which (debianutils 5.7) -----------------------------------------------------------


def default_path(user: str) -> str:
    """PATH of a Debian 12 login shell (/etc/profile)."""
    if user == "root":
        return "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    return "/usr/local/bin:/usr/bin:/bin:/usr/games"


def _canonical(path: str, merged: bool) -> str:
    path = posixpath.normpath(path)
    if merged:
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if path == top or path.startswith(top + "/"):
                return "/usr" + path
    return path


def _program_kind(
    path: str, machine: Machine, path_kind: PathKind | None, programs: set[str], names: set[str]
) -> str | None:
    """ "exec" when an executable file is at ``path``, "no" when none is, None if unknown.

    The caller's ledger decides first (it follows what the session changed); then the
    declared programs: a name a package declares is nowhere else among the packages'
    directories, and /usr/local is empty on a Debian host (no package writes there)."""
    path = posixpath.normpath(path)
    kind = path_kind(path) if path_kind is not None else None
    if kind == "exec":
        return "exec"
    if kind in ("file", "dir", "missing"):
        return "no"
    canonical = _canonical(path, machine.merged_usr)
    if canonical in programs:
        return "exec"
    if canonical.startswith("/usr/local/"):
        return "no"
    if canonical.startswith("/usr/"):
        if machine.complete or posixpath.basename(canonical) in names:
            return "no"
        return None
    return "no" if path_kind is None else None


def _which(
    args: list[str],
    machine: Machine,
    user: str,
    cwd: str,
    env: Mapping[str, str],
    path_kind: PathKind | None,
) -> Result | None:
    every = False
    names: list[str] = []
    options_done = False
    for arg in args:
        if not options_done and arg == "--":
            options_done = True
        elif not options_done and arg.startswith("-") and len(arg) > 1:
            if set(arg[1:]) - {"a"}:
                return None
            every = True
        else:
            options_done = True
            names.append(arg)
    programs = {_canonical(p, machine.merged_usr) for pkg in machine.packages for p in pkg.programs}
    declared = {posixpath.basename(p) for p in programs}
    path = env.get("PATH", default_path(user))
    if re.search(r"[^:]:$", path):
        path += ":"  # as the script does, so that sh's splitting keeps the final empty entry
    elements = path.split(":")
    if path.endswith(":"):
        elements.pop()  # sh's field splitting drops a trailing empty field
    out: list[str] = []
    status = 1 if not names else 0
    for name in names:
        found = False
        if "/" in name:
            kind = _program_kind(posixpath.join(cwd, name), machine, path_kind, programs, declared)
            if kind is None:
                return None
            if kind == "exec":
                out.append(name)
                found = True
        else:
            for element in elements:
                element = element or "."
                candidate = f"{element}/{name}"
                kind = _program_kind(
                    posixpath.join(cwd, candidate), machine, path_kind, programs, declared
                )
                if kind is None:
                    return None
                if kind == "exec":
                    out.append(candidate)
                    found = True
                    if not every:
                        break
        if not found:
            status = 1
    return "".join(line + "\n" for line in out), "", status


# -- dpkg -l (dpkg 1.21) ---------------------------------------------------------------

_DPKG_HEAD = (
    "Desired=Unknown/Install/Remove/Purge/Hold\n"
    "| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend\n"
    "|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)\n"
)


def _dpkg(
    args: list[str],
    machine: Machine,
    width: int | None,
    height: int | None,
    env: Mapping[str, str],
) -> Result | None:
    if not args or args[0] not in ("-l", "--list"):
        return None
    patterns = args[1:]
    if any(p.startswith("-") for p in patterns):
        return None
    packages = sorted(machine.packages, key=lambda p: (p.name, p.architecture))
    missing: list[str] = []
    if not patterns:
        if not machine.complete:
            return None
        shown = packages
    else:
        shown = []
        for pattern in patterns:
            name, _, arch = pattern.partition(":")
            hits = [
                p for p in packages
                if fnmatch.fnmatchcase(p.name, name)
                and (not arch or fnmatch.fnmatchcase(p.architecture, arch))
            ]  # fmt: skip
            if not hits:
                if not machine.complete or any(c in pattern for c in "*?["):
                    # dpkg also lists packages it only knows of ("un"): not declared here
                    return None
                missing.append(pattern)
            elif any(c in pattern for c in "*?[") and not machine.complete:
                return None
            shown += [p for p in hits if p not in shown]
        shown.sort(key=lambda p: (p.name, p.architecture))
    err = "".join(f"dpkg-query: no packages found matching {m}\n" for m in missing)
    if not shown:
        return "", err, 1
    nw = max([14] + [len(p.shown_name) for p in shown])
    vw = max([12] + [len(p.version) for p in shown])
    aw = max([12] + [len(p.architecture) for p in shown])
    dw = max([33] + [len(p.description) for p in shown])

    def line(status: str, name: str, version: str, arch: str, desc: str) -> str:
        return f"{status:<3} {name:<{nw}} {version:<{vw}} {arch:<{aw}} {desc}"

    lines = _DPKG_HEAD.splitlines()
    lines.append(line("||/", "Name", "Version", "Architecture", "Description"))
    lines.append(f"+++-{'=' * nw}-{'=' * vw}-{'=' * aw}-{'=' * dw}")
    for p in shown:
        lines.append(line(p.status, p.shown_name, p.version, p.architecture, p.description))
    pager = env.get("DPKG_PAGER") or env.get("PAGER") or "pager"
    if width is not None and pager != "cat":
        # on a terminal dpkg pipes the list through `pager` (less -FRSXMQ): it prints a
        # list that fits the screen, long lines cut at the width, and holds a longer one
        if height is None or len(lines) > height - 1:
            return None
        lines = [text[:width] for text in lines]
    return "".join(text + "\n" for text in lines), err, 1 if missing else 0


# -- nproc, cat /etc/os-release --------------------------------------------------------


def _nproc(args: list[str], machine: Machine, env: Mapping[str, str]) -> Result | None:
    if machine.cpus is None or any(a not in ("--all",) for a in args):
        return None
    if "--all" not in args and ("OMP_NUM_THREADS" in env or "OMP_THREAD_LIMIT" in env):
        return None
    return f"{machine.cpus}\n", "", 0


def _cat(args: list[str], machine: Machine, cwd: str, path_kind: PathKind | None) -> Result | None:
    if not args or not machine.os_release:
        return None
    out = []
    for arg in args:
        if arg.startswith("-"):
            return None
        path = posixpath.normpath(posixpath.join(cwd, arg))
        if path not in ("/etc/os-release", "/usr/lib/os-release"):
            return None
        if path_kind is not None and path_kind(path) not in (None, "file"):
            return None  # the ledger says otherwise: the caller's emulator answers
        out.append(machine.os_release)
    return "".join(out), "", 0
