"""Grounding for the swe domain: the repository's files are in the hidden state, so the
file tools' results are certain and ``bash`` runs through :mod:`simgym.domains.shell`.

The formats are those of the real repository backend (``simgym.real.swe``), which uses
the helpers here too, so a grounded observation is what the real tool prints.
"""

from __future__ import annotations

import difflib
import hashlib
import posixpath
import shlex
from collections.abc import Callable
from typing import Any

from simgym.core.execution import Repository, Run, RunResult
from simgym.core.grounding import Grounding
from simgym.core.types import Action
from simgym.domains.shell import file_fact, run_line
from simgym.domains.shell.execution import (
    missing_program,
    printed_in_file_system_order,
    why_not,
)

CONTEXT_LINES = 3  # lines shown around an edit
MAX_PLAIN_CHANGES = 3  # replaced lines a file may have for the submitted diff to be exact


def split_lines(content: str) -> list[str]:
    """A file's lines; the newline that ends the last line starts no new one."""
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def numbered(lines: list[str], first: int, last: int) -> str:
    """Lines ``first..last`` (1-based) with right-aligned numbers, as ``cat -n`` shows."""
    return "\n".join(f"{n:>6}  {lines[n - 1]}" for n in range(first, last + 1))


def with_exit(output: str, code: int) -> str:
    """A command's output followed by its ``[exit code: N]`` line."""
    body = output.rstrip("\n")
    return f"{body}\n[exit code: {code}]" if body else f"[exit code: {code}]"


def _is_dir(files: dict[str, str], path: str) -> bool:
    return path == "." or path + "/" in files or any(k.startswith(path + "/") for k in files)


def read_file(files: dict[str, str], args: dict[str, Any]) -> str:
    path = args["path"]
    if _is_dir(files, path):
        return f"Error: {path} is a directory"
    if path not in files:
        return f"Error: file not found: {path}"
    return file_view(files[path], path, args)


def file_view(content: str, path: str, args: dict[str, Any]) -> str:
    """What ``read_file`` prints for a file's text: the lines ``start_line..end_line``
    numbered as ``cat -n`` shows them; the one formatter of the simulated and the real
    repository tools.

    Args:
        content: the file's text.
        path: the file's path, as the agent named it (for the error line).
        args: the call's arguments (``start_line``, ``end_line``; 1-based, inclusive).

    Returns:
        The numbered lines, ``(empty file)``, or an ``Error:`` line for a start past the end.
    """
    lines = split_lines(content)
    if not lines:
        return "(empty file)"
    first = args.get("start_line", 1)
    last = min(args.get("end_line", len(lines)), len(lines))
    if first > len(lines):
        return f"Error: start_line {first} is past the end of {path} ({len(lines)} lines)"
    return numbered(lines, first, last)


def edit(content: str, old: str, new: str, path: str) -> tuple[str | None, str]:
    """(new content, what the tool prints) for an ``edit_file`` call."""
    count = content.count(old)
    if count == 0:
        return None, f"Error: old_str not found in {path}"
    if count > 1:
        return None, f"Error: old_str occurs {count} times in {path}; it must be unique"
    at = content.index(old)
    updated = content[:at] + new + content[at + len(old) :]
    lines = split_lines(updated)
    first_changed = content[:at].count("\n") + 1
    last_changed = first_changed + max(new.count("\n"), 0)
    first = max(1, first_changed - CONTEXT_LINES)
    last = min(len(lines), last_changed + CONTEXT_LINES)
    shown = numbered(lines, first, last) if lines and first <= last else ""
    return updated, f"Edited {path}" + (f"\n{shown}" if shown else "")


def list_dir(files: dict[str, str], path: str) -> str:
    """``ls -1Ap`` in the C locale: byte order, directories with a slash."""
    if path != "." and path not in files and not _is_dir(files, path):
        return f"Error: directory not found: {path}"
    if path in files:
        return f"Error: not a directory: {path}"
    prefix = "" if path == "." else path.rstrip("/") + "/"
    names = set()
    for key in files:
        if key.startswith(prefix) and key != prefix:
            head, sep, _ = key[len(prefix) :].partition("/")
            names.add(head + "/" if sep else head)
    return "\n".join(sorted(names)) or "(empty directory)"


