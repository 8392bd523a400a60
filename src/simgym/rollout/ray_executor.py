"""Episodes spread over a Ray cluster: ``arollout(..., executor="ray")``.

The driver starts a pool of Ray actors. Each actor builds one :class:`EpisodeRunner`
from the :class:`RolloutConfig` (by name and options, so nothing unpicklable travels) and
plays up to ``config.concurrency`` episodes at once on its own event loop. Jobs go out
one at a time from a shared queue as slots free up, so a slow episode holds only its own
slot, never a whole shard. Trajectories come back as JSON dicts, are rebuilt here, and
reach ``on_done`` on the driver's loop in the order they finish.

Failures are never silent. A worker that cannot build its pieces stops the run before any
episode with the worker's own message. If a worker process dies, every episode it held is
retried once on another actor (a fresh one replaces the dead; Ray cannot tell which
episode killed the process, so each one it held spends a try); an episode whose worker
dies a second time comes back as a failed trajectory (``error`` set, ``truncated``),
which a rerun with resume will not repeat. An episode
that raises stops the run as it would with the local executor, once the episodes already
in flight have been reported.

Options (``RayExecutor(config, num_workers=2)`` or ``executor_options`` in the config):
``num_workers`` (default: the cluster's CPUs / ``num_cpus``), ``num_cpus`` per worker
(default 1), ``address`` (a cluster to join; default ``RAY_ADDRESS`` if set, else a local
instance is started and shut down afterwards), ``retries`` (default 1), ``start_timeout``
(seconds for workers to come up, default 300), ``init_options`` (more ``ray.init``
arguments for a local start).

On a cluster: start a head (``ray start --head --port=6379``) and join each other
machine to it (``ray start --address=HEAD:6379``), with the same Python environment and
simgym installed on every node (workers rebuild the world model, agent and reward by
name, and a world model's server or model files must be reachable from each). Then run
from the head or any machine that reaches it: ``arollout(..., executor="ray",
executor_options={"address": "HEAD:6379"})`` or ``simgym run --executor ray
--ray-address HEAD:6379`` (or ``RAY_ADDRESS``). Workers take one CPU each by default and
are spread over the nodes (``SPREAD`` scheduling); ``concurrency`` is per worker. Each
episode's seed comes from its task id, so the trajectories are those the local executor
makes, whichever node played them (tests/test_rollout_ray_cluster.py starts a head and a
worker node on one machine and checks both). ``benchmarks/rollout.py --executors
local,ray --ray-nodes 2`` measures it. A node that joins by hand must share the head's
authentication setting (``RAY_AUTH_MODE``, and the token if it is on).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import re
import socket
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.types import Trajectory
from simgym.rollout.episode import EpisodeJob
from simgym.rollout.executors import EpisodeRunner, OnDone, RolloutConfig, quiet_gc

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_OPTIONS = {"num_workers", "num_cpus", "address", "retries", "start_timeout", "init_options"}


def import_ray() -> Any:
    """The ``ray`` module, or a SimgymError that says how to install it."""
    try:
        import ray
    except ImportError:
        raise SimgymError(
            "the ray executor needs Ray, which is not installed: pip install 'simgym[ray]'"
        ) from None
    return ray


class EpisodeWorker:
    """The body of one Ray actor: a runner built once, many episodes on its loop."""

    def __init__(self, config: RolloutConfig) -> None:
        # Keep a build failure as text for ready(): Ray's own report of a failed
        # constructor buries the message in a traceback of its internals.
        self.error: str | None = None
        self.runner: EpisodeRunner | None = None
        try:
            self.runner = EpisodeRunner.from_config(config)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        # the actor exists to run episodes: its collector is tuned for that until close()
        self._gc: contextlib.AbstractContextManager[None] | None = quiet_gc()
        self._gc.__enter__()

    async def ready(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "error": self.error}

    async def run(self, job: EpisodeJob) -> dict[str, Any]:
        assert self.runner is not None
        try:
            trajectory = await self.runner.run(job)
        except Exception as exc:
            failed = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
            try:  # send the exception itself when it can travel, so callers can catch it
                pickle.loads(pickle.dumps(exc))
                failed["exception"] = exc
            except Exception:
                pass
            return failed
        return {"trajectory": trajectory.model_dump(mode="json")}

    async def close(self) -> None:
        if self._gc is not None:
            self._gc.__exit__(None, None, None)
            self._gc = None
        if self.runner is None:
            return
        for piece in (self.runner.world_model, self.runner.agent):
            if hasattr(piece, "aclose"):
                await piece.aclose()


class RayExecutor:
    """Runs episode jobs on a pool of Ray actors; see the module docstring."""

    def __init__(self, config: RolloutConfig, **options: Any) -> None:
        merged = {**dict(getattr(config, "executor_options", None) or {}), **options}
        unknown = sorted(set(merged) - _OPTIONS)
        if unknown:
            raise SimgymError(
                f"unknown ray executor option(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(_OPTIONS))}"
            )
        self.config = config
        self.num_workers: int | None = merged.get("num_workers")
        self.num_cpus = float(merged.get("num_cpus", 1))
        self.address: str | None = merged.get("address")
        self.retries = int(merged.get("retries", 1))
        self.start_timeout = float(merged.get("start_timeout", 300))
        self.init_options: dict[str, Any] = dict(merged.get("init_options") or {})
        if self.num_workers is not None and self.num_workers < 1:
            raise SimgymError(f"num_workers must be at least 1, not {self.num_workers}")
        if self.num_cpus < 0 or self.retries < 0:
            raise SimgymError("num_cpus and retries cannot be negative")
        self.ray = import_ray()

    async def run(self, jobs: list[EpisodeJob], on_done: OnDone) -> None:
        if not jobs:
            return
        started = self._connect()
        try:
            workers = self._pool_size(len(jobs))
            await _Dispatch(self, jobs, on_done).run(workers)
        finally:
            if started:  # only a Ray this executor started (or joined) is let go
                self.ray.shutdown()

    def _connect(self) -> bool:
        """Join or start Ray unless this process already is connected; True if we did."""
        ray = self.ray
        if ray.is_initialized():
            return False
        address = self.address or os.environ.get("RAY_ADDRESS")
        if address:
            _probe(address)
            ray.init(address=address, **self.init_options)
        else:
            options = {"include_dashboard": False, "logging_level": logging.WARNING}
            ray.init(**{**options, **self.init_options})
        return True

    def _pool_size(self, jobs: int) -> int:
        cpus = float(self.ray.cluster_resources().get("CPU", 0))
        if not self.num_cpus:  # workers that reserve no CPU fit anywhere; default: one a CPU
            return min(self.num_workers or max(1, int(cpus)), jobs)
        fits = int(cpus // self.num_cpus)
        wanted = self.num_workers if self.num_workers is not None else max(1, fits)
        if wanted > fits:
            raise SimgymError(
                f"{wanted} ray workers x {self.num_cpus:g} CPU do not fit the cluster's "
                f"{cpus:g} CPUs; ask for fewer workers or a smaller num_cpus"
            )
        return min(wanted, jobs)


def _probe(address: str, timeout_s: float = 5.0) -> None:
    """Fail in seconds, with one line, when nothing listens at a ``host:port`` address:
    ``ray.init`` would retry a dead address for minutes. ``auto``, ``local`` and other
    forms are left to Ray."""
    match = re.fullmatch(r"(?:ray://)?\[?([^\[\]/]+?)\]?:(\d+)/?", address.strip())
    if match is None:
        return
    host, port = match.group(1), int(match.group(2))
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise SimgymError(
            f"cannot reach the Ray cluster at {address}: {reason} (is `ray start --head` "
            "running there? without --ray-address a local Ray is started)"
        ) from None


@dataclass
class _Worker:
    handle: Any
    ready: bool = False
    dead: bool = False
    slots: list[asyncio.Task[None]] = field(default_factory=list)


class _Dispatch:
    """One run's bookkeeping: the job queue, the live actors, and what is still owed."""

    def __init__(self, executor: RayExecutor, jobs: list[EpisodeJob], on_done: OnDone) -> None:
        self.ray = executor.ray
        self.executor = executor
        self.config = executor.config
        self.on_done = on_done
        self.queue: asyncio.Queue[tuple[EpisodeJob, int]] = asyncio.Queue()
        for job in jobs:
            self.queue.put_nowait((job, 0))
        self.owed = len(jobs)  # jobs not yet reported to on_done
        self.in_flight = 0
        self.stopping = False  # an episode raised: send out nothing more
        self.failure: BaseException | None = None
        self.finished = asyncio.Event()
        self.workers: list[_Worker] = []
        self.starters: list[asyncio.Task[None]] = []
        remote = executor.ray.remote(EpisodeWorker)
        self.actor_class = remote.options(
            num_cpus=executor.num_cpus,
            max_concurrency=self.config.concurrency + 2,  # + ready() and close()
            scheduling_strategy="SPREAD",  # over the cluster's nodes, not packed on one
        )

    async def run(self, count: int) -> None:
        try:
            first = [self._launch(self._start_worker()) for _ in range(count)]
            await asyncio.gather(*first)
            await self.finished.wait()
            if self.failure is not None:
                raise self.failure
        finally:
            await self._teardown()

    def _launch(self, start: Any) -> asyncio.Task[None]:
        task = asyncio.create_task(start)
        self.starters.append(task)
        return task

    async def _start_worker(self) -> None:
        worker = _Worker(self.actor_class.remote(self.config))
        self.workers.append(worker)
        try:
            info = await asyncio.wait_for(worker.handle.ready.remote(), self.executor.start_timeout)
        except TimeoutError:
            raise SimgymError(
                f"a ray worker did not start within {self.executor.start_timeout:g} s "
                "(is the cluster short of CPUs?)"
            ) from None
        except self.ray.exceptions.RayActorError as exc:
            raise SimgymError(f"a ray worker died while starting: {_first_line(exc)}") from None
        if info["error"]:
            raise SimgymError(f"a ray worker could not build the rollout: {info['error']}")
        worker.ready = True
        if self.stopping or self.owed == 0:
            return
        worker.slots = [
            asyncio.create_task(self._guarded(self._slot(worker)))
            for _ in range(self.config.concurrency)
        ]

    async def _slot(self, worker: _Worker) -> None:
        """Feed one of the actor's episode slots until the queue is drained or it dies."""
        while not self.stopping:
            job, tries = await self.queue.get()
            if worker.dead or self.stopping:
                self.queue.put_nowait((job, tries))
                return
            self.in_flight += 1
            try:
                # the job travels pickled, so the task arrives exactly as given
                result = await worker.handle.run.remote(job)
            except self.ray.exceptions.RayError as exc:
                # the actor died (or its result was lost): the job goes round again
                self.in_flight -= 1
                lost = isinstance(exc, self.ray.exceptions.RayActorError)
                if lost:
                    self._worker_lost(worker)
                self._retry_or_fail(job, tries, exc)
                if lost:
                    return
                continue
            self.in_flight -= 1
            if "error" in result:
                self._episode_raised(job, result)
            else:
                trajectory = Trajectory.model_validate(result["trajectory"])
                trajectory.task = job.task  # the caller's own object, as the local executor
                self._report(trajectory)

    async def _guarded(self, body: Any) -> None:
        try:
            await body
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # on_done or Ray itself broke: stop everything
            if self.failure is None:
                self.failure = exc
            self.stopping = True
            self.finished.set()

    def _worker_lost(self, worker: _Worker) -> None:
        if worker.dead:
            return
        worker.dead = True
        self.ray.kill(worker.handle, no_restart=True)
        if not self.stopping:  # keep the pool at its size for the jobs still owed
            self._launch(self._guarded(self._start_worker()))

    def _retry_or_fail(self, job: EpisodeJob, tries: int, exc: BaseException) -> None:
        if tries < self.executor.retries and not self.stopping:
            self.queue.put_nowait((job, tries + 1))
            return
        reason = f"the ray worker running this episode died ({tries + 1} tries): "
        self._report(_failed(job, self.config, reason + _first_line(exc)))

    def _episode_raised(self, job: EpisodeJob, result: dict[str, Any]) -> None:
        # Like the local executor: an exception out of an episode is a bug or bad input,
        # so the run stops. What is in flight still gets reported first.
        self.stopping = True
        if self.failure is None:
            where = f"episode {job.key} failed on a ray worker"
            exc = result.get("exception")
            if isinstance(exc, Exception):
                exc.add_note(f"({where}; its traceback there:)\n{result['traceback']}")
                self.failure = exc
            else:
                self.failure = SimgymError(f"{where}: {result['error']}\n{result['traceback']}")
        self._check_finished()

    def _report(self, trajectory: Trajectory) -> None:
        self.owed -= 1
        self.on_done(trajectory)
        self._check_finished()

    def _check_finished(self) -> None:
        if self.owed == 0 or (self.stopping and self.in_flight == 0):
            self.finished.set()

    async def _teardown(self) -> None:
        tasks = [t for w in self.workers for t in w.slots] + self.starters
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        live = [w.handle for w in self.workers if w.ready and not w.dead]
        if live:
            # a polite close lets clients end their connections; then the actors go
            closing = [asyncio.ensure_future(h.close.remote()) for h in live]
            for future in closing:  # a close that fails after the kill is of no interest
                future.add_done_callback(_swallow)
            await asyncio.wait(closing, timeout=10)
        for worker in self.workers:
            self.ray.kill(worker.handle, no_restart=True)


def _failed(job: EpisodeJob, config: RolloutConfig, reason: str) -> Trajectory:
    """The record of an episode that could not be run to its end anywhere."""
    return Trajectory(
        task=job.task,
        domain=job.task.domain or "",
        world_model={"backend": config.world_model},
        agent={"name": config.agent},
        seed=job.seed,
        group_id=job.task.id if job.sample is not None else None,
        sample=job.sample,
        truncated=True,
        error=reason,
        finished_at=time.time(),
        metrics={"errors": 1, "executor_error": reason},
    )


def _swallow(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _first_line(exc: BaseException) -> str:
    """Ray's first line (what happened) and, when the text goes on, its last (the error
    the worker raised, e.g. a module it could not import), without terminal colours."""
    lines = [line.strip() for line in _ANSI.sub("", str(exc)).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
