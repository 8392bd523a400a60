"""Execution grounding's runner: commands whose inputs the state knows run for real.

:class:`SandboxRunner` answers :class:`simgym.core.execution.Run` requests in a
:class:`~simgym.real.sandbox.Sandbox` (bubblewrap, no network, cgroup and seccomp limits).
One sandbox is kept warm per episode (``Run.session``): before each run the state's files
are laid over it (only what changed since the last run is written), the command lines run
one after another in fresh shells that carry the working directory and environment
forward, and the tree under ``Run.scope`` is read back and compared with what was there
before, so the changes go to the ledger as certain effects. A terminal's command runs on
a pseudo-terminal as wide as the real backend's tmux window (programs that ask whether
they write to a terminal, such as ``ls`` and Python's buffering, behave as they do there);
a repository's ``bash`` runs on pipes, as the real swe backend runs it.

The scenario's clock reaches programs through libfaketime (Debian's ``faketime``), loaded
by the sandbox's own ``/etc/ld.so.preload`` so that no variable shows in ``env``; without
it programs see the host's time.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import fcntl
import json
import os
import posixpath
import re
import secrets
import select
import shlex
import shutil
import stat
import struct
import subprocess
import termios
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from simgym.core.execution import Run, RunResult
from simgym.real.clock import hold_sandbox_clock
from simgym.real.sandbox import (
    CONTROL_DIR,
    Limits,
    Sandbox,
    SandboxError,
    bwrap_problem,
    placeable,
    reap,
)
from simgym.real.seccomp_filter import filter_fd
from simgym.real.snapshot import read_text

# The real terminal backend's tmux window (simgym.real.shell.ShellSession).
COLUMNS, LINES = 160, 48
# Trees of the sandbox's root that hold the host's system or the runner's own files: their
# changes are not the machine's (a scenario's own files there are still compared).
_PRUNED = ("/etc", "/usr", "/run", "/proc", "/sys", "/dev")
_FILE_MODE, _DIR_MODE = 0o644, 0o755
# What one run may use: a command that would run longer is the model's to render.
RUN_LIMITS = Limits(cpu_s=20, memory_mb=1024, file_mb=64, command_s=10.0, episode_s=6 * 3600)


@dataclass
class _Warm:
    """One episode's sandbox and what the runner last laid into it."""

    sandbox: Sandbox
    laid: dict[str, str] = field(default_factory=dict)  # absolute path -> content
    modes: dict[str, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    server: subprocess.Popen[bytes] | None = None  # exec_server.py, started on first use
    no_server: bool = False  # it could not start: every run starts its own sandboxed shell


class SandboxRunner:
    """Runs :class:`Run` requests in warm per-episode sandboxes (see the module doc)."""

    def __init__(self, limits: Limits = RUN_LIMITS, *, max_sessions: int = 64) -> None:
        self.limits = limits
        self.max_sessions = max_sessions
        self._warm: OrderedDict[str, _Warm] = OrderedDict()

    @staticmethod
    def problem() -> str | None:
        """Why commands cannot run here (None when they can)."""
        return bwrap_problem()

    async def run(self, request: Run) -> RunResult:
        start = time.perf_counter()
        key = request.session or f"once-{secrets.token_hex(6)}"
        try:
            warm = self._session(key, request)
            # one episode's runs come one after another (an environment steps in turn)
            if request.repository is not None and not warm.laid:
                await self._repository(warm, request)
            self._lay(warm, request)
            before = _walk(warm.sandbox.root, request.scope)
            result = await self._chunks(warm, request)
            if result.problem is None:
                after = _walk(warm.sandbox.root, request.scope)
                _compare(warm, request, before, after, result)
        except (SandboxError, OSError) as exc:
            await self.close(key)
            return RunResult([], -1, problem=f"{type(exc).__name__}: {exc}")
        finally:
            if request.session is None:
                await self.close(key)
        if result.problem is not None:
            await self.close(key)  # a killed run may leave anything behind: start afresh
        result.seconds = time.perf_counter() - start
        return result

    async def close(self, session: str) -> None:
        self.forget(session)

    def forget(self, session: str) -> None:
        """Close ``session``'s sandbox and helper now (needs no event loop)."""
        warm = self._warm.pop(session, None)
        if warm is not None:
            _kill_server(warm)
            warm.sandbox.destroy()

    def close_all(self) -> None:
        """Delete every warm sandbox (needs no event loop)."""
        while self._warm:
            _, warm = self._warm.popitem()
            _kill_server(warm)
            warm.sandbox.destroy()

    # -- the sandbox --------------------------------------------------------------------

    def _session(self, key: str, request: Run) -> _Warm:
        warm = self._warm.get(key)
        if warm is not None:
            self._warm.move_to_end(key)
            return warm
        while len(self._warm) >= self.max_sessions:
            _, old = self._warm.popitem(last=False)
            _kill_server(old)
            old.sandbox.destroy()
        sandbox = Sandbox(
            user=request.user,
            hostname=request.host,
            home=request.home,
            cwd=request.cwd,
            limits=self.limits,
        ).build()
        hold_sandbox_clock(sandbox.root, request.clock)
        for path, target in request.links.items():
            link = _host(sandbox, path)
            if (
                placeable(path)
                and not link.exists()
                and not os.path.exists("/usr/bin/" + posixpath.basename(path))
            ):
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(target)
        warm = _Warm(sandbox)
        self._warm[key] = warm
        return warm

    async def _repository(self, warm: _Warm, request: Run) -> None:
        """The repository's first commit: its files as the scenario gave them."""
        repo = request.repository
        assert repo is not None
        first = {
            posixpath.join(request.scope, path): content for path, content in repo.files.items()
        }
        first.setdefault(request.scope.rstrip("/") + "/", "")
        modes = {p: m for p, m in request.modes.items() if p in first}
        _lay_files(warm, first, modes, request.clock)
        script = (
            "git init -q -b " + shlex.quote(repo.branch) + " . && git add -A && "
            "git -c user.name=simgym -c user.email=simgym@localhost "
            "commit -q --allow-empty -m " + shlex.quote(repo.message)
        )
        done = await warm.sandbox.exec(script, cwd=request.scope, timeout=30)
        if done.exit_code != 0:
            raise SandboxError(f"git could not make the repository: {done.output.strip()[:200]}")

    def _lay(self, warm: _Warm, request: Run) -> None:
        _lay_files(warm, request.files, request.modes, request.clock)

    async def _chunks(self, warm: _Warm, request: Run) -> RunResult:
        sandbox = warm.sandbox
        cwd, env = request.cwd, dict(request.env)
        spool = sandbox.root / "run" / f".simgym-{secrets.token_hex(6)}"
        spool.mkdir(mode=0o777)
        spool.chmod(0o777)
        outputs: list[str] = []
        cwds: list[str] = []
        status = 0
        try:
            for chunk in request.chunks:
                inside = "/run/" + spool.name
                # the trap records where the shell ended up; on the chunk's own first line,
                # so bash's "line N" in error messages counts the agent's lines
                trap = (
                    f"trap 'pwd > {inside}/cwd 2>/dev/null; env -0 > {inside}/env 2>/dev/null'"
                    " EXIT; "
                )
                argv = ["bash", "--norc", "--noprofile", "-c", trap + chunk]
                out, status, problem = await self._one(warm, argv, cwd, env, request)
                if problem is not None:
                    return RunResult(outputs, status, problem=problem)
                outputs.append(_as_shown(out, request.terminal))
                cwd, env = _after(spool, cwd, env)
                cwds.append(cwd)
        finally:
            shutil.rmtree(spool, ignore_errors=True)
        base = {**sandbox.environment(), **request.env}
        changed: dict[str, str | None] = {
            k: v for k, v in env.items() if base.get(k) != v and k not in _SHELL_OWN
        }
        changed.update({k: None for k in request.env if k not in env})
        return RunResult(
            outputs, status, cwd=cwd if cwd != request.cwd else None, env=changed, cwds=cwds
        )

    async def _one(
        self, warm: _Warm, argv: list[str], cwd: str, env: dict[str, str], request: Run
    ) -> tuple[str, int, str | None]:
        """Run one shell; (output, status, why it did not finish or None)."""
        sandbox = warm.sandbox
        # the limits go on the command's own first line: one shell fewer to start, and
        # bash's "line N" in error messages still counts the agent's lines
        *head, chunk = argv
        limits = "; ".join(line for line in sandbox.limits_script().splitlines() if line)
        full = [*head, f"{limits}; {chunk}"]
        run_env = dict(env)
        if request.terminal:
            run_env.setdefault("COLUMNS", str(COLUMNS))
            run_env.setdefault("LINES", str(LINES))
        limit = min(request.timeout_s, self.limits.command_s)
        saved, sandbox.env = sandbox.env, run_env  # runs of a session never overlap
        try:
            environment = sandbox.environment()
        finally:
            sandbox.env = saved
        if not warm.no_server:
            answer = await _ask(warm, full, environment, cwd, request.terminal, limit)
            if answer is not None:
                return answer
        fd = filter_fd()
        saved, sandbox.env = sandbox.env, run_env
        try:
            command = sandbox.bwrap_command(full, chdir=cwd, seccomp_fd=fd)
        finally:
            sandbox.env = saved
        if request.terminal:
            return await _on_terminal(command, fd, limit)
        return await _on_pipes(command, fd, limit, self.limits.output_chars)


_SERVER = Path(__file__).with_name("exec_server.py")
_CAP = 4 << 20  # bytes of output a run may print before it is stopped


async def _start_server(warm: _Warm) -> subprocess.Popen[bytes] | None:
    """Start the sandbox's helper. A plain process, not an asyncio one: its pipes belong
    to no event loop, so a session outlives the loop that started it."""
    sandbox = warm.sandbox
    (sandbox.control / "exec_server.py").write_text(_SERVER.read_text())
    limits = "; ".join(line for line in sandbox.limits_script().splitlines() if line)
    script = f"{limits}; exec /usr/bin/python3 -I -S {CONTROL_DIR}/exec_server.py"
    fd = filter_fd()
    command = sandbox.bwrap_command(["/bin/bash", "-c", script], chdir="/", seccomp_fd=fd)
    try:
        return subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            pass_fds=() if fd is None else (fd,),
        )
    finally:
        if fd is not None:
            os.close(fd)