def blob_id(content: str) -> str:
    """The abbreviated id git gives a file's content (its ``index`` lines show it)."""
    data = content.encode("utf-8")
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()[:7]


def _blob(content: str | None) -> str:
    return blob_id(content) if content is not None else "0" * 7


def _funcname(lines: list[str], before: int) -> str:
    """What git writes after a hunk's ``@@``: the nearest line above the hunk that starts
    with a letter, ``_`` or ``$`` (its default heading rule), cut at 80 characters."""
    for line in reversed(lines[:before]):
        if line[:1].isalpha() or line[:1] in "_$":
            return " " + line.rstrip("\n")[:80]
    return ""


def _hunks(old: str, new: str, old_name: str, new_name: str) -> list[str]:
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    out: list[str] = []
    for line in difflib.unified_diff(a, b, old_name, new_name):
        if line.startswith("@@ "):
            start = int(line.split()[1].split(",")[0].lstrip("-"))
            # context before the hunk: git looks above the hunk's first line
            line = line.rstrip("\n") + _funcname(a, max(start - 1, 0)) + "\n"
        out.append(line)
    return out


def diff(before: dict[str, str], after: dict[str, str]) -> str:
    """The changes as ``git add -A && git diff --cached`` shows them: per changed file in
    path order, the ``diff --git`` header, a new or deleted file's mode, the ``index``
    line of blob ids, and unified hunks with git's heading after each ``@@``."""
    parts = []
    for path in sorted(set(before) | set(after)):
        if path.endswith("/") or before.get(path) == after.get(path):
            continue
        old, new = before.get(path), after.get(path)
        header = [f"diff --git a/{path} b/{path}"]
        ids = f"{_blob(old)}..{_blob(new)}"
        if old is None:
            header += ["new file mode 100644", f"index {ids}"]
        elif new is None:
            header += ["deleted file mode 100644", f"index {ids}"]
        else:
            header.append(f"index {ids} 100644")
        lines = _hunks(
            old or "",
            new or "",
            "/dev/null" if old is None else f"a/{path}",
            "/dev/null" if new is None else f"b/{path}",
        )
        parts.append("\n".join(header) + ("\n" + "".join(lines).rstrip("\n") if lines else ""))
    return "\n".join(parts)


def _plain_diff(before: dict[str, str], after: dict[str, str]) -> bool:
    """Whether :func:`diff` writes what git would: every changed text ends with a newline
    (git marks a missing one) and changes at most :data:`MAX_PLAIN_CHANGES` lines (git's
    alignment of many changed lines can part from difflib's)."""
    for path in set(before) | set(after):
        old, new = before.get(path), after.get(path)
        if path.endswith("/") or old == new:
            continue
        for text in (old, new):
            if text and not text.endswith("\n"):
                return False
        changed = sum(
            1
            for line in difflib.ndiff((old or "").splitlines(), (new or "").splitlines())
            if line[:1] in "+-"
        )
        if old is not None and new is not None and changed > 2 * MAX_PLAIN_CHANGES:
            return False
    return True


