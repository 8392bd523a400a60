"""A bubblewrap sandbox: a throw-away root filesystem, no network, resource limits.

:class:`Sandbox` builds a fresh root directory from a scenario's files (the host's ``/usr``
is mounted read-only over it, nothing else of the host is visible) and runs commands in it
with ``bwrap``: every namespace unshared (so no network but a private loopback), all
capabilities dropped, no nested user namespaces, a seccomp filter
(:mod:`simgym.real.seccomp_filter`), rlimits on CPU time, memory, file size and open files
per process, and a cgroup per sandbox for the totals: processes, memory, swap, CPU
(:mod:`simgym.real.cgroup`; rlimits alone where the host's cgroup tree is not writable).
:meth:`Sandbox.exec` runs one command in a fresh shell and keeps only the head of its
output while it streams; :class:`ShellSession` keeps one interactive ``bash`` alive in a
tmux session inside the sandbox, types keys into it and reads the screen back.

The host never talks to anything the sandbox could replace: the tmux client runs *inside*
the sandbox behind a small control loop on a pipe, and the host only reads bytes from that
pipe and (read-only) the process table, to see whether a command is still running and to
kill one that ran past its time limit. The control loop is the namespace's init and
non-dumpable, so the agent can neither kill it nor open its pipes or read its memory; its
answers are length-framed and numbered, so nothing on the screen can pass for one, and an
answer out of place stops the session with an error instead of stale screens.

Every sandbox directory is named after its owner's pid: a later run deletes those whose
owner is gone (a run killed with SIGKILL cannot clean up), and every cancelled path kills
and deletes without needing to await anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import posixpath
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

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
TMUX_SOCKET = "/run/tmux-simgym/socket"  # the tmux server's socket, inside the sandbox
SANDBOX_UID = 1000
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


@dataclass
class ExecResult:
    """The result of :meth:`Sandbox.exec`."""

    output: str
    exit_code: int
    timed_out: bool = False
    seconds: float = 0.0


_SANDBOX_PREFIX = "simgym-sandbox-"
_reclaimed = False
_log = logging.getLogger("simgym.real.sandbox")


def isolation() -> dict[str, str]:
    """How sandboxes are confined on this host, in words (recorded with each trajectory's
    backend description): which totals the kernel enforces, and the seccomp filter."""
    cgroup = cgroup_problem()
    seccomp = seccomp_problem()
    return {
        "totals": "cgroup (pids, memory, swap, cpu)"
        if cgroup is None
        else f"rlimits only (per process; no process cap for root): {cgroup}",
        "seccomp": "on" if seccomp is None else f"off: {seccomp}",
    }


@lru_cache(maxsize=1)
def _warn_fallback() -> None:
    # once per process: every sandbox falls back the same way
    for what, state in isolation().items():
        if not state.startswith(("cgroup", "on")):
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
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    reclaim_stale(alive=set())
    return removed


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
            self._skeleton()
            for path, content in self.files.items():
                try:
                    self._place(path, content)
                except (OSError, ValueError, UnicodeError) as exc:
                    # a file over a directory, a NUL byte, a name too long: the scenario's
                    # fault, reported as such instead of a traceback
                    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
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
            shutil.rmtree(self._base, ignore_errors=True)
            self._base = None

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

    def _place(self, path: str, content: str) -> None:
        absolute = self._absolute(path)
        probe = absolute + "/"
        if (
            probe.startswith(_READ_ONLY_PREFIXES) and not probe.startswith("/usr/local/")
        ) or probe.startswith(_VIRTUAL_PREFIXES):
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
        return ExecResult(text, code, timed_out, time.perf_counter() - start)


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
    _kill_inside(proc.pid)
    _kill_group(proc.pid)
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
        _kill_group(proc.pid)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_inside(bwrap_pid: int) -> None:
    """Kill the sandbox's init (the outer bwrap's child); the kernel then ends every
    process in its pid namespace and the outer bwrap exits normally, to be reaped by
    us. Killing the outer one first would leave the inner one to the host's init."""
    for pid, stat in _process_table().items():
        if stat.ppid == bwrap_pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """End a sandbox started as ``proc``: end of input first, then kills."""
    if proc.stdin is not None and not proc.stdin.is_closing():
        proc.stdin.close()
    for kill in (None, _kill_inside, _kill_group):
        if kill is not None:
            kill(proc.pid)
        try:
            async with asyncio.timeout(2):
                await proc.wait()
            return
        except TimeoutError:
            continue


