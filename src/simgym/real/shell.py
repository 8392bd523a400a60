"""An interactive ``bash`` in a tmux session inside a :class:`~simgym.real.sandbox.Sandbox`.

:class:`ShellSession` keeps one shell alive, types keys into it and reads the screen back.
The host never talks to anything the sandbox could replace: the tmux client runs *inside*
the sandbox behind a small control loop on a pipe, and the host only reads bytes from that
pipe and (read-only) the process table, to see whether a command is still running and to
kill one that ran past its time limit. The control loop is the namespace's init and
non-dumpable, so the agent can neither kill it nor open its pipes or read its memory; its
answers are length-framed and numbered, so nothing on the screen can pass for one, and an
answer out of place stops the session with an error instead of stale screens.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import BinaryIO

from simgym.real.clock import as_utc, hold_sandbox_clock
from simgym.real.sandbox import (
    CONTROL_DIR,
    ProcStat,
    Sandbox,
    SandboxError,
    kill_group,
    kill_inside,
    process_table,
    read_stat,
)

TMUX_SOCKET = "/run/tmux-simgym/socket"  # the tmux server's socket, inside the sandbox


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """End a sandbox started as ``proc``: end of input first, then kills."""
    if proc.stdin is not None and not proc.stdin.is_closing():
        proc.stdin.close()
    for kill in (None, kill_inside, kill_group):
        if kill is not None:
            kill(proc.pid)
        try:
            async with asyncio.timeout(2):
                await proc.wait()
            return
        except TimeoutError:
            continue


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

# A pane's shell must not inherit libfaketime's shared-memory name from the tmux server:
# a shell respawned after a process storm was stopped died at start on the stale name.
_TMUX_CONF = """set -g status off
set -g remain-on-exit on
set -g remain-on-exit-format ""
set -g history-limit 5000
set -g update-environment ""
set-environment -gu FAKETIME_SHARED
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

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        width: int = 160,
        height: int = 48,
        clock: datetime | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.width = width
        self.height = height
        self.clock = clock  # the scenario's time, which every program reads (libfaketime)
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
        hold_sandbox_clock(sandbox.root, self.clock)
        if self.clock is not None:
            sandbox.date_files(as_utc(self.clock).timestamp())
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
            kill_inside(proc.pid)
            kill_group(proc.pid)
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
            kill_inside(proc.pid)
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
            raise SandboxError(f"tmux {args[0]} failed: {_tmux_reason(text, code)}")
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
            await self._tmux("send-keys", "-t", "main", _tmux_word(keys))
            return
        parts = keys.split("\n")
        for i, part in enumerate(parts):
            if part:
                await self._tmux("send-keys", "-t", "main", "-l", "--", _tmux_word(part))
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
        stat = read_stat(self._shell_pid) if self._shell_pid else None
        return stat is None or stat.tpgid in (stat.pgrp, -1)

    def _enforce_command_limit(self) -> None:
        """Kill a foreground job that has run longer than ``limits.command_s``."""
        if self._shell_pid is None or self._proc is None:
            return
        stat = read_stat(self._shell_pid)
        if stat is None or stat.tpgid in (stat.pgrp, -1, 0):
            return
        table = process_table()
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


def _tmux_word(text: str) -> str:
    """``text`` as one argument of a tmux command given on tmux's own command line. tmux
    reads an argument that ends in ``;`` as the end of a command (``-l`` does not change
    that): ``find . -exec wc -l {} \\;`` would lose its ``;`` and ``\\`` (tmux turns a final
    ``\\;`` into ``;``), a ``case`` arm's ``;;`` one ``;``. A final ``;`` written ``\\;`` is
    typed as ``;``, and the text before it is left as it is."""
    return text[:-1] + "\\;" if text.endswith(";") else text


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


def _descendants(table: dict[int, ProcStat], ancestor: int) -> set[int]:
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
    table = process_table()
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


def _tmux_reason(output: str, code: int) -> str:
    """Why a tmux command failed: its own message, or (a client cut off as the server
    died says nothing) its exit status and what that means."""
    said = " ".join(output.split())
    if said:
        return said[:300]
    if code >= 128:
        return f"tmux was killed by signal {code - 128} (exit status {code}) and said nothing"
    return (
        f"exit status {code} and no message: the tmux server in the sandbox ended while it "
        "answered (the agent's shell or a command may have killed it)"
    )
