"""Terminal and SWE fault templates: a failing command's output as the shell prints it
(with a fresh prompt when the shell would give one back), or a workspace tool's error."""

from __future__ import annotations

import re
import shlex

from simgym.perturb.renderers._base import REASONS, Context, failing_items


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:  # an unclosed quote: the shell would complain, not us
        return command.split()


# Programs that talk to a network: a fault is the service's (HTTP status, a timeout).
NETWORK_PROGRAMS = frozenset(
    "curl wget git pip pip3 npm yarn apt apt-get ssh scp sftp rsync ping nc http gh docker "
    "kubectl aws gcloud az psql mysql redis-cli mongosh ftp telnet dig nslookup".split()
)
# A local program meets the same faults as the operating system reports them (a network
# file system that stalls, drops or lost its lease), in the words strerror gives.
_LOCAL_ERRORS = {
    "timeout": ("Connection timed out", 1),  # ETIMEDOUT, an NFS mount not answering
    "rate_limit": ("Resource temporarily unavailable", 1),  # EAGAIN
    "server_error": ("Input/output error", 1),  # EIO
    "stale_data": ("Stale file handle", 1),  # ESTALE
    "flaky_network": ("Transport endpoint is not connected", 1),  # ENOTCONN, a dropped mount
    "auth_failure": ("Key has expired", 1),  # EKEYEXPIRED, a Kerberos ticket ran out
    "permission_denied": ("Permission denied", 1),
}
# How GNU coreutils and bash name the file an error is about, by program.
_LOCAL_FORMS = {
    "ls": "ls: cannot access '{target}': {error}",
    "rm": "rm: cannot remove '{target}': {error}",
    "mkdir": "mkdir: cannot create directory \u2018{target}\u2019: {error}",  # C.UTF-8 quotes
    "touch": "touch: cannot touch '{target}': {error}",
    "cp": "cp: cannot stat '{target}': {error}",
    "mv": "mv: cannot stat '{target}': {error}",
    "cd": "bash: cd: {target}: {error}",
    "stat": "stat: cannot statx '{target}': {error}",
    "head": "head: cannot open '{target}' for reading: {error}",
    "tail": "tail: cannot open '{target}' for reading: {error}",
    "sort": "sort: cannot read: {target}: {error}",
    "less": "{target}: {error}",
}
_REDIRECT = re.compile(r">>?\s*([^\s;&|<>]+)")


def _local_line(prog: str, args: list[str], command: str, error: str) -> str:
    """One local program's error line about the file it works on."""
    if prog in ("echo", "printf"):
        written = _REDIRECT.search(command)
        return (
            f"bash: {written.group(1)}: {error}"
            if written
            else f"bash: {prog}: write error: {error}"
        )
    if prog in ("grep", "egrep", "fgrep", "sed", "awk"):
        args = args[1:]  # the pattern or script comes first
    elif prog in ("head", "tail"):
        args = [a for a in args if not a.isdigit()]  # the value of -n or -c
    target = args[0] if args else "."
    form = _LOCAL_FORMS.get(prog, "{prog}: {target}: {error}")
    return form.format(prog=prog, target=target, error=error)


