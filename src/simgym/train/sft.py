"""World-model supervised fine-tuning with TRL's ``SFTTrainer`` (``simgym train sft``).

The base is the embedded SmolLM2-135M-Instruct GGUF (or any GGUF file or Hugging Face
folder, :mod:`simgym.train.base`); the data is SFT JSONL (:mod:`simgym.train.sft_data`),
fitted to ``max_length`` by dropping the oldest history and trained with the prompt masked
out of the loss, so only observation tokens are learned. LoRA (``peft``) or full weights.

Everything lands in one output folder:

- ``checkpoint-N/``: trainer checkpoints every ``save_steps`` (the newest few are kept);
  ``resume=True`` continues from the last one, and refuses if the data or the settings
  that shape the run changed;
- ``final/``: the trained model with its tokenizer (an adapter for LoRA), what
  ``simgym train export-gguf`` reads;
- ``loss.jsonl``: one line per logging step (step, epoch, loss, learning rate, tokens
  seen, tokens per second, and the validation loss when there is validation data);
- ``simgym_train.json``: the settings, the base, the data's checksums, what fitting did
  to the rows, and the result.

The budget is ``max_steps`` and/or ``max_tokens`` (prompt and completion tokens the model
reads; training stops at the first step that reaches it), else ``epochs`` passes.
On CPU ``bf16`` means bfloat16 autocast (float32 master weights): measured 1.6-1.7x the
float32 speed on this machine's AVX-512-BF16 cores (``simgym train speed``), so it is the
default. ``threads`` sets torch's thread count; on a busy machine 1 can beat 2.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from transformers import PrinterCallback, TrainerCallback

from simgym.train.base import file_sha256, load_model, load_tokenizer, resolve_base
from simgym.train.episode_data import build_episode_dataset
from simgym.train.errors import TrainError
from simgym.train.lora import lora_config
from simgym.train.sft_data import FitStats, build_dataset
from simgym.train.speed import torch_threads

MANIFEST = "simgym_train.json"
LOSS_LOG = "loss.jsonl"
FINAL = "final"
# Settings a resumed run must share with the run that wrote the checkpoints: the data,
# the model and everything that decides what one optimizer step is.
_RUN_SHAPE = (
    "base",
    "mode",
    "max_length",
    "layout",
    "order",
    "batch_size",
    "grad_accum",
    "lora_rank",
    "lora_alpha",
    "seed",
)


class SftOptions(BaseModel):
    """Settings of one SFT run."""

    model_config = ConfigDict(extra="forbid")

    data: Path
    out: Path
    val: Path | None = None
    base: str | None = None  # a GGUF file or a Hugging Face folder; None: the embedded model
    mode: Literal["lora", "full"] = "lora"
    max_steps: int | None = Field(None, ge=1)
    max_tokens: int | None = Field(None, ge=1)
    epochs: float = Field(1.0, gt=0)
    batch_size: int = Field(4, ge=1)
    grad_accum: int = Field(1, ge=1)
    lr: float | None = Field(None, gt=0)  # default: 2e-4 for LoRA, 2e-5 for full weights
    warmup_ratio: float = Field(0.03, ge=0, lt=1)
    max_length: int = Field(1024, ge=16)
    # "episode": one sequence per episode, loss on every observation (about 8x fewer tokens
    # than "turn", one sequence per row, on the factory's episodes)
    layout: Literal["episode", "turn"] = "episode"
    # "sequential" keeps the rows' order in every epoch (a curriculum written easy to hard)
    order: Literal["random", "sequential"] = "random"
    bf16: bool = True
    gradient_checkpointing: bool = False
    save_steps: int = Field(50, ge=1)
    save_total_limit: int = Field(2, ge=1)
    logging_steps: int = Field(5, ge=1)
    eval_steps: int | None = Field(None, ge=1)  # default: every save
    lora_rank: int = Field(16, ge=1)
    lora_alpha: int = Field(32, ge=1)
    # Dropout copies every LoRA input; on a CPU that was ~15% of a step, and budgeted
    # runs read each row about once, so there is little to overfit.
    lora_dropout: float = Field(0.0, ge=0, lt=1)
    seed: int = 0
    threads: int | None = Field(None, ge=1)  # torch threads while training; None: default
    resume: bool = False

    @property
    def learning_rate(self) -> float:
        if self.lr is not None:
            return self.lr
        return 2e-4 if self.mode == "lora" else 2e-5


@dataclass
class SftResult:
    """What a run did."""

    out: Path
    final: Path
    steps: int
    tokens: int
    seconds: float
    tokens_per_second: float
    train_loss: float | None
    eval_loss: float | None
    train_stats: FitStats
    val_stats: FitStats | None = None
    resumed_from: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["out"], data["final"] = str(self.out), str(self.final)
        return data


@dataclass
class PreparedRun:
    """A run ready to train: the trainer with its data, and what fitting the data did."""

    options: SftOptions
    trainer: Any  # trl.SFTTrainer
    tokenizer: Any
    checkpoint: str | None  # the checkpoint a resumed run starts from
    fingerprint: dict[str, Any]
    max_steps: int
    log: LossLog
    train_stats: FitStats
    val_stats: FitStats | None


def prepare_sft(options: SftOptions, callbacks: Sequence[TrainerCallback] = ()) -> PreparedRun:
    """Check the run folder, read and fit the data, load the base and build the trainer
    (nothing is written yet). ``callbacks`` are extra transformers callbacks."""
    import torch
    from transformers.trainer_utils import get_last_checkpoint
    from trl import SFTConfig, SFTTrainer

    out = options.out
    base = resolve_base(options.base)
    checkpoint = get_last_checkpoint(str(out)) if out.is_dir() else None
    fingerprint = _fingerprint(options, base)
    if options.resume:
        if checkpoint is None:
            raise TrainError(f"nothing to resume: {out} holds no checkpoint-N folder")
        _check_same_run(out, fingerprint)
    elif checkpoint is not None:
        raise TrainError(
            f"{out} already holds checkpoints ({Path(checkpoint).name}); pass --resume to "
            "continue that run, or choose another --out"
        )

    tokenizer = load_tokenizer(base)
    build = build_episode_dataset if options.layout == "episode" else build_dataset
    train_data, train_stats = build(
        options.data, tokenizer, options.max_length, **_rows_needed(options)
    )
    val_data, val_stats = (None, None)
    if options.val is not None:
        val_data, val_stats = build(options.val, tokenizer, options.max_length)

    max_steps = plan_steps(options, train_stats, len(train_data))
    validate = val_data is not None
    config = SFTConfig(
        output_dir=str(out),
        max_steps=max_steps,
        per_device_train_batch_size=options.batch_size,
        per_device_eval_batch_size=options.batch_size,
        gradient_accumulation_steps=options.grad_accum,
        learning_rate=options.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=math.floor(options.warmup_ratio * max_steps),  # none for short runs
        max_length=options.max_length,
        completion_only_loss=True,  # the prompt never counts: only observation tokens
        packing=False,
        bf16=options.bf16,
        use_cpu=not torch.cuda.is_available(),
        gradient_checkpointing=options.gradient_checkpointing,
        logging_steps=options.logging_steps,
        logging_first_step=True,
        save_strategy="steps",
        save_steps=options.save_steps,
        save_total_limit=options.save_total_limit,
        eval_strategy="steps" if validate else "no",
        eval_steps=(options.eval_steps or options.save_steps) if validate else None,
        include_num_input_tokens_seen="non_padding",
        report_to="none",
        disable_tqdm=True,
        seed=options.seed,
        data_seed=options.seed,
        dataloader_num_workers=0,
        train_sampling_strategy=options.order,
    )
    peft_config = None
    if options.mode == "lora":
        peft_config = lora_config(options.lora_rank, options.lora_alpha, options.lora_dropout)
    log = LossLog(out / LOSS_LOG)
    trainer = SFTTrainer(
        model=load_model(base),
        args=config,
        train_dataset=train_data,
        eval_dataset=val_data,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[log, Budget(options.max_tokens), ScheduledRate(), *callbacks],
    )
    # the callers' callbacks report progress; transformers' printer would repeat it raw
    trainer.remove_callback(PrinterCallback)
    return PreparedRun(
        options=options,
        trainer=trainer,
        tokenizer=tokenizer,
        checkpoint=checkpoint if options.resume else None,
        fingerprint=fingerprint,
        max_steps=max_steps,
        log=log,
        train_stats=train_stats,
        val_stats=val_stats,
    )


def train_sft(options: SftOptions, callbacks: Sequence[TrainerCallback] = ()) -> SftResult:
    """Run (or resume) one SFT run; ``callbacks`` are extra transformers callbacks (the CLI
    passes its progress display)."""
    run = prepare_sft(options, callbacks)
    trainer, out = run.trainer, options.out
    out.mkdir(parents=True, exist_ok=True)
    per_step = options.batch_size * options.grad_accum
    manifest = {
        "fingerprint": run.fingerprint,
        "options": json.loads(options.model_dump_json()),
        "max_steps": run.max_steps,
        "tokens_per_step_estimate": round(run.train_stats.tokens / max(run.train_stats.kept, 1))
        * per_step,
        "train_data": run.train_stats.to_dict(),
        "val_data": run.val_stats.to_dict() if run.val_stats else None,
    }
    _write_manifest(out, manifest)

    with torch_threads(options.threads):
        start = time.perf_counter()
        output = trainer.train(resume_from_checkpoint=run.checkpoint)
        seconds = time.perf_counter() - start
        final = out / FINAL
        trainer.save_model(str(final))
        run.tokenizer.save_pretrained(str(final))
        eval_loss = None
        if options.val is not None:
            step = trainer.state.global_step
            history = trainer.state.log_history
            logged = [r["eval_loss"] for r in history if r.get("step") == step and "eval_loss" in r]
            # the last step may have been validated already; if not, validate the final model
            eval_loss = logged[-1] if logged else float(trainer.evaluate()["eval_loss"])
    session_tokens = trainer.state.num_input_tokens_seen - run.log.tokens_at_start
    result = SftResult(
        out=out,
        final=final,
        steps=trainer.state.global_step,
        tokens=int(trainer.state.num_input_tokens_seen),
        seconds=round(seconds, 1),
        tokens_per_second=round(session_tokens / seconds, 1) if seconds > 0 else 0.0,
        train_loss=_train_loss(output.training_loss, trainer.state.log_history, session_tokens),
        eval_loss=eval_loss,
        train_stats=run.train_stats,
        val_stats=run.val_stats,
        resumed_from=Path(run.checkpoint).name if run.checkpoint else None,
    )
    manifest["result"] = result.to_dict()
    _write_manifest(out, manifest)
    return result


def _train_loss(
    session_loss: float, history: list[dict[str, Any]], session_tokens: int
) -> float | None:
    """The session's mean loss; for a resumed run that had nothing left to train (the
    session's own mean is then 0), the mean of the losses the run logged before."""
    if session_tokens > 0:
        return None if math.isnan(session_loss) else session_loss
    logged = [r["loss"] for r in history if "loss" in r]
    return sum(logged) / len(logged) if logged else None


