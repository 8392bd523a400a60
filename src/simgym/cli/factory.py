"""``simgym factory``: record real transitions at volume for world-model training.

Runs :mod:`simgym.data.factory` (randomized scenarios and action programs on the real
backends), writes ``train``/``val``/``test`` trajectory files and ``manifest.json`` to
``--out``, and with ``--sft-out`` also exports them as transition rows
(:mod:`simgym.data.sft`). Rerunning the same command resumes: episodes already in
``--out`` are skipped, and the splits and rows are written again.

Importing this module adds :func:`factory` to the ``simgym`` command (as
:mod:`simgym.cli.serve` does for ``serve``); ``python -m simgym.cli.factory`` runs it alone.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from simgym.cli.errors import errors, friendly_errors
from simgym.cli.progress import CommandProgress
from simgym.core.errors import SimgymError

SPLIT_NAMES = ("train", "val", "test")


def _names(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        raise SimgymError("--domains names no domain")
    return names


def _weights(text: str | None) -> dict[str, float] | None:
    if not text:
        return None
    weights: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise SimgymError(f"--weights takes DOMAIN=NUMBER pairs, got {item!r}")
    return weights


def _split(text: str) -> tuple[float, float, float]:
    try:
        parts = tuple(float(x) for x in text.split(","))
    except ValueError:
        parts = ()
    if len(parts) != 3:
        raise SimgymError(f"--split takes three shares such as 0.9,0.05,0.05, got {text!r}")
    return parts  # type: ignore[return-value]


@friendly_errors
def factory(
    out: Annotated[
        Path, typer.Option("--out", "-o", help="folder for raw.jsonl, the splits and manifest.json")
    ],
    transitions: Annotated[
        int, typer.Option(help="transitions to record in all (kept, unique)")
    ] = 20_000,
    domains: Annotated[
        str, typer.Option(help="comma-separated domains")
    ] = "terminal,swe,mcp,search,web",
    concurrency: Annotated[
        int, typer.Option(help="episodes running at once (one backend each)")
    ] = 4,
    seed: Annotated[int, typer.Option(help="seed of every scenario and program")] = 0,
    weights: Annotated[
        str | None, typer.Option(help="share per domain, e.g. web=2,search=0.5 (default equal)")
    ] = None,
    max_turns: Annotated[int, typer.Option(help="steps before an episode is truncated")] = 40,
    episode_timeout: Annotated[
        float, typer.Option(help="seconds an episode may take (checked between steps)")
    ] = 300.0,
    web_sites: Annotated[int, typer.Option(help="generated web sites to browse")] = 24,
    split: Annotated[str, typer.Option(help="train,val,test shares by episode")] = "0.9,0.05,0.05",
    resume: Annotated[bool, typer.Option(help="continue a run already in --out")] = True,
    sft_out: Annotated[
        Path | None, typer.Option(help="also export the splits as transition rows here")
    ] = None,
    n_ctx: Annotated[int, typer.Option(help="sft: the context window rows must fit")] = 4096,
    max_tokens: Annotated[int, typer.Option(help="sft: tokens kept free for the answer")] = 256,
    max_completion_tokens: Annotated[
        int | None, typer.Option(help="sft: leave out rows whose answer is longer")
    ] = None,
    prompt_style: Annotated[
        str | None,
        typer.Option(help="sft: rebuild system prompts as compact | full (default: as recorded)"),
    ] = None,
) -> None:
    """Record real transitions at volume: randomized scenarios and action programs run on
    the real backends, deduplicated and split by episode into train/val/test."""
    from simgym.data.factory import FactoryConfig, arun_factory

    config = FactoryConfig(
        out=out,
        transitions=transitions,
        domains=_names(domains),
        concurrency=concurrency,
        seed=seed,
        weights=_weights(weights),
        max_turns=max_turns,
        episode_timeout_s=episode_timeout,
        web_sites=web_sites,
        split=_split(split),
        resume=resume,
    )
    budget = count = None
    if sft_out is not None:  # checked before the run, not after an hour of it
        from simgym.core.domain import PROMPT_STYLES
        from simgym.data.sft import ContextBudget, embedded_token_counter

        if prompt_style is not None and prompt_style not in PROMPT_STYLES:
            raise SimgymError(f"--prompt-style takes {' or '.join(PROMPT_STYLES)}")

        budget = ContextBudget(n_ctx=n_ctx, max_tokens=max_tokens)
        count = embedded_token_counter()
    progress = CommandProgress(errors)
    bars: dict[str, Any] = {}
    failed: dict[str, int] = {}  # failures the bars have been told of, per domain

    def on_start(tally: Any) -> None:
        for domain, quota in tally.quotas.items():
            bars[domain] = progress.add(
                domain, total=quota, completed=min(tally.done[domain], quota)
            )
            failed[domain] = 0

    def on_episode(record: Any, tally: Any) -> None:
        domain = record.domain
        note = f"{tally.episodes[domain]} ep"
        if tally.duplicates[domain]:
            note += f", {tally.duplicates[domain]} dup"
        more, failed[domain] = tally.failed[domain] - failed[domain], tally.failed[domain]
        quota = tally.quotas[domain]
        progress.update(
            bars[domain], completed=min(tally.done[domain], quota), failed=more, note=note
        )

    start = time.perf_counter()
    with progress:
        manifest = asyncio.run(arun_factory(config, on_episode=on_episode, on_start=on_start))
    wall = time.perf_counter() - start
    errors.print(_summary(manifest))
    run = manifest["runs"][-1] if manifest.get("runs") else {}
    rate = run.get("transitions", 0) / wall if wall > 0 else 0.0
    errors.print(
        f"recorded {run.get('episodes', 0)} episodes, {run.get('transitions', 0)} new transitions "
        f"in {wall:.0f}s ({rate:.1f}/s); splits in {escape(str(out))}"
    )
    if sft_out is not None:
        from simgym.data.sft import export_sft_splits

        stats = export_sft_splits(
            out,
            sft_out,
            count=count,
            budget=budget,
            max_completion_tokens=max_completion_tokens,
            prompt_style=prompt_style,
        )
        parts = ", ".join(f"{name} {s.rows}" for name, s in stats.items())
        skipped = sum(
            s.prompt_too_long + s.completion_too_long + s.duplicates for s in stats.values()
        )
        errors.print(
            f"sft rows: {parts} ({skipped} left out, see manifest.json) in {escape(str(sft_out))}"
        )
    if manifest.get("abandoned"):
        for domain, why in manifest["abandoned"].items():
            errors.print(f"[bold red]error:[/] {domain} was given up: {escape(why)}")
        raise typer.Exit(1)


def _summary(manifest: dict[str, Any]) -> Table:
    table = Table(title="factory")
    table.add_column("domain")
    for name in SPLIT_NAMES:
        table.add_column(name, justify="right")
    table.add_column("dup", justify="right")
    table.add_column("failed", justify="right")
    table.add_column("trans/ep-s", justify="right")
    splits = manifest["splits"]
    for domain, info in manifest["domains"].items():
        counts = [splits[s].get(domain, {"transitions": 0, "episodes": 0}) for s in SPLIT_NAMES]
        cells = [f"{c['transitions']} ({c['episodes']})" for c in counts]
        table.add_row(
            domain,
            *cells,
            str(info["duplicates"]),
            str(info["failed"]),
            f"{info['transitions_per_episode_second']:.2f}",
        )
    totals = [
        f"{splits[s]['total']['transitions']} ({splits[s]['total']['episodes']})"
        for s in SPLIT_NAMES
    ]
    table.add_row("total", *totals, "", "", "")
    return table


def main(argv: list[str] | None = None) -> None:
    """Run ``factory`` as a command of its own (``python -m simgym.cli.factory --out ...``)."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(factory)
    app(args=argv)


if __name__ == "__main__":
    main()
