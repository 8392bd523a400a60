"""Execution grounding: a command whose inputs the state knows runs for real.

A domain's grounding may find that an action is a program it cannot decide itself (a
pipeline through ``awk``, a script the agent wrote, the repository's tests) but whose
every input the hidden state holds. It then asks for a :class:`Run`: the state's files,
working directory, user, host name and environment, and the command. A
:class:`CommandRunner` (the real one is :class:`simgym.real.execute.SandboxRunner`: a
throwaway bubblewrap sandbox with no network) materialises the files, runs the command,
and answers with a :class:`RunResult`: what it printed, its exit status and what it did
to the files. The domain turns that into the turn's grounding (exact observation, certain
effects); the world model renders only what no code has.

This module holds only the types, so that domains (which must not import the real
environments) and the environment loop (which must not either) can speak of runs.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Literal, Protocol, runtime_checkable

ExecutionMode = Literal["sandbox", "off"]
EXECUTION_MODES: tuple[str, ...] = ("sandbox", "off")


@dataclass(frozen=True)
class Repository:
    """A git repository to create when a session's sandbox is built: ``files`` (paths
    relative to ``root``) committed once on ``branch``, before the state's current files
    are laid over them, so ``git status`` and ``git diff`` show the episode's changes."""

    files: dict[str, str]
    branch: str = "main"
    message: str = "Initial commit"


@dataclass(frozen=True)
class Run:
    """One command to run for real over the state's files.

    ``files`` maps absolute paths to content (a key ending in ``/`` is a directory);
    ``modes`` holds permission bits where they are not the default (0o644 files, 0o755
    directories). ``chunks`` are the command lines, typed one after another into one
    shell session (a multi-line paste; usually one). ``scope`` is the directory whose
    changes are read back (``/`` for a machine, the repository root for swe).
    ``terminal``: the output goes to a terminal 80 columns wide (a tmux screen) rather
    than a pipe. ``session`` names a sandbox kept warm between runs of one episode (what
    only the sandbox holds, such as a ``.git`` directory, lives on there)."""

    chunks: tuple[str, ...]
    files: dict[str, str]
    cwd: str
    home: str
    user: str = "user"
    host: str = "localhost"
    env: dict[str, str] = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)
    scope: str = "/"
    terminal: bool = True
    session: str | None = None
    repository: Repository | None = None
    links: dict[str, str] = field(default_factory=dict)  # symbolic links to make: path -> target
    clock: datetime | None = None
    timeout_s: float = 10.0


@dataclass
class RunResult:
    """What a :class:`Run` did. ``outputs`` holds each chunk's output (stdout and stderr
    as the terminal or pipe showed them); ``changes`` maps absolute paths to new content
    (None: deleted; a key ending in ``/`` is a new directory); ``modes`` the new
    permission bits of changed paths; ``cwd`` (None: unchanged) and ``env`` the shell's
    after the last chunk (``env`` values None: unset). ``problem`` says why it did not run
    to its end (a time limit, a sandbox that could not start): then nothing is certain."""

    outputs: list[str]
    status: int
    changes: dict[str, str | None] = field(default_factory=dict)
    modes: dict[str, int] = field(default_factory=dict)
    cwd: str | None = None
    env: dict[str, str | None] = field(default_factory=dict)
    cwds: list[str] = field(default_factory=list)  # the working directory after each chunk
    seconds: float = 0.0
    problem: str | None = None

    @property
    def output(self) -> str:
        return "".join(self.outputs)


@runtime_checkable
class CommandRunner(Protocol):
    """Runs :class:`Run` requests (shared by many environments on one event loop)."""

    async def run(self, request: Run) -> RunResult: ...

    async def close(self, session: str) -> None:
        """Forget the warm sandbox of ``session`` (the episode ended)."""
        ...


# Runners by name, resolved on first use (the real one lives above this layer).
RUNNERS: dict[str, str] = {"sandbox": "simgym.real.execute:shared_runner"}
_log = logging.getLogger("simgym.execution")


def resolve_runner(execution: str | CommandRunner | None) -> CommandRunner | None:
    """The runner for ``execution``: a runner as it is, ``"off"`` or None for none, a
    name from :data:`RUNNERS` for its shared instance, or None with a one-line notice
    where it cannot run here (no bubblewrap, no user namespaces)."""
    if execution is None or execution == "off":
        return None
    if not isinstance(execution, str):
        return execution
    if execution not in RUNNERS:
        raise ValueError(
            f"execution must be one of {', '.join(EXECUTION_MODES)}, not {execution!r}"
        )
    return _named_runner(execution)


@cache
def _named_runner(name: str) -> CommandRunner | None:
    module, _, attr = RUNNERS[name].partition(":")
    runner = getattr(importlib.import_module(module), attr)()
    if runner is None:
        _log.warning("execution grounding is off: %s", _why_not(module))
    return runner


def _why_not(module: str) -> str:
    problem = getattr(importlib.import_module(module), "problem", None)
    return (problem() if callable(problem) else None) or "the runner is unavailable here"