def ground(action: Action, state: dict[str, Any], scenario: Any) -> Grounding | None:
    """Facts and certain results of a repository tool call against the state's files."""
    if action.kind != "tool_call":
        return None
    files: dict[str, str] = dict(state.get("files") or {})
    args = action.arguments
    name = action.name
    path = args.get("path", ".")
    unknown = set(state.get("unknown") or ())
    if name == "write_file" and _uncertain(path, files, unknown, listing=False):
        # what was there is unknown (so is the verb), what is there now is certain
        return Grounding(
            facts=[f"{path} may have been changed by an earlier command"],
            effects={
                "files": {path: args["content"]},
                "unknown": sorted(u for u in unknown if u != path),
            },
            expect=[f"{path} ({len(split_lines(args['content']))} lines)"],
        )
    if name in ("read_file", "list_dir", "write_file", "edit_file") and _uncertain(
        path, files, unknown, listing=name == "list_dir"
    ):
        # A program simgym did not run may have changed this path: facts only.
        facts = [file_fact(path, files[path])] if path in files and path not in unknown else []
        return Grounding(facts=facts or [f"{path} may have been changed by an earlier command"])
    if name == "read_file":
        text = read_file(files, args)
        facts = [file_fact(path, files[path])] if path in files else [f"{path}: {text}"]
        return Grounding(facts=facts, observation=text)
    if name == "list_dir":
        text = list_dir(files, path)
        if posixpath.normpath(path) == "." and not text.startswith("Error"):
            # the repository's own .git/ (every repository has one; its files are not
            # in the ledger), first in byte order
            names = [] if text == "(empty directory)" else text.split("\n")
            text = "\n".join(sorted({*names, ".git/"}))
        return Grounding(facts=[f"directory {path} lists:\n{text}"], observation=text)
    if name == "write_file":
        if _is_dir(files, path) and path not in files:
            return Grounding(
                facts=[f"{path} is a directory"], observation=f"Error: {path} is a directory"
            )
        verb = "Overwrote" if path in files else "Created"
        text = f"{verb} {path} ({len(split_lines(args['content']))} lines)"
        return Grounding(
            facts=[f"{path} {'exists' if path in files else 'does not exist yet'}"],
            effects={"files": {path: args["content"]}},
            observation=text,
        )
    if name == "edit_file":
        if path not in files:
            error = (
                f"Error: {path} is a directory"
                if _is_dir(files, path)
                else (f"Error: file not found: {path}")
            )
            return Grounding(facts=[f"{path} does not exist"], observation=error)
        updated, text = edit(files[path], args["old_str"], args["new_str"], path)
        return Grounding(
            facts=[file_fact(path, files[path])],
            effects={"files": {path: updated}} if updated is not None else None,
            observation=text,
        )
    if name == "bash":
        return _bash(args["command"], files, state, scenario)
    if name == "run_tests":
        command = scenario.test_command
        if args.get("target"):
            command += " " + shlex.quote(args["target"])
        return with_run(
            _tests(files, state, scenario, args.get("target")), command, state, scenario, with_exit
        )
    if name == "submit":
        original = {k: v for k, v in scenario.files.items() if not k.endswith("/")}
        current = {k: v for k, v in files.items() if not k.endswith("/")}
        changes = diff(original, current)
        facts = [
            f"the changes since the start, as a diff:\n```\n{changes}\n```"
            if changes
            else "nothing was changed since the start"
        ]
        expect = [
            f"diff --git a/{p} b/{p}"
            for p in sorted(set(original) | set(current))
            if original.get(p) != current.get(p)
        ]
        if unknown or not _plain_diff(original, current):
            return with_run(
                Grounding(facts=facts, expect=expect or ["No changes."]),
                "git add -A && git diff --cached --no-color",
                state,
                scenario,
                _submitted,
            )
        # every file is known and the diff is one git writes the same: the exact answer
        return Grounding(facts=facts, observation=f"{changes or 'No changes.'}\n[submitted]")
    return None


def _submitted(output: str, status: int) -> str:
    """``submit``'s observation from its ``git add -A && git diff --cached``."""
    if status != 0:
        first = next((line.strip() for line in output.splitlines() if line.strip()), "")
        return f"Error: {first or 'git diff failed'}\n[submitted]"
    return f"{output.rstrip(chr(10)) or 'No changes.'}\n[submitted]"


def _uncertain(path: str, files: dict[str, str], unknown: set[str], *, listing: bool) -> bool:
    """Whether an earlier unrun program may have changed ``path``: it is itself unknown,
    or it is missing (or listed) under a directory such a program ran in."""
    if path in unknown:
        return True
    if path in files and not listing:
        return False
    probe = path
    while True:
        if probe in unknown:
            return True
        if probe in (".", "", "/"):
            return False
        probe = posixpath.dirname(probe) or "."


def _bash(
    command: str, files: dict[str, str], state: dict[str, Any], scenario: Any
) -> Grounding | None:
    root = scenario.root
    result = run_line(
        command,
        files,
        cwd=root,
        home="/root",
        root=root,
        user="root",
        host="sandbox",
        unknown=state.get("unknown") or (),
    )
    effects = result.patch_for(files, root) or None
    if effects:
        effects.pop("cwd", None)  # each call runs in a fresh shell at the root
        effects.pop("env", None)
        effects = effects or None
    if result.output is None:
        facts = result.facts or [f"the command runs in {root}"]
        return with_run(
            Grounding(facts=facts, effects=effects), command, state, scenario, with_exit
        )
    text = with_exit(result.output, result.status)
    return Grounding(
        facts=[f"`{command}` prints exactly:\n```\n{text}\n```"],
        effects=effects,
        observation=text,
    )


