"""``df`` (GNU coreutils 9.1), ``free`` (procps-ng 4.0.2), ``which`` (debianutils 5.7), ``dpkg -l``
(dpkg 1.21), ``nproc`` and ``cat /etc/os-release`` over a declared machine
(:mod:`simgym.domains.shell.machine`)."""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
import struct
from collections.abc import Mapping, Sequence

from simgym.domains.shell.declared import Machine, Mount, PathKind, Result
from simgym.domains.shell.options import parse_options

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


def df_output(
    args: list[str], machine: Machine, cwd: str, path_kind: PathKind | None
) -> Result | None:
    parsed = parse_options(
        args,
        "hHkmTl",
        "tx",
        long_flags=("human-readable", "si", "print-type", "total", "local"),
        long_valued=("type", "exclude-type"),
    )
    if parsed is None:
        return None
    human = si = show_type = total = local = False
    block = 1024
    types: list[str] = []
    excluded: list[str] = []
    operands = parsed.operands
    # in the order given: a later option undoes an earlier one (df -h -k prints KiB)
    for option, value in parsed.options:
        if option in ("h", "human-readable"):
            human, si = True, False
        elif option in ("H", "si"):
            human, si = True, True
        elif option == "k":
            human, block = False, 1024
        elif option == "m":
            human, block = False, 1024 * 1024
        elif option in ("T", "print-type"):
            show_type = True
        elif option == "total":
            total = True
        elif option in ("l", "local"):
            local = True
        elif option in ("t", "type"):
            types.append(value or "")
        else:  # x, exclude-type
            excluded.append(value or "")
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


def free_output(args: list[str], machine: Machine) -> Result | None:
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


def which_output(
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


def dpkg_output(
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


def nproc_output(args: list[str], machine: Machine, env: Mapping[str, str]) -> Result | None:
    if machine.cpus is None or any(a not in ("--all",) for a in args):
        return None
    if "--all" not in args and ("OMP_NUM_THREADS" in env or "OMP_THREAD_LIMIT" in env):
        return None
    return f"{machine.cpus}\n", "", 0


def os_release_output(
    args: list[str], machine: Machine, cwd: str, path_kind: PathKind | None
) -> Result | None:
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
