"""``ps`` of procps-ng 4.0.2 over a declared machine's processes
(:mod:`simgym.domains.shell.machine`)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from simgym.domains.shell.declared import Machine, Process, Result

# Sizes of the processes a session adds, measured on Debian 12 (bash 5.2, procps 4.0.2,
# grep 3.8, coreutils 9.1): VSZ and RSS in KiB.
_PIPE_SIZES = {"grep": (3760, 1900), "egrep": (3760, 1900), "fgrep": (3760, 1900)}
_OTHER_SIZE = (3060, 1760)
_SSHD_PRIV = (17356, 10880)
_SSHD_USER = (17616, 6884)

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


def ps_output(
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
