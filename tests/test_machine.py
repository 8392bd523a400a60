"""The declared machine (simgym.domains.shell.machine): ps, df, free, which, dpkg -l, nproc and
cat /etc/os-release print what the real Debian 12 programs print for the same numbers.

The comparisons run the real programs over the same facts: ``free`` over a /proc/meminfo
bound into a bubblewrap sandbox, ``df`` over tmpfs mounts of chosen sizes, ``ps`` over a
whole faked /proc (pids, states, times, sizes, users, a tty) in a pid namespace whose next
pid is set so that ``ps`` gets the pid the declaration gives it, ``which`` over PATH
directories of our own, ``dpkg -l`` over this machine's package database. They are skipped
where the program, bubblewrap or (for ps) root is missing."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

import simgym
from simgym.domains.shell import UNAME_DECLARED
from simgym.domains.shell.machine import (
    Machine,
    answer,
    default_profile,
    default_uname,
    human_readable,
)
from simgym.domains.shell.ps import _process_table

DEBIAN = Path("/etc/debian_version").exists()
BWRAP = shutil.which("bwrap")
ENV = {"LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin", "TZ": os.environ.get("TZ", "UTC")}


def _bwrap_works() -> bool:
    if BWRAP is None:
        return False
    done = subprocess.run(
        [BWRAP, "--dev-bind", "/", "/", "--", "/bin/true"], capture_output=True, check=False
    )
    return done.returncode == 0


SANDBOX = _bwrap_works()
needs_bwrap = pytest.mark.skipif(not SANDBOX, reason="bubblewrap cannot run here")
needs_debian = pytest.mark.skipif(not DEBIAN, reason="the real programs are Debian's")


def small(**changes) -> Machine:
    data = {
        "processes": [
            {
                "user": "root",
                "pid": 1,
                "stat": "Ss",
                "start": "Mar10",
                "command": "/sbin/init",
                "vsz": 167744,
                "rss": 12620,
                "time": "0:05",
            },
            {"user": "root", "pid": 2, "stat": "S", "start": "Mar10", "command": "[kthreadd]"},
            {
                "user": "root",
                "pid": 436,
                "ppid": 1,
                "stat": "Ss",
                "start": "Mar10",
                "command": "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups",
                "vsz": 15420,
                "rss": 9240,
            },
        ],
        "mounts": [
            {
                "filesystem": "/dev/vda1",
                "type": "ext4",
                "size": 20466256,
                "used": 2101444,
                "avail": 17300524,
                "mounted_on": "/",
            },
            {
                "filesystem": "tmpfs",
                "type": "tmpfs",
                "size": 5120,
                "used": 0,
                "avail": 5120,
                "mounted_on": "/run/lock",
            },
        ],
        "memory": {
            "total": 2014196,
            "free": 1290340,
            "shared": 1104,
            "buff_cache": 520068,
            "available": 1725744,
        },
        "packages": [
            {
                "name": "bash",
                "version": "5.2.15-2+b7",
                "description": "GNU Bourne Again SHell",
                "programs": ["/bin/bash"],
            },
        ],
        "os_release": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n',
        "cpus": 2,
    }
    return Machine.model_validate({**data, **changes})


# -- the model ---------------------------------------------------------------------------


def test_a_machine_refuses_unknown_keys_and_inconsistent_numbers():
    with pytest.raises(ValidationError, match="Extra inputs"):
        small(swap=0)
    with pytest.raises(ValidationError, match="Extra inputs"):
        Machine.model_validate(
            {
                "processes": [
                    {"user": "root", "pid": 1, "start": "Mar10", "command": "init", "%cpu": 1}
                ]
            }
        )
    bad_memory = {"total": 100, "free": 10, "available": 50, "used": 10}
    with pytest.raises(ValidationError, match="total - available"):
        small(memory=bad_memory)
    with pytest.raises(ValidationError, match="exceed size"):
        small(
            mounts=[
                {
                    "filesystem": "tmpfs",
                    "type": "tmpfs",
                    "size": 10,
                    "used": 6,
                    "avail": 6,
                    "mounted_on": "/x",
                }
            ]
        )
    twice = small().model_dump()["processes"][:1] * 2
    with pytest.raises(ValidationError, match="declared twice"):
        small(processes=twice)
    for field, value in (("stat", "Z<<"), ("start", "yesterday"), ("tty", "pts0")):
        process = {"user": "root", "pid": 1, "start": "Mar10", "command": "x", field: value}
        with pytest.raises(ValidationError):
            Machine.model_validate({"processes": [process]})
    assert small().memory.used == 2014196 - 1725744  # procps 4: total - available
    assert (
        Machine.model_validate(
            {
                "processes": [
                    {"user": "root", "pid": 9, "start": "Mar10", "command": "x", "time": "01:02:03"}
                ]
            }
        )
        .processes[0]
        .time
        == 3723
    )


def test_the_shipped_profile_loads_and_feeds_the_default_terminal():
    machine = default_profile()
    assert machine.os_name == "Debian GNU/Linux 12 (bookworm)"
    assert machine.processes[0].command == "/sbin/init" and machine.memory is not None
    assert {m.mounted_on for m in machine.mounts} >= {"/", "/run", "/run/lock"}
    names = {p.name for p in machine.packages}
    assert {"coreutils", "openssh-server", "python3-minimal", "git", "vim", "curl"} <= names
    uname = default_uname()
    assert set(uname) == set(UNAME_DECLARED)
    terminal = simgym.get_domain("terminal")
    scenario = terminal.scenario(terminal.default_scenario())
    assert scenario.os == machine.os_name and scenario.uname == uname
    assert scenario.machine == machine
    # every program the default scenario lists is one the machine provides
    for program in scenario.programs:
        out = answer(["which", program], machine, user=scenario.user, cwd=scenario.working_dir)
        assert out is not None and out[2] == 0 and out[0].endswith(f"/{program}\n"), program


def test_ps_adds_the_session_after_the_highest_declared_pid():
    machine = small()
    now = datetime(2025, 3, 14, 9, 26)
    out, err, status = answer(["ps", "aux"], machine, user="dev", cwd="/home/dev", now=now)
    assert status == 0 and not err
    rows = out.splitlines()
    assert rows[0] == "USER         PID %CPU %MEM    VSZ   RSS TTY      STAT START   TIME COMMAND"
    assert rows[-4:] == [
        "root         437  0.0  0.5  17356 10880 ?        Ss   09:26   0:00 sshd: dev [priv]",
        "dev          439  0.0  0.3  17616  6884 ?        S    09:26   0:00 sshd: dev@pts/0",
        "dev          440  0.0  0.1   4724  3788 pts/0    Ss   09:26   0:00 -bash",
        "dev          441  0.0  0.2   8548  4560 pts/0    R+   09:26   0:00 ps aux",
    ]
    # later commands fork later pids; a pipeline's other commands are there too
    out, _, _ = answer(
        ["ps", "-ef"], machine, user="dev", cwd="/", now=now, forks=5, pipeline=[["grep", "sshd"]]
    )
    assert out.splitlines()[-2:] == [
        "dev          446     440  0 09:26 pts/0    00:00:00 ps -ef",
        "dev          447     440  0 09:26 pts/0    00:00:00 grep sshd",
    ]
    assert answer(["ps"], machine, user="dev", cwd="/")[0] == (
        "    PID TTY          TIME CMD\n    440 pts/0    00:00:00 bash\n"
        "    441 pts/0    00:00:00 ps\n"
    )
    # on an 80-column terminal ps cuts its lines; START needs the clock
    out, _, _ = answer(["ps", "aux"], machine, user="dev", cwd="/", now=now, width=80)
    assert max(len(line) for line in out.splitlines()) == 80
    assert answer(["ps", "aux"], machine, user="dev", cwd="/") is None


def test_what_is_not_modelled_is_left_to_the_world_model():
    machine = small()
    for argv in (
        ["ps", "--sort=-%mem"],
        ["ps", "-o", "pid,comm"],
        ["ps", "auxf"],
        ["ps", "-u", "nobody"],
        ["df", "-i"],
        ["df", "-a"],
        ["free", "-s", "1"],
        ["free", "-v"],
        ["dpkg", "-L", "bash"],
        ["which", "-x", "ls"],
        ["nproc", "--ignore=1"],
        ["cat", "/etc/hostname"],
        ["top"],
        ["dpkg", "-l"],  # the package list is not declared complete
        ["which", "python3"],  # nor are the programs
    ):
        assert answer(argv, machine, user="dev", cwd="/", now=datetime(2025, 3, 14)) is None, argv
    assert answer(["free"], machine, user="dev", cwd="/", env={"LC_ALL": "de_DE.UTF-8"}) is None
    assert answer(["df"], small(locale="fr_FR.UTF-8"), user="dev", cwd="/") is None
    assert answer(["free"], small(memory=None), user="dev", cwd="/") is None


def test_df_finds_the_mount_of_a_path_and_says_when_there_is_none():
    machine = small()
    out, _, status = answer(["df", "-h", "/run/lock/x", "/etc"], machine, user="dev", cwd="/")
    assert status == 0 and out == (
        "Filesystem      Size  Used Avail Use% Mounted on\n"
        "tmpfs           5.0M     0  5.0M   0% /run/lock\n"
        "/dev/vda1        20G  2.1G   17G  11% /\n"
    )
    known = {"/home/dev/notes.txt": "file"}
    out, err, status = answer(
        ["df", "notes.txt", "gone"],
        machine,
        user="dev",
        cwd="/home/dev",
        path_kind=lambda p: known.get(p, "missing"),
    )
    assert status == 1 and err == "df: gone: No such file or directory\n"
    assert out.splitlines()[1].startswith("/dev/vda1")
    assert answer(["df", "/proc/cpuinfo"], machine, user="dev", cwd="/") is None
    assert answer(["df", "x"], machine, user="dev", cwd="/", path_kind=lambda p: None) is None


@pytest.mark.parametrize(
    ("kib", "expected"),
    [
        (0, "0"),
        (4, "4.0K"),
        (1023, "1023K"),
        (1024, "1.0M"),
        (1025, "1.1M"),
        (10 * 1024 - 1, "10M"),
        (9 * 1024 + 1, "9.1M"),
        (1024**3, "1.0T"),
        (1024**2 - 1, "1.0G"),
    ],
)
def test_df_human_sizes_round_up(kib, expected):
    assert human_readable(kib, from_block=1024, to_block=1, autoscale=True, base=1024) == expected


# -- against the real programs -----------------------------------------------------------


@needs_bwrap
@needs_debian
def test_free_prints_what_procps_free_prints_for_the_same_meminfo(tmp_path):
    rng = random.Random(7)
    options = [
        [],
        ["-m"],
        ["-h"],
        ["-g"],
        ["-k"],
        ["-b"],
        ["--si"],
        ["-h", "--si"],
        ["--mega"],
        ["--giga"],
        ["-t"],
        ["-w"],
        ["-l"],
        ["--tebi"],
        ["-ht"],
        ["-m", "-g"],
    ]
    # this machine's own numbers first, then random ones of every size
    real = {
        k: int(v.split()[0])
        for k, v in (line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    }
    samples = [real]
    for _ in range(12):
        total = rng.randint(1, 1000) * rng.choice([1, 1000, 10**6, 10**9]) + rng.randint(0, 1023)
        available = rng.randint(0, total)
        free = rng.randint(0, available)
        cache = rng.randint(0, total - free)
        buffers = rng.randint(0, cache)
        swap = rng.choice([0, rng.randint(1, 10**8), 1048575])
        samples.append(
            {
                "MemTotal": total,
                "MemFree": free,
                "MemAvailable": available,
                "Buffers": buffers,
                "Cached": cache - buffers,
                "SReclaimable": 0,
                "Shmem": rng.randint(0, cache),
                "SwapTotal": swap,
                "SwapFree": rng.randint(0, swap),
            }
        )
    meminfo = tmp_path / "meminfo"
    compared = 0
    for info in samples:
        meminfo.write_text("".join(f"{k}: {v} kB\n" for k, v in info.items()))
        available = info["MemAvailable"] or info["MemFree"]
        if available > info["MemTotal"]:
            available = info["MemFree"]
        machine = Machine(
            memory={
                "total": info["MemTotal"],
                "free": info["MemFree"],
                "available": available,
                "shared": info.get("Shmem", 0),
                "buffers": info.get("Buffers", 0),
                "buff_cache": info.get("Buffers", 0)
                + info.get("Cached", 0)
                + info.get("SReclaimable", 0),
                "swap_total": info.get("SwapTotal", 0),
                "swap_used": info.get("SwapTotal", 0) - info.get("SwapFree", 0),
            }
        )
        for opts in options:
            done = subprocess.run(
                [
                    BWRAP,
                    "--dev-bind",
                    "/",
                    "/",
                    "--bind",
                    str(meminfo),
                    "/proc/meminfo",
                    "free",
                    *opts,
                ],
                capture_output=True,
                text=True,
                env=ENV,
                check=False,
            )
            expected = (done.stdout, done.stderr, done.returncode)
            assert answer(["free", *opts], machine, user="dev", cwd="/") == expected, (info, opts)
            compared += 1
    assert compared == len(samples) * len(options)


def _df_in_a_box(tmp: Path, mounts: list[tuple[str, int, int]], argv: list[str]) -> tuple:
    """Run the real df in a sandbox whose every mount is its own and holds still: a new
    tmpfs root holding df and the C library (the host's disks, which other work changes
    while the test runs, are not mounted), /dev, and a tmpfs of each chosen size filled
    with the chosen number of KiB."""
    binaries = ["/usr/bin/df", "/lib64/ld-linux-x86-64.so.2"]
    binaries += re.findall(
        r"=> (/\S+)",
        subprocess.run(["ldd", "/usr/bin/df"], capture_output=True, text=True, check=True).stdout,
    )
    fds: list[int] = []
    args = [BWRAP, "--proc", "/proc", "--dev", "/dev"]
    try:
        for path in binaries:
            fds.append(os.open(os.path.realpath(path), os.O_RDONLY))
            dest = path
            args += ["--perms", "0755", "--file", str(fds[-1]), dest]
        for point, size, used in mounts:
            args += ["--size", str(size * 1024), "--tmpfs", point]
            if used:
                data = tmp / f"fill{used}"
                if not data.exists():
                    data.write_bytes(b"\0" * used * 1024)
                fds.append(os.open(data, os.O_RDONLY))
                args += ["--file", str(fds[-1]), f"{point}/f"]
        done = subprocess.run(
            [*args, "--", *argv],
            pass_fds=fds,
            capture_output=True,
            text=True,
            env={"LC_ALL": "C", "PATH": "/usr/bin"},
            check=False,
        )
    finally:
        for fd in fds:
            os.close(fd)
    return done.stdout, done.stderr, done.returncode


@needs_bwrap
@needs_debian
def test_df_prints_what_coreutils_df_prints_for_the_same_file_systems(tmp_path):
    """tmpfs mounts of chosen sizes around the rounding edges of -h and -H; the machine is
    built from the real ``df -k`` numbers, and every format must then match."""
    k = 1024
    rng = random.Random(11)
    sizes = [
        4,
        1020,
        1024,
        1028,
        10236,
        10240,
        10244,
        1023 * k + 4,
        1024 * k - 4,
        1024 * k,
        10 * k * k - 4,
        10 * k * k + 4,
        10433328,
        10433332,
        102399 * k,
        1024 * k * k - 4,
        5 * k**3 + 4,
        999 * k**3 + 49380,
    ]
    sizes += [rng.randint(1, 10 ** rng.randint(1, 12)) * 4 for _ in range(8)]
    used = [0, 4, 8, 1020, 1024, 1028, 4096, 10236, 10240, 10244]
    mounts = [(f"/m{i}", size, min(rng.choice(used), size)) for i, size in enumerate(sizes)]
    listing = _df_in_a_box(
        tmp_path, mounts, ["df", "-k", "--output=source,fstype,size,used,avail,target"]
    )[0]
    table = []
    for line in listing.splitlines()[1:]:
        source, fstype, size, used_kb, avail, target = line.split(None, 5)
        table.append(
            {
                "filesystem": source,
                "type": fstype,
                "size": int(size),
                "used": int(used_kb),
                "avail": int(avail),
                "mounted_on": target,
            }
        )
    assert len(table) > len(mounts)
    machine = Machine(mounts=table)
    commands = [
        ["df"],
        ["df", "-h"],
        ["df", "-H"],
        ["df", "-T"],
        ["df", "-hT"],
        ["df", "-m"],
        ["df", "--total"],
        ["df", "-h", "--total"],
        ["df", "-h", "/m3/f", "/usr/bin/df", "/"],
        ["df", "-x", "tmpfs"],
        ["df", "-t", "devtmpfs", "-h"],
        ["df", "-h", "/m1", "/nope"],
        ["df", "-kT", "/m5"],
        ["df", "-t", "nfs"],
        ["df", "-H", "/nope"],
    ]

    def kind(path: str) -> str:
        return "missing" if path.startswith("/nope") else "file"

    for command in commands:
        expected = _df_in_a_box(tmp_path, mounts, command)
        assert answer(command, machine, user="root", cwd="/", path_kind=kind) == expected, command


@needs_debian
def test_which_walks_the_path_as_debianutils_which_does(tmp_path):
    dirs = [tmp_path / d for d in "abc"]
    for d in dirs:
        d.mkdir()
    executables = {
        dirs[0] / "tool": True,
        dirs[1] / "tool": True,
        dirs[1] / "other": True,
        dirs[2] / "plain": False,
        tmp_path / "here": True,
    }
    for path, executable in executables.items():
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755 if executable else 0o644)
    (dirs[0] / "adir").mkdir()
    machine = Machine(
        packages=[
            {
                "name": "tools",
                "version": "1",
                "description": "t",
                "programs": [str(p) for p, x in executables.items() if x],
            }
        ],
        complete=True,
    )
    kinds = {str(p): "exec" if x else "file" for p, x in executables.items()}
    kinds[str(dirs[0] / "adir")] = "dir"
    path = ":".join(map(str, dirs))
    for args in (
        ["tool"],
        ["-a", "tool"],
        ["other", "tool"],
        ["nothing"],
        ["plain"],
        ["adir"],
        [],
        ["tool", "nothing"],
        ["./here"],
        ["-a", "nothing", "other"],
        ["--", "tool"],
    ):
        for search in (path, path + ":", ":" + path, ""):
            done = subprocess.run(
                ["/usr/bin/which", *args],
                capture_output=True,
                text=True,
                env={"PATH": search},
                cwd=tmp_path,
                check=False,
            )
            expected = (done.stdout, done.stderr, done.returncode)
            for path_kind in (lambda p: kinds.get(p, "missing"), None):
                got = answer(
                    ["which", *args],
                    machine,
                    user="root",
                    cwd=str(tmp_path),
                    env={"PATH": search},
                    path_kind=path_kind,
                )
                assert got == expected, (args, search)


@needs_debian
def test_which_on_the_profile_matches_this_debian_machine():
    """The recorded programs, looked up as a user and as root (merged /usr: /bin/ls is
    /usr/bin/ls), give what which gives here for the same names."""
    machine = default_profile()
    for user, search in (
        ("dev", "/usr/local/bin:/usr/bin:/bin:/usr/games"),
        ("root", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
    ):
        for names in (["-a", "ip"], ["ls", "vi", "awk", "git"], ["-a", "ps"]):
            done = subprocess.run(
                ["/usr/bin/which", *names],
                capture_output=True,
                text=True,
                env={"PATH": search},
                check=False,
            )
            if done.returncode != 0 or "/usr/local/" in done.stdout:
                continue  # not installed here as in the profile
            got = answer(["which", *names], machine, user=user, cwd="/")
            assert got == (done.stdout, done.stderr, done.returncode), (user, names)


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="no dpkg here")
def test_dpkg_list_prints_what_dpkg_prints_for_the_same_packages():
    fmt = "${db:Status-Abbrev}\t${Package}\t${Version}\t${Architecture}\t${Multi-Arch}\t${binary:Summary}\n"  # noqa: E501
    rows = subprocess.run(
        ["dpkg-query", "-W", "-f", fmt], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    packages = []
    for row in rows:
        status, name, version, arch, multi, summary = row.split("\t")
        packages.append(
            {
                "name": name,
                "version": version,
                "architecture": arch,
                "description": summary,
                "status": status.strip(),
                "multi_arch": multi or None,
            }
        )
    machine = Machine(packages=packages, complete=True)
    for argv in (
        ["dpkg", "-l"],
        ["dpkg", "-l", "bash", "coreutils", "libc6"],
        ["dpkg-query", "-l", "libc6:amd64", "dpkg"],
        ["dpkg", "-l", "no-such-package"],
        ["dpkg", "-l", "bash", "no-such-package", "nor-this"],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, env=ENV, check=False)
        assert answer(argv, machine, user="root", cwd="/") == (
            done.stdout,
            done.stderr,
            done.returncode,
        ), argv
    # on a terminal the list goes through the pager: a short one is printed, cut at the width
    out, _, _ = answer(["dpkg", "-l", "bash"], machine, user="root", cwd="/", width=40, height=24)
    assert {len(line) for line in out.splitlines()} <= set(range(41))
    assert answer(["dpkg", "-l"], machine, user="root", cwd="/", width=80, height=24) is None


@needs_debian
def test_nproc_and_os_release_are_this_machines():
    text = Path("/etc/os-release").read_text()
    machine = Machine(os_release=text, cpus=os.cpu_count())
    nproc = subprocess.run(["nproc"], capture_output=True, text=True, env=ENV, check=False)
    assert answer(["nproc"], machine, user="dev", cwd="/") == (nproc.stdout, "", 0)
    for path in ("/etc/os-release", "../usr/lib/os-release"):
        cat = subprocess.run(["cat", path], capture_output=True, text=True, cwd="/etc", check=False)
        assert answer(["cat", path], machine, user="dev", cwd="/etc") == (cat.stdout, "", 0)
    assert machine.files()["/etc/os-release"] == text


# -- ps over a faked /proc ------------------------------------------------------------------

HZ = 100


def _root_sandbox() -> bool:
    if not SANDBOX or os.geteuid() != 0 or shutil.which("ps") is None:
        return False
    done = subprocess.run(
        [
            BWRAP,
            "--unshare-pid",
            "--cap-add",
            "ALL",
            "--dev-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--",
            "sh",
            "-c",
            "echo 1000 > /proc/sys/kernel/ns_last_pid",
        ],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def _tty_nr(tty: str) -> int:
    if tty == "?":
        return 0
    number = int(re.sub(r"\D", "", tty))
    if tty.startswith("pts/"):
        return (136 << 8) | number
    return (4 << 8) | (64 + number if tty.startswith("ttyS") else number)


def _fake_proc(
    root: Path,
    rows: list[dict],
    *,
    now: float,
    uptime: int,
    memory_kb: int,
    pid_max: int,
    ps_pid: int,
    uids: dict[str, int],
) -> None:
    """A /proc that procps reads as ``rows``: stat, status, cmdline per pid, and the
    system files ps looks at (uptime, stat's btime, meminfo, pid_max, tty drivers)."""
    (root / "sys" / "kernel").mkdir(parents=True)
    (root / "tty").mkdir()
    (root / "sys" / "kernel" / "pid_max").write_text(f"{pid_max}\n")
    (root / "tty" / "drivers").write_text(Path("/proc/tty/drivers").read_text())
    for name in ("cpuinfo", "loadavg", "version"):
        (root / name).write_text(Path("/proc", name).read_text())
    btime = int(now - uptime)
    (root / "uptime").write_text(f"{uptime}.00 {uptime}.00\n")
    (root / "stat").write_text(
        re.sub(r"btime \d+", f"btime {btime}", Path("/proc/stat").read_text())
    )
    (root / "meminfo").write_text(
        f"MemTotal: {memory_kb} kB\nMemFree: {memory_kb // 2} kB\nMemAvailable: {memory_kb // 2} kB\n"
    )
    # tmpfs lists a directory newest first: create the pids downwards so ps reads them upwards
    for row in sorted(rows, key=lambda r: -r["pid"]):
        pid, stat = row["pid"], row["stat"]
        folder = root / str(pid)
        (folder / "task").mkdir(parents=True)
        nice = -20 if "<" in stat else 19 if "N" in stat else 0
        session = pid if "s" in stat else pid + 9000000
        threads = 2 if "l" in stat else 1
        kernel = row["command"].startswith("[")
        fields = [
            pid,
            f"({row['comm']})",
            stat[0],
            row["ppid"],
            pid,
            session,
            _tty_nr(row["tty"]),
            pid if "+" in stat else -1,
            0x00200000 if kernel else 0x400100,
            0,
            0,
            0,
            0,
            row["ticks"],
            0,
            0,
            0,
            20 + nice,
            nice,
            threads,
            0,
            (row["started"] - btime) * HZ,
            row["vsz"] * 1024,
            row["rss"] // 4,
            18446744073709551615,
        ] + [0] * 27
        (folder / "stat").write_text(" ".join(map(str, fields)) + "\n")
        uid = uids[row["user"]]
        status = (
            f"Name:\t{row['comm']}\nUmask:\t0022\nState:\t{stat[0]} (x)\nTgid:\t{pid}\n"
            f"Ngid:\t0\nPid:\t{pid}\nPPid:\t{row['ppid']}\nTracerPid:\t0\n"
            f"Uid:\t{uid}\t{uid}\t{uid}\t{uid}\nGid:\t{uid}\t{uid}\t{uid}\t{uid}\n"
        )
        if not kernel:
            locked = 4 if "L" in stat else 0
            status += (
                f"VmSize:\t{row['vsz']} kB\nVmLck:\t{locked} kB\nVmRSS:\t{row['rss']} kB\n"
                f"RssAnon:\t{row['rss']} kB\nRssFile:\t0 kB\nRssShmem:\t0 kB\n"
            )
        (folder / "status").write_text(status + f"Threads:\t{threads}\n")
        args = [] if kernel else row["command"].split(" ")
        (folder / "cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in args))
        (folder / "environ").write_text("")
        os.chown(folder, uid, uid)
    (root / "self").symlink_to(str(ps_pid))


def _real_ps(root: Path, passwd: Path, ps_pid: int, argv: list[str], width: int | None) -> tuple:
    env = dict(ENV) | ({"COLUMNS": str(width)} if width else {})
    script = (
        "mknod /dev/pts/0 c 136 0 && exec 3>/proc/sys/kernel/ns_last_pid && "
        'mount --bind "$1" /proc && mount --bind "$2" /etc/passwd && '
        'echo $(($3 - 1)) >&3 && "${@:4}"; exit $?'  # a fork (bash would exec a last command)
    )
    done = subprocess.run(
        [
            BWRAP,
            "--unshare-pid",
            "--cap-add",
            "ALL",
            "--dev-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--tmpfs",
            "/dev/pts",
            "--",
            "bash",
            "-c",
            script,
            "_",
            str(root),
            str(passwd),
            str(ps_pid),
            *argv,
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    return done.stdout, done.stderr, done.returncode


def _start_text(epoch: float, now: float) -> str:
    then, today = time.localtime(epoch), time.localtime(now)
    if then.tm_year != today.tm_year:
        return time.strftime("%Y", then)
    if then.tm_yday != today.tm_yday:
        return time.strftime("%b%d", then)
    return time.strftime("%H:%M", then)


@pytest.mark.skipif(not _root_sandbox(), reason="needs root, bubblewrap and procps' ps")
@pytest.mark.parametrize("pid_max", [4194304, 32768, 100000])
def test_ps_prints_what_procps_ps_prints_for_the_same_processes(pid_max):
    now = int(time.time())
    uptime = 400 * 86400 + 123
    raw = [  # user, pid, ppid, stat, tty, seconds since start, CPU ticks, vsz, rss, command
        ("root", 1, 0, "Ss", "?", uptime - 2, 51234, 167744, 12412, "/sbin/init"),
        ("root", 2, 0, "S", "?", uptime - 2, 0, 0, 0, "[kthreadd]"),
        ("root", 3, 2, "I<", "?", uptime - 2, 0, 0, 0, "[rcu_gp]"),
        ("root", 15, 2, "I", "?", uptime - 2, 12345, 0, 0, "[kworker/u4:1-events_unbound]"),
        (
            "root",
            221,
            1,
            "Ss",
            "?",
            uptime - 60,
            777,
            48232,
            15872,
            "/lib/systemd/systemd-journald",
        ),
        (
            "systemd-timesync",
            512,
            1,
            "Ssl",
            "?",
            86400 * 2,
            300,
            89364,
            6560,
            "/lib/systemd/systemd-timesyncd",
        ),
        (
            "messagebus",
            600,
            1,
            "Ss",
            "?",
            3600 * 5,
            1000,
            9124,
            4840,
            "/usr/bin/dbus-daemon --system --address=systemd: --nofork --nopidfile "
            "--systemd-activation --syslog-only",
        ),
        (
            "root",
            640,
            1,
            "Ss+",
            "tty1",
            600,
            0,
            5872,
            1020,
            "/sbin/agetty -o -p -- \\u --noclear - linux",
        ),
        (
            "root",
            650,
            1,
            "Ss",
            "?",
            3000,
            20,
            15420,
            9240,
            "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups",
        ),
        (
            "dev",
            1234567,
            1,
            "S<sl",
            "?",
            600,
            123456,
            12345678,
            2345678,
            "/usr/bin/java -Xmx2g -jar app.jar",
        ),
        ("www-data", 99999, 1, "SN", "?", 120, 30000, 1000000, 99999, "php-fpm: pool www"),
        (
            "root",
            4000000,
            1,
            "D",
            "?",
            7,
            3,
            123,
            45,
            "/usr/local/bin/task --with --many --arguments --that --go --past --the --edge",
        ),
    ]
    declared = []
    for user, pid, ppid, stat, tty, age, ticks, vsz, rss, command in raw:
        declared.append(
            {
                "user": user,
                "pid": pid,
                "ppid": ppid,
                "stat": stat,
                "tty": tty,
                "vsz": vsz,
                "rss": rss,
                "command": command,
                "cpu": ticks * 1000 // (age * HZ) / 10,
                "time": ticks // HZ,
                "start": _start_text(now - age, now),
            }
        )
    memory_kb = 4014080
    machine = Machine(
        processes=declared,
        pid_max=pid_max,
        memory={"total": memory_kb, "free": memory_kb // 2, "available": memory_kb // 2},
        # the real ps must get the pid the declaration gives it: below this kernel's pid_max
        session={"pid": 30000},
    )
    by_pid = {r[1]: r for r in raw}
    session_start = now - 30
    clock = datetime.fromtimestamp(session_start)
    uids = {"root": 0, "dev": 1001, "systemd-timesync": 997, "messagebus": 100, "www-data": 33}
    cases = [
        (["ps", "aux"], "dev", None, ()),
        (["ps", "-ef"], "dev", None, ()),
        (["ps", "aux"], "dev", 80, ()),
        (["ps", "-ef"], "dev", 80, ()),
        (["ps", "aux"], "dev", 40, ()),
        (["ps", "auxw"], "dev", 80, ()),
        (["ps", "-e"], "dev", None, ()),
        (["ps", "ax"], "dev", None, ()),
        (["ps", "-u", "dev"], "dev", None, ()),
        (["ps", "-fu", "www-data"], "dev", None, ()),
        (["ps", "-p", "1,640"], "dev", None, ()),
        (["ps", "-A"], "dev", None, ()),
        (["ps", "-efww"], "dev", 80, ()),
        (["ps", "-efw"], "dev", 80, ()),
        (["ps", "aux"], "dev", 120, [["grep", "-v", "x"], ["sort"]]),
        # ps's own user is the real euid (root) here: the sessions of these are root's
        (["ps"], "root", None, ()),
        (["ps", "-f"], "root", None, ()),
        (["ps", "ux"], "root", None, ()),
        (["ps", "x"], "root", None, ()),
        (["ps", "a"], "root", None, ()),
        (["ps", "u"], "root", None, ()),
    ]
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as tmp:
        for argv, user, width, pipeline in cases:
            table = _process_table(machine, user, argv, clock, 0, pipeline)
            rows = []
            for process in table:
                if process.pid in by_pid:
                    _, _, _, _, _, age, ticks, _, _, _ = by_pid[process.pid]
                    started = now - age
                else:
                    started, ticks = session_start, 0
                rows.append(
                    {
                        "user": process.user,
                        "pid": process.pid,
                        "ppid": process.ppid,
                        "stat": process.stat,
                        "tty": process.tty,
                        "vsz": process.vsz,
                        "rss": process.rss,
                        "command": process.command,
                        "comm": process.name,
                        "started": int(started),
                        "ticks": ticks,
                    }
                )
            ps_pid = next(p.pid for p in table if p.stat == "R+" and p.name == "ps")
            root = Path(tmp, f"proc{len(os.listdir(tmp))}")
            _fake_proc(
                root,
                rows,
                now=now,
                uptime=uptime,
                memory_kb=memory_kb,
                pid_max=pid_max,
                ps_pid=ps_pid,
                uids=uids | {user: uids.get(user, 1002)},
            )
            passwd = root.with_suffix(".passwd")
            passwd.write_text("".join(f"{n}:x:{i}:{i}::/:/bin/sh\n" for n, i in uids.items()))
            real = _real_ps(root, passwd, ps_pid, argv, width)
            assert real[2] == 0 and real[0].count("\n") > 1, real
            sim = answer(
                argv, machine, user=user, cwd="/", now=clock, width=width, pipeline=pipeline
            )
            assert sim == real, (argv, width)
