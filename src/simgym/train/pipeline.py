"""The whole world-model loop in one resumable run (``simgym train pipeline``):

1. **factory**: real transitions from simgym's real backends, split by episode
   (:mod:`simgym.data.factory`), then SFT rows fitted to the runtime context budget
   (:func:`simgym.data.sft.export_sft_splits`);
2. **train**: LoRA SFT on observation tokens (:mod:`simgym.train.sft`);
3. **export**: the adapter as a GGUF adapter for llama.cpp, and a greedy check of
   llama.cpp (base + adapter) against transformers (merged model);
4. **evaluate**: base vs trained on the held-out test split and the recorded dev set,
   by the benchmark's rule metrics (:mod:`simgym.train.evaluate`).

Every stage leaves its output in ``out`` and is skipped when that output is complete, so
an interrupted run is resumed by running the same command again. ``SMALL`` is the reduced
size that CI runs end to end; the defaults are the full size.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from simgym.train.errors import TrainError

DOMAINS = ("terminal", "swe", "mcp", "search", "web")
ADAPTER_FILE = "adapter.gguf"
REPORT_FILE = "report.json"


@dataclass
class PipelineConfig:
    """One pipeline run. Paths are under ``out``."""

    out: Path
    transitions: int = 20_000
    domains: tuple[str, ...] = DOMAINS
    concurrency: int = 4
    seed: int = 0
    split: tuple[float, float, float] = (0.9, 0.05, 0.05)  # train, val, test by episode
    n_ctx: int = 4096  # the runtime context the SFT rows must fit (the local default)
    # the system prompt layout the rows are built with, and the adapter is then run with
    # (its sidecar JSON says so): a small model is trained on the compact prompts
    prompt_style: str = "compact"
    # training
    max_length: int = 3072
    max_steps: int | None = None
    max_tokens: int | None = None
    epochs: float = 1.0
    batch_size: int = 1
    grad_accum: int = 4
    lr: float = 5e-4
    lora_rank: int = 16
    lora_alpha: int = 32
    save_steps: int = 25
    val_rows: int = 48  # validation rows (sampled): a pass over them costs minutes on a CPU
    threads: int | None = None
    # evaluation
    eval_limit: int | None = 20  # rows per domain and data set
    eval_max_tokens: int = 256
    eval_n_ctx: int = 8192
    devset: Path | None = None
    check_tokens: int = 16

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        unknown = sorted(set(self.domains) - set(DOMAINS))
        if unknown:
            raise TrainError(f"unknown domains {unknown}; the factory records {list(DOMAINS)}")
        from simgym.core.domain import PROMPT_STYLES

        if self.prompt_style not in PROMPT_STYLES:
            raise TrainError(f"prompt_style must be one of {PROMPT_STYLES}")


# What CI runs: every stage, a few minutes on two cores.
SMALL = {
    "transitions": 120,
    "concurrency": 2,
    "split": (0.6, 0.2, 0.2),  # a dozen episodes: every split needs a few
    "max_length": 1536,
    "max_steps": 3,
    "grad_accum": 1,
    "save_steps": 2,
    "val_rows": 4,
    "eval_limit": 1,
    "eval_max_tokens": 48,
    "check_tokens": 8,
}


def sized(config: PipelineConfig, size: str) -> PipelineConfig:
    """``config`` at ``size``: ``full`` leaves it as it is, ``small`` applies ``SMALL``."""
    if size == "full":
        return config
    if size == "small":
        return replace(config, **SMALL)
    raise TrainError(f"unknown size {size!r}; choose small or full")


@dataclass
class PipelineResult:
    """What each stage did (also written to ``out/pipeline.json``)."""

    stages: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Say = Callable[[str], None]


def run_pipeline(
    config: PipelineConfig, say: Say = print, callbacks: list[Any] | None = None
) -> PipelineResult:
    """Run (or resume) every stage; ``say`` gets one line per stage event, ``callbacks``
    are extra transformers callbacks for training (progress)."""
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    result = PipelineResult()
    record = _Recorder(out / "pipeline.json", result)
    record("config", {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()})
    record("factory", factory_stage(config, say))
    record("train", train_stage(config, say, callbacks or []))
    record("export", export_stage(config, say))
    result.report = evaluate_stage(config, say)
    record("evaluate", {"report": str(out / REPORT_FILE)})
    return result


class _Recorder:
    def __init__(self, path: Path, result: PipelineResult) -> None:
        self.path, self.result = path, result

    def __call__(self, stage: str, info: Any) -> None:
        self.result.stages[stage] = info
        self.path.write_text(json.dumps(self.result.stages, indent=2, default=str) + "\n")


def factory_stage(config: PipelineConfig, say: Say) -> dict[str, Any]:
    """Record the transitions (resumable) and export the SFT rows (once)."""
    from simgym.data.factory import FactoryConfig, arun_factory
    from simgym.data.sft import ContextBudget, embedded_token_counter, export_sft_splits

    folder, sft = config.out / "factory", config.out / "sft"
    start = time.perf_counter()
    manifest = asyncio.run(
        arun_factory(
            FactoryConfig(
                out=folder,
                transitions=config.transitions,
                domains=config.domains,
                concurrency=config.concurrency,
                seed=config.seed,
                split=config.split,
            )
        )
    )
    if manifest.get("abandoned"):
        raise TrainError(f"the factory gave up on {manifest['abandoned']}")
    totals = {s: manifest["splits"][s]["total"]["transitions"] for s in ("train", "val", "test")}
    say(f"factory: {totals} transitions in {folder} ({time.perf_counter() - start:.0f}s)")
    if not (sft / "manifest.json").is_file():
        budget = ContextBudget(n_ctx=config.n_ctx)  # the local backend's answer budget
        export_sft_splits(
            folder,
            sft,
            count=embedded_token_counter(),
            budget=budget,
            prompt_style=config.prompt_style,
        )
    rows = json.loads((sft / "manifest.json").read_text())["splits"]
    counts = ", ".join(f"{split} {info['rows']}" for split, info in rows.items())
    say(f"sft rows: {counts} in {sft}")
    if not rows["train"]["rows"]:
        raise TrainError(f"no training rows fit n_ctx={config.n_ctx}; raise --n-ctx")
    return {"transitions": totals, "sft_rows": {s: v["rows"] for s, v in rows.items()}}


def train_stage(config: PipelineConfig, say: Say, callbacks: list[Any]) -> dict[str, Any]:
    """LoRA SFT on the train rows; resumes from the last checkpoint."""
    from transformers.trainer_utils import get_last_checkpoint

    from simgym.train.sft import FINAL, SftOptions, read_manifest, train_sft

    run = config.out / "run"
    if (run / FINAL / "adapter_config.json").is_file():
        manifest = read_manifest(run) or {}
        before = {key: manifest.get("options", {}).get(key) for key in _BUDGET}
        if before == _budget(config):
            say(f"train: already done in {run / FINAL}")
            return manifest.get("result", {})
        # a new budget continues the finished run from its last checkpoint (the Budget
        # callback saved one at its last step); what was made from the old weights goes
        changes = ", ".join(f"{k} {before[k]} -> {v}" for k, v in _budget(config).items())
        say(f"train: extending the finished run ({changes})")
        _drop_outputs_of_training(config)
    sft = config.out / "sft"
    val = sample_rows(sft / "val.jsonl", config.out / "val_sample.jsonl", config.val_rows)
    resume = run.is_dir() and get_last_checkpoint(str(run)) is not None
    options = SftOptions(
        data=sft / "train.jsonl",
        val=val,
        out=run,
        mode="lora",
        max_length=config.max_length,
        max_steps=config.max_steps,
        max_tokens=config.max_tokens,
        epochs=config.epochs,
        batch_size=config.batch_size,
        grad_accum=config.grad_accum,
        lr=config.lr,
        lora_rank=config.lora_rank,
        lora_alpha=config.lora_alpha,
        save_steps=config.save_steps,
        eval_steps=10**9,  # validate once, at the end: a pass costs minutes on a CPU
        logging_steps=1,
        seed=config.seed,
        threads=config.threads,
        resume=resume,
    )
    result = train_sft(options, callbacks=callbacks)
    session = (
        f"in {result.seconds:.0f}s ({result.tokens_per_second:.0f} tokens/s)"
        if result.tokens_per_second
        else f"(resumed from {result.resumed_from}: nothing left to train)"
    )
    say(
        f"train: {result.steps} steps, {result.tokens} tokens {session}, "
        f"train loss {result.train_loss}, validation loss {result.eval_loss}"
    )
    return result.to_dict()


# The settings that say how long a run trains: a finished run rerun with others continues.
_BUDGET = ("max_steps", "max_tokens", "epochs")


def _budget(config: PipelineConfig) -> dict[str, Any]:
    return {key: getattr(config, key) for key in _BUDGET}


def _drop_outputs_of_training(config: PipelineConfig) -> None:
    """Remove the old final weights (an interrupted extension then resumes like any
    interrupted run), the exported adapter and the trained model's evaluation, so the
    stages after training redo them with the new weights (the base's evaluation stays)."""
    from simgym.train.sft import FINAL

    shutil.rmtree(config.out / "run" / FINAL)
    for path in (config.out / "export.json", config.out / ADAPTER_FILE):
        path.unlink(missing_ok=True)
    for results in (config.out / "eval").glob("*/trained.jsonl"):
        results.unlink()


def sample_rows(source: Path, target: Path, count: int) -> Path | None:
    """At most ``count`` rows of ``source``, evenly spaced (the same rows every time, so a
    resumed run sees the same file); None when there are none."""
    if not source.is_file() or count <= 0:
        return None
    lines = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        return None
    step = max(len(lines) / count, 1.0)
    picked = [lines[int(i * step)] for i in range(min(count, len(lines)))]
    target.write_text("".join(f"{line}\n" for line in picked), encoding="utf-8")
    return target


def export_stage(config: PipelineConfig, say: Say) -> dict[str, Any]:
    """The adapter as GGUF, and the greedy check of llama.cpp against transformers."""
    from simgym.train.adapter_gguf import export_adapter_gguf
    from simgym.train.base import load_tokenizer, resolve_base
    from simgym.train.gguf_export import load_trained, saved_tokenizer
    from simgym.train.sft import FINAL
    from simgym.train.verify import compare_greedy

    final, path = config.out / "run" / FINAL, config.out / ADAPTER_FILE
    done = config.out / "export.json"
    if path.is_file() and done.is_file():
        say(f"export: already done in {path}")
        return json.loads(done.read_text(encoding="utf-8"))
    export_adapter_gguf(final, path, out_type="f16")
    base = resolve_base(None)
    results = compare_greedy(
        load_trained(final),
        saved_tokenizer(final) or load_tokenizer(None),
        base,
        max_new_tokens=config.check_tokens,
        lora_path=path,
    )
    same = sum(m.same for m in results)
    first = [m.first_difference for m in results]
    say(
        f"export: {path} ({path.stat().st_size / 2**20:.1f} MiB); llama.cpp (base + adapter) "
        f"matched transformers' greedy output on {same} of {len(results)} prompts "
        f"(first differences {first}; the base's 4-bit weights round differently)"
    )
    info = {
        "adapter": str(path),
        "bytes": path.stat().st_size,
        "greedy_same": same,
        "greedy_prompts": len(results),
        "first_differences": first,
        "same_prompt_tokenization": all(m.same_prompt_tokenization for m in results),
    }
    # what the local backend reads to lay out prompts the way the rows were laid out
    from simgym.worldmodels.local import adapter_sidecar

    sidecar = {"prompt_style": config.prompt_style}
    adapter_sidecar(path).write_text(json.dumps(sidecar) + "\n", encoding="utf-8")
    done.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info


def eval_data(config: PipelineConfig) -> dict[str, Path]:
    """The held-out test split, and the dev set when there is one, by label. Trajectory
    files are rewritten with the run's prompt style, so that base and trained models are
    asked what the trained one will be asked (rows in the benchmark's layout keep the
    system prompt they hold)."""
    from simgym.data.exchanges import restyle_trajectories

    data = {"test": config.out / "factory" / "test.jsonl"}
    if config.devset is not None:
        if not Path(config.devset).is_file():
            raise TrainError(f"dev set not found: {config.devset}")
        data["dev"] = Path(config.devset)
    return {
        label: restyle_trajectories(path, config.out / "eval" / f"{label}-data.jsonl", style)
        if (style := config.prompt_style) != "full"
        else path
        for label, path in data.items()
    }


def evaluate_stage(config: PipelineConfig, say: Say) -> dict[str, Any]:
    """Base vs trained on each evaluation set; the report lands in ``out/report.json``."""
    from simgym.train.evaluate import aevaluate, report_markdown

    candidates = {"base": {"adapter": None}, "trained": {"adapter": str(config.out / ADAPTER_FILE)}}
    sets: dict[str, Any] = {}
    for label, data in eval_data(config).items():
        report = asyncio.run(
            aevaluate(
                [data],
                candidates,
                config.out / "eval" / label,
                limit=config.eval_limit,
                seed=config.seed,
                max_tokens=config.eval_max_tokens,
                n_ctx=config.eval_n_ctx,
            )
        )
        sets[label] = report
        say(f"evaluate ({label}):\n{report_markdown(report)}")
    report = {"sets": sets}
    (config.out / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (config.out / "report.md").write_text(
        "".join(f"## {label}\n\n{report_markdown(r)}\n" for label, r in sets.items()),
        encoding="utf-8",
    )
    return report
