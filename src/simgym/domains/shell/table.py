"""One :class:`Command` record per program the shell knows, and every classification the
rest of simgym asks about, generated from those records.

A record says how simgym runs the program over the ledger (``run``, absent for programs
it never runs itself), whether it decides every line it is on (``always_run``), and
what it may touch when it is not run here: nothing (``reads_only``), the files it names
(``edits``, ``changes_modes``), the screen (``interactive``, ``full_screen``), other
machines (``network``) or the machine itself (``machine``). Adding a command is adding
its record; the sets below follow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simgym.domains.shell import fs, system, text
from simgym.domains.shell.view import Shell

# (shell, args, user, host) -> (stdout, stderr, exit status)
Runner = Callable[[Shell, list[str], str, str], tuple[str, str, int]]


@dataclass(frozen=True)
class Command:
    """What simgym knows about one program.

    ``run``: simgym's own body for it over the ledger (None: the program runs for real
    or the world model renders it). ``always_run``: with a body, whether simgym always
    runs it itself; False for ``python3`` and the declared machine's programs, which are
    programs like any other (that may change their directory) when the body gives up.
    ``reads_only``: it never writes a file. ``edits``: it may rewrite the files it
    names. ``changes_modes``: it may change their modes or owners (``ls -l`` shows them).
    ``interactive``: started without a script or file it takes over the screen.
    ``full_screen``: a pager or editor, which always does. ``network``: its output
    comes from other machines. ``machine``: its output comes from the machine itself
    (processes, disks, accounts), not from files.
    """

    name: str
    run: Runner | None = None
    always_run: bool = True
    reads_only: bool = False
    edits: bool = False
    changes_modes: bool = False
    interactive: bool = False
    full_screen: bool = False
    network: bool = False
    machine: bool = False


def _ll(shell: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    return fs.run_ls(shell, ["-alF", *args], user, host)  # Ubuntu's alias


def _whoami(shell: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    return user + "\n", "", 0


def _hostname(shell: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    return host + "\n", "", 0


def _true(shell: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    return "", "", 0


def _false(shell: Shell, args: list[str], user: str, host: str) -> tuple[str, str, int]:
    return "", "", 1


def _declared(name: str) -> Runner:
    return system.declared_program(name)


_RECORDS = (
    # the commands simgym runs over the ledger itself
    Command("pwd", fs.run_pwd),
    Command("cd", fs.run_cd),
    Command("ls", fs.run_ls),
    Command("ll", _ll),
    Command("cat", fs.run_cat),
    Command("echo", fs.run_echo),
    Command("touch", fs.run_touch),
    Command("mkdir", fs.run_mkdir),
    Command("rm", fs.run_rm),
    Command("rmdir", fs.run_rmdir),
    Command("cp", fs.copy_or_move(False)),
    Command("mv", fs.copy_or_move(True)),
    Command("head", fs.head_tail(False)),
    Command("tail", fs.head_tail(True)),
    Command("wc", fs.run_wc),
    Command("grep", text.run_grep, reads_only=True),
    Command("find", text.run_find, reads_only=True),
    Command("sort", text.run_sort, reads_only=True),
    Command("uniq", text.run_uniq, reads_only=True),
    Command("cut", text.run_cut, reads_only=True),
    Command("tr", text.run_tr),
    Command("sed", text.run_sed, edits=True),
    Command("export", fs.run_export),
    Command("unset", fs.run_unset),
    Command("printenv", fs.run_printenv),
    Command("whoami", _whoami),
    Command("id", system.run_id, reads_only=True, machine=True),
    Command("hostname", _hostname),
    Command("uname", system.run_uname, reads_only=True),
    Command("date", system.run_date, reads_only=True),
    Command("git", system.run_git),
    Command("python3", system.run_python, always_run=False, interactive=True),
    Command("true", _true),
    Command("false", _false),
    Command(":", _true),
    Command("truncate", fs.run_truncate, edits=True),
    Command("shred", fs.run_shred),
    Command("ps", _declared("ps"), always_run=False, reads_only=True, machine=True),
    Command("df", _declared("df"), always_run=False, reads_only=True, machine=True),
    Command("free", _declared("free"), always_run=False, reads_only=True, machine=True),
    Command("which", _declared("which"), always_run=False, reads_only=True),
    Command("dpkg", _declared("dpkg"), always_run=False, machine=True),
    Command("dpkg-query", _declared("dpkg-query"), always_run=False),
    Command("nproc", _declared("nproc"), always_run=False, reads_only=True, machine=True),
    # programs simgym does not run: what they may touch
    Command("[", reads_only=True),
    Command("apt", network=True),
    Command("apt-get", network=True),
    Command("aptitude", network=True),
    Command("arp", machine=True),
    Command("at", machine=True),
    Command("atop", machine=True),
    Command("awk", reads_only=True),
    Command("aws", network=True),
    Command("az", network=True),
    Command("basename", reads_only=True),
    Command("bg", machine=True),
    Command("blkid", machine=True),
    Command("brew", network=True),
    Command("cargo", network=True),
    Command("chgrp", changes_modes=True, machine=True),
    Command("chmod", changes_modes=True),
    Command("chown", changes_modes=True, machine=True),
    Command("clear", reads_only=True),
    Command("cmp", reads_only=True),
    Command("column", reads_only=True),
    Command("conda", network=True),
    Command("crontab", machine=True),
    Command("curl", network=True),
    Command("dd", edits=True),
    Command("diff", reads_only=True),
    Command("dig", network=True),
    Command("dirname", reads_only=True),
    Command("disown", machine=True),
    Command("dmesg", reads_only=True, machine=True),
    Command("docker", network=True),
    Command("du", reads_only=True),
    Command("egrep", reads_only=True),
    Command("emacs", edits=True, full_screen=True),
    Command("env", reads_only=True),
    Command("expand", reads_only=True),
    Command("fdisk", machine=True),
    Command("fg", machine=True),
    Command("fgrep", reads_only=True),
    Command("file", reads_only=True),
    Command("fmt", reads_only=True),
    Command("fold", reads_only=True),
    Command("ftp", network=True),
    Command("gcloud", network=True),
    Command("gem", network=True),
    Command("getent", machine=True),
    Command("git-lfs", network=True),
    Command("go", network=True),
    Command("groupadd", machine=True),
    Command("groups", reads_only=True, machine=True),
    Command("halt", machine=True),
    Command("helm", network=True),
    Command("hexdump", reads_only=True),
    Command("history", reads_only=True),
    Command("host", network=True),
    Command("hostnamectl", machine=True),
    Command("htop", reads_only=True, interactive=True, machine=True),
    Command("ifconfig", machine=True),
    Command("iostat", machine=True),
    Command("ip", reads_only=True, machine=True),
    Command("ipython", interactive=True),
    Command("irb", interactive=True),
    Command("jobs", machine=True),
    Command("journalctl", reads_only=True, machine=True),
    Command("jq", reads_only=True),
    Command("kill", machine=True),
    Command("killall", machine=True),
    Command("kubectl", network=True),
    Command("last", reads_only=True, machine=True),
    Command("lastlog", machine=True),
    Command("less", reads_only=True, full_screen=True),
    Command("locale", reads_only=True),
    Command("logname", machine=True),
    Command("lsb_release", reads_only=True, machine=True),
    Command("lsblk", machine=True),
    Command("lscpu", reads_only=True, machine=True),
    Command("lsof", machine=True),
    Command("lspci", machine=True),
    Command("lsusb", machine=True),
    Command("mail", network=True),
    Command("man", reads_only=True, full_screen=True),
    Command("md5sum", reads_only=True),
    Command("more", reads_only=True, full_screen=True),
    Command("mount", machine=True),
    Command("mpstat", machine=True),
    Command("mysql", interactive=True),
    Command("nano", edits=True, full_screen=True),
    Command("nc", network=True),
    Command("ncat", network=True),
    Command("netcat", network=True),
    Command("netstat", reads_only=True, machine=True),
    Command("nl", reads_only=True),
    Command("node", interactive=True),
    Command("nohup", machine=True),
    Command("npm", network=True),
    Command("npx", network=True),
    Command("nslookup", network=True),
    Command("od", reads_only=True),
    Command("passwd", machine=True),
    Command("patch", edits=True),
    Command("perl", edits=True),
    Command("pgrep", machine=True),
    Command("ping", reads_only=True, network=True),
    Command("ping6", network=True),
    Command("pip", network=True),
    Command("pip3", network=True),
    Command("pkill", machine=True),
    Command("pnpm", network=True),
    Command("podman", network=True),
    Command("poweroff", machine=True),
    Command("printf", reads_only=True),
    Command("psql", interactive=True),
    Command("python", interactive=True),
    Command("readlink", reads_only=True),
    Command("realpath", reads_only=True),
    Command("reboot", machine=True),
    Command("rev", reads_only=True),
    Command("rg", reads_only=True),
    Command("route", machine=True),
    Command("rpm", machine=True),
    Command("rsync", network=True),
    Command("sar", machine=True),
    Command("scp", network=True),
    Command("screen", machine=True),
    Command("sendmail", network=True),
    Command("seq", reads_only=True),
    Command("service", machine=True),
    Command("setfacl", changes_modes=True),
    Command("sftp", network=True),
    Command("sha1sum", reads_only=True),
    Command("sha256sum", reads_only=True),
    Command("shutdown", machine=True),
    Command("sleep", reads_only=True),
    Command("snap", network=True),
    Command("sqlite3", interactive=True),
    Command("ss", reads_only=True, machine=True),
    Command("ssh", network=True),
    Command("stat", reads_only=True),
    Command("strings", reads_only=True),
    Command("stty", machine=True),
    Command("su", machine=True),
    Command("sudo", machine=True),
    Command("systemctl", machine=True),
    Command("tac", reads_only=True),
    Command("telnet", network=True),
    Command("test", reads_only=True),
    Command("timedatectl", machine=True),
    Command("tmux", machine=True),
    Command("top", reads_only=True, interactive=True, machine=True),
    Command("tracepath", network=True),
    Command("traceroute", network=True),
    Command("tree", reads_only=True),
    Command("tty", machine=True),
    Command("type", reads_only=True),
    Command("umount", machine=True),
    Command("uptime", reads_only=True, machine=True),
    Command("useradd", machine=True),
    Command("userdel", machine=True),
    Command("usermod", machine=True),
    Command("users", machine=True),
    Command("vi", edits=True, full_screen=True),
    Command("vim", edits=True, full_screen=True),
    Command("vmstat", machine=True),
    Command("w", reads_only=True, machine=True),
    Command("wait", machine=True),
    Command("wget", network=True),
    Command("whereis", reads_only=True),
    Command("who", reads_only=True, machine=True),
    Command("whois", network=True),
    Command("xxd", reads_only=True),
    Command("yarn", network=True),
    Command("yes", reads_only=True),
)

TABLE: dict[str, Command] = {record.name: record for record in _RECORDS}
if len(TABLE) != len(_RECORDS):  # two records for one program: which one holds?
    raise RuntimeError("simgym.domains.shell.table names a program twice")

# simgym's own bodies, by program name
RUNNERS: dict[str, Runner] = {c.name: c.run for c in _RECORDS if c.run is not None}
# The commands simgym always runs itself. python3 it runs only when what the program does is
# certain; otherwise it is a program like any other, which may have changed its directory.
ALWAYS_RUN = frozenset(c.name for c in _RECORDS if c.run is not None and c.always_run)
# Programs that only read files; any other program simgym does not run may write in the
# directory it runs in, so what is there afterwards is no longer certain.
READ_ONLY = frozenset(c.name for c in _RECORDS if c.reads_only)
EDITORS = frozenset(c.name for c in _RECORDS if c.edits)
MODE_CHANGERS = frozenset(c.name for c in _RECORDS if c.changes_modes)
# Programs that take over the screen when started without a script or file argument.
INTERACTIVE = frozenset(c.name for c in _RECORDS if c.interactive)
PAGERS_AND_EDITORS = frozenset(c.name for c in _RECORDS if c.full_screen)
# Programs whose output comes from other machines or from the machine itself, not from
# files: the model (or a declared machine) answers them; they never run for real.
NETWORK = frozenset(c.name for c in _RECORDS if c.network)
MACHINE = frozenset(c.name for c in _RECORDS if c.machine)