def _rows_needed(options: SftOptions) -> dict[str, Any]:
    """How much of the training file a budgeted run reads (all of it for epoch runs):
    ``max_steps`` full steps of rows, or ``max_tokens`` plus one step's worth of
    sequences so that the last step is whole."""
    per_step = options.batch_size * options.grad_accum
    if options.max_steps is None and options.max_tokens is None:
        return {}
    return {
        "max_rows": None if options.max_steps is None else options.max_steps * per_step,
        "max_tokens": None
        if options.max_tokens is None
        else options.max_tokens + per_step * options.max_length,
        "seed": options.seed,
    }


def plan_steps(options: SftOptions, stats: FitStats, rows: int) -> int:
    """Optimizer steps for the budget: the smallest of ``max_steps``, the steps that read
    about ``max_tokens`` tokens, and (when neither is given) ``epochs`` passes."""
    per_step = options.batch_size * options.grad_accum
    limits = []
    if options.max_steps is not None:
        limits.append(options.max_steps)
    if options.max_tokens is not None:
        mean = stats.tokens / max(stats.kept, 1)
        limits.append(max(1, math.ceil(options.max_tokens / (mean * per_step))))
    if not limits:
        limits.append(max(1, math.ceil(options.epochs * rows / per_step)))
    return min(limits)


