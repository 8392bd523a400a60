"""``simgym train``: world-model training (a typer sub-app, ``train_app``).

``sft`` fine-tunes a world model on SFT JSONL (LoRA or full weights, checkpoints, resume,
a loss log), ``curve`` prints a run's loss curves, ``export-gguf`` writes the trained
weights as a GGUF file for the ``local`` backend and checks that llama.cpp decodes like
transformers, ``eval`` compares base and trained models on held-out real observations,
``pipeline`` runs factory -> training -> export -> evaluation in one resumable command,
and ``speed`` measures training tokens per second on this machine.
Everything heavy (torch, transformers, TRL) is imported by the command that needs it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from simgym.cli.console import make_console
from simgym.cli.errors import errors, friendly_errors
from simgym.core.errors import SimgymError

train_app = typer.Typer(
    help="Train a world model: SFT on recorded transitions, export to GGUF.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = make_console()

Base = Annotated[
    str | None,
    typer.Option(help="base model: a GGUF file or a Hugging Face folder (default: embedded)"),
]


@train_app.command("sft")
@friendly_errors
def sft(
    data: Annotated[Path, typer.Option(help="training rows (SFT JSONL)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="run folder (checkpoints, final/)")],
    val: Annotated[Path | None, typer.Option(help="validation rows (SFT JSONL)")] = None,
    base: Base = None,
    lora: Annotated[bool, typer.Option("--lora/--full", help="LoRA adapter or all weights")] = True,
    max_steps: Annotated[int | None, typer.Option(min=1, help="optimizer steps at most")] = None,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="stop once this many tokens were read")
    ] = None,
    epochs: Annotated[float, typer.Option(help="passes over the data, if no budget")] = 1.0,
    batch_size: Annotated[int, typer.Option(min=1)] = 4,
    grad_accum: Annotated[int, typer.Option(min=1, help="batches per optimizer step")] = 1,
    lr: Annotated[
        float | None, typer.Option(help="learning rate (default 2e-4 LoRA, 2e-5 full)")
    ] = None,
    max_length: Annotated[
        int, typer.Option(min=16, help="tokens per row; longer rows lose their oldest turns")
    ] = 1024,
    layout: Annotated[
        str,
        typer.Option(
            help="episode: one sequence per episode, loss on every observation; "
            "turn: one sequence per row"
        ),
    ] = "episode",
    bf16: Annotated[
        bool, typer.Option("--bf16/--fp32", help="bfloat16 autocast (faster on CPU)")
    ] = True,
    gradient_checkpointing: Annotated[
        bool, typer.Option(help="recompute activations (less memory, slower)")
    ] = False,
    save_steps: Annotated[int, typer.Option(min=1, help="checkpoint every N steps")] = 50,
    logging_steps: Annotated[int, typer.Option(min=1, help="log the loss every N steps")] = 5,
    eval_steps: Annotated[
        int | None, typer.Option(min=1, help="validate every N steps (default: every save)")
    ] = None,
    lora_rank: Annotated[int, typer.Option(min=1)] = 16,
    lora_alpha: Annotated[int, typer.Option(min=1)] = 32,
    seed: Annotated[int, typer.Option()] = 0,
    threads: Annotated[
        int | None, typer.Option(min=1, help="torch threads (1 is faster on a busy machine)")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="continue from the last checkpoint in --out")
    ] = False,
) -> None:
    """Supervised fine-tuning on observation tokens only (TRL SFTTrainer)."""
    from pydantic import ValidationError

    from simgym.train.progress import RichProgress, curve_lines, read_log
    from simgym.train.sft import LOSS_LOG, SftOptions, train_sft

    _quiet_libraries()
    try:
        options = SftOptions(
            data=data,
            out=out,
            val=val,
            base=base,
            mode="lora" if lora else "full",
            max_steps=max_steps,
            max_tokens=max_tokens,
            epochs=epochs,
            batch_size=batch_size,
            grad_accum=grad_accum,
            lr=lr,
            max_length=max_length,
            layout=layout,
            bf16=bf16,
            gradient_checkpointing=gradient_checkpointing,
            save_steps=save_steps,
            logging_steps=logging_steps,
            eval_steps=eval_steps,
            lora_rank=lora_rank,
            lora_alpha=lora_alpha,
            seed=seed,
            threads=threads,
            resume=resume,
        )
    except ValidationError as exc:
        raise SimgymError(f"bad training settings: {exc}") from None
    result = train_sft(options, callbacks=[RichProgress(errors)])
    stats = result.train_stats
    errors.print(
        f"rows: {stats.rows - stats.dropped - stats.unread} of {stats.rows + stats.unread} "
        f"used as {stats.kept} sequences teaching {stats.observations} observations, "
        f"{stats.trimmed} lost old turns to fit "
        f"{max_length} tokens, {stats.dropped} too long even alone"
        + (f" (lines {stats.dropped_lines})" if stats.dropped else ""),
        highlight=False,
    )
    for line in curve_lines(read_log(out / LOSS_LOG)):
        errors.print(line, highlight=False)
    steps = f"{result.steps} step" + ("s" if result.steps != 1 else "")
    errors.print(
        f"{steps}, {result.tokens} tokens in {result.seconds:.0f}s "
        f"({result.tokens_per_second:.0f} tokens/s); model in {escape(str(result.final))}",
        highlight=False,
    )


@train_app.command("curve")
@friendly_errors
def curve(
    run: Annotated[Path, typer.Argument(help="a run folder written by `simgym train sft`")],
    width: Annotated[int, typer.Option(min=8, help="columns of the curve")] = 60,
    as_json: Annotated[bool, typer.Option("--json", help="print the log records")] = False,
) -> None:
    """Print a run's loss curves (also while it trains)."""
    from simgym.train.progress import curve_lines, read_log

    path = run / "loss.jsonl"
    if not path.is_file():
        raise SimgymError(f"no loss log in {run} (expected {path})")
    records = read_log(path)
    if as_json:
        for record in records:
            typer.echo(json.dumps(record))
        return
    lines = curve_lines(records, width)
    if not lines:
        raise SimgymError(f"{path} has no loss records yet")
    for line in lines:
        console.print(line, highlight=False)


