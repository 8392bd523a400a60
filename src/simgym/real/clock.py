"""The scenario's clock for a real program, through libfaketime (Debian's ``faketime``).

A program started with :func:`held_clock_env` in its environment reads the scenario's
moment as the time, unchanging: what it stamps (a ticket's creation) is the moment the
simulation stamps too, so a real run and a simulated one of the same episode agree. The
monotonic clock stays real, since event loops time their waits with it.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def as_utc(clock: datetime) -> datetime:
    """``clock`` in UTC; a naive one is read as UTC already (the scenarios' convention)."""
    return clock.astimezone(UTC) if clock.tzinfo else clock.replace(tzinfo=UTC)


def faketime_available() -> bool:
    return os.path.exists(FAKETIME_LIB)


def held_clock_env(clock: datetime) -> dict[str, str]:
    """Environment variables that hold a dynamically linked program's clock at ``clock``
    (read as UTC when naive). Raises ``FileNotFoundError`` where libfaketime is missing:
    a scenario that declares a clock must not meet a server running on its own."""
    if not faketime_available():
        raise FileNotFoundError(
            f"{FAKETIME_LIB} is missing (apt install faketime): the scenario's clock "
            "cannot reach the real server"
        )
    moment = as_utc(clock)
    return {
        "LD_PRELOAD": FAKETIME_LIB,
        # a date without '@' holds the clock still (libfaketime's absolute form)
        "FAKETIME": moment.strftime("%Y-%m-%d %H:%M:%S"),
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "TZ": "UTC",
    }


def hold_sandbox_clock(root: Path, clock: datetime | None) -> None:
    """The scenario's clock for every program of a sandbox whose root is ``root``, through
    libfaketime's own files (``/etc/ld.so.preload``, ``/etc/faketimerc``): it starts at
    ``clock`` and runs on (``make`` sees a later write as newer). Nothing where libfaketime
    is missing or there is no clock."""
    if clock is None or not faketime_available():
        return
    etc = root / "etc"
    when = as_utc(clock)
    (etc / "faketimerc").write_text("@" + when.strftime("%Y-%m-%d %H:%M:%S") + "\n")
    (etc / "ld.so.preload").write_text(FAKETIME_LIB + "\n")
