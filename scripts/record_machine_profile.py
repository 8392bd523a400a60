#!/usr/bin/env python3
"""Record this Debian machine as a simgym machine profile (simgym.domains.shell.machine).

    python scripts/record_machine_profile.py [--out src/simgym/domains/profiles/debian12.json]

What is RECORDED here, from the running machine: /etc/os-release, the uname fields
(``uname -r -v -m -p -i``), the number of CPUs (``nproc``), memory and swap
(/proc/meminfo, counted as procps 4's ``free`` counts them), the disks and the tmpfs
mounts a Debian host has (``df -k``; the sandbox's own helper mounts and a container's
cgroup tmpfs are left out), the kernel threads at the bottom of the process table (their
pids, names and states), /proc/sys/kernel/pid_max, and the installed packages that provide
common programs (``dpkg-query``, with each program's path).

What is CHOSEN, because a build container runs no services: the daemons of a small
Debian 12 server (systemd as pid 1, journald, udevd, timesyncd, cron, dbus, rsyslogd,
logind, a getty on tty1, sshd) with plausible pids, sizes and CPU times; the packages of
those daemons that are not installed here (openssh-server, cron, rsyslog, sudo,
iputils-ping, nano ...), whose version and synopsis come from this machine's apt lists
(``apt-cache show``, the candidate) and whose program paths are written below; the
systemd tmpfs mounts on /run and /run/lock (sizes as systemd sets them: 20% of memory and
5 MiB); and the times: the processes started at boot, four days before the scenario clock.
The profile's ``notes`` repeat this.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "src" / "simgym" / "domains" / "profiles" / "debian12.json"
# the terminal scenario's default clock: START columns are printed relative to it
CLOCK = datetime(2025, 3, 14, 9, 26)
BOOT = CLOCK - timedelta(days=4, hours=2, minutes=13)

# Programs an agent commonly asks a server about (which, dpkg -l); their packages are
# recorded when installed here.
COMMON = """bash ls cat cp mv rm mkdir rmdir ln chmod chown touch date echo head tail wc sort
uniq cut tr tee env id whoami uname hostname df du stat grep sed awk find xargs tar gzip
bzip2 xz curl wget git vim vi less more python3 perl ssh scp ps top free kill pgrep pkill
watch mount umount lsblk ip ss su passwd useradd systemctl journalctl dpkg apt apt-get
apt-cache which diff""".split()
# Packages of a small Debian 12 server that a build container lacks: programs by hand.
CHOSEN_PACKAGES = {
    "openssh-server": ["/usr/sbin/sshd"],
    "cron": ["/usr/sbin/cron", "/usr/bin/crontab"],
    "rsyslog": ["/usr/sbin/rsyslogd"],
    "sudo": ["/usr/bin/sudo", "/usr/bin/sudoedit"],
    "iputils-ping": ["/bin/ping"],
    "nano": ["/bin/nano", "/bin/rnano"],
    "dbus-daemon": ["/usr/bin/dbus-daemon"],
    "systemd-timesyncd": [],
}
SEARCH = ("/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/games")
# (user, command, stat, tty, vsz KiB, rss KiB, cpu seconds, pid offset after the kernel
# threads) -- chosen: a small Debian 12 server as `ps aux` shows one
DAEMONS = [
    ("root", "/lib/systemd/systemd-journald", "Ss", "?", 48364, 15480, 9, 120),
    ("root", "/lib/systemd/systemd-udevd", "Ss", "?", 25884, 6512, 2, 150),
    ("systemd-timesync", "/lib/systemd/systemd-timesyncd", "Ssl", "?", 90076, 6660, 4, 300),
    ("root", "/usr/sbin/cron -f", "Ss", "?", 6608, 2664, 1, 380),
    (
        "messagebus",
        "/usr/bin/dbus-daemon --system --address=systemd: --nofork --nopidfile "
        "--systemd-activation --syslog-only",
        "Ss",
        "?",
        9148,
        4980,
        1,
        381,
    ),
    ("root", "/usr/sbin/rsyslogd -n -iNONE", "Ssl", "?", 222220, 5408, 6, 384),
    ("root", "/lib/systemd/systemd-logind", "Ss", "?", 25316, 7724, 2, 386),
    ("root", "/sbin/agetty -o -p -- \\u --noclear - linux", "Ss+", "tty1", 5876, 1040, 0, 400),
    (
        "root",
        "sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups",
        "Ss",
        "?",
        15420,
        9240,
        0,
        410,
    ),
]
KERNEL_THREADS = 24  # how many of the real kernel threads to keep


def run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=False).stdout


def os_release() -> str:
    return Path("/etc/os-release").read_text()


def uname() -> dict[str, str]:
    names = ("kernel-release", "kernel-version", "machine", "processor", "hardware-platform")
    return {name: run("uname", f"--{name}").strip() for name in names}


def memory() -> dict[str, int]:
    info = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        info[key] = int(rest.split()[0])
    total, free = info["MemTotal"], info["MemFree"]
    available = info.get("MemAvailable") or free
    if available > total:
        available = free
    return {
        "total": total,
        "free": free,
        "shared": info.get("Shmem", 0),
        "buff_cache": info.get("Buffers", 0) + info.get("Cached", 0) + info.get("SReclaimable", 0),
        "buffers": info.get("Buffers", 0),
        "available": available,
        "swap_total": info.get("SwapTotal", 0),
        "swap_used": info.get("SwapTotal", 0) - info.get("SwapFree", 0),
    }


def mounts(total_kb: int) -> list[dict]:
    rows = run("df", "-k", "--output=source,fstype,size,used,avail,target").splitlines()[1:]
    recorded = {}
    for row in rows:
        source, fstype, size, used, avail, target = row.split(None, 5)
        keep = source.startswith("/dev/") or (
            fstype in ("tmpfs", "devtmpfs") and target in ("/dev", "/dev/shm")
        )
        if keep:
            recorded[target] = {
                "filesystem": source,
                "type": fstype,
                "size": int(size),
                "used": int(used),
                "avail": int(avail),
                "mounted_on": target,
            }
    # chosen: systemd's /run (20% of memory, in whole pages) and /run/lock (5 MiB)
    run_kb = total_kb // 4 * 20 // 100 * 4
    run_used = 612
    chosen = {
        "/run": {"filesystem": "tmpfs", "type": "tmpfs", "size": run_kb, "used": run_used,
                 "avail": run_kb - run_used, "mounted_on": "/run"},
        "/run/lock": {"filesystem": "tmpfs", "type": "tmpfs", "size": 5120, "used": 0,
                      "avail": 5120, "mounted_on": "/run/lock"},
    }  # fmt: skip
    order = ["/dev", "/run", "/", "/dev/shm", "/run/lock"]
    table = recorded | chosen
    out = [table[t] for t in order if t in table]
    out += [m for t, m in recorded.items() if t not in order]
    return out


def kernel_threads() -> list[dict]:
    found = []
    for entry in sorted(int(d) for d in os.listdir("/proc") if d.isdigit()):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        state, ppid, nice, threads = fields[0], int(fields[1]), int(fields[16]), int(fields[17])
        if not (entry == 2 or ppid == 2):
            continue
        flags = state + ("<" if nice < 0 else "N" if nice > 0 else "")
        flags += "l" if threads > 1 else ""
        found.append({"pid": entry, "ppid": ppid, "command": f"[{name}]", "stat": flags})
        if len(found) >= KERNEL_THREADS:
            break
    return found


def start_text(when: datetime) -> str:
    if when.year != CLOCK.year:
        return when.strftime("%Y")
    if when.timetuple().tm_yday != CLOCK.timetuple().tm_yday:
        return when.strftime("%b%d")
    return when.strftime("%H:%M")


def cpu_percent(seconds: int, since: datetime) -> float:
    elapsed = (CLOCK - since).total_seconds()
    return int(seconds * 1000 // elapsed) / 10


def processes() -> list[dict]:
    boot = start_text(BOOT)
    procs = [
        {"user": "root", "pid": 1, "ppid": 0, "vsz": 167744, "rss": 12620, "stat": "Ss",
         "start": boot, "time": 5, "cpu": cpu_percent(5, BOOT), "command": "/sbin/init",
         "comm": "systemd"},
    ]  # fmt: skip
    threads = kernel_threads()
    for thread in threads:
        procs.append({"user": "root", "start": boot, "time": 0, **thread})
    top = max(t["pid"] for t in threads) if threads else 2
    for user, command, stat, tty, vsz, rss, seconds, offset in DAEMONS:
        procs.append(
            {
                "user": user,
                "pid": top + offset,
                "ppid": 1,
                "cpu": cpu_percent(seconds, BOOT),
                "vsz": vsz,
                "rss": rss,
                "tty": tty,
                "stat": stat,
                "start": boot,
                "time": seconds,
                "command": command,
            }
        )
    return procs


def dpkg_owner(path: str) -> str | None:
    out = run("dpkg-query", "-S", path).strip()
    if not out or ":" not in out or out.startswith("diversion"):
        return None
    return out.split(": ", 1)[0].split(":")[0].split(",")[0]


def variants(path: str) -> list[str]:
    for a, b in (("/usr/bin/", "/bin/"), ("/usr/sbin/", "/sbin/")):
        if path.startswith(a):
            return [path, b + path[len(a) :]]
        if path.startswith(b):
            return [path, a + path[len(b) :]]
    return [path]


def installed(name: str) -> dict | None:
    fmt = "${db:Status-Abbrev}\t${Version}\t${Architecture}\t${Multi-Arch}\t${binary:Summary}"
    out = run("dpkg-query", "-W", "-f", fmt, name)
    if not out.startswith("ii"):
        return None
    status, version, arch, multi, summary = out.split("\t")
    return {"name": name, "version": version, "architecture": arch, "description": summary,
            "programs": [], "status": status.strip(), "multi_arch": multi or None}  # fmt: skip


def candidate(name: str) -> dict | None:
    fields = {}
    for line in run("apt-cache", "show", "--no-all-versions", name).splitlines():
        key, sep, value = line.partition(": ")
        if sep and key in ("Version", "Architecture", "Multi-Arch", "Description"):
            fields.setdefault(key, value)
    if "Version" not in fields:
        return None
    return {"name": name, "version": fields["Version"], "architecture": fields["Architecture"],
            "description": fields["Description"], "programs": [],
            "multi_arch": fields.get("Multi-Arch")}  # fmt: skip


def packages() -> tuple[list[dict], list[str], list[str]]:
    by_name: dict[str, dict] = {}
    absent = []
    for program in COMMON:
        seen_dirs = set()
        found = False
        for directory in SEARCH:
            path = f"{directory}/{program}"
            real_dir = os.path.realpath(directory)
            if real_dir in seen_dirs or not os.path.exists(path):
                continue
            seen_dirs.add(real_dir)
            owned = None
            for candidate_path in variants(path) + variants(os.path.realpath(path)):
                owner = dpkg_owner(candidate_path)
                if owner:
                    owned = (owner, candidate_path if candidate_path in variants(path) else path)
                    break
            if owned is None:
                continue
            owner, shown = owned
            package = by_name.get(owner) or installed(owner)
            if package is None:
                continue
            by_name[owner] = package
            found = True
            if shown not in package["programs"]:
                package["programs"].append(shown)
        if not found:
            absent.append(program)
    chosen = []
    for name, programs in CHOSEN_PACKAGES.items():
        if name in by_name:
            continue
        package = installed(name) or candidate(name)
        if package is None:
            sys.exit(f"no apt record for {name}: run apt-get update first")
        package["programs"] = programs
        by_name[name] = package
        chosen.append(name)
    return sorted(by_name.values(), key=lambda p: p["name"]), chosen, absent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    mem = memory()
    pkgs, chosen, absent = packages()
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    profile = {
        "notes": {
            "recorded": "on a real Debian 12 machine by scripts/record_machine_profile.py: "
            "os_release, uname, cpus, memory, pid_max, the disks and the /dev, /dev/shm "
            "mounts, the kernel threads (pids, names, states), and the installed packages "
            "providing common programs",
            "chosen": "the daemons of a small Debian 12 server (systemd as pid 1 and what "
            "follows it: their pids, sizes and CPU times), the packages not installed where "
            f"this was recorded ({', '.join(chosen)}: version and synopsis from its apt "
            "lists, program paths by hand), the /run and /run/lock tmpfs mounts, and the "
            f"start times (boot at {BOOT:%Y-%m-%d %H:%M}, START printed relative to "
            f"{CLOCK:%Y-%m-%d %H:%M}, the terminal scenario's default clock)",
        },
        "uname": uname(),
        "machine": {
            "processes": processes(),
            "mounts": mounts(mem["total"]),
            "memory": mem,
            "packages": pkgs,
            "complete": False,
            "os_release": os_release(),
            "locale": "C.UTF-8",
            "cpus": int(run("nproc").strip()),
            "pid_max": pid_max,
            "merged_usr": os.path.islink("/bin"),
        },
    }
    # refuse to write a profile the model would not load
    sys.path.insert(0, str(ROOT / "src"))
    from simgym.domains.shell.machine import Machine

    Machine.model_validate(profile["machine"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(profile, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}: {len(profile['machine']['processes'])} processes, "
          f"{len(pkgs)} packages ({len(chosen)} chosen; no package here for: "
          f"{', '.join(absent) or 'none'}), "
          f"{len(profile['machine']['mounts'])} mounts")  # fmt: skip


if __name__ == "__main__":
    main()
