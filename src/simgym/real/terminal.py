"""The terminal domain for real: keystrokes typed into a bash shell in a bubblewrap sandbox.

:class:`RealTerminal` is a world-model backend that does not predict: it builds the
scenario's machine (its files, user, host name and working directory) in a
:class:`~simgym.real.sandbox.Sandbox`, types each action into a live shell and returns
the screen. Plug it in wherever a world model goes::

    env = simgym.make("terminal", world_model=RealTerminal())

and the same action files, agents and trajectory writers record ground truth. Each
environment needs its own ``RealTerminal`` (it holds one machine at a time).

:func:`record` runs scripted episodes against the real backends and appends the
trajectories to a file (what ``simgym record`` does).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from pydantic import BaseModel

from simgym.core.domain import get_domain
from simgym.core.errors import WorldModelError
from simgym.core.types import Task
from simgym.real.base import RealExecutor
from simgym.real.sandbox import Limits, Sandbox, SandboxError, isolation, sandbox_disk_note
from simgym.real.shell import ShellSession
from simgym.real.snapshot import SYSTEM_TREES, VIRTUAL_TREES, declared_paths, tree_files

BACKEND_NAME = "real-terminal"


class RealTerminal(RealExecutor):
    """A real shell behind the terminal domain's interface (see the module docstring).

    Args:
        limits: CPU, memory, file-size and time limits of the sandbox.
        width, height: the terminal's size in characters.
        read_only_binds: extra host directories to show inside, ``{host: inside}``
            (a toolchain, say); nothing else of the host is visible.
    """

    name = BACKEND_NAME

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        width: int = 160,
        height: int = 48,
        read_only_binds: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.limits = limits or Limits()
        self.width = width
        self.height = height
        self.read_only_binds = dict(read_only_binds or {})
        self.session: ShellSession | None = None
        self.skipped_files: list[str] = []
        self._declared: dict[str, str] = {}  # absolute path -> the scenario's own key

    async def start_episode(self, scenario: BaseModel | dict[str, Any], task: Task) -> str:
        """Build the scenario's machine in a new sandbox; return its first screen."""
        await self.end_episode()
        world: Any = get_domain("terminal").scenario(scenario)
        sandbox = Sandbox(
            files=dict(world.files),
            user=world.user,
            hostname=world.hostname,
            home=world.home,
            cwd=world.working_dir,
            env=dict(world.env),
            limits=self.limits,
            read_only_binds=self.read_only_binds,
        )
        self.session = ShellSession(
            sandbox, width=self.width, height=self.height, clock=world.clock
        )
        self._declared = declared_paths(world.files, world.working_dir)
        self.forget_turns()
        try:
            first = await self.session.start()
        except BaseException:
            self.session = None
            raise
        self.skipped_files = list(sandbox.skipped)
        return first

    async def end_episode(self) -> None:
        """Stop the shell and delete the machine."""
        session, self.session = self.session, None
        if session is not None:
            await session.close()

    def live_state(self) -> dict[str, Any] | None:
        """The machine's files now, as the terminal domain's state holds them (``files``:
        path -> content, directories as ``path/``), read from the sandbox's root; None
        when no machine is up. System trees are left out but for the scenario's files."""
        session = self.session
        if session is None:
            return None
        try:
            root = session.sandbox.root
        except SandboxError:
            return None
        skip = (*SYSTEM_TREES, *VIRTUAL_TREES)
        return {"files": tree_files(root, inside="/", declared=self._declared, skip=skip)}

    def abandon(self) -> None:
        """Kill and delete the machine without awaiting (see ShellSession.abandon)."""
        session, self.session = self.session, None
        if session is not None:
            session.abandon()

    async def run_action(self, action_text: str) -> str:
        """Type the keystrokes into the shell; return the screen."""
        if self.session is None:
            raise WorldModelError("the real terminal has no machine: start_episode first")
        try:
            return await self.session.send(keystroke_batches(action_text))
        except SandboxError as exc:
            raise WorldModelError(f"real terminal: {exc}") from None

    def turn_metadata(self, observation: str) -> dict[str, Any]:
        """The sandbox's refused writes, when its writable space ran out this turn."""
        return sandbox_disk_note(self.session.sandbox if self.session else None, observation)

    def describe(self) -> dict[str, Any]:
        return {
            "backend": BACKEND_NAME,
            "sandbox": "bubblewrap",
            "limits": asdict(self.limits),
            "isolation": isolation(),
            "size": [self.width, self.height],
        }

    async def aclose(self) -> None:
        await self.end_episode()


def keystroke_batches(action_text: str) -> list[tuple[str, float]]:
    """``(keystrokes, seconds)`` pairs from a rendered terminal action (the JSON list the
    terminal domain renders). Text that is not such a list is typed as one command line,
    as when a scenario lets invalid actions through."""
    try:
        data = json.loads(action_text)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        data = [data]
    if isinstance(data, list) and data and all(isinstance(b, dict) for b in data):
        try:
            return [(str(b["keystrokes"]), float(b.get("duration", 1.0))) for b in data]
        except (KeyError, TypeError, ValueError):
            pass
    text = action_text if action_text.endswith("\n") else action_text + "\n"
    return [(text, 1.0)]