def _fingerprint(options: SftOptions, base: Path) -> dict[str, Any]:
    shape = {key: getattr(options, key) for key in _RUN_SHAPE}
    shape["base"] = str(base.resolve())
    shape["data_sha256"] = _sha256(options.data)
    shape["val_sha256"] = _sha256(options.val) if options.val else None
    return shape


def _check_same_run(out: Path, fingerprint: dict[str, Any]) -> None:
    path = out / MANIFEST
    if not path.is_file():
        raise TrainError(f"cannot resume: {path} is missing, so the run's settings are unknown")
    before = json.loads(path.read_text(encoding="utf-8")).get("fingerprint", {})
    changed = sorted(k for k in fingerprint if before.get(k) != fingerprint[k])
    if changed:
        details = ", ".join(f"{k}: {before.get(k)!r} -> {fingerprint[k]!r}" for k in changed)
        raise TrainError(f"cannot resume {out} with different data or settings ({details})")


def _sha256(path: Path) -> str:
    if not path.is_file():
        raise TrainError(f"SFT data file not found: {path}")
    return file_sha256(path)


def _write_manifest(out: Path, manifest: dict[str, Any]) -> None:
    path = out / MANIFEST
    scratch = path.with_suffix(".json.part")
    scratch.write_text(json.dumps(manifest, indent=2, default=str) + "\n", encoding="utf-8")
    scratch.replace(path)


