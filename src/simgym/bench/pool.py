"""What ``infer`` and ``judge`` share: a bounded pool of workers, retries on transient
errors with backoff, and the summary of a run."""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from simgym.core.errors import WorldModelError

T = TypeVar("T")
R = TypeVar("R")
_HTTP_STATUS = re.compile(r"HTTP (\d{3})")


@dataclass
class RunSummary:
    """Counts of one ``infer`` or ``judge`` run."""

    selected: int = 0  # rows asked for
    skipped: int = 0  # already finished in the output file
    written: int = 0  # rows written by this run
    failed: int = 0  # of those, rows that failed
    seconds: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)  # first line of each error -> count
    first_error: str | None = None  # the first failure's cause, whole (on one line)

    @property
    def rate(self) -> float:
        return self.written / self.seconds if self.seconds > 0 else 0.0

    def note_error(self, message: str) -> None:
        head = message.splitlines()[0][:200] if message else "unknown error"
        if self.first_error is None:
            self.first_error = " ".join((message or "unknown error").split())[:500]
        self.errors[head] = self.errors.get(head, 0) + 1


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: timeouts, refused connections, 408/409/425/429 and 5xx answers.
    Other 4xx answers (a prompt longer than the context, a bad request) will not heal."""
    if not isinstance(exc, WorldModelError):
        return False
    match = _HTTP_STATUS.search(str(exc))
    if match:
        code = int(match.group(1))
        return code >= 500 or code in (408, 409, 425, 429)
    return True


async def with_retries(
    call: Callable[[], Awaitable[R]], *, retries: int, backoff_s: float
) -> tuple[R, int]:
    """``(result, attempts)``; transient errors are retried ``retries`` times with
    exponential backoff and jitter, the last error is raised."""
    attempt = 0
    while True:
        attempt += 1
        try:
            return await call(), attempt
        except Exception as exc:
            if attempt > retries or not is_transient(exc):
                exc.attempts = attempt  # type: ignore[attr-defined]
                raise
        delay = backoff_s * (2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
        await asyncio.sleep(delay)


async def run_pool(
    items: Sequence[T] | Iterable[T],
    work: Callable[[T], Awaitable[R]],
    finish: Callable[[R], None],
    *,
    concurrency: int,
) -> None:
    """Run ``work`` over ``items`` with at most ``concurrency`` in flight, handing each
    result to ``finish`` (which records it; ``work`` must not raise for an ordinary
    failure).

    A worker starts its next item before it finishes the previous one, so the CPU work of
    ``finish`` (metrics, the results line) runs while the next request is on the wire
    rather than delaying it: when many answers arrive at once this keeps the server busy.
    A result already received is finished even if the run is cancelled.
    """
    items = list(items)
    if not items:
        return
    iterator = iter(items)

    async def worker() -> None:
        pending: list[R] = []
        try:
            for item in iterator:  # a shared iterator: each item goes to exactly one worker
                task = asyncio.ensure_future(work(item))
                try:
                    if pending:
                        await asyncio.sleep(0)  # let the new request go out first
                        finish(pending.pop())
                    pending.append(await task)
                except BaseException:
                    task.cancel()  # cancelled (or a bug): leave no request behind
                    raise
        finally:
            while pending:
                finish(pending.pop())

    workers = [asyncio.create_task(worker()) for _ in range(max(1, min(concurrency, len(items))))]
    try:
        await asyncio.gather(*workers)
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


def now() -> float:
    return round(time.time(), 3)