# -- the interactive shell ------------------------------------------------------------------

# The control loop answers each request with a header line "NONCE SEQ STATUS LENGTH" and
# exactly LENGTH bytes of tmux's output, so nothing the agent prints on the screen can pass
# for the end of an answer. The nonce comes on stdin, never on a command line or in the
# environment (both readable in /proc from inside); SEQ numbers the answers, so the host
# notices one that is missing or out of place.
_CONTROL_LOOP = r"""# simgym: runs tmux commands for the host, one request at a time.
IFS= read -r nonce || exit 1
LC_ALL=C  # ${#out} counts bytes; not exported, so tmux and the shell keep UTF-8
tmux -S /run/tmux-simgym/socket -f /run/simgym/tmux.conf new-session -d -s main \
    -x "$1" -y "$2" -c "$3" </dev/null >/dev/null || exit 1
printf '%s ready\n' "$nonce"
seq=0
while IFS=$'\x1f' read -r -d '' -a request; do
    out=$(tmux -S /run/tmux-simgym/socket "${request[@]}" 2>&1 </dev/null)
    rc=$?
    seq=$((seq + 1))
    printf '%s %d %d %d\n%s' "$nonce" "$seq" "$rc" "${#out}" "$out"
done
"""

_TMUX_CONF = """set -g status off
set -g remain-on-exit on
set -g remain-on-exit-format ""
set -g history-limit 5000
set -g update-environment ""
set -g default-terminal "{term}"
set -sg escape-time 0
set -g default-command "exec /bin/bash --noprofile --rcfile /run/simgym/bashrc -i"
"""

# Before each prompt the shell counts it in a tmux option: the host sees the moment a
# command has finished (and its exit status) without guessing from the screen.
_PROMPT_HOOK = (
    f"__simgym_rc=$?; tmux -S {TMUX_SOCKET} set -p @simgym_prompt "
    '"$((++__simgym_n)) $__simgym_rc" >/dev/null 2>&1'
)
_BASHRC = (
    "{limits}[ -f ~/.bashrc ] && . ~/.bashrc\n"
    r"PS1='\u@\h:\w\$ '" + "\n"
    "PROMPT_COMMAND='{hook}'\n"
)

# tmux key names sent as keys; any other text is typed literally.
_KEY = re.compile(
    r"(?:[CMS]-.+|Enter|Escape|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End|"
    r"PageUp|PageDown|PPage|NPage|IC|DC|F\d{1,2})"
)
_POLL_S = 0.05
_SETTLE_S = 0.2


@dataclass
class ShellState:
    """What the host knows about the shell after a poll."""

    prompts: int = 0  # prompts drawn so far
    last_status: int | None = None  # exit status the last prompt reported
    dead: bool = False  # the shell has exited
    full_screen: bool = False  # a program has switched to the alternate screen
    cursor_x: int = 0  # the cursor's column