def read_manifest(out: str | Path) -> dict[str, Any] | None:
    """The manifest of a run folder (or of the run a ``final``/checkpoint folder is in)."""
    for folder in (Path(out), Path(out).parent):
        path = folder / MANIFEST
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
    return None


class LossLog(TrainerCallback):
    """Appends every log record to a JSONL file. On resume, the records after the
    checkpoint's step (written by the interrupted run, about to be redone) are removed
    first, so the curve has one point per step."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tokens_at_start = 0
        self._clock = 0.0
        self._tokens = 0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.tokens_at_start = self._tokens = state.num_input_tokens_seen
        self._clock = time.perf_counter()
        if self.path.is_file():
            kept = [
                line
                for line in self.path.read_text(encoding="utf-8").splitlines()
                if line.strip() and json.loads(line).get("step", 0) <= state.global_step
            ]
            self.path.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        if not logs:
            return
        record: dict[str, Any] = {"step": state.global_step, "time": round(time.time(), 1)}
        now, tokens = time.perf_counter(), state.num_input_tokens_seen
        if "loss" in logs and now > self._clock:
            record["tokens_per_second"] = round((tokens - self._tokens) / (now - self._clock), 1)
            self._clock, self._tokens = now, tokens
        for key, value in logs.items():
            if isinstance(value, int | float):
                record["tokens" if key == "num_input_tokens_seen" else key] = value
        self.write(record)

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")


class Budget(TrainerCallback):
    """Stops training at the first step whose total of tokens read reaches ``max_tokens``,
    and saves a checkpoint at the last step, whatever ``save_steps`` is, so a finished run
    can be extended with ``resume`` and a larger budget."""

    def __init__(self, max_tokens: int | None) -> None:
        self.max_tokens = max_tokens

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.max_tokens is not None and state.num_input_tokens_seen >= self.max_tokens:
            control.should_training_stop = True
        if control.should_training_stop or state.global_step >= state.max_steps:
            control.should_save = True
        return control


class ScheduledRate(TrainerCallback):
    """On resume, sets the optimizer's learning rate to what this run's schedule gives at
    the checkpoint's step. A checkpoint stores the rate its own schedule had reached (0 at
    the end of a finished run), and the first step after an extension with a larger budget
    would otherwise be taken at that rate."""

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        optimizer, scheduler = kwargs.get("optimizer"), kwargs.get("lr_scheduler")
        scheduler = getattr(scheduler, "scheduler", scheduler)  # accelerate's wrapper
        lambdas = getattr(scheduler, "lr_lambdas", None)
        if not state.global_step or optimizer is None or not lambdas:
            return
        rates = [
            base * rate(scheduler.last_epoch)
            for base, rate in zip(scheduler.base_lrs, lambdas, strict=True)
        ]
        for group, rate in zip(optimizer.param_groups, rates, strict=True):
            group["lr"] = rate
        scheduler._last_lr = rates  # what the first step's log reports