@train_app.command("export-gguf")
@friendly_errors
def export_gguf(
    model: Annotated[
        Path, typer.Option(help="final/ or checkpoint-N/ of a run, a model folder, or a GGUF file")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="GGUF file to write")],
    out_type: Annotated[
        str,
        typer.Option("--type", help="tensor type: f32 | f16 | bf16 | q8_0 (adapter: f32 | f16)"),
    ] = "f16",
    adapter: Annotated[
        bool,
        typer.Option(
            "--adapter/--merged",
            help="a LoRA run as a GGUF adapter for llama.cpp, or merged into a full model",
        ),
    ] = False,
    template: Annotated[
        Path | None,
        typer.Option(
            help="GGUF file to copy the tokenizer and metadata from (default: the run's base); "
            "with --adapter, the base GGUF the check applies the adapter to"
        ),
    ] = None,
    name: Annotated[str | None, typer.Option(help="general.name of the new file")] = None,
    check: Annotated[
        bool, typer.Option(help="compare greedy output of llama.cpp and transformers")
    ] = True,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="tokens per check prompt")] = 24,
) -> None:
    """Write trained weights as a GGUF file: a full model (a LoRA adapter merged first) or,
    with --adapter, the adapter alone."""
    from simgym.train.gguf_export import export_gguf as export
    from simgym.train.gguf_export import load_trained, saved_tokenizer, template_for

    _quiet_libraries()
    if adapter:
        from simgym.train.adapter_gguf import export_adapter_gguf

        path = export_adapter_gguf(model, out, out_type=out_type)
        base_gguf = template or template_for(model)
        loaded = load_trained(model) if check else None
        tokenizer = saved_tokenizer(model)
    else:
        done = export(model, out, out_type=out_type, template=template, name=name)
        path, base_gguf, loaded, tokenizer = done.path, None, done.model, done.tokenizer
    size = path.stat().st_size / 2**20
    errors.print(f"wrote {escape(str(path))} ({size:.1f} MiB, {out_type})", highlight=False)
    if not check:
        return
    from simgym.train.base import load_tokenizer
    from simgym.train.verify import compare_greedy

    tokenizer = tokenizer or load_tokenizer(base_gguf or path)
    if base_gguf is not None:  # llama.cpp runs the base with the adapter applied
        results = compare_greedy(
            loaded, tokenizer, base_gguf, max_new_tokens=max_new_tokens, lora_path=path
        )
    else:
        results = compare_greedy(loaded, tokenizer, path, max_new_tokens=max_new_tokens)
    table = Table("prompt", "tokens", "same prompt ids", "same greedy", "first difference")
    for index, match in enumerate(results, 1):
        table.add_row(
            str(index),
            str(len(match.hf_tokens)),
            "yes" if match.same_prompt_tokenization else "[red]no",
            "yes" if match.same else "[yellow]no",
            "" if match.same else str(match.first_difference),
        )
    console.print(table)
    same = sum(m.same for m in results)
    errors.print(f"llama.cpp matched transformers' greedy output on {same} of {len(results)}")
    quantized = _quantized(base_gguf or path)
    if same < len(results) and quantized:
        errors.print(
            f"note: {quantized} weights: llama.cpp's quantized kernels also round the "
            "activations, so greedy output can part ways early; an f32 file decodes exactly",
            highlight=False,
        )
    if not all(m.same_prompt_tokenization for m in results):
        raise SimgymError("llama.cpp tokenizes the prompts differently: the tokenizer metadata")
    if same < len(results) and out_type == "f32" and base_gguf is None:
        raise SimgymError("an f32 export should decode exactly like transformers; it does not")


