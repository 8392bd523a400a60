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

import asyncio
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from simgym.core.domain import get_domain
from simgym.core.env import SimEnv
from simgym.core.errors import SimgymError, WorldModelError
from simgym.core.types import Task, Trajectory
from simgym.core.worldmodel import register_backend
from simgym.real.base import RealExecutor
from simgym.real.sandbox import Limits, Sandbox, SandboxError, ShellSession, isolation

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
        self.session = ShellSession(sandbox, width=self.width, height=self.height)
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


register_backend(BACKEND_NAME, RealTerminal)


# -- recording ----------------------------------------------------------------------------

ExecutorFactory = Callable[..., Any]


def real_backends() -> dict[str, ExecutorFactory]:
    """Domain name -> the real executor class that runs it."""
    backends: dict[str, ExecutorFactory] = {"terminal": RealTerminal}
    # imported here: they import this module's helpers, or are heavy
    from simgym.real.mcp import RealMCP
    from simgym.real.search import RealSearch
    from simgym.real.swe import RealSWE
    from simgym.real.web import RealWeb

    backends["swe"] = RealSWE
    backends["web"] = RealWeb
    # sandbox limits apply to the shell backends; the others take none
    backends["mcp"] = lambda limits=None: RealMCP()
    backends["search"] = lambda limits=None: RealSearch()
    return backends


async def arecord(
    files: Iterable[str | Path],
    out: str | Path,
    *,
    domain: str | None = None,
    concurrency: int = 2,
    max_turns: int = 30,
    resume: bool = True,
    limits: Limits | None = None,
    on_done: Callable[[Trajectory], None] | None = None,
) -> list[Trajectory]:
    """Run the episodes in action/task files against real backends, appending each
    trajectory to ``out`` as it finishes; with ``resume``, task ids already in ``out``
    are skipped. Every episode gets a fresh sandbox."""
    import simgym.domains  # noqa: F401  (registers the built-in domains)
    from simgym.data.trajectories import TrajectoryWriter, finished_ids
    from simgym.rollout.scripted import load_specs, run_episode

    specs = load_specs(list(files), domain)
    backends = real_backends()
    for spec in specs:
        name = spec.task.domain
        if name not in backends:
            raise SimgymError(
                f"{spec.task.id}: no real backend for domain {name!r}; "
                f"available: {', '.join(sorted(backends))}"
            )
    done = finished_ids(out) if resume else set()
    todo = [spec for spec in specs if spec.task.id not in done]
    gate = asyncio.Semaphore(max(1, concurrency))
    with TrajectoryWriter(out) as writer:

        async def one(spec: Any) -> Trajectory:
            async with gate:
                executor = backends[spec.task.domain](limits=limits)
                # One try per turn: a real action must not run twice.
                env = SimEnv(
                    spec.task.domain,
                    executor,
                    max_turns=max_turns,
                    writer=writer,
                    validation_retries=0,
                )
                try:
                    trajectory = await run_episode(env, spec)
                except (SimgymError, ValidationError) as exc:
                    # The scenario's world could not be built (a file over a directory, a
                    # NUL byte, a name too long...): this episode's error, not the run's.
                    if env.trajectory is not None:  # built, then failed: keep its turns
                        await env.close(reason=f"the episode failed: {exc}")
                        trajectory = env.trajectory
                    else:
                        trajectory = _failed(spec, executor, exc)
                        writer.write(trajectory)
                finally:
                    # Shielded: a cancelled run still kills and reaps this sandbox; and
                    # where even that is cancelled (Ctrl-C), killed and deleted at once.
                    try:
                        await asyncio.shield(_close_quietly(executor))
                    finally:
                        abandon = getattr(executor, "abandon", None)
                        if abandon is not None:
                            abandon()
            if on_done is not None:
                on_done(trajectory)
            return trajectory

        return list(await asyncio.gather(*(one(spec) for spec in todo)))


async def _close_quietly(executor: Any) -> None:
    close = getattr(executor, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:  # noqa: BLE001  (closing is best effort; the sandbox is reaped)
            pass


def _failed(spec: Any, executor: Any, exc: Exception) -> Trajectory:
    """The trajectory of an episode whose world could not be built."""
    import time

    return Trajectory(
        task=spec.task,
        domain=spec.task.domain,
        scenario=dict(spec.task.scenario or {}),
        world_model=executor.describe(),
        truncated=True,
        error=f"the episode's world could not be built: {exc}",
        finished_at=time.time(),
    )


def record(files: Iterable[str | Path], out: str | Path, **options: Any) -> list[Trajectory]:
    """Blocking :func:`arecord`; Ctrl-C stops it with KeyboardInterrupt."""
    return asyncio.run(_interruptible(arecord(files, out, **options)))


async def _interruptible(work: Any) -> Any:
    """Run ``work``; on SIGINT cancel it, and cancel again until it ends, then raise
    KeyboardInterrupt. asyncio.run's own handler cancels once, and a cancellation that
    lands as an awaited call finishes can be swallowed on the way (Python 3.11's
    ``wait_for``, libraries), after which the run would go on as if nothing happened."""
    import signal

    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    hits: list[float] = []

    def cancel() -> None:
        if not task.done():
            task.cancel()
            loop.call_later(0.5, cancel)

    def on_sigint() -> None:
        hits.append(loop.time())
        cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (RuntimeError, ValueError, NotImplementedError):  # not the main thread
        return await task
    try:
        return await task
    except asyncio.CancelledError:
        if hits:
            raise KeyboardInterrupt from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        if hits and task.done() and not task.cancelled():
            raise KeyboardInterrupt  # the work finished anyway: still say it was stopped
