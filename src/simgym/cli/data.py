"""``simgym record`` (real backends write trajectories) and ``simgym export`` (trajectories
become training or benchmark rows)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from simgym.cli.errors import errors, friendly_errors
from simgym.cli.progress import CommandProgress
from simgym.cli.run import RetryErrorsOption, errored, exit_on_errors, summary_table
from simgym.core.errors import SimgymError
from simgym.core.safeload import read_text


@friendly_errors
def record(
    files: Annotated[
        list[Path],
        typer.Argument(help="action files (.yaml/.json, one episode each) or task files (.jsonl)"),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="trajectory JSONL (appended)")],
    domain: Annotated[
        str | None, typer.Option("--domain", "-d", help="domain for specs that do not name one")
    ] = None,
    concurrency: Annotated[int, typer.Option(help="sandboxes running at once")] = 2,
    max_turns: Annotated[int, typer.Option()] = 30,
    resume: Annotated[bool, typer.Option(help="skip task ids already in --out")] = True,
    retry_errors: RetryErrorsOption = True,
    command_timeout: Annotated[
        float, typer.Option(help="seconds a command may run before it is killed")
    ] = 300.0,
    cpu_seconds: Annotated[int, typer.Option(help="CPU seconds per process")] = 60,
    memory_mb: Annotated[
        int,
        typer.Option(
            help="memory of the whole sandbox (cgroup) and address space per process, MiB"
        ),
    ] = 2048,
) -> None:
    """Run scripted episodes for real: terminal and swe in bubblewrap sandboxes (no network,
    a throw-away root per episode), mcp against a live MCP server, search on a full-text
    index, web in headless Chromium on local sites. Trajectories go to --out."""
    from simgym.real.sandbox import Limits, bwrap_problem
    from simgym.rollout.record import record as record_real

    problem = bwrap_problem()
    if problem:
        raise SimgymError(problem)
    limits = Limits(cpu_s=cpu_seconds, memory_mb=memory_mb, command_s=command_timeout)
    with CommandProgress(errors) as progress:
        bar = progress.add("episodes")  # the total comes from on_start, after resuming
        finished = record_real(
            files,
            out,
            domain=domain,
            concurrency=concurrency,
            max_turns=max_turns,
            resume=resume,
            retry_errors=retry_errors,
            limits=limits,
            on_start=lambda todo: progress.update(bar, total=todo),
            on_done=lambda episode: progress.update(bar, advance=1, failed=len(errored([episode]))),
        )
    errors.print(summary_table(finished))
    errors.print(f"recorded {len(finished)} episodes to {out}")
    exit_on_errors(finished, out)


@friendly_errors
def export(
    files: Annotated[list[Path], typer.Argument(help="trajectory JSONL files")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="rows to write: .jsonl, or .parquet (pyarrow)")
    ],
    output_format: Annotated[
        str, typer.Option("--format", "-f", help="awb (AgentWorldBench rows) | sft (chat data)")
    ] = "awb",
    mode: Annotated[str, typer.Option(help="sft: one example per episode or per turn")] = "episode",
    domain: Annotated[
        str | None, typer.Option("--domain", "-d", help="only this domain's episodes")
    ] = None,
    system_prompt_file: Annotated[
        Path | None,
        typer.Option(help="the prompt template the episodes ran with, if not the domain's"),
    ] = None,
    instructions: Annotated[
        str | None, typer.Option(help="control instructions the episodes ran with")
    ] = None,
) -> None:
    """Convert trajectories into AgentWorldBench rows (one per turn) or chat SFT data."""
    from simgym.core.trajectories import UnreadableLineWarning
    from simgym.data.export import export_files

    if system_prompt_file is not None and not system_prompt_file.is_file():
        raise SimgymError(f"system prompt file not found: {system_prompt_file}")
    template = read_text(system_prompt_file) if system_prompt_file else None
    with warnings.catch_warnings(record=True) as caught:
        # Unreadable lines are skipped by the reader; count them and show one line each.
        warnings.simplefilter("always", UnreadableLineWarning)
        count = export_files(
            files,
            out,
            output_format,  # type: ignore[arg-type]
            mode=mode,  # type: ignore[arg-type]
            template=template,
            instructions=instructions,
            domain=domain,
        )
    skipped = [w for w in caught if issubclass(w.category, UnreadableLineWarning)]
    for other in (w for w in caught if w not in skipped):  # recording hid them: show them
        warnings.showwarning(other.message, other.category, other.filename, other.lineno)
    for warning in skipped:
        errors.print(f"[yellow]{escape(str(warning.message))}[/]")
    if skipped and count == 0:
        raise SimgymError(f"wrote no rows: {len(skipped)} unreadable trajectory lines skipped")
    note = f" ({len(skipped)} unreadable lines skipped)" if skipped else ""
    errors.print(f"wrote {count} {output_format} rows to {out}{note}")
