"""``bench infer``: ask a world model for the next observation of every benchmark row.

Each finished row is appended to the output file at once (flushed), keyed by
``domain/id/turn_idx``. A rerun skips rows already there, retries rows that failed, and
never leaves two rows for one key. The output row is the sample in the official layout
plus ``gen`` (the raw model text, as the reference script calls it) and simgym's fields:
``key``, ``domain``, ``status`` (``ok`` or ``failed``), ``error``, ``attempts``,
``observation``, ``reasoning``, ``tagged``, ``finish_reason``, ``latency_s``, ``usage``,
``reference`` (the real observation, without its header), ``metrics`` (rule metrics),
``world_model`` (backend and settings), ``pred_id`` and ``finished_at``.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simgym.bench.data import BenchRow, clean_observation
from simgym.bench.messages import build_messages
from simgym.bench.metrics import EDIT_METHOD, rule_metrics
from simgym.bench.pool import RunSummary, now, run_pool, with_retries
from simgym.bench.store import RowWriter, prepare_resume
from simgym.core.worldmodel import Prediction, WorldModel

SCHEMA = "simgym.bench.prediction/1"
# The reference evaluation's sampling settings, used when a caller names none.
OFFICIAL_MAX_TOKENS = 32768
OFFICIAL_TEMPERATURE = 0.6

OnResult = Callable[[dict[str, Any]], None]
OnStart = Callable[[int], None]  # called with the number of rows left to do


def plan_infer(
    rows: list[BenchRow],
    out: str | os.PathLike[str],
    *,
    retry_failed: bool = True,
    restart: bool = False,
) -> tuple[list[BenchRow], dict[str, dict[str, Any]]]:
    """``(rows still to do, finished rows kept in the file)``. ``restart`` empties the
    file; otherwise failed rows are retried (unless ``retry_failed`` is off)."""
    if restart:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text("", encoding="utf-8")
    finished = prepare_resume(
        out, lambda r: r.get("status") == "ok" or (not retry_failed and "status" in r)
    )
    return [r for r in rows if r.key not in finished], finished


def prediction_row(
    row: BenchRow,
    *,
    prediction: Prediction | None,
    error: str | None,
    attempts: int,
    world_model: dict[str, Any],
) -> dict[str, Any]:
    """The results-file row for one sample."""
    reference = clean_observation(row.reference)
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "key": row.key,
        "domain": row.domain,
        **row.sample(),
        "gen": prediction.raw if prediction else "",
        "pred_id": uuid.uuid4().hex,
        "status": "ok" if prediction is not None else "failed",
        "error": error,
        "attempts": attempts,
        "observation": prediction.observation if prediction else None,
        "reasoning": prediction.reasoning if prediction else None,
        "tagged": prediction.tagged if prediction else None,
        "finish_reason": prediction.finish_reason if prediction else None,
        "latency_s": round(prediction.latency_s, 4) if prediction else None,
        "usage": prediction.usage.model_dump() if prediction else None,
        "reference": reference,
        "metrics": None,
        "world_model": world_model,
        "finished_at": now(),
    }
    if prediction is not None:
        result["metrics"] = rule_metrics(
            prediction.observation,
            reference,
            domain=row.domain,
            current_prompt=row.current_prompt,
        )
    return result


async def infer_rows(
    rows: list[BenchRow],
    world_model: WorldModel,
    writer: RowWriter,
    *,
    concurrency: int = 64,
    max_tokens: int | None = None,
    temperature: float | None = None,
    retries: int = 2,
    backoff_s: float = 1.0,
    on_result: OnResult | None = None,
) -> RunSummary:
    """Predict ``rows`` with at most ``concurrency`` requests in flight, writing each
    result as it finishes. Failures are recorded as rows, never raised."""
    summary = RunSummary(selected=len(rows))

    def settings() -> dict[str, Any]:
        # Asked per row: a backend learns some facts (the served model's name) on its
        # first call.
        return {
            **world_model.describe(),
            "request_max_tokens": max_tokens,
            "request_temperature": temperature,
            "edit_method": EDIT_METHOD,
        }

    async def work(row: BenchRow) -> tuple[BenchRow, Prediction | None, str | None, int]:
        messages = build_messages(row)
        try:
            prediction, attempts = await with_retries(
                lambda: world_model.predict(
                    messages, max_tokens=max_tokens, temperature=temperature
                ),
                retries=retries,
                backoff_s=backoff_s,
            )
        except Exception as exc:  # recorded in the row; the run goes on
            return row, None, f"{type(exc).__name__}: {exc}", getattr(exc, "attempts", 1)
        return row, prediction, None, attempts

    def finish(outcome: tuple[BenchRow, Prediction | None, str | None, int]) -> None:
        row, prediction, error, attempts = outcome
        result = prediction_row(
            row, prediction=prediction, error=error, attempts=attempts, world_model=settings()
        )
        writer.write(result)
        summary.written += 1
        if error is not None:
            summary.failed += 1
            summary.note_error(error)
        if on_result is not None:
            on_result(result)

    start = time.perf_counter()
    try:
        await run_pool(rows, work, finish, concurrency=concurrency)
    finally:
        summary.seconds = time.perf_counter() - start
    return summary


async def run_infer(
    rows: list[BenchRow],
    world_model: WorldModel,
    out: str | os.PathLike[str],
    *,
    concurrency: int = 64,
    max_tokens: int | None = None,
    temperature: float | None = None,
    retries: int = 2,
    backoff_s: float = 1.0,
    retry_failed: bool = True,
    restart: bool = False,
    fsync: bool = False,
    on_start: OnStart | None = None,
    on_result: OnResult | None = None,
) -> RunSummary:
    """Resume or start ``out``, then predict every row not finished there. ``on_start``
    gets the number of rows left once resuming is planned; ``on_result`` each row."""
    todo, finished = plan_infer(rows, out, retry_failed=retry_failed, restart=restart)
    if on_start is not None:
        on_start(len(todo))
    with RowWriter(out, fsync=fsync) as writer:
        summary = await infer_rows(
            todo,
            world_model,
            writer,
            concurrency=concurrency,
            max_tokens=max_tokens,
            temperature=temperature,
            retries=retries,
            backoff_s=backoff_s,
            on_result=on_result,
        )
    summary.selected = len(rows)
    summary.skipped = len(rows) - len(todo)
    return summary
