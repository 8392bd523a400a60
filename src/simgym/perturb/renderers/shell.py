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


def _shell(kind: str, ctx: Context, command: str) -> tuple[list[str], int, bool]:
    """A failing command's output lines, its exit code, and whether the shell's prompt
    comes back afterwards (a pager, a question or a running program keep the screen)."""
    words = _words(command)
    if words and words[0] == "sudo" and len(words) > 1:
        words = words[1:]
    prog = words[0] if words else "bash"
    args = [w for w in words[1:] if not w.startswith("-")]
    target = args[0] if args else "."
    message = ctx.get("message")
    status = ctx.get("status")
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