@train_app.command("eval")
@friendly_errors
def evaluate(
    data: Annotated[
        list[Path], typer.Option("--data", "-d", help="benchmark rows or trajectories (repeatable)")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="folder for the results files")],
    adapter: Annotated[
        list[str] | None,
        typer.Option(help="a trained GGUF adapter to compare, as NAME=PATH or PATH (repeatable)"),
    ] = None,
    model: Annotated[
        list[str] | None,
        typer.Option(help="a trained GGUF model to compare, as NAME=PATH or PATH (repeatable)"),
    ] = None,
    base: Annotated[bool, typer.Option(help="also evaluate the plain embedded base")] = True,
    limit: Annotated[int | None, typer.Option(help="rows per domain (sampled)")] = 20,
    seed: Annotated[int, typer.Option(help="seed of the row sample")] = 0,
    max_tokens: Annotated[int, typer.Option(min=1, help="answer budget per row")] = 256,
    n_ctx: Annotated[int, typer.Option(min=256, help="context window of each model")] = 8192,
    threads: Annotated[int | None, typer.Option(min=1, help="llama.cpp threads")] = None,
    as_json: Annotated[Path | None, typer.Option("--json", help="write the report here")] = None,
) -> None:
    """Base vs trained world models on held-out real observations: exact match, edit
    similarity, format validity and line F1 per domain (greedy, resumable)."""
    import asyncio

    from simgym.train.evaluate import aevaluate, report_table

    candidates: dict[str, dict] = {"base": {"adapter": None}} if base else {}
    for kind, given in (("adapter", adapter or []), ("model_path", model or [])):
        for item in given:
            name, _, path = item.rpartition("=")
            name = name or Path(path).stem
            if name in candidates:
                raise SimgymError(f"two candidates are named {name!r}; use NAME=PATH")
            candidates[name] = {kind: path, **({"adapter": None} if kind == "model_path" else {})}
    for options in candidates.values():
        options["n_threads"] = threads
    done = 0

    def on_row(name: str, row: dict) -> None:
        nonlocal done
        done += 1
        if done % 10 == 0:
            errors.print(f"{done} predictions ({name})", highlight=False)

    report = asyncio.run(
        aevaluate(
            data,
            candidates,
            out,
            limit=limit,
            seed=seed,
            max_tokens=max_tokens,
            n_ctx=n_ctx,
            on_row=on_row,
        )
    )
    console.print(report_table(report))
    if as_json is not None:
        as_json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


