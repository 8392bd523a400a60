"""Running the factory: quotas per domain, the scheduler, one episode on a real backend,
and :func:`arun_factory`, which records until every domain has its share.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.types import Task, Trajectory
from simgym.data.factory.backends import _Slot, _Slots, backend_problems, factory_limits
from simgym.data.factory.common import RAW_FILE, EpisodePlan, FactoryError
from simgym.data.factory.config import FactoryConfig
from simgym.data.factory.context import FactoryContext
from simgym.data.factory.dataset import finalize
from simgym.data.factory.plans import PLANNERS, episode_id, plan_episode
from simgym.data.factory.records import EpisodeRecord, Tally, _replay, episode_hash, scan_raw


def quotas_for(
    total: int, domains: Iterable[str], weights: dict[str, float] | None = None
) -> dict[str, int]:
    """``total`` transitions shared among ``domains`` by weight (equal by default)."""
    names = list(dict.fromkeys(domains))
    if not names:
        raise FactoryError("no domains to record")
    if total < 1:
        raise FactoryError("the number of transitions must be positive")
    unknown = [d for d in names if d not in PLANNERS]
    if unknown:
        raise FactoryError(
            f"unknown domain(s) {', '.join(unknown)}; available: {', '.join(PLANNERS)}"
        )
    weights = weights or {}
    bad = [d for d in weights if d not in names]
    if bad:
        raise FactoryError(f"weights for domain(s) not being recorded: {', '.join(bad)}")
    shares = {d: float(weights.get(d, 1.0)) for d in names}
    if any(w < 0 for w in shares.values()) or sum(shares.values()) <= 0:
        raise FactoryError("domain weights must be non-negative and not all zero")
    scale = total / sum(shares.values())
    quotas = {d: int(shares[d] * scale) for d in names}
    for d in sorted(names, key=lambda d: -(shares[d] * scale - quotas[d]))[
        : total - sum(quotas.values())
    ]:
        quotas[d] += 1
    return {d: q for d, q in quotas.items() if q > 0}


class _Scheduler:
    """Hands out the next episode: the domain furthest from its quota, counting the
    transitions that episodes in flight are expected to add."""

    def __init__(
        self, config: FactoryConfig, context: FactoryContext, tally: Tally, done_ids: set[str]
    ) -> None:
        self.config = config
        self.context = context
        self.tally = tally
        self.done_ids = done_ids
        self.next_index: Counter = Counter()
        self.inflight: Counter = Counter()

    def next(self) -> EpisodePlan | None:
        best, best_score = None, 0.0
        for domain, quota in self.tally.quotas.items():
            if domain in self.tally.abandoned:
                continue
            remaining = quota - self.tally.done[domain] - self.inflight[domain]
            if remaining > 0 and remaining / quota > best_score:
                best, best_score = domain, remaining / quota
        if best is None:
            return None
        while episode_id(best, self.config.seed, self.next_index[best]) in self.done_ids:
            self.next_index[best] += 1
        plan = plan_episode(best, self.config.seed, self.next_index[best], self.context)
        self.next_index[best] += 1
        self.inflight[best] += plan.expected_turns
        return plan

    def finish(self, plan: EpisodePlan) -> None:
        self.inflight[plan.domain] -= plan.expected_turns


class EpisodeTimeout(SimgymError):
    """An episode ran past its time limit (checked between steps)."""


async def _play(env: Any, plan: EpisodePlan, task: Task, deadline: float) -> Trajectory:
    """Reset, let the program act until it stops or the episode ends, give its answer.

    The time limit is checked between steps, never by cancelling one: a step may be
    starting a sandbox process, and on Python 3.11 a subprocess whose creation is
    cancelled can leave ``create_subprocess_exec`` waiting forever (its transport only
    finishes once pipes that were never connected disconnect). Each step is bounded by
    its backend's own limits (command, tool call and page timeouts)."""
    first = await env.reset(task)
    program = plan.program(first.text)
    answer: str | None = None
    open_episode = True
    try:
        action = next(program)
        while True:
            if time.monotonic() > deadline:
                raise EpisodeTimeout("the episode ran past its time limit")
            result = await env.step(action)
            if result.done or result.truncated:
                open_episode = False
                break
            action = program.send(result.observation.text)
    except StopIteration as stop:
        answer = stop.value
    if answer and open_episode:
        await env.finish(answer)
    await env.close(reason=None)
    assert env.trajectory is not None
    return env.trajectory


