"""Recording: episodes run against real backends, every trajectory appended as it ends.

``record(files, out)`` runs the action/task files' episodes, each in a fresh sandbox (or
browser, or server), ``concurrency`` at a time, resuming after the last finished task id
(an episode that errored runs again).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simgym.core.domain import domain_names, get_domain
from simgym.core.env import SimEnv
from simgym.core.errors import SimgymError
from simgym.core.trajectories import TrajectoryWriter
from simgym.core.types import Trajectory
from simgym.real.registry import real_backends
from simgym.real.sandbox import Limits
from simgym.rollout.episode import resume_keys
from simgym.rollout.scripted import load_specs, run_episode


async def arecord(
    files: Iterable[str | Path],
    out: str | Path,
    *,
    domain: str | None = None,
    concurrency: int = 2,
    max_turns: int = 30,
    resume: bool = True,
    retry_errors: bool = True,
    limits: Limits | None = None,
    on_done: Callable[[Trajectory], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> list[Trajectory]:
    """Run the episodes in action/task files against real backends, appending each
    trajectory to ``out`` as it finishes; with ``resume``, task ids already in ``out``
    are skipped, except episodes that errored (unless ``retry_errors`` is off). Every
    episode gets a fresh sandbox."""
    specs = load_specs(list(files), domain)
    backends = real_backends()
    for spec in specs:
        name = spec.task.domain
        if name not in backends:
            raise SimgymError(
                f"{spec.task.id}: no real backend for domain {name!r}; "
                f"available: {', '.join(sorted(backends))}"
            )
        if name in domain_names():  # a key the schema does not know is a typo: refused
            try:
                get_domain(name).scenario(spec.task.scenario or None, strict=True)
            except SimgymError as exc:
                raise SimgymError(f"{spec.task.id}: {' '.join(str(exc).split())}") from None
    done = resume_keys(out, retry_errors=retry_errors) if resume else set()
    todo = [spec for spec in specs if spec.task.id not in done]
    if on_start is not None:  # how many will run: a progress bar's total
        on_start(len(todo))
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