@train_app.command("pipeline")
@friendly_errors
def pipeline(
    out: Annotated[Path, typer.Option("--out", "-o", help="folder for every stage's output")],
    size: Annotated[
        str, typer.Option(help="small (minutes, what CI runs) | full (hours, by hand)")
    ] = "full",
    transitions: Annotated[int | None, typer.Option(help="factory transitions")] = None,
    max_steps: Annotated[int | None, typer.Option(min=1, help="training steps")] = None,
    max_tokens: Annotated[int | None, typer.Option(min=1, help="training token budget")] = None,
    max_length: Annotated[
        int | None,
        typer.Option(min=64, help="training sequence tokens (oldest turns are dropped to fit)"),
    ] = None,
    lr: Annotated[float | None, typer.Option(min=0.0, help="learning rate")] = None,
    eval_limit: Annotated[int | None, typer.Option(help="evaluation rows per domain")] = None,
    devset: Annotated[
        Path | None, typer.Option(help="recorded dev set rows to evaluate on as well")
    ] = None,
    threads: Annotated[int | None, typer.Option(min=1, help="torch threads")] = None,
    seed: Annotated[int, typer.Option()] = 0,
    prompt_style: Annotated[
        str | None,
        typer.Option(help="system prompts to train with: compact (default) | full"),
    ] = None,
) -> None:
    """Factory -> SFT rows -> LoRA training -> GGUF adapter -> base vs trained evaluation,
    resumable: rerun the same command after an interruption."""
    from simgym.train.pipeline import PipelineConfig, run_pipeline, sized
    from simgym.train.progress import RichProgress

    _quiet_libraries()
    config = sized(PipelineConfig(out=out, seed=seed, threads=threads, devset=devset), size)
    changes = {
        "transitions": transitions,
        "max_steps": max_steps,
        "max_tokens": max_tokens,
        "max_length": max_length,
        "lr": lr,
        "eval_limit": eval_limit,
        "prompt_style": prompt_style,
    }
    for key, value in changes.items():
        if value is not None:
            setattr(config, key, value)
    run_pipeline(
        config,
        say=lambda line: errors.print(line, highlight=False, markup=False),
        callbacks=[RichProgress(errors)],
    )
    errors.print(f"report: {escape(str(out / 'report.md'))}", highlight=False)


@train_app.command("ship")
@friendly_errors
def ship(
    run: Annotated[Path, typer.Argument(help="a `simgym train pipeline` folder, evaluated")],
    dest: Annotated[
        Path | None, typer.Option(help="where to put it (default: the local backend's default)")
    ] = None,
) -> None:
    """Make the run's adapter the local backend's default, with a provenance file (sha256,
    training, base vs trained scores) beside it."""
    from simgym.train.ship import ship_adapter
    from simgym.worldmodels.local import SHIPPED_ADAPTER

    target = dest or SHIPPED_ADAPTER
    provenance = ship_adapter(run, target, command=f"simgym train ship {run}")
    errors.print(f"shipped {escape(str(target))} ({escape(str(provenance))})", highlight=False)


@train_app.command("speed")
@friendly_errors
def speed(
    base: Base = None,
    mode: Annotated[str, typer.Option(help="full | lora | both")] = "both",
    precision: Annotated[str, typer.Option(help="fp32 | bf16 | both")] = "both",
    batch_size: Annotated[int, typer.Option(min=1)] = 4,
    seq_len: Annotated[int, typer.Option(min=8)] = 512,
    steps: Annotated[int, typer.Option(min=1, help="timed steps per setting")] = 3,
    threads: Annotated[int | None, typer.Option(min=1, help="torch threads")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON line per setting")] = False,
) -> None:
    """Measure training tokens per second (forward, backward, AdamW) per setting."""
    import gc

    from simgym.train.speed import measure_speed

    _quiet_libraries()
    modes = ("full", "lora") if mode == "both" else (mode,)
    precisions = ("fp32", "bf16") if precision == "both" else (precision,)
    for given, allowed in ((mode, ("full", "lora")), (precision, ("fp32", "bf16"))):
        if given != "both" and given not in allowed:
            raise SimgymError(f"expected one of {', '.join(allowed)} or both, got {given!r}")
    table = Table("mode", "precision", "batch x length", "threads", "tokens/s", "tokens/CPU-s")
    for each_mode in modes:
        for each_precision in precisions:
            result = measure_speed(
                base,
                mode=each_mode,
                bf16=each_precision == "bf16",
                batch_size=batch_size,
                seq_len=seq_len,
                steps=steps,
                threads=threads,
            )
            gc.collect()
            if as_json:
                typer.echo(json.dumps(result.to_dict()))
            table.add_row(
                each_mode,
                each_precision,
                f"{batch_size} x {seq_len}",
                str(result.threads),
                f"{result.tokens_per_second:.0f}",
                f"{result.tokens_per_cpu_second:.0f}",
            )
    if not as_json:
        console.print(table)


def _quantized(path: Path) -> str | None:
    """The name of a GGUF file's quantized tensor type, None for f32/f16/bf16 files."""
    from simgym.train.gguf_export import read_template

    kinds = {t.tensor_type.name for t in read_template(path).tensors}
    quantized = sorted(kinds - {"F32", "F16", "BF16"})
    return "/".join(quantized) or None


def _quiet_libraries() -> None:
    """Keep the libraries' own progress bars (dataset maps, weight loading) out of the
    output; the commands report progress themselves."""
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()


if __name__ == "__main__":  # python -m simgym.cli.train, before it is mounted in simgym
    train_app()