def _tests(
    files: dict[str, str], state: dict[str, Any], scenario: Any, target: str | None
) -> Grounding:
    """Test results cannot be computed here; the facts are what the tests read: the test
    files and every file changed since the start."""
    original = scenario.files
    changed = sorted(p for p in files if not p.endswith("/") and original.get(p) != files[p])
    removed = sorted(p for p in original if not p.endswith("/") and p not in files)
    tests = sorted(
        p
        for p in files
        if posixpath.basename(p).startswith("test")
        and p.endswith(".py")
        and (target is None or p in target or target.split("::")[0] == p)
    )
    facts = [f"the test command is `{scenario.test_command}`" + (f" {target}" if target else "")]
    failing = state.get("failing_tests") or []
    if failing:
        facts.append("tests failing before any change: " + ", ".join(failing))
    if changed or removed:
        facts.append("changed since the start: " + ", ".join(changed + removed))
    else:
        facts.append("no file was changed since the start")
    for path in dict.fromkeys([*changed, *tests[:2]]):
        facts.append(file_fact(path, files[path], limit=1200))
    return Grounding(facts=facts)


# -- execution grounding (simgym.core.execution) -------------------------------------

# The real swe backend's shell: root in a sandbox named "sandbox", no bytecode caches
# (they would show in the diff), `python` for `python3` (Debian's python-is-python3).
_SWE_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}
_PYTHON_LINK = {"/usr/local/bin/python": "/usr/bin/python3"}


def with_run(
    grounding: Grounding,
    command: str,
    state: dict[str, Any],
    scenario: Any,
    shape: Callable[[str, int], str],
) -> Grounding:
    """``grounding`` with the run of ``command`` in the repository, where every input is
    known; ``shape(output, status)`` makes the tool's observation of what it printed."""
    root = scenario.root
    files: dict[str, str] = state.get("files") or {}
    absolute = {
        posixpath.join(root, k) + ("/" if k.endswith("/") else ""): v for k, v in files.items()
    }
    absolute.setdefault(root + "/", "")
    unknown = [posixpath.join(root, u) for u in state.get("unknown") or ()]
    problem = why_not(
        command,
        cwd=root,
        home="/root",
        files=absolute,
        unknown=unknown,
        programs=None,
        also=frozenset(("python",)),
    )
    if problem is not None:
        return grounding
    modes = {posixpath.join(root, p): m for p, m in (state.get("modes") or {}).items()}
    initial = {
        posixpath.join(root, p): 0o755
        for p, c in scenario.files.items()
        if not p.endswith("/") and c.startswith("#!")
    }
    run = Run(
        chunks=(command,),
        files=absolute,
        cwd=root,
        home="/root",
        user="root",
        host="sandbox",
        env=dict(_SWE_ENV),
        modes={**initial, **modes},
        scope=root,
        terminal=False,
        repository=Repository(
            files=dict(scenario.files),
            branch=scenario.branch,
            message=scenario.head().partition(" ")[2] or "Initial commit",
        ),
        links=dict(_PYTHON_LINK),
        timeout_s=30.0,
    )

    def settle(result: RunResult) -> Grounding | None:
        if missing_program(result.output, result.status):
            return None  # `python -m pytest` on a host without pytest: not the repository's
        effects: dict[str, Any] = {}
        if result.changes:
            effects["files"] = {_relative(p, root): v for p, v in result.changes.items()}
        if result.modes:
            effects["modes"] = {_relative(p, root): m for p, m in result.modes.items()}
        left = [u for u in state.get("unknown") or () if u not in effects.get("files", {})]
        if left != list(state.get("unknown") or ()):
            effects["unknown"] = left
        text = shape(result.output, result.status)
        if printed_in_file_system_order(command, result.output):
            return Grounding(  # its order (or sizes) is the file system's: a fact only
                facts=[f"`{command}` prints these lines, in the file system's order:\n{text}"],
                effects=effects or None,
            )
        return Grounding(
            facts=[f"`{command}` prints exactly:\n```\n{text}\n```"],
            effects=effects or None,
            observation=text,
        )

    grounding.run, grounding.settle = run, settle
    return grounding


def _relative(path: str, root: str) -> str:
    rel = posixpath.relpath(path.rstrip("/"), root)
    return rel + "/" if path.endswith("/") else rel