def _exchange(server: subprocess.Popen[bytes], request: bytes, timeout: float) -> bytes:
    """Send one request line and read the answer line (blocking; run in a thread)."""
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(request)
    server.stdin.flush()
    out = server.stdout.fileno()
    data = bytearray()
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([out], [], [], left)[0]:
            raise TimeoutError("the sandbox's helper did not answer")
        piece = os.read(out, 1 << 20)
        if not piece:
            raise OSError("the sandbox's helper stopped")
        data += piece
        if len(data) > _CAP * 2:
            raise ValueError("the helper's answer is too long")
    return bytes(data)


async def _ask(
    warm: _Warm, argv: list[str], env: dict[str, str], cwd: str, terminal: bool, limit: float
) -> tuple[str, int, str | None] | None:
    """Run through the sandbox's own helper; None when it is not there (then the caller
    starts a sandboxed shell for this run)."""
    if warm.server is None or warm.server.poll() is not None:
        warm.server = await _start_server(warm)
    server = warm.server
    if server is None:
        warm.no_server = True
        return None
    request = {
        "argv": argv,
        "env": env,
        "cwd": cwd,
        "terminal": terminal,
        "limit": limit,
        "cap": _CAP,
        "columns": COLUMNS,
        "lines": LINES,
    }
    line = json.dumps(request).encode() + b"\n"
    try:
        answer = json.loads(await asyncio.to_thread(_exchange, server, line, limit + 10))
    except (TimeoutError, OSError, ValueError):
        _kill_server(warm)
        warm.no_server = True
        return None
    why = answer.get("why")
    if why == "timeout":
        return "", 124, f"the command ran past {limit:g} s (or waits for the keyboard)"
    if why == "flood":
        return "", 0, "the command printed more than the runner keeps"
    if why:
        _kill_server(warm)
        warm.no_server = True
        return None
    text = base64.b64decode(answer["out"]).decode("utf-8", errors="replace")
    code = int(answer["status"])
    return text, (128 - code if code < 0 else code), None


