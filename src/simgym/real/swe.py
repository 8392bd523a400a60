"""The swe domain for real: repository tools executed in a bubblewrap sandbox.

:class:`RealSWE` checks the scenario's files out at its ``root`` (a git repository with
one commit, so ``submit`` can show the diff), then runs each tool call inside the sandbox
and prints what the simulated domain documents (see :mod:`simgym.domains.swe`):
``bash`` and ``run_tests`` print the output and ``[exit code: N]``, ``read_file``
numbers lines (``    12  text``), ``write_file``/``edit_file``/``list_dir`` print their
one-line results, ``submit`` prints the diff and ``[submitted]``, and a file tool that
fails prints ``Error: ...``. Every tool runs in a fresh sandboxed process, as the
simulated ``bash`` tool does (a fresh shell each call); files persist for the episode.
File tools read and write through the sandbox too, so a symbolic link the agent made
cannot point them at the host.
"""

from __future__ import annotations

import json
import os
import posixpath
import shlex
from dataclasses import asdict
from typing import Any

from pydantic import BaseModel

from simgym.core.domain import get_domain
from simgym.core.errors import WorldModelError
from simgym.core.types import Task
from simgym.domains.swe_ground import edit, file_view, split_lines, with_exit
from simgym.real.base import RealExecutor
from simgym.real.sandbox import (
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    isolation,
    sandbox_disk_note,
)
from simgym.real.snapshot import declared_paths, tree_files

BACKEND_NAME = "real-swe"
DEFAULT_TIMEOUT_S = 120
# Exit codes of the small file scripts below.
_IS_DIR, _MISSING, _NOT_DIR = 21, 22, 23