class ShellSession:
    """One interactive ``bash`` in a tmux session inside ``sandbox``.

    :meth:`send` types keystroke batches and returns the new part of the screen: from
    the line the cursor was on (the prompt, now holding the echoed command) to the end,
    the way a person reads a terminal after pressing Enter. When what was on the screen
    no longer matches (a full-screen program, ``clear``), the whole visible screen is
    returned instead.
    """

    def __init__(self, sandbox: Sandbox, *, width: int = 160, height: int = 48) -> None:
        self.sandbox = sandbox
        self.width = width
        self.height = height
        self._proc: asyncio.subprocess.Process | None = None
        self._nonce = secrets.token_hex(12)
        self._lines: list[str] = []
        self._shell_pid: int | None = None  # host pid of the pane's bash
        self._stderr: BinaryIO | None = None
        self._timer: threading.Timer | None = None
        self._lock = asyncio.Lock()
        self._seq = 0  # requests sent; the control loop numbers its answers the same way
        self._header: tuple[int, int, int] | None = None  # an answer whose body is pending
        self._lost: str | None = None  # why the control channel can no longer be trusted
        self.killed_commands = 0
        self.limit_stops = 0  # turns that ended with the agent's processes killed

    # -- life cycle ---------------------------------------------------------------------

    async def start(self, *, timeout: float = 20.0) -> str:
        """Start the sandbox and the shell; return the first screen."""
        sandbox = self.sandbox.build()
        self._write_control_files()
        (sandbox.root / "run" / "tmux-simgym").mkdir(parents=True, exist_ok=True)
        control = f"{CONTROL_DIR}/control.sh"
        size = [str(self.width), str(self.height), sandbox.cwd or "/"]
        self._stderr = open(self.sandbox.control.parent / "bwrap.log", "wb")  # noqa: SIM115
        try:
            self._proc = await sandbox.spawn(
                [f"{CONTROL_DIR}/bash", control, *size],
                # The control loop is the namespace's init: bwrap's own init would hold
                # the pipes to the host open where the agent can reach them (/proc/1/fd),
                # and an init cannot be killed from inside.
                as_pid_1=True,
                leaf="control",  # the agent's shell is moved to the "agent" leaf below
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=self._stderr,
                limit=1 << 24,
            )
        except BaseException:
            self.abandon()
            raise
        self._timer = threading.Timer(sandbox.limits.episode_s, self._expire)
        self._timer.daemon = True
        self._timer.start()
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write(self._nonce.encode() + b"\n")
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a
            # cancellation that lands as the awaited call finishes, and Ctrl-C is then lost.
            async with asyncio.timeout(timeout):
                await self._read_until_ready()
            deadline = time.monotonic() + timeout
            while not await self._prompt_drawn(0):
                if time.monotonic() > deadline:
                    raise SandboxError("the shell did not show a prompt")
                await asyncio.sleep(_POLL_S)
            await self._adopt_shell()
            self._lines = await self._capture_all()
        except (TimeoutError, ValueError, SandboxError) as exc:
            log = self._log_tail()
            self.abandon()
            raise SandboxError(f"the sandbox shell did not start: {exc} {log}".strip()) from None
        except BaseException:  # cancelled while starting: kill and delete before giving up
            self.abandon()
            raise
        return "\n".join(self._lines)

    async def close(self) -> None:
        """Stop every process in the sandbox and delete its files."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        try:
            if self._proc is not None:
                await _stop(self._proc)
        finally:
            self.abandon()  # also when the wait above is cancelled

    def abandon(self) -> None:
        """Kill every process of the sandbox and delete its files, without awaiting: for
        cleanup paths that may not get to run a coroutine (Ctrl-C cancels every task,
        even one that would close, before it starts). Idempotent."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            _kill_inside(proc.pid)
            _kill_group(proc.pid)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        self.sandbox.destroy()  # kills what is left in its cgroup first

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    def _expire(self) -> None:
        # The episode outlived its time: kill everything; the next call reports it.
        proc = self._proc
        if proc is not None:
            _kill_inside(proc.pid)
        if self.sandbox.cgroup is not None:
            self.sandbox.cgroup.kill(timeout=1.0)

    def _write_control_files(self) -> None:
        control = self.sandbox.control
        (control / "control.sh").write_text(_CONTROL_LOOP)
        term = "tmux-256color" if _terminfo_has("tmux-256color") else "screen"
        (control / "tmux.conf").write_text(_TMUX_CONF.format(term=term))
        bashrc = _BASHRC.format(limits=self.sandbox.limits_script(), hook=_PROMPT_HOOK)
        (control / "bashrc").write_text(bashrc)
        # The control loop runs a copy of bash that nobody inside may read: the kernel
        # marks a process started from an unreadable program non-dumpable, and then a
        # process of the same user without capabilities (the agent's) cannot open its
        # /proc/PID/fd (the pipes to the host) nor read its memory (the nonce).
        shell = control / "bash"
        shutil.copyfile(os.path.realpath("/bin/bash"), shell)
        shell.chmod(0o111)

    def _log_tail(self) -> str:
        try:
            text = (self.sandbox.control.parent / "bwrap.log").read_text(errors="replace")
        except (OSError, SandboxError):
            return ""
        return text.strip()[-500:]

    # -- talking to tmux ------------------------------------------------------------------

    async def _read_line(self) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        raw = await self._proc.stdout.readline()
        if not raw:
            raise SandboxError("the sandbox has exited")
        return raw.decode("utf-8", errors="replace")

    async def _read_until_ready(self) -> None:
        while (await self._read_line()).rstrip("\n") != f"{self._nonce} ready":
            pass

    async def _tmux(self, *args: str, timeout: float = 15.0) -> str:
        """Run one tmux command inside the sandbox; return its output."""
        if self._lost is not None:
            raise SandboxError(self._lost)
        if not self.running:
            raise SandboxError("the sandbox is not running (it ended or ran out of time)")
        assert self._proc is not None and self._proc.stdin is not None
        if any("\x00" in a or "\x1f" in a for a in args):
            raise SandboxError("keystrokes may not contain NUL or \\x1f bytes")
        self._proc.stdin.write("\x1f".join(args).encode() + b"\x00")
        await self._proc.stdin.drain()
        self._seq += 1
        wanted = self._seq

        async def collect() -> tuple[str, int]:
            while True:
                seq, code, body = await self._answer()
                if seq == wanted:
                    return body, code
                if seq > wanted:  # an answer to a request never sent: someone wrote in
                    raise self._lose_sync(f"answer {seq} arrived while waiting for {wanted}")
                # an earlier request timed out and its late answer arrives now: skip it

        try:
            async with asyncio.timeout(timeout):
                text, code = await collect()
        except TimeoutError:
            raise SandboxError(f"tmux {args[0]} did not answer in {timeout:g}s") from None
        if code != 0:
            raise SandboxError(f"tmux {args[0]} failed: {text.strip()}")
        return text

    async def _answer(self) -> tuple[int, int, str]:
        """The next framed answer: (sequence number, exit status, output). A header that
        is not ours means the channel lost sync, and every later call fails with it: an
        error in the trajectory instead of silently stale screens."""
        assert self._proc is not None and self._proc.stdout is not None
        if self._header is None:  # kept across a timeout that cut between header and body
            line = await self._read_line()
            fields = line.rstrip("\n").split(" ")
            if (
                len(fields) != 4
                or fields[0] != self._nonce
                or not all(f.isdigit() for f in fields[1:])
            ):
                raise self._lose_sync(f"unexpected bytes from the sandbox: {line[:80]!r}")
            self._header = (int(fields[1]), int(fields[2]), int(fields[3]))
        seq, code, length = self._header
        try:
            body = await self._proc.stdout.readexactly(length)
        except asyncio.IncompleteReadError:
            raise SandboxError("the sandbox has exited") from None
        self._header = None
        return seq, code, body.decode("utf-8", errors="replace")

    def _lose_sync(self, detail: str) -> SandboxError:
        self._lost = f"the sandbox's control channel lost sync ({detail}); observations stopped"
        return SandboxError(self._lost)

    async def state(self) -> ShellState:
        out = await self._tmux(
            "display",
            "-p",
            "-t",
            "main",
            "#{pane_dead}|#{alternate_on}|#{cursor_x}|#{@simgym_prompt}",
        )
        dead, alternate, cursor, prompt = (out.strip().split("|", 3) + ["", "", ""])[:4]
        count, _, status = prompt.partition(" ")
        return ShellState(
            prompts=int(count) if count.isdigit() else 0,
            last_status=int(status) if status.lstrip("-").isdigit() else None,
            dead=dead == "1",
            full_screen=alternate == "1",
            cursor_x=int(cursor) if cursor.isdigit() else 0,
        )

    async def _capture_all(self) -> list[str]:
        text = await self._tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "main")
        return _trim(text)

    async def screen(self) -> str:
        """The visible screen now."""
        return "\n".join(_trim(await self._tmux("capture-pane", "-p", "-J", "-t", "main")))

    # -- acting -------------------------------------------------------------------------

    async def send(self, batches: list[tuple[str, float]]) -> str:
        """Type each ``(keystrokes, wait_seconds)`` batch in turn, waiting after each until
        the shell is back at a prompt (or the wait is over); return the new screen text."""
        async with self._lock:
            if (await self.state()).dead:
                await self._respawn()
            hits = self.sandbox.cgroup.process_limit_hits() if self.sandbox.cgroup else 0
            for keys, wait in batches:
                await self._send_one(keys, wait)
            note = self._stop_saturation(hits)
            if note:
                return f"{await self.screen()}\n{note}"
            if (await self.state()).full_screen:
                # vim, less, top: the program's screen is the observation; the shell's
                # scrollback is compared again once the program gives the screen back.
                return await self.screen()
            lines = await self._capture_all()
            new = _new_part(self._lines, lines)
            if new is None:
                new = _trim(await self._tmux("capture-pane", "-p", "-J", "-t", "main"))
            self._lines = lines
            return "\n".join(new)

    async def _respawn(self) -> None:
        # The shell died (exit, CPU limit): a new login in the same sandbox.
        await self._tmux("respawn-pane", "-k", "-t", "main")
        deadline = time.monotonic() + 10
        before = (await self.state()).prompts
        while (await self.state()).prompts == before and time.monotonic() < deadline:
            await asyncio.sleep(_POLL_S)
        await self._adopt_shell()

    async def _adopt_shell(self) -> None:
        """Find the pane's shell on the host and move it to the cgroup's agent leaf, where
        everything it starts counts against the limits."""
        pane_pid = int((await self._tmux("display", "-p", "-t", "main", "#{pane_pid}")).strip())
        assert self._proc is not None
        self._shell_pid = _host_pid(self._proc.pid, pane_pid)
        if self.sandbox.cgroup is not None and self._shell_pid is not None:
            self.sandbox.cgroup.move(self._shell_pid, "agent")

    async def _send_one(self, keys: str, wait: float) -> None:
        self._enforce_command_limit()
        before = (await self.state()).prompts
        await self._type(keys)
        limit = max(min(wait, self.sandbox.limits.max_wait_s), _POLL_S)
        deadline = time.monotonic() + limit
        previous: str | None = None
        stable_since = time.monotonic()
        while time.monotonic() < deadline:
            await asyncio.sleep(_POLL_S)
            self._enforce_command_limit()
            state = await self.state()
            if state.dead:
                return
            idle = self._shell_idle()
            if state.prompts != before and idle and await self._prompt_drawn(before):
                return  # the command finished and a new prompt is up
            if not idle or keys.endswith("\n") or keys == "Enter":
                continue  # a program holds the terminal, or a line is still being run
            screen = await self.screen()  # typing at the prompt: wait for the echo to settle
            if screen != previous:
                previous, stable_since = screen, time.monotonic()
            elif time.monotonic() - stable_since >= _SETTLE_S:
                return

    async def _prompt_drawn(self, before: int) -> bool:
        """Whether a prompt after the ``before``-th is fully on the screen. The counter
        moves just *before* bash prints the prompt, so wait until the cursor has left
        the line start and the screen holds still for a moment."""
        state = await self.state()
        if state.prompts <= before or state.cursor_x == 0:
            return False
        first = await self.screen()
        await asyncio.sleep(_POLL_S / 2)
        return first == await self.screen()

    async def _type(self, keys: str) -> None:
        if _KEY.fullmatch(keys):
            await self._tmux("send-keys", "-t", "main", keys)
            return
        parts = keys.split("\n")
        for i, part in enumerate(parts):
            if part:
                await self._tmux("send-keys", "-t", "main", "-l", "--", part)
            if i < len(parts) - 1:
                await self._tmux("send-keys", "-t", "main", "Enter")

    def _stop_saturation(self, hits_before: int) -> str | None:
        """After a turn whose processes filled the sandbox's process limit (a fork bomb),
        kill every process of the agent, shell included (the next turn starts a fresh
        shell): a full process table would make every later turn fail. Returns the note
        that ends this turn's observation, or None."""
        group = self.sandbox.cgroup
        if group is None or group.process_limit_hits() == hits_before:
            return None
        limit = self.sandbox.limits.processes
        if len(group.pids("agent")) < limit * 0.9:
            return None  # it hit the limit but let go: the shell is usable
        group.kill(leaf="agent")
        self.limit_stops += 1
        return (
            f"[simgym: the sandbox reached its limit of {limit} processes; "
            "every process in it was stopped]"
        )

    # -- watching processes from the host ----------------------------------------------

    def _shell_idle(self) -> bool:
        """True when the shell itself owns the terminal (no foreground job)."""
        stat = _read_stat(self._shell_pid) if self._shell_pid else None
        return stat is None or stat.tpgid in (stat.pgrp, -1)

    def _enforce_command_limit(self) -> None:
        """Kill a foreground job that has run longer than ``limits.command_s``."""
        if self._shell_pid is None or self._proc is None:
            return
        stat = _read_stat(self._shell_pid)
        if stat is None or stat.tpgid in (stat.pgrp, -1, 0):
            return
        table = _process_table()
        ours = _descendants(table, self._proc.pid)
        group = [pid for pid in ours if table[pid].pgrp == stat.tpgid]
        if not group:
            return
        started = min(table[pid].start for pid in group)
        if _uptime() - started < self.sandbox.limits.command_s:
            return
        for pid in group:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.killed_commands += 1


