"""A bubblewrap sandbox: a throw-away root filesystem, no network, resource limits.

:class:`Sandbox` builds a fresh root directory from a scenario's files (the host's ``/usr``
is mounted read-only over it, nothing else of the host is visible) and runs commands in it
with ``bwrap``: every namespace unshared (so no network but a private loopback), all
capabilities dropped, no nested user namespaces, a seccomp filter
(:mod:`simgym.real.seccomp_filter`), rlimits on CPU time, memory, file size and open files
per process, and a cgroup per sandbox for the totals: processes, memory, swap, CPU
(:mod:`simgym.real.cgroup`; rlimits alone where the host's cgroup tree is not writable),
and a size-limited tmpfs under the whole sandbox directory for the total of what it may
write (``Limits.disk_mb``; where simgym may not mount, only ``file_mb`` per file holds,
and :func:`isolation` says so).
:meth:`Sandbox.exec` runs one command in a fresh shell and keeps only the head of its
output while it streams; the interactive shell is :class:`simgym.real.shell.ShellSession`.

Every sandbox directory is named after its owner's pid: a later run deletes those whose
owner is gone (a run killed with SIGKILL cannot clean up), and every cancelled path kills
and deletes without needing to await anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import logging
import os
import posixpath
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from simgym.core.errors import SimgymError
from simgym.real.cgroup import CgroupLimits, SandboxCgroup, cgroup_problem, reclaim_stale
from simgym.real.seccomp_filter import filter_fd, seccomp_problem

# Host trees mounted read-only into every sandbox. /usr/local is replaced by the
# sandbox's own (empty or scenario-filled) directory so host-local tools stay out.
_SYSTEM_TREES = ("/usr",)
_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Small pieces of the host's /etc that programs need to start (linker cache, terminal
# descriptions, Debian's alternatives). Accounts, keys and host names are never copied.
_ETC_COPY = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "nsswitch.conf",
    "localtime",
    "timezone",
    "inputrc",
    "terminfo",
    "alternatives",
    "os-release",
    "debian_version",
    "lsb-release",
    "mime.types",
    "magic",
    "magic.mime",
    "protocols",
    "services",
    "vim",
    "perl",
    "python3",
    "ssl/certs",  # public CA certificates only: /etc/ssl/private is never copied
    "ssl/openssl.cnf",
)
_READ_ONLY_PREFIXES = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/libx32/")
_VIRTUAL_PREFIXES = ("/proc/", "/sys/", "/dev/", "/run/simgym/")
CONTROL_DIR = "/run/simgym"  # read-only inside: the control loop, tmux and shell settings
SANDBOX_UID = 1000


def placeable(path: str) -> bool:
    """Whether a file can be placed at absolute ``path`` in a sandbox: not in the host's
    read-only system trees (``/usr/local`` is the sandbox's own) nor the virtual ones."""
    probe = path.rstrip("/") + "/"
    if probe.startswith(_READ_ONLY_PREFIXES) and not probe.startswith("/usr/local/"):
        return False
    return not probe.startswith(_VIRTUAL_PREFIXES)


PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class SandboxError(SimgymError):
    """The sandbox could not be built, started or reached."""


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use. CPU, memory and file size apply to every process the
    shell starts; ``command_s`` is the wall-clock time a foreground command may run
    before it is killed, ``episode_s`` the life of the whole sandbox."""

    cpu_s: int = 60
    memory_mb: int = 2048
    file_mb: int = 512
    open_files: int = 1024
    command_s: float = 300.0
    episode_s: float = 1800.0
    max_wait_s: float = 30.0  # the longest wait after an action, whatever it asks for
    output_chars: int = 50_000  # longest command output kept by exec
    # A command that prints more than this is stopped: reading it costs time, keeping it
    # nothing (only the first output_chars are kept, while it streams).
    output_drain_mb: int = 64
    # Totals over all the sandbox's processes (cgroups; see simgym.real.cgroup).
    processes: int = 256
    cpus: float = 2.0
    # Everything the sandbox may write, its scenario files included: the size of the tmpfs
    # its directory is (memory, not disk; written pages count against memory_mb too).
    disk_mb: int = 1024


DISK_FULL = "No space left on device"  # what a refused write says, in every program


@dataclass
class ExecResult:
    """The result of :meth:`Sandbox.exec`."""

    output: str
    exit_code: int
    timed_out: bool = False
    seconds: float = 0.0
    disk_full: bool = False  # the sandbox's writable space ran out (writes were refused)


_SANDBOX_PREFIX = "simgym-sandbox-"
_reclaimed = False
_log = logging.getLogger("simgym.real.sandbox")


def isolation() -> dict[str, str]:
    """How sandboxes are confined on this host, in words (recorded with each trajectory's
    backend description): which totals the kernel enforces, and the seccomp filter."""
    cgroup = cgroup_problem()
    seccomp = seccomp_problem()
    disk = disk_problem()
    return {
        "totals": "cgroup (pids, memory, swap, cpu)"
        if cgroup is None
        else f"rlimits only (per process; no process cap for root): {cgroup}",
        "seccomp": "on" if seccomp is None else f"off: {seccomp}",
        "disk": "tmpfs per sandbox (disk_mb in total)"
        if disk is None
        else f"not bounded in total (file_mb per file only): {disk}",
    }


@lru_cache(maxsize=1)
def _warn_fallback() -> None:
    # once per process: every sandbox falls back the same way
    for what, state in isolation().items():
        if not state.startswith(("cgroup", "on", "tmpfs")):
            _log.warning("sandbox %s: %s", what, state)


def reclaim_leftovers() -> int:
    """Delete the sandbox directories and cgroups of simgym processes that are gone (a run
    killed with SIGKILL cannot clean up); return how many directories. Directory names
    start with the owner's pid; older unnamed ones are taken once a day old."""
    removed = 0
    base = Path(tempfile.gettempdir())
    for path in base.glob(_SANDBOX_PREFIX + "*"):
        owner = path.name[len(_SANDBOX_PREFIX) :].split("-", 1)[0]
        try:
            if owner.isdigit():
                if _alive(int(owner)):
                    continue
            elif time.time() - path.stat().st_mtime < 86400:
                continue
        except OSError:
            continue
        _unmount(path)  # its tmpfs first: rmtree would empty it and leave it mounted
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    reclaim_stale(alive=set())
    return removed


# -- the sandbox's writable space: a size-limited tmpfs ------------------------------------

_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover
        return None


def _mount_tmpfs(target: Path, size_mb: int) -> str | None:
    """Mount a tmpfs of ``size_mb`` on ``target``; None, or why it could not."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mount"):
        return "no mount(2) here"
    inodes = max(65536, size_mb * 256)  # files cost kernel memory beyond the size limit
    options = f"size={size_mb}m,nr_inodes={inodes},mode=0700".encode()
    if libc.mount(b"tmpfs", str(target).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options):
        error = ctypes.get_errno()
        return f"cannot mount a tmpfs ({os.strerror(error)}; needs root or CAP_SYS_ADMIN)"
    return None


def _unmount(target: Path) -> None:
    libc = _libc()
    if libc is not None and os.path.ismount(target):
        libc.umount2(str(target).encode(), _MNT_DETACH)


@lru_cache(maxsize=1)
def disk_problem() -> str | None:
    """Why a sandbox's total writes cannot be bounded here (None when each sandbox gets a
    size-limited tmpfs): mounting one needs root or CAP_SYS_ADMIN."""
    if os.geteuid() != 0:
        return "not root: a size-limited tmpfs needs mount rights"
    probe = Path(tempfile.mkdtemp(prefix=f"{_SANDBOX_PREFIX}{os.getpid()}-probe-"))
    try:
        problem = _mount_tmpfs(probe, 1)
        _unmount(probe)
        return problem
    finally:
        shutil.rmtree(probe, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


@lru_cache(maxsize=1)
def bwrap_problem() -> str | None:
    """Why sandboxes cannot run here (None when they can): bwrap missing, or the kernel
    refuses the namespaces it needs (unprivileged user namespaces turned off)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    if shutil.which("tmux") is None:
        return "tmux is not installed (apt-get install tmux)"
    probe = [exe, *_namespace_args(), "--ro-bind", "/usr", "/usr", *_link_args(), "--"]
    try:
        done = subprocess.run(
            [*probe, "/bin/true"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap failed to start: {exc}"
    if done.returncode != 0:
        return f"bwrap cannot create its namespaces here: {done.stderr.strip()}"
    return None


def _namespace_args() -> list[str]:
    return [
        "--unshare-all",
        "--unshare-user",  # explicit: --unshare-all only tries, and we rely on it
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
    ]


def _link_args() -> list[str]:
    """Recreate the host's /bin -> usr/bin style links, or mount the real directories."""
    args: list[str] = []
    for path in _SYSTEM_LINKS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


@dataclass
class Sandbox:
    """A throw-away root built from ``files`` (path -> content; a path ending in ``/`` is a
    directory; relative paths are relative to ``cwd``). Files under the read-only system
    trees (``/usr`` but ``/usr/local``, ``/bin``, ``/lib``) cannot be placed and are listed
    in :attr:`skipped`. ``user`` ``root`` runs as uid 0 (without capabilities), anyone
    else as uid 1000."""

    files: dict[str, str] = field(default_factory=dict)
    user: str = "user"
    hostname: str = "sandbox"
    home: str | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    read_only_binds: dict[str, str] = field(default_factory=dict)  # host path -> inside path
    skipped: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", self.user):
            raise SandboxError(f"not a valid user name for the sandbox: {self.user!r}")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]{0,62}", self.hostname):
            raise SandboxError(f"not a valid host name for the sandbox: {self.hostname!r}")
        self.home = self.home or ("/root" if self.user == "root" else f"/home/{self.user}")
        self.cwd = self.cwd or self.home
        self._base: Path | None = None
        self.cgroup: SandboxCgroup | None = None
        self.started = 0.0  # time.monotonic() at build: episode_s counts from here

    # -- the filesystem -------------------------------------------------------------

    @property
    def uid(self) -> int:
        return 0 if self.user == "root" else SANDBOX_UID

    @property
    def root(self) -> Path:
        """The sandbox's ``/`` on the host (only while built)."""
        if self._base is None:
            raise SandboxError("the sandbox is not built")
        return self._base / "root"

    @property
    def control(self) -> Path:
        """Host directory mounted read-only at :data:`CONTROL_DIR`."""
        if self._base is None:
            raise SandboxError("the sandbox is not built")
        return self._base / "control"

    def build(self) -> Sandbox:
        """Create the root directory on the host; idempotent."""
        if self._base is not None:
            return self
        problem = bwrap_problem()
        if problem:
            raise SandboxError(problem)
        global _reclaimed
        if not _reclaimed:  # once per process: what a killed earlier run left behind
            _reclaimed = True
            reclaim_leftovers()
        self._base = Path(tempfile.mkdtemp(prefix=f"{_SANDBOX_PREFIX}{os.getpid()}-"))
        try:
            if disk_problem() is None:
                problem = _mount_tmpfs(self._base, self.limits.disk_mb)
                if problem is not None:
                    raise SandboxError(f"cannot bound the sandbox's disk: {problem}")
            self._skeleton()
            for path, content in self.files.items():
                try:
                    self._place(path, content)
                except (OSError, ValueError, UnicodeError) as exc:
                    # a file over a directory, a NUL byte, a name too long: the scenario's
                    # fault, reported as such instead of a traceback
                    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
                        reason = f"the scenario's files exceed disk_mb={self.limits.disk_mb}"
                    raise SandboxError(
                        f"cannot place scenario file {path[:200]!r}: {reason}"
                    ) from None
            lim = self.limits
            name = self._base.name[len(_SANDBOX_PREFIX) :]
            self.cgroup = SandboxCgroup.create(
                name, CgroupLimits(lim.processes, lim.memory_mb, lim.cpus)
            )
            if self.cgroup is None or seccomp_problem() is not None:
                _warn_fallback()
        except BaseException:
            self.destroy()
            raise
        self.started = time.monotonic()
        return self

    @property
    def limit_note(self) -> str:
        """How this sandbox's totals are enforced, in words (for logs and describe())."""
        if self.cgroup is not None:
            return f"cgroup v{self.cgroup.version}"
        return f"rlimits only: {cgroup_problem() or 'cgroup not created'}"

    def remaining_s(self) -> float:
        """Seconds left of ``limits.episode_s``."""
        return self.limits.episode_s - (time.monotonic() - self.started)

    def destroy(self) -> None:
        """Kill every process of the sandbox (background jobs too), delete its cgroup and
        its root directory."""
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self._base is not None:
            _unmount(self._base)  # lazily: the tmpfs goes once nothing holds it
            shutil.rmtree(self._base, ignore_errors=True)
            self._base = None

    def disk_usage(self) -> tuple[int, int] | None:
        """(bytes written, bytes allowed) of the sandbox's tmpfs; None when it has none."""
        if self._base is None or not os.path.ismount(self._base):
            return None
        try:
            st = os.statvfs(self._base)
        except OSError:
            return None
        return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_blocks * st.f_frsize

    def disk_full(self, output: str = "") -> bool:
        """Were writes refused for want of space: the tmpfs is (all but) full, or
        ``output`` (what a command printed) says so while the sandbox has a limit."""
        usage = self.disk_usage()
        if usage is None:
            return False
        used, allowed = usage
        return allowed - used < max(1 << 20, allowed // 100) or DISK_FULL in output

    def _skeleton(self) -> None:
        root = self.root
        for directory in ("tmp", "var/tmp", "var/log", "etc", "usr/local/bin", "run", "opt"):
            (root / directory).mkdir(parents=True, exist_ok=True)
        for path in ("tmp", "var/tmp"):
            (root / path).chmod(0o1777)
        self.control.mkdir()
        assert self.home is not None and self.cwd is not None
        for path in (self.home, self.cwd):
            self._inside(path).mkdir(parents=True, exist_ok=True)
        for path in _SYSTEM_LINKS:  # /bin -> usr/bin and friends, as on the host
            if os.path.islink(path):
                (root / path.lstrip("/")).symlink_to(os.readlink(path))
        etc = root / "etc"
        for name in _ETC_COPY:
            source = Path("/etc") / name
            (etc / name).parent.mkdir(parents=True, exist_ok=True)
            try:
                if source.is_dir() and not source.is_symlink():
                    shutil.copytree(source, etc / name, symlinks=True)
                elif source.exists() or source.is_symlink():
                    shutil.copy2(source, etc / name, follow_symlinks=False)
            except OSError:
                continue  # unreadable host file: the sandbox does without it
        name = self.user
        home = self.home
        accounts = "root:x:0:0:root:/root:/bin/bash\n"
        groups = "root:x:0:\n"
        if self.uid != 0:
            accounts += f"{name}:x:{SANDBOX_UID}:{SANDBOX_UID}::{home}:/bin/bash\n"
            groups += f"{name}:x:{SANDBOX_UID}:\n"
        accounts += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        groups += "nogroup:x:65534:\n"
        (etc / "passwd").write_text(accounts)
        (etc / "group").write_text(groups)
        (etc / "hostname").write_text(self.hostname + "\n")
        (etc / "hosts").write_text(f"127.0.0.1\tlocalhost\n127.0.1.1\t{self.hostname}\n")

    def _inside(self, path: str) -> Path:
        """The host path of an absolute sandbox path (normalized, never outside the root)."""
        normal = posixpath.normpath("/" + path.lstrip("/"))
        return self.root / normal.lstrip("/")

    def _absolute(self, path: str) -> str:
        assert self.cwd is not None
        raw = path if path.startswith("/") else posixpath.join(self.cwd, path)
        return posixpath.normpath(raw)

    def date_files(self, when: float) -> None:
        """Give every placed scenario file and directory the time ``when`` (seconds since
        the epoch): the scenario's clock, as ``ls -l`` shows it in the simulation."""
        for path in self.files:
            absolute = self._absolute(path)
            if not placeable(absolute) or path in self.skipped:
                continue
            target = self._inside(absolute)
            if target.exists() and not target.is_symlink():
                os.utime(target, (when, when))

    def _place(self, path: str, content: str) -> None:
        absolute = self._absolute(path)
        if not placeable(absolute):
            self.skipped.append(path)
            return
        target = self._inside(absolute)
        if path.endswith("/"):
            self._safe_parent(target / "x")
            target.mkdir(parents=True, exist_ok=True)
            return
        self._safe_parent(target)
        if target.is_dir() and not target.is_symlink():
            raise SandboxError(f"cannot place scenario file {path[:200]!r}: it is a directory")
        if target.is_symlink():  # e.g. the copied /etc/localtime link: replace, never follow
            target.unlink()
        target.write_text(content, encoding="utf-8")
        if content.startswith("#!"):
            target.chmod(0o755)

    def _safe_parent(self, target: Path) -> None:
        """Create ``target``'s parent, refusing any path that resolves outside the root.
        Checked before the directories are made too: a copied host link (/etc/alternatives)
        to a host directory would otherwise get the new directories on the host."""
        for _ in range(2):
            real = Path(os.path.realpath(target.parent))
            if real != self.root and self.root not in real.parents:
                inside = "/" + str(target.relative_to(self.root))
                raise SandboxError(f"scenario path leads outside the sandbox: {inside[:200]!r}")
            target.parent.mkdir(parents=True, exist_ok=True)

    # -- running ----------------------------------------------------------------------

    def bwrap_command(
        self,
        argv: list[str],
        *,
        chdir: str | None = None,
        seccomp_fd: int | None = None,
        as_pid_1: bool = False,
        leaf: str = "agent",
    ) -> list[str]:
        """The full command line that runs ``argv`` inside this sandbox: a launcher that
        joins the sandbox's cgroup (before anything forks), ``prlimit``, then ``bwrap``."""
        exe = shutil.which("bwrap")
        if exe is None:
            raise SandboxError("bubblewrap is not installed (apt-get install bubblewrap)")
        root = self.root
        args = [*self._join_cgroup(leaf), *self.tree_limits(), exe, *_namespace_args()]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        if as_pid_1:
            args.append("--as-pid-1")
        args += ["--bind", str(root), "/"]
        for tree in _SYSTEM_TREES:
            args += ["--ro-bind", tree, tree]
        args += ["--bind", str(root / "usr" / "local"), "/usr/local"]
        for path in _SYSTEM_LINKS:  # the links themselves were made in the root
            if os.path.isdir(path) and not os.path.islink(path):
                args += ["--ro-bind", path, path]
        for host, inside in self.read_only_binds.items():
            args += ["--ro-bind", host, inside]
        args += ["--ro-bind", str(self.control), CONTROL_DIR]
        args += ["--proc", "/proc", "--dev", "/dev", "--hostname", self.hostname]
        args += ["--uid", str(self.uid), "--gid", str(self.uid)]
        args += ["--clearenv"]
        for key, value in self.environment().items():
            args += ["--setenv", key, value]
        args += ["--chdir", chdir or self.cwd or "/", "--", *argv]
        return args

    def environment(self) -> dict[str, str]:
        assert self.home is not None
        return {
            "HOME": self.home,
            "USER": self.user,
            "LOGNAME": self.user,
            "SHELL": "/bin/bash",
            "PATH": PATH,
            "LANG": "C.UTF-8",
            "HOSTNAME": self.hostname,
            "TERM": "xterm-256color",
            **self.env,
        }

    def limits_script(self) -> str:
        """Shell lines that set the per-process limits. Hard limits cannot be raised from
        inside; the CPU soft limit comes first so a runaway process gets SIGXCPU ("CPU
        time limit exceeded") before the hard limit's SIGKILL (soft first: a hard limit below
        the current soft one is refused)."""
        lim = self.limits
        return (
            f"ulimit -S -t {lim.cpu_s}\n"
            f"ulimit -H -t {lim.cpu_s + 5}\n"
            f"ulimit -v {lim.memory_mb * 1024}\n"
            f"ulimit -f {lim.file_mb * 1024}\n"
            "ulimit -c 0\n"
        )

    def tree_limits(self) -> list[str]:
        """A ``prlimit`` prefix that limits every process of the sandbox, tmux included
        (``prlimit`` execs, so the pid stays bwrap's). Empty where prlimit is missing:
        the shell's own limits still apply."""
        exe = shutil.which("prlimit")
        if exe is None:
            return []
        lim = self.limits
        memory = (lim.memory_mb + 256) * 1024 * 1024  # room for tmux next to the shell
        args = [exe, f"--nofile={lim.open_files}", "--core=0", f"--as={memory}"]
        if self.cgroup is None:
            # Fallback for hosts without writable cgroups: a per-user process cap. The
            # kernel does not apply it to root, and memory stays a per-process limit.
            args.append(f"--nproc={lim.processes}")
        return [*args, "--"]

    def _join_cgroup(self, leaf: str) -> list[str]:
        """A ``sh`` prefix that writes its own pid into the sandbox's cgroup files (of
        ``leaf``) and execs the rest (exit 125 if it cannot join); empty without a cgroup."""
        if self.cgroup is None:
            return []
        files = self.cgroup.procs_files(leaf)
        script = (
            'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; '
            'shift; n=$((n - 1)); done; exec "$@"'
        )
        return ["/bin/sh", "-c", script, "sh", str(len(files)), *files]

    async def spawn(
        self,
        argv: list[str],
        *,
        chdir: str | None = None,
        as_pid_1: bool = False,
        leaf: str = "agent",
        **options: object,
    ) -> asyncio.subprocess.Process:
        """Start ``argv`` in the sandbox (its own session, seccomp filter passed to bwrap).
        The start is shielded: a task cancelled meanwhile still gets the process, kills
        it and waits for it, so a cancellation never leaves a sandbox running."""
        fd = filter_fd()
        command = self.bwrap_command(argv, chdir=chdir, seccomp_fd=fd, as_pid_1=as_pid_1, leaf=leaf)
        starting = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *command,
                start_new_session=True,
                pass_fds=() if fd is None else (fd,),
                **options,  # type: ignore[arg-type]
            )
        )
        try:
            return await asyncio.shield(starting)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await reap(await starting)
            raise
        finally:
            if fd is not None:
                os.close(fd)

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        stdin: bytes | None = None,
        timeout: float | None = None,
    ) -> ExecResult:
        """Run ``command`` with ``bash -c`` in a fresh sandboxed process (the files persist,
        processes do not). Output is stdout and stderr together; a command still running
        after ``timeout`` seconds is killed and reported with exit code 124."""
        self.build()
        remaining = self.remaining_s()
        if remaining <= 0:
            raise SandboxError(f"the episode's time is over (episode_s={self.limits.episode_s:g})")
        limit = min(timeout or self.limits.command_s, self.limits.command_s, remaining)
        # The limits are set by an outer shell so the command's own line numbers (in error
        # messages) are its own: "bash: line 1: go: command not found".
        script = self.limits_script() + 'exec bash -c "$1"'
        start = time.perf_counter()
        proc = await self.spawn(
            ["/bin/bash", "-c", script, "bash", command],
            chdir=cwd,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        lim = self.limits
        output = _CappedOutput(keep=lim.output_chars * 4, stop=lim.output_drain_mb << 20)
        timed_out = False
        feeding = asyncio.ensure_future(_feed(proc, stdin))
        try:
            async with asyncio.timeout(limit):
                await output.read(proc)
                if output.flooded:
                    await reap(proc)  # the rest would be thrown away anyway
                await proc.wait()
                await feeding
        except TimeoutError:
            timed_out = True
            await reap(proc)
        except BaseException:  # cancelled: never leave the sandbox running
            await asyncio.shield(reap(proc))
            raise
        finally:
            feeding.cancel()
        code = 124 if timed_out else (proc.returncode if proc.returncode is not None else -1)
        if code == 1 and output.head.startswith(b"bwrap: "):
            raise SandboxError(output.head.decode("utf-8", errors="replace").strip())
        if code == 125 and self.cgroup is not None and output.total == 0:
            raise SandboxError("the sandbox could not join its cgroup")
        if code < 0:  # killed by a signal: report it as a shell would
            code = 128 - code
        text = output.head.decode("utf-8", errors="replace")
        if output.flooded:
            text = text[: lim.output_chars]
            text += (
                f"\n[output truncated: the command printed more than {lim.output_drain_mb} MB"
                " and was stopped]\n"
            )
        elif len(text) > lim.output_chars or output.total > len(output.head):
            shown = text[: lim.output_chars]
            hidden = output.total - len(shown.encode("utf-8", errors="replace"))
            text = shown + f"\n[output truncated: {hidden} more bytes not shown]\n"
        # the output stays what the programs printed ("No space left on device"); callers
        # record the refusal beside it (RealExecutor.turn_metadata)
        full = self.disk_full(text)
        return ExecResult(text, code, timed_out, time.perf_counter() - start, full)


def sandbox_disk_note(sandbox: Sandbox | None, output: str = "") -> dict[str, object]:
    """``{"sandbox_disk": {...}}`` for a turn's observation metadata when the sandbox's
    writable space ran out (writes were refused), else ``{}``: the refusal is recorded on
    the turn, the observation keeps what the programs printed."""
    if sandbox is None:
        return {}
    try:
        usage = sandbox.disk_usage()
        full = sandbox.disk_full(output)
    except SandboxError:
        return {}
    if usage is None or not full:
        return {}
    used, allowed = usage
    return {
        "sandbox_disk": {
            "refused": f"writes beyond the sandbox's {sandbox.limits.disk_mb} MB were refused "
            f"({DISK_FULL})",
            "used_mb": round(used / (1 << 20), 1),
            "limit_mb": sandbox.limits.disk_mb,
        }
    }


class _CappedOutput:
    """Reads a process's output as it streams, keeping only the first ``keep`` bytes (the
    host's memory stays flat whatever the command prints) and stopping at ``stop`` bytes."""

    def __init__(self, *, keep: int, stop: int) -> None:
        self.keep, self.stop = keep, stop
        self._parts: list[bytes] = []  # kept as it comes: a timeout still shows the start
        self._kept = 0
        self.total = 0
        self.flooded = False

    @property
    def head(self) -> bytes:
        return b"".join(self._parts)

    async def read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(1 << 16):
            self.total += len(chunk)
            if self._kept < self.keep:
                self._parts.append(chunk[: self.keep - self._kept])
                self._kept += len(self._parts[-1])
            if self.total > self.stop:
                self.flooded = True
                break


async def _feed(proc: asyncio.subprocess.Process, data: bytes | None) -> None:
    """Write ``data`` to the process's stdin and close it (a command that stops reading
    early is not an error)."""
    if data is None or proc.stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(data)
        await proc.stdin.drain()
    proc.stdin.close()


async def reap(proc: asyncio.subprocess.Process, *, timeout: float = 5.0) -> None:
    """Kill a sandbox started as ``proc`` (its pid namespace, then its session) and wait
    for it. Its output is read to the end and dropped: asyncio reports the exit only once
    the pipes are closed, and a paused reader would never see them close."""
    kill_inside(proc.pid)
    kill_group(proc.pid)
    if proc.stdin is not None and not proc.stdin.is_closing():
        proc.stdin.close()

    async def drain() -> None:
        if proc.stdout is not None:
            while await proc.stdout.read(1 << 16):
                pass
        await proc.wait()

    try:
        async with asyncio.timeout(timeout):
            await drain()
    except TimeoutError:
        kill_group(proc.pid)


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_inside(bwrap_pid: int) -> None:
    """Kill the sandbox's init (the outer bwrap's child); the kernel then ends every
    process in its pid namespace and the outer bwrap exits normally, to be reaped by
    us. Killing the outer one first would leave the inner one to the host's init."""
    for pid, stat in process_table().items():
        if stat.ppid == bwrap_pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


# -- the host's process table (read-only; shared with simgym.real.shell) ------------------


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/PID/stat`` the host watches sandboxed processes by."""

    ppid: int
    pgrp: int
    tpgid: int
    start: float  # seconds after boot


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read_stat(pid: int | None) -> ProcStat | None:
    if pid is None:
        return None
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ')'.
    fields = raw[raw.rfind(")") + 2 :].split()
    try:
        return ProcStat(int(fields[1]), int(fields[2]), int(fields[5]), int(fields[19]) / _TICKS)
    except (IndexError, ValueError):
        return None


def process_table() -> dict[int, ProcStat]:
    table: dict[int, ProcStat] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = read_stat(int(entry))
            if stat is not None:
                table[int(entry)] = stat
    return table