def _kill_server(warm: _Warm) -> None:
    server, warm.server = warm.server, None
    if server is not None and server.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(server.pid, 9)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(timeout=5)
    if server is not None:
        for pipe in (server.stdin, server.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()


# Variables bash sets itself in every shell: never the agent's changes.
_SHELL_OWN = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES", "FAKETIME_SHARED"})


async def _on_pipes(
    command: list[str], fd: int | None, limit: float, keep: int
) -> tuple[str, int, str | None]:
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            pass_fds=() if fd is None else (fd,),
        )
    finally:
        if fd is not None:
            os.close(fd)
    try:
        async with asyncio.timeout(limit):
            data, _ = await proc.communicate()
    except TimeoutError:
        await reap(proc)
        return "", 124, f"the command ran past {limit:g} s"
    except BaseException:
        await asyncio.shield(reap(proc))
        raise
    text = data.decode("utf-8", errors="replace")
    if proc.returncode == 1 and text.startswith("bwrap: "):
        raise SandboxError(text.strip())
    if len(text) > keep:
        return "", 0, "the command printed more than the runner keeps"
    code = proc.returncode if proc.returncode is not None else -1
    return text, (128 - code if code < 0 else code), None


async def _on_terminal(
    command: list[str], fd: int | None, limit: float
) -> tuple[str, int, str | None]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            pass_fds=() if fd is None else (fd,),
        )
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
        if fd is not None:
            os.close(fd)
    loop = asyncio.get_running_loop()
    chunks: list[bytes] = []
    closed = loop.create_future()

    def readable() -> None:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            data = b""
        if data:
            chunks.append(data)
            if sum(map(len, chunks)) > (4 << 20) and not closed.done():
                loop.remove_reader(master)
                closed.set_result("flood")
        else:  # the end: stop watching at once (a closed terminal stays readable)
            loop.remove_reader(master)
            if not closed.done():
                closed.set_result(None)

    loop.add_reader(master, readable)
    try:
        async with asyncio.timeout(limit):
            flood = await closed
            if flood:
                await reap(proc)
                return "", 0, "the command printed more than the runner keeps"
            await proc.wait()
    except TimeoutError:
        await reap(proc)
        return "", 124, f"the command ran past {limit:g} s (or waits for the keyboard)"
    except BaseException:
        await asyncio.shield(reap(proc))
        raise
    finally:
        loop.remove_reader(master)
        os.close(master)
    text = b"".join(chunks).decode("utf-8", errors="replace")
    if proc.returncode == 1 and text.startswith("bwrap: "):
        raise SandboxError(text.strip())
    code = proc.returncode if proc.returncode is not None else -1
    return text, (128 - code if code < 0 else code), None