def _trim(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _new_part(before: list[str], after: list[str]) -> list[str] | None:
    """The lines of ``after`` from the last line of ``before`` on, when ``after`` still
    starts with what ``before`` showed; None when the screen was redrawn."""
    if not before:
        return after
    keep = len(before) - 1
    if len(after) < keep or after[:keep] != before[:keep]:
        return None
    return after[keep:]


@lru_cache(maxsize=4)
def _terminfo_has(name: str) -> bool:
    return any(
        Path(base, name[0], name).exists()
        for base in ("/usr/share/terminfo", "/lib/terminfo", "/etc/terminfo")
    )


@dataclass(frozen=True)
class _Stat:
    ppid: int
    pgrp: int
    tpgid: int
    start: float  # seconds after boot


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _read_stat(pid: int | None) -> _Stat | None:
    if pid is None:
        return None
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ')'.
    fields = raw[raw.rfind(")") + 2 :].split()
    try:
        return _Stat(int(fields[1]), int(fields[2]), int(fields[5]), int(fields[19]) / _TICKS)
    except (IndexError, ValueError):
        return None


def _process_table() -> dict[int, _Stat]:
    table: dict[int, _Stat] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _read_stat(int(entry))
            if stat is not None:
                table[int(entry)] = stat
    return table


def _descendants(table: dict[int, _Stat], ancestor: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, stat in table.items():
        children.setdefault(stat.ppid, []).append(pid)
    found: set[int] = set()
    todo = [ancestor]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _host_pid(ancestor: int, inner_pid: int) -> int | None:
    """The host pid of the process numbered ``inner_pid`` inside the sandbox started as
    ``ancestor`` (matched on the innermost NSpid entry)."""
    table = _process_table()
    for pid in _descendants(table, ancestor):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:") and line.split()[-1] == str(inner_pid):
                return pid
    return None


def _uptime() -> float:
    try:
        return float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return time.clock_gettime(time.CLOCK_BOOTTIME)
