"""Blocking access to async environments through one shared background event loop.

``asyncio.run`` per call would build and tear down a loop each step and break clients
bound to a loop (HTTP connection pools); one long-lived loop in a daemon thread avoids
both and lets many sync environments share one world-model client.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from simgym.core.types import Observation, StepResult

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    """The process-wide loop that sync wrappers run coroutines on (started on first use)."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="simgym-loop", daemon=True)
            thread.start()
            _loop = loop
        return _loop


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run a coroutine on the background loop and wait for its result."""
    loop = background_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError("run_sync called from the background loop itself; await instead")
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)


class SyncEnv:
    """The same environment with blocking ``reset``/``step``/``close``."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self, task: Any = None, **kwargs: Any) -> Observation:
        return run_sync(self.env.reset(task, **kwargs))

    def step(self, action: Any, **kwargs: Any) -> StepResult:
        return run_sync(self.env.step(action, **kwargs))

    def close(self) -> None:
        run_sync(self.env.close())

    @property
    def trajectory(self):
        return self.env.trajectory

    @property
    def state(self) -> dict[str, Any] | None:
        """The hidden state of the episode (the ledger), as the environment holds it."""
        return self.env.state

    def __enter__(self) -> SyncEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