# What tmux's capture leaves out of a screen: colours and other escape sequences.
_ESCAPES = re.compile(
    r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]"  # CSI: colours, cursor, modes
    r"|\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: window titles
    r"|[()][0-9A-Za-z]|[=>78cDEHMNOZ])"  # character sets, keypad modes
)


def _as_shown(text: str, terminal: bool) -> str:
    """What the agent sees. On a terminal, as the real backend's tmux screen shows it: CR LF
    as LF, escape sequences (colours, a pager's keypad mode) dropped, tabs at 8-column
    stops, no blanks at line ends; and an interactive shell names no line in its errors
    (``bash: foo: command not found``), where ``bash -c`` says ``line 1``."""
    if not terminal:
        return text
    text = _ESCAPES.sub("", text).replace("\r\n", "\n").replace("\r", "")
    text = "".join(c for c in text if c in "\n\t" or c >= " " or c > "\x7f")
    lines = text.split("\n")
    return "\n".join(
        (
            "bash: " + line.split(": ", 2)[2]
            if line.startswith("bash: line ") and line.count(": ") >= 2
            else line
        )
        .expandtabs(8)
        .rstrip()
        for line in lines
    )


def _after(spool: Path, cwd: str, env: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The shell's working directory and environment at its exit (unchanged if it left
    no record, as after ``exec``)."""
    try:
        where = (spool / "cwd").read_text().strip() or cwd
        raw = (spool / "env").read_bytes()
    except OSError:
        return cwd, env
    found: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, eq, value = item.decode("utf-8", errors="replace").partition("=")
        if eq and name:
            found[name] = value
    for name in ("cwd", "env"):
        with contextlib.suppress(OSError):
            (spool / name).unlink()
    return where, found


# -- the files -----------------------------------------------------------------------


def _host(sandbox: Sandbox, path: str) -> Path:
    normal = posixpath.normpath("/" + path.lstrip("/"))
    return sandbox.root / normal.lstrip("/")


def _lay_files(
    warm: _Warm, files: dict[str, str], modes: dict[str, int], clock: datetime | None
) -> None:
    """Make the sandbox's files those of the state: write what differs from what was
    laid last time, delete what the state no longer has, set the permission bits."""
    sandbox = warm.sandbox
    wanted = {p: c for p, c in files.items() if placeable(p)}
    stamp = _machine_time(warm, clock)
    for path in sorted(set(warm.laid) - set(wanted), key=len, reverse=True):
        target = _host(sandbox, path)
        if path.endswith("/"):
            shutil.rmtree(target, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                target.unlink()
        warm.laid.pop(path, None)
        warm.modes.pop(path, None)
    for path in sorted(wanted):  # parents before children
        content = wanted[path]
        target = _host(sandbox, path)
        _inside(sandbox, target)
        if path.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
        elif warm.laid.get(path) != content or not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.is_dir():
                shutil.rmtree(target) if target.is_dir() else target.unlink()
            target.write_text(content, encoding="utf-8")
            if stamp is not None:
                os.utime(target, (stamp, stamp))
        warm.laid[path] = content
        mode = modes.get(path.rstrip("/"), _DIR_MODE if path.endswith("/") else _FILE_MODE)
        if warm.modes.get(path) != mode:
            target.chmod(mode)
            warm.modes[path] = mode


def _machine_time(warm: _Warm, clock: datetime | None) -> float | None:
    """The scenario's clock, run on since the sandbox was made: a file written later is
    newer (``make`` depends on it), and every time is near the clock ``date`` shows."""
    if clock is None:
        return None
    start = clock.replace(tzinfo=clock.tzinfo or UTC).timestamp()
    return start + (time.monotonic() - warm.started)


def _inside(sandbox: Sandbox, target: Path) -> None:
    real = Path(os.path.realpath(target.parent))
    if real != sandbox.root and sandbox.root not in real.parents:
        raise SandboxError(f"a state path leads outside the sandbox: {target}")


Entry = tuple[bool, int, int, int]  # is a directory, size, mtime (ns), mode


def _walk(root: Path, scope: str) -> dict[str, Entry]:
    """Every file and directory under ``scope`` (absolute, inside the sandbox), but the
    pruned system trees and ``.git`` directories (a repository's own)."""
    found: dict[str, Entry] = {}
    top = root / scope.lstrip("/")
    for directory, dirs, names in os.walk(top):
        here = "/" + Path(directory).relative_to(root).as_posix().lstrip(".").lstrip("/")
        here = posixpath.normpath(here)
        dirs[:] = [d for d in dirs if d != ".git" and posixpath.join(here, d) not in _PRUNED]
        for name in [*dirs, *names]:
            path = posixpath.join(here, name)
            try:
                info = os.lstat(Path(directory) / name)
            except OSError:
                continue
            is_dir = stat.S_ISDIR(info.st_mode)
            found[path + "/" if is_dir else path] = (
                is_dir,
                info.st_size,
                info.st_mtime_ns,
                stat.S_IMODE(info.st_mode),
            )
    return found


def _compare(
    warm: _Warm,
    request: Run,
    before: dict[str, Entry],
    after: dict[str, Entry],
    result: RunResult,
) -> None:
    """Fill ``result`` with what the run changed, and remember it as laid."""
    root = warm.sandbox.root
    stamp = _machine_time(warm, request.clock)
    for path in sorted(set(before) - set(after)):
        result.changes[path] = None
        warm.laid.pop(path, None)
        warm.modes.pop(path, None)
    for path, entry in after.items():
        old = before.get(path)
        is_dir, _, _, mode = entry
        default = _DIR_MODE if is_dir else _FILE_MODE
        if old is None or old[:3] != entry[:3]:
            if is_dir:
                if old is None:
                    result.changes[path] = ""
                    warm.laid[path] = ""
            else:
                content = read_text(root / path.lstrip("/"))
                if old is None or warm.laid.get(path) != content:
                    result.changes[path] = content
                warm.laid[path] = content
                if stamp is not None:
                    with contextlib.suppress(OSError):
                        os.utime(root / path.lstrip("/"), (stamp, stamp))
        if old is None and mode != default or old is not None and old[3] != mode:
            result.modes[path.rstrip("/")] = mode
        warm.modes[path] = mode


_SHARED: list[SandboxRunner | None] = []


def problem() -> str | None:
    """Why the shared runner cannot run commands here (None when it can)."""
    return bwrap_problem()


def shared_runner() -> SandboxRunner | None:
    """The process's runner (None where sandboxes cannot run); its sandboxes are deleted
    at exit, and a later run reclaims those of a process killed before it could."""
    if not _SHARED:
        runner = None if bwrap_problem() else SandboxRunner()
        if runner is not None:
            atexit.register(runner.close_all)
        _SHARED.append(runner)
    return _SHARED[0]