def _shell(kind: str, ctx: Context, command: str) -> tuple[list[str], int, bool]:
    """A failing command's output lines, its exit code, and whether the shell's prompt
    comes back afterwards (a pager, a question or a running program keep the screen)."""
    words = _words(command)
    if words and words[0] == "sudo" and len(words) > 1:
        words = words[1:]
    prog = words[0] if words else "bash"
    args = [w for w in words[1:] if not w.startswith("-") and not w.startswith(">")]
    target = args[0] if args else "."
    message = ctx.get("message")
    status = ctx.get("status")
    local = prog not in NETWORK_PROGRAMS and "/" not in prog
    if local and kind in _LOCAL_ERRORS and not (kind == "auth_failure" and message):
        error, code = _LOCAL_ERRORS[kind]
        return [_local_line(prog, args, command, error)], code, True
    simple = {
        "auth_failure": (message or "authentication failed: invalid or expired credentials", 1),
        "timeout": (f"error: operation timed out after {ctx.get('seconds')} seconds", 124),
        "rate_limit": (
            f"error: HTTP 429 Too Many Requests (retry after {ctx.get('retry_after')} seconds)",
            1,
        ),
        "server_error": (
            f"error: the server returned HTTP {status} {REASONS.get(status, 'Server Error')}",
            1,
        ),
        "stale_data": (f"{target}: Stale file handle", 1),
        "flaky_network": (f"error: {ctx.get('network_error')}", 1),
    }
    if kind in simple:
        line, code = simple[kind]
        return [f"{prog}: {line}"], code, True
    if kind == "permission_denied":
        if "/" in prog:
            return [f"bash: {prog}: Permission denied"], 126, True
        return [f"{prog}: cannot access '{target}': Permission denied"], 1, True
    if kind == "pagination":
        return ["--More--"], 0, False
    if kind == "truncated":
        return [f"[... output truncated: {ctx.get('omitted')} lines omitted ...]"], 0, True
    if kind == "empty_results":
        return [], 0, True
    if kind == "partial_batch":
        if len(args) < 2:
            return [f"{prog}: warning: the operation completed only in part"], 1, True
        failing = failing_items(args, ctx.get("draw", 0))
        failed = [a for i, a in enumerate(args) if i in failing]
        if local:
            return [_local_line(prog, [a], "", "Input/output error") for a in failed], 1, True
        return [f"{prog}: cannot process '{a}': Input/output error" for a in failed], 1, True
    if kind == "ui_dialog":
        return [f"{ctx.get('title')}", f"{ctx.get('text')} [y/N] "], 0, False
    return [], 0, False  # slow_load: still running, nothing printed yet


def render_terminal(kind: str, ctx: Context) -> str:
    command = "".join(k.keystrokes for k in ctx.action.keystrokes)
    typed = command.rstrip("\n").replace("\n", " ")
    lines = ctx.last_observation.rstrip("\n").splitlines()
    prompt = lines[-1].rstrip() if lines and re.search(r"[$#]\s*$", lines[-1]) else ""
    prompt = prompt or ctx.scenario.prompt().rstrip()
    body, _, back = _shell(kind, ctx, typed)
    screen = [f"{prompt} {typed}".rstrip(), *body]
    if back:
        screen.append(prompt)
    return "\n".join(screen).rstrip()  # as the world model's parsed screens are


def render_swe(kind: str, ctx: Context) -> str:
    name, args = ctx.action.name or "bash", ctx.action.arguments
    if name in ("bash", "run_tests"):
        command = args.get("command") or ctx.scenario.test_command
        if kind == "pagination":
            body = [f"(output paginated: page 1 of {ctx.get('pages')}; narrow the command)"]
            return "\n".join([*body, "[exit code: 0]"])
        if kind == "ui_dialog":
            body = [f"{ctx.get('text')} [y/N] ", "Aborted: no answer (stdin is not a terminal)"]
            return "\n".join([*body, "[exit code: 1]"])
        if kind == "slow_load":
            seconds = ctx.get("seconds")
            return f"[command still running after {seconds} seconds: killed]\n[exit code: 124]"
        lines, code, _ = _shell(kind, ctx, command)
        return "\n".join([*lines, f"[exit code: {code}]"])
    path = args.get("path", ".")
    if kind == "empty_results" and name == "read_file":
        return "(empty file)"
    if kind == "empty_results" and name == "list_dir":
        return "(empty directory)"
    errors = {
        "auth_failure": "authentication failed: the workspace session expired",
        "permission_denied": f"permission denied: {path}",
        "timeout": f"timed out after {ctx.get('seconds')} seconds",
        "rate_limit": f"429 Too Many Requests (retry after {ctx.get('retry_after')} seconds)",
        "server_error": f"{ctx.get('status')} {REASONS.get(ctx.get('status'), 'Error')}",
        "pagination": f"output too large ({ctx.get('pages')} pages); read a smaller range",
        "truncated": f"output too large ({ctx.get('omitted')} lines omitted); read a smaller range",
        "empty_results": f"nothing found at {path}",
        "stale_data": f"{path} changed on disk since it was last read; read it again",
        "partial_batch": f"the change to {path} was only partly applied",
        "flaky_network": f"lost the connection to the workspace ({ctx.get('network_error')})",
        "ui_dialog": f"the editor is waiting for an answer: {ctx.get('text')}",
        "slow_load": f"timed out after {ctx.get('seconds')} seconds waiting for the file system",
    }
    return f"Error: {ctx.get('message') or errors[kind]}"
