"""Which event loop a blocking rollout runs on: asyncio's own, or uvloop when asked for.

A driver with a thousand episodes in flight spends much of its CPU in the event loop
itself (selecting sockets, scheduling callbacks, transport writes). uvloop (libuv, the
``speed`` extra: ``pip install 'simgym[speed]'``) does that work in C. It is opt-in:
``rollout(..., event_loop="uvloop")`` or ``SIMGYM_EVENT_LOOP=uvloop``; ``"auto"`` takes
uvloop when it is installed and asyncio's loop otherwise. ``benchmarks/rollout.py
--loops asyncio,uvloop`` measures both side by side.

An async caller (``await arollout(...)``) already owns its loop; to put uvloop under it,
start the program with ``uvloop.run(main())`` or
``asyncio.Runner(loop_factory=simgym.rollout.loops.loop_factory("uvloop"))``.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from simgym.core.errors import SimgymError

T = TypeVar("T")

LOOP_ENV = "SIMGYM_EVENT_LOOP"
LOOPS = ("asyncio", "uvloop", "auto")


def loop_name(event_loop: str | None = None) -> str:
    """The loop asked for: ``event_loop``, else ``SIMGYM_EVENT_LOOP``, else asyncio's.

    Args:
        event_loop: ``"asyncio"``, ``"uvloop"``, ``"auto"`` or None (the environment).

    Returns:
        ``"asyncio"`` or ``"uvloop"`` (``"auto"`` resolved by what is installed).
    """
    name = (event_loop or os.environ.get(LOOP_ENV) or "asyncio").strip().lower()
    if name not in LOOPS:
        raise SimgymError(f"unknown event loop {name!r}; use one of {', '.join(LOOPS)}")
    if name == "auto":
        return "uvloop" if _uvloop() is not None else "asyncio"
    return name


def loop_factory(event_loop: str | None = None) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """A factory for ``asyncio.Runner(loop_factory=...)``; None for asyncio's default.

    Args:
        event_loop: as for :func:`loop_name`.

    Returns:
        ``uvloop.new_event_loop`` when uvloop is asked for, else None.
    """
    if loop_name(event_loop) == "asyncio":
        return None
    module = _uvloop()
    if module is None:
        raise SimgymError(
            "event loop 'uvloop' was asked for but uvloop is not installed: "
            "pip install 'simgym[speed]' (or use 'auto', which falls back to asyncio)"
        )
    return module.new_event_loop


def run_on_loop(coro: Coroutine[Any, Any, T], factory: Callable[[], Any]) -> T:
    """Run ``coro`` to its end on a new loop from ``factory``; from a thread that already
    runs a loop (a notebook), on a thread of its own, since one thread runs one loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(coro)
    outcome: dict[str, Any] = {}

    def body() -> None:
        try:
            with asyncio.Runner(loop_factory=factory) as runner:
                outcome["value"] = runner.run(coro)
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc

    thread = threading.Thread(target=body, name="simgym-rollout-loop")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _uvloop() -> Any:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop
