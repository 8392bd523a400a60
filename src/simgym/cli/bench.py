"""``simgym bench``: infer, judge, score and compare (a typer sub-app, ``bench_app``).

Mounted by the main command as ``simgym bench``; also runnable alone as
``python -m simgym.bench``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from simgym.cli.console import make_console
from simgym.cli.errors import errors, friendly_errors
from simgym.cli.progress import CommandProgress
from simgym.core.errors import SimgymError
from simgym.core.worldmodel import WorldModel
from simgym.worldmodels.local import ADAPTER_HELP

bench_app = typer.Typer(
    help="World-model fidelity benchmark (AgentWorldBench-compatible): infer, judge, score.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = make_console()

# The reference evaluation's settings for served models (long reasoning needs room).
OFFICIAL = {"max_tokens": 32768, "temperature": 0.6}


# Ctrl-C loses nothing: say how to pick up where the run stopped.
friendly = friendly_errors(
    interrupted="interrupted: finished rows are saved; rerun the same command to resume"
)


def build_backend(
    kind: str,
    *,
    base_url: str | None,
    model: str | None,
    model_path: str | None,
    n_ctx: int | None,
    timeout: float,
    concurrency: int,
    api_key: str | None = None,
    judge: bool = False,
    adapter: str | None = None,
) -> WorldModel:
    """A backend for ``kind`` (openai, local, or any registered name)."""
    import simgym

    opts: dict[str, Any] = {}
    if kind == "openai":
        opts = {
            "base_url": base_url,
            "model": model,
            "api_key": api_key,
            "timeout": timeout,
            "max_concurrency": concurrency,
        }
    elif kind == "local":
        opts = {"model_path": model_path}
        if n_ctx:
            opts["n_ctx"] = n_ctx
        if judge:
            opts["prefill"] = False  # a judge answers in JSON, not as an observation
            opts["adapter"] = None  # the world-model adapter would make it simulate, not grade
        elif adapter is not None:
            opts["adapter"] = adapter
    return simgym.world_model(kind, **opts)


def request_settings(
    kind: str, max_tokens: int | None, temperature: float | None
) -> tuple[int | None, float | None]:
    """Per-request settings: what was asked, else the reference evaluation's for served
    models, else the backend's own defaults (the embedded model needs small answers)."""
    if kind == "openai":
        return max_tokens or OFFICIAL["max_tokens"], (
            OFFICIAL["temperature"] if temperature is None else temperature
        )
    return max_tokens, temperature


class RowProgress:
    """Progress fed one finished row at a time (the total may come later, through
    :meth:`start`): a bar on a terminal, a line now and then in a pipe."""

    def __init__(self, label: str, total: int | None, failed: Any) -> None:
        self._failed = failed
        self.progress = CommandProgress(errors)
        self.bar = self.progress.add(label, total=total)
        self.failures = 0

    def start(self, total: int) -> None:
        """Set the total once known; the rate counts from here."""
        self.progress.update(self.bar, total=total)

    def __enter__(self) -> RowProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def __call__(self, row: dict[str, Any]) -> None:
        failed = bool(self._failed(row))
        self.failures += failed
        self.progress.update(self.bar, advance=1, failed=int(failed))


def _print_summary(what: str, summary: Any, out: Path) -> None:
    errors.print(
        f"{what}: {summary.written} rows written to {out} in {summary.seconds:.1f}s "
        f"({summary.rate:.2f} rows/s), {summary.failed} failed, "
        f"{summary.skipped} already done"
    )
    for message, count in sorted(summary.errors.items(), key=lambda kv: -kv[1])[:5]:
        errors.print(f"  {count} x {message}", highlight=False)


def _resuming(progress: RowProgress, total: int, out: Path) -> Callable[[int], None]:
    """An ``on_start`` that says how many rows a resumed run skips and sizes the bar."""

    def start(todo: int) -> None:
        if total - todo:
            errors.print(f"resuming: {total - todo} of {total} rows already in {out}")
        progress.start(todo)

    return start


def _warnings_to_stderr() -> None:
    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        errors.print(f"[yellow]warning:[/] {message}", highlight=False)

    warnings.showwarning = show  # type: ignore[assignment]


# -- commands ---------------------------------------------------------------------------


@bench_app.command()
@friendly
def infer(
    data: Annotated[
        list[Path],
        typer.Option("--data", "-d", help="AgentWorldBench folder or JSONL files (repeatable)"),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="predictions JSONL (appended)")],
    world_model: Annotated[
        str, typer.Option("--world-model", "-w", help="openai | local | another backend")
    ] = "openai",
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible server (or SIMGYM_BASE_URL)")
    ] = None,
    model: Annotated[str | None, typer.Option(help="served model name")] = None,
    model_path: Annotated[str | None, typer.Option(help="GGUF file for -w local")] = None,
    adapter: Annotated[str | None, typer.Option(help=ADAPTER_HELP)] = None,
    n_ctx: Annotated[int | None, typer.Option(help="context size for -w local")] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="answer budget (openai default: 32768, as the reference)")
    ] = None,
    temperature: Annotated[
        float | None, typer.Option(help="sampling temperature (openai default: 0.6)")
    ] = None,
    timeout: Annotated[float, typer.Option(help="seconds per request")] = 1800.0,
    concurrency: Annotated[int, typer.Option(help="requests in flight")] = 64,
    retries: Annotated[int, typer.Option(help="extra tries on transient errors")] = 2,
    limit: Annotated[int | None, typer.Option(help="at most this many rows per domain")] = None,
    domains: Annotated[
        list[str] | None, typer.Option("--domains", help="only these domains (comma list)")
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="sample --limit rows at random with this seed")
    ] = None,
    retry_failed: Annotated[
        bool,
        typer.Option(
            "--retry-errors/--no-retry-errors",
            "--retry-failed/--no-retry-failed",
            help="on resume, redo rows that failed before",
        ),
    ] = True,
    restart: Annotated[bool, typer.Option(help="discard rows already in --out")] = False,
    fsync: Annotated[bool, typer.Option(help="fsync after every row")] = False,
) -> None:
    """Predict the next observation of every benchmark row (resumable; rows that failed
    are retried). Exits 1 when a row failed, naming the first one's cause."""
    from simgym.bench.data import load_rows, select_rows
    from simgym.bench.infer import run_infer

    _warnings_to_stderr()
    rows = select_rows(load_rows(data), domains=domains, limit=limit, seed=seed)
    backend = build_backend(
        world_model,
        base_url=base_url,
        model=model,
        model_path=model_path,
        adapter=adapter,
        n_ctx=n_ctx,
        timeout=timeout,
        concurrency=concurrency,
    )
    tokens, temp = request_settings(world_model, max_tokens, temperature)

    async def main():
        try:
            with RowProgress("infer", None, lambda r: r["status"] != "ok") as progress:
                return await run_infer(
                    rows,
                    backend,
                    out,
                    concurrency=concurrency,
                    max_tokens=tokens,
                    temperature=temp,
                    retries=retries,
                    retry_failed=retry_failed,
                    restart=restart,
                    fsync=fsync,
                    on_start=_resuming(progress, len(rows), out),
                    on_result=progress,
                )
        finally:
            await backend.aclose()

    summary = asyncio.run(main())
    _print_summary("infer", summary, out)
    _exit_on_failures("infer", summary, out)


def _exit_on_failures(what: str, summary: Any, out: Path) -> None:
    """Exit 1 when rows failed: the results are not finished (a rerun retries them)."""
    if not summary.failed:
        return
    errors.print(
        f"[bold red]{summary.failed} row(s) failed[/]; the first: "
        f"{escape(str(summary.first_error))}",
        highlight=False,
    )
    errors.print(f"rerun the same command to retry them (they are in {out})", highlight=False)
    raise typer.Exit(1)


@bench_app.command()
@friendly
def judge(
    predictions: Annotated[
        Path, typer.Option("--predictions", "-p", help="predictions JSONL from `bench infer`")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="judged JSONL (appended)")],
    judge_backend: Annotated[
        str, typer.Option("--judge", "-j", help="openai | local | another backend")
    ] = "openai",
    judge_base_url: Annotated[
        str | None, typer.Option(help="judge's OpenAI-compatible server")
    ] = None,
    judge_model: Annotated[str | None, typer.Option(help="judge model name")] = None,
    judge_model_path: Annotated[
        str | None, typer.Option(help="GGUF file for --judge local")
    ] = None,
    judge_n_ctx: Annotated[int | None, typer.Option(help="context size for --judge local")] = None,
    judge_max_tokens: Annotated[
        int | None, typer.Option(help="judge answer budget (openai default: 32768)")
    ] = None,
    judge_temperature: Annotated[
        float | None, typer.Option(help="judge temperature (openai default: 0.6)")
    ] = None,
    attempts: Annotated[int, typer.Option(help="asks per row for a readable grade")] = 3,
    context_turns: Annotated[
        int | None, typer.Option(help="earlier turns shown to the judge (default: all)")
    ] = None,
    prompts_dir: Annotated[
        Path | None,
        typer.Option(
            help="judge prompt overrides: judge.md / judge_<family>.md, or "
            "<domain>/judge_system_prompt.txt (the Qwen-AgentWorld prompts/ layout)"
        ),
    ] = None,
    timeout: Annotated[float, typer.Option(help="seconds per request")] = 1800.0,
    concurrency: Annotated[int, typer.Option(help="requests in flight")] = 16,
    retries: Annotated[int, typer.Option(help="extra tries on transient errors")] = 2,
    retry_failed: Annotated[
        bool, typer.Option(help="on resume, redo rows the judge failed")
    ] = True,
    restart: Annotated[bool, typer.Option(help="discard rows already in --out")] = False,
    fsync: Annotated[bool, typer.Option(help="fsync after every row")] = False,
) -> None:
    """Grade each prediction against the real observation (resumable). The judge's API
    key comes from SIMGYM_JUDGE_API_KEY, else OPENAI_API_KEY."""
    from simgym.bench.judge import run_judge
    from simgym.bench.store import load_results

    _warnings_to_stderr()
    rows = load_results(predictions)
    backend = build_backend(
        judge_backend,
        base_url=judge_base_url,
        model=judge_model,
        model_path=judge_model_path,
        n_ctx=judge_n_ctx,
        timeout=timeout,
        concurrency=concurrency,
        api_key=os.environ.get("SIMGYM_JUDGE_API_KEY"),
        judge=True,
    )
    tokens, temp = request_settings(judge_backend, judge_max_tokens, judge_temperature)

    async def main():
        try:
            with RowProgress("judge", None, lambda r: r["judge"]["status"] != "ok") as progress:
                return await run_judge(
                    rows,
                    backend,
                    out,
                    retry_failed=retry_failed,
                    restart=restart,
                    fsync=fsync,
                    on_start=_resuming(progress, len(rows), out),
                    concurrency=concurrency,
                    attempts=attempts,
                    max_tokens=tokens,
                    temperature=temp,
                    retries=retries,
                    context_turns=context_turns,
                    prompts_dir=prompts_dir,
                    on_result=progress,
                )
        finally:
            await backend.aclose()

    _print_summary("judge", asyncio.run(main()), out)


@bench_app.command()
@friendly
def score(
    files: Annotated[
        list[Path], typer.Argument(help="judged (or predictions) JSONL; several are merged")
    ],
    json_out: Annotated[Path | None, typer.Option("--json", help="write the report JSON")] = None,
    markdown: Annotated[Path | None, typer.Option(help="write a Markdown report")] = None,
    html: Annotated[Path | None, typer.Option(help="write an HTML report with a chart")] = None,
) -> None:
    """Per-domain and overall scores (0-100), failures and rule metrics."""
    from simgym.bench.report import rich_tables, write_reports
    from simgym.bench.score import score_rows
    from simgym.bench.store import latest_by_key, load_results

    _warnings_to_stderr()
    rows: list[dict[str, Any]] = []
    for path in files:
        rows.extend(load_results(path))
    report = score_rows(list(latest_by_key(rows).values()), sources=[str(p) for p in files])
    for table in rich_tables(report):
        console.print(table)
    for path in write_reports(report, json_path=json_out, markdown_path=markdown, html_path=html):
        errors.print(f"wrote {path}")


@bench_app.command()
@friendly
def compare(
    a: Annotated[Path, typer.Argument(help="run A: score JSON or results JSONL")],
    b: Annotated[Path, typer.Argument(help="run B: score JSON or results JSONL")],
    paired: Annotated[
        bool, typer.Option(help="only rows graded in both runs (needs JSONL files)")
    ] = False,
    field: Annotated[str, typer.Option(help="total | total_strict | a dimension")] = "total",
    json_out: Annotated[Path | None, typer.Option("--json", help="write the comparison")] = None,
    markdown: Annotated[Path | None, typer.Option(help="write a Markdown table")] = None,
) -> None:
    """Two runs side by side with per-domain deltas (B - A)."""
    from simgym.bench.compare_runs import (
        FIELDS,
        compare_reports,
        compare_table,
        load_side,
        paired_reports,
    )
    from simgym.bench.report import md_table

    if field not in FIELDS:
        raise SimgymError(f"--field must be one of {', '.join(FIELDS)}")
    report_a, rows_a = load_side(a)
    report_b, rows_b = load_side(b)
    if paired:
        if rows_a is None or rows_b is None:
            raise SimgymError("--paired needs two results JSONL files, not score reports")
        report_a, report_b = paired_reports(rows_a, rows_b)
    comparison = compare_reports(report_a, report_b)
    lines = compare_table(comparison, field)
    table = Table(*lines[0], title=f"{field}: A = {a.name}, B = {b.name}")
    for line in lines[1:]:
        table.add_row(*line)
    console.print(table)
    if json_out:
        json_out.write_text(json.dumps(comparison, indent=2), encoding="utf-8")
        errors.print(f"wrote {json_out}")
    if markdown:
        markdown.write_text(f"A: {a}\n\nB: {b}\n\n{md_table(lines)}\n", encoding="utf-8")
        errors.print(f"wrote {markdown}")


def _int_list(text: str, what: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SimgymError(f"{what} must be a comma list of whole numbers, not {text!r}") from None


def _word_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


# --quick: n=5 and one probe per cell (the ops spread over the domains), enough to see
# the table in a couple of minutes with the embedded model.
CONSISTENCY_QUICK = {"gaps": "5", "probes": 1}
# The embedded model's observations here are one short line; a cap keeps a rambling
# small model from spending minutes of CPU on text the rule never reads.
CONSISTENCY_LOCAL_MAX_TOKENS = 96


@bench_app.command()
@friendly
def consistency(
    world_model: Annotated[
        str, typer.Option("--world-model", "-w", help="local | openai | another backend")
    ] = "local",
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible server (or SIMGYM_BASE_URL)")
    ] = None,
    model: Annotated[str | None, typer.Option(help="served model name")] = None,
    model_path: Annotated[str | None, typer.Option(help="GGUF file for -w local")] = None,
    adapter: Annotated[str | None, typer.Option(help=ADAPTER_HELP)] = None,
    n_ctx: Annotated[int | None, typer.Option(help="context size for -w local")] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(help="answer budget (local default: 96; openai default: 32768)"),
    ] = None,
    temperature: Annotated[
        float | None, typer.Option(help="sampling temperature (openai default: 0.6)")
    ] = None,
    timeout: Annotated[float, typer.Option(help="seconds per request")] = 1800.0,
    concurrency: Annotated[
        int | None, typer.Option(help="episodes in flight (default: 1 for local, else 16)")
    ] = None,
    domains: Annotated[str, typer.Option(help="comma list: terminal, mcp, swe")] = (
        "terminal,mcp,swe"
    ),
    gaps: Annotated[
        str | None, typer.Option(help="turns n between change and look (default: 5,20,50)")
    ] = None,
    modes: Annotated[str, typer.Option(help="context modes: history, state")] = "history,state",
    grounding: Annotated[
        str,
        typer.Option(
            help="grounding modes to compare: off, facts, strict (facts from the hidden "
            "state; strict also checks and corrects the observation)"
        ),
    ] = "off,strict",
    probes: Annotated[
        int | None, typer.Option(help="probes per domain, n and mode; ops cycle (default: 3)")
    ] = None,
    seed: Annotated[int, typer.Option(help="seed for fact ids, values and sampling")] = 0,
    context_turns: Annotated[int, typer.Option(help="recent turns sent in state mode")] = 4,
    retries: Annotated[
        int, typer.Option(help="world-model retries on a malformed observation")
    ] = 0,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="per-probe rows JSONL (resumable)")
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the table as JSON")] = None,
    restart: Annotated[bool, typer.Option(help="discard rows already in --out")] = False,
    quick: Annotated[
        bool, typer.Option(help="a short run: n=5, one probe per cell (~2 min local)")
    ] = False,
) -> None:
    """Does the world model keep facts straight? A fact is created, changed or deleted at
    turn k and looked at again at turn k+n, in both context modes, with grounding off and
    on; scored by rule. Only those two turns are simulated by the model under test: the
    turns between are written by rule (see simgym.bench.consistency)."""
    from simgym.bench.consistency import (
        DEFAULT_GAPS,
        GROUNDINGS,
        RunSettings,
        corrected_totals,
        generate_probes,
        mode_totals,
        plan_runs,
        report_table,
        run_consistency,
        summarize,
    )
    from simgym.bench.store import RowWriter

    _warnings_to_stderr()
    if gaps is None:
        gaps = CONSISTENCY_QUICK["gaps"] if quick else ",".join(map(str, DEFAULT_GAPS))
    if probes is None:
        probes = CONSISTENCY_QUICK["probes"] if quick else 3
    if context_turns < 0 or retries < 0:
        raise SimgymError("--context-turns and --retries must be zero or more")
    chosen = generate_probes(
        _word_list(domains), gaps=_int_list(gaps, "--gaps"), probes=probes, seed=seed
    )
    mode_list = _word_list(modes)
    grounding_list = _word_list(grounding)
    unknown = [g for g in grounding_list if g not in GROUNDINGS]
    if unknown or not grounding_list:
        raise SimgymError(
            f"--grounding must be a comma list of {', '.join(GROUNDINGS)}, not {grounding!r}"
        )
    if world_model == "local" and max_tokens is None:
        max_tokens = CONSISTENCY_LOCAL_MAX_TOKENS
    tokens, temp = request_settings(world_model, max_tokens, temperature)
    settings = RunSettings(
        context_turns=context_turns, max_tokens=tokens, temperature=temp, retries=retries
    )
    backend = build_backend(
        world_model,
        base_url=base_url,
        model=model,
        model_path=model_path,
        adapter=adapter,
        n_ctx=n_ctx,
        timeout=timeout,
        concurrency=concurrency or 16,
    )
    run = settings.record(backend, seed)
    todo, finished = plan_runs(
        chosen, mode_list, out, run, restart=restart, groundings=grounding_list
    )
    if finished:
        errors.print(f"resuming: {len(finished)} rows already in {out}")
    if concurrency is None:
        # The embedded model answers one request at a time, and interleaved episodes
        # would evict each other's prompt prefix from its cache.
        concurrency = 1 if world_model == "local" else 16
    started = time.perf_counter()

    async def main():
        try:
            with (
                RowWriter(out) if out else _NoWriter() as writer,
                RowProgress("consistency", len(todo), lambda r: r["status"] != "ok") as progress,
            ):
                return await run_consistency(
                    todo,
                    backend,
                    settings=settings,
                    run=run,
                    writer=writer,
                    concurrency=concurrency,
                    on_row=progress,
                )
        finally:
            await backend.aclose()

    rows = asyncio.run(main())
    seconds = time.perf_counter() - started
    wanted = {p.key(m, g) for p in chosen for m in mode_list for g in grounding_list}
    every = [r for r in [*finished.values(), *rows] if r["key"] in wanted]
    cells = summarize(every)
    console.print(report_table(cells, title=f"World-state consistency ({backend.name})"))
    totals = mode_totals(cells)
    corrected = corrected_totals(cells)

    def total(name: str, p: int, n: int) -> str:
        fixed = f", {corrected[name]} corrected" if corrected.get(name) else ""
        return f"{name} {p}/{n} ({100 * p / n:.0f}%{fixed})"

    console.print("overall: " + ", ".join(total(m, p, n) for m, (p, n) in totals.items() if n))
    rendered = sum(c.rendered for c in cells)
    contradictions = sum(c.contradictions for c in cells)
    console.print(
        f"the model under test wrote {rendered} turn(s); {contradictions} contradicted the "
        "state's facts and were served (strict mode could not resolve them)"
    )
    errors.print(
        f"{len(rows)} probe episodes in {seconds:.1f}s; only turn k and turn k+n are "
        "simulated by the model under test, the turns between are scripted"
        + (f"; rows in {out}" if out else "")
    )
    if json_out:
        report = {
            "run": run,
            "cells": [c.as_dict() for c in cells],
            "totals": totals,
            "corrected": corrected,
            "rendered": rendered,
            "contradictions": contradictions,
        }
        json_out.write_text(json.dumps(report, indent=2), encoding="utf-8")
        errors.print(f"wrote {json_out}")


class _NoWriter:
    """Stands in for a RowWriter when no --out file is given."""

    def write(self, row: dict[str, Any]) -> None:
        return None

    def __enter__(self) -> _NoWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def main() -> None:
    bench_app()


if __name__ == "__main__":
    main()