async def _record_episode(
    plan: EpisodePlan, slots: _Slots, config: FactoryConfig
) -> tuple[Trajectory, EpisodeRecord]:
    """Run one plan on a backend; never raises for what goes wrong inside the episode."""
    from simgym.core.env import SimEnv

    slot: _Slot | None = None
    env: Any = None
    error: str | None = None
    trajectory: Trajectory | None = None
    start = time.perf_counter()
    task = plan.task
    try:
        slot = await slots.acquire(plan.domain)
        task = await slot.prepare(plan)
        env = SimEnv(
            plan.domain,
            slot.executor,
            max_turns=config.max_turns,
            validation_retries=0,
            grounding=config.grounding,  # type: ignore[arg-type]
        )
        deadline = time.monotonic() + config.episode_timeout_s
        trajectory = await _play(env, plan, task, deadline)
    except EpisodeTimeout:
        error = f"episode timed out after {config.episode_timeout_s:g}s"
    except Exception as exc:  # noqa: BLE001 - a failed episode is recorded, not fatal
        error = f"{type(exc).__name__}: {exc}"
    finally:
        if error is not None and env is not None:
            with contextlib.suppress(Exception):
                await env.close(reason=error)
        if slot is not None:
            await slots.release(slot, healthy=error is None)
    seconds = time.perf_counter() - start
    if trajectory is None:
        trajectory = env.trajectory if env is not None and env.trajectory is not None else None
    if trajectory is None:
        trajectory = Trajectory(task=task, domain=plan.domain, error=error, truncated=True)
    error = error or trajectory.error
    transitions = sum(1 for t in trajectory.turns if t.in_history)
    if error is None and transitions == 0:
        error = "the program produced no transition"
    record = EpisodeRecord(
        id=plan.id,
        domain=plan.domain,
        index=plan.index,
        status="failed" if error else "ok",
        transitions=transitions,
        hash=episode_hash(trajectory),
        seconds=round(seconds, 3),
        rejected=sum(1 for t in trajectory.turns if t.error_type == "action"),
        format_problems=sum(1 for t in trajectory.turns if t.format_problems),
        error=error,
    )
    return trajectory, record


def _stamp(trajectory: Trajectory, record: EpisodeRecord) -> None:
    info = dict(trajectory.task.metadata.get("factory") or {})
    info.update(
        {
            "status": record.status,
            "hash": record.hash,
            "transitions": record.transitions,
            "seconds": record.seconds,
            "rejected": record.rejected,
            "format_problems": record.format_problems,
            "error": record.error,
        }
    )
    trajectory.task.metadata["factory"] = info


async def arun_factory(
    config: FactoryConfig,
    *,
    on_episode: Callable[[EpisodeRecord, Tally], None] | None = None,
    on_start: Callable[[Tally], None] | None = None,
) -> dict[str, Any]:
    """Record episodes until every domain has its share of ``config.transitions`` (counting
    only kept, unique episodes), then :func:`finalize`. Returns the manifest."""
    from simgym.core.trajectories import TrajectoryWriter

    out = config.out
    raw = out / RAW_FILE
    if not config.resume and raw.is_file() and raw.stat().st_size > 0:
        raise FactoryError(f"{out} already holds a factory run; resume it or choose another folder")
    quotas = quotas_for(config.transitions, config.domains, config.weights)
    problems = backend_problems(quotas)
    if problems:
        raise FactoryError(
            "real backends missing: "
            + "; ".join(f"{d}: {why}" for d, why in sorted(problems.items()))
        )
    out.mkdir(parents=True, exist_ok=True)
    records = scan_raw(raw).records
    tally = _replay(records, quotas)
    tally.failures_in_a_row.clear()
    context = await FactoryContext.abuild(
        quotas, work=out, seed=config.seed, web_sites=config.web_sites
    )
    scheduler = _Scheduler(config, context, tally, {r.id for r in records})
    started, before = time.time(), sum(tally.done.values())
    clock = time.perf_counter()
    new_records: list[EpisodeRecord] = []
    if on_start is not None:
        on_start(tally)
    work = Path(tempfile.mkdtemp(prefix="simgym-factory-"))
    slots = _Slots(work, factory_limits())
    try:
        with TrajectoryWriter(raw) as writer:

            async def worker() -> None:
                while (plan := scheduler.next()) is not None:
                    try:
                        trajectory, record = await _record_episode(plan, slots, config)
                    finally:
                        scheduler.finish(plan)
                    tally.classify(record)
                    _stamp(trajectory, record)
                    writer.write(trajectory)
                    tally.add(record, max_failures=config.max_failures)
                    new_records.append(record)
                    if on_episode is not None:
                        on_episode(record, tally)

            await asyncio.gather(*(worker() for _ in range(config.concurrency)))
    finally:
        await slots.aclose()
        shutil.rmtree(work, ignore_errors=True)
    wall = time.perf_counter() - clock
    run = {
        "seed": config.seed,
        "started": started,
        "wall_s": round(wall, 1),
        "concurrency": config.concurrency,
        "episodes": len(new_records),
        "transitions": sum(tally.done.values()) - before,
        "per_domain": {
            d: {
                "episodes": sum(1 for r in new_records if r.domain == d),
                "transitions": sum(
                    r.transitions for r in new_records if r.domain == d and r.status == "ok"
                ),
                "episode_seconds": round(sum(r.seconds for r in new_records if r.domain == d), 1),
            }
            for d in quotas
        },
    }
    return finalize(out, config=config, quotas=quotas, run=run, abandoned=tally.abandoned)


def run_factory(config: FactoryConfig, **options: Any) -> dict[str, Any]:
    """Blocking :func:`arun_factory`."""
    return asyncio.run(arun_factory(config, **options))