class RealSWE(RealExecutor):
    """Runs swe tool calls for real (see the module docstring).

    Args:
        limits: the sandbox's limits; ``bash`` timeouts are capped by ``command_s``.
        read_only_binds: extra host directories to show inside, ``{host: inside}``.
        user: who runs the tools (``root`` like most agent containers, or a name).
    """

    name = BACKEND_NAME

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        read_only_binds: dict[str, str] | None = None,
        user: str = "root",
    ) -> None:
        super().__init__()
        self.limits = limits or Limits()
        self.read_only_binds = dict(read_only_binds or {})
        self.user = user
        self.sandbox: Sandbox | None = None
        self.scenario: Any = None

    # -- episode ------------------------------------------------------------------------

    async def start_episode(self, scenario: BaseModel | dict[str, Any], task: Task) -> None:
        """Check the repository out in a new sandbox; the first observation is the
        domain's own (it names the repository and the tools)."""
        await self.end_episode()
        world: Any = get_domain("swe").scenario(scenario)
        files = {posixpath.join(world.root, path): text for path, text in world.files.items()}
        files.setdefault(world.root + "/", "")
        sandbox = Sandbox(
            files=files,
            user=self.user,
            hostname="sandbox",
            cwd=world.root,
            # No bytecode caches: they would show in the diff, and an edit within the
            # same second that keeps a file's size would run the stale cached code.
            env={"PYTHONDONTWRITEBYTECODE": "1"},
            limits=self.limits,
            read_only_binds=self.read_only_binds,
        ).build()
        _python_alias(sandbox)
        self.sandbox, self.scenario = sandbox, world
        self.forget_turns()
        subject = world.head().partition(" ")[2] or "Initial commit"
        await self._run(
            "git init -q -b " + shlex.quote(world.branch) + " . && git add -A && "
            "git -c user.name=simgym -c user.email=simgym@localhost "
            "commit -q --allow-empty -m " + shlex.quote(subject),
            timeout=60,
        )
        return None

    async def end_episode(self) -> None:
        self.abandon()

    def live_state(self) -> dict[str, Any] | None:
        """The repository's files now, as the swe domain's state holds them (paths
        relative to the root, directories as ``path/``, ``.git`` left out); None when no
        repository is up."""
        sandbox, world = self.sandbox, self.scenario
        if sandbox is None or world is None:
            return None
        try:
            top = sandbox.root / world.root.lstrip("/")
        except SandboxError:
            return None
        declared = declared_paths(world.files, world.root)
        files = tree_files(
            top,
            inside=world.root,
            declared=declared,
            relative=True,
            skip=[posixpath.join(world.root, ".git")],
        )
        return {"branch": world.branch, "files": files}

    def abandon(self) -> None:
        """Kill the sandbox's processes and delete it; needs no event loop."""
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            sandbox.destroy()

    async def run_action(self, action_text: str) -> str:
        """Run the tool call; return what it printed."""
        if self.sandbox is None:
            raise WorldModelError("the real repository is not set up: start_episode first")
        try:
            call = json.loads(action_text)
            name, args = call["name"], dict(call.get("arguments") or {})
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
            name, args = "bash", {"command": action_text.strip()}
        try:
            return await self.run_tool(name, args)
        except SandboxError as exc:
            raise WorldModelError(f"real swe: {exc}") from None

    def turn_metadata(self, observation: str) -> dict[str, Any]:
        """The sandbox's refused writes, when its writable space ran out this turn."""
        return sandbox_disk_note(self.sandbox, observation)

    def describe(self) -> dict[str, Any]:
        return {
            "backend": BACKEND_NAME,
            "sandbox": "bubblewrap",
            "limits": asdict(self.limits),
            "isolation": isolation(),
        }

    async def aclose(self) -> None:
        await self.end_episode()

    # -- tools --------------------------------------------------------------------------

    async def run_tool(self, name: str, args: dict[str, Any]) -> str:
        """One tool call's observation text."""
        tools = {
            "bash": self._bash,
            "read_file": self._read_file,
            "write_file": self._write_file,
            "edit_file": self._edit_file,
            "list_dir": self._list_dir,
            "run_tests": self._run_tests,
            "submit": self._submit,
        }
        tool = tools.get(name)
        if tool is None:
            return f"Error: unknown tool {name!r}"
        return await tool(args)

    async def _run(
        self, command: str, *, timeout: float | None = None, stdin: bytes | None = None
    ) -> ExecResult:
        assert self.sandbox is not None and self.scenario is not None
        return await self.sandbox.exec(
            command, cwd=self.scenario.root, timeout=timeout, stdin=stdin
        )

    async def _bash(self, args: dict[str, Any]) -> str:
        result = await self._run(args["command"], timeout=args.get("timeout", DEFAULT_TIMEOUT_S))
        return _with_exit(result)

    async def _run_tests(self, args: dict[str, Any]) -> str:
        command = self.scenario.test_command
        if args.get("target"):
            command += " " + shlex.quote(args["target"])
        return _with_exit(await self._run(command))  # up to limits.command_s

    async def _read_text(self, path: str) -> tuple[str | None, str | None]:
        """(content, None) or (None, the error line)."""
        quoted = shlex.quote(path)
        result = await self._run(
            f"[ -d {quoted} ] && exit {_IS_DIR}; [ -e {quoted} ] || exit {_MISSING}; "
            f"exec cat -- {quoted}"
        )
        if result.exit_code == _MISSING:
            return None, f"Error: file not found: {path}"
        if result.exit_code == _IS_DIR:
            return None, f"Error: {path} is a directory"
        if result.exit_code != 0:
            return None, f"Error: {_first_line(result.output) or 'cannot read ' + path}"
        return result.output, None

    async def _write_text(self, path: str, content: str) -> str | None:
        """Write through the sandbox; the error line, or None."""
        quoted = shlex.quote(path)
        result = await self._run(
            f'mkdir -p -- "$(dirname -- {quoted})" && cat > {quoted}', stdin=content.encode()
        )
        if result.exit_code != 0:
            return f"Error: {_first_line(result.output) or 'cannot write ' + path}"
        return None

    async def _read_file(self, args: dict[str, Any]) -> str:
        path = args["path"]
        content, error = await self._read_text(path)
        if error is not None or content is None:
            return error or ""
        return file_view(content, path, args)

    async def _write_file(self, args: dict[str, Any]) -> str:
        path, content = args["path"], args["content"]
        quoted = shlex.quote(path)
        existed = await self._run(f"[ -d {quoted} ] && exit {_IS_DIR}; [ -e {quoted} ]")
        if existed.exit_code == _IS_DIR:
            return f"Error: {path} is a directory"
        error = await self._write_text(path, content)
        if error is not None:
            return error
        verb = "Overwrote" if existed.exit_code == 0 else "Created"
        return f"{verb} {path} ({len(split_lines(content))} lines)"

    async def _edit_file(self, args: dict[str, Any]) -> str:
        path, old, new = args["path"], args["old_str"], args["new_str"]
        content, error = await self._read_text(path)
        if error is not None or content is None:
            return error or ""
        updated, shown = edit(content, old, new, path)
        if updated is None:
            return shown
        error = await self._write_text(path, updated)
        return shown if error is None else error

    async def _list_dir(self, args: dict[str, Any]) -> str:
        path = args.get("path", ".")
        quoted = shlex.quote(path)
        result = await self._run(
            f"[ -e {quoted} ] || exit {_MISSING}; [ -d {quoted} ] || exit {_NOT_DIR}; "
            f"LC_ALL=C ls -1Ap -- {quoted}"
        )
        if result.exit_code == _MISSING:
            return f"Error: directory not found: {path}"
        if result.exit_code == _NOT_DIR:
            return f"Error: not a directory: {path}"
        if result.exit_code != 0:
            return f"Error: {_first_line(result.output)}"
        return result.output.rstrip("\n") or "(empty directory)"

    async def _submit(self, args: dict[str, Any]) -> str:
        result = await self._run("git add -A && git diff --cached --no-color", timeout=60)
        if result.exit_code != 0:
            return f"Error: {_first_line(result.output) or 'git diff failed'}\n[submitted]"
        diff = result.output.rstrip("\n")
        return f"{diff or 'No changes.'}\n[submitted]"


def _with_exit(result: ExecResult) -> str:
    return with_exit(result.output, result.exit_code)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _python_alias(sandbox: Sandbox) -> None:
    """``python`` for ``python3`` where the host has only the latter, as repositories'
    test commands expect (Debian's python-is-python3)."""
    if not os.path.exists("/usr/bin/python") and os.path.exists("/usr/bin/python3"):
        link = sandbox.root / "usr" / "local" / "bin" / "python"
        if not link.exists():
            link.symlink_to("/usr/bin/python3")
