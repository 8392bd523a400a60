"""Training throughput on this machine: tokens per second of one optimizer step, to size
a CPU run before starting it (``simgym train speed``).

Each step is a forward and backward pass over ``batch_size`` random sequences of
``seq_len`` tokens plus an AdamW update, in float32 or under bfloat16 autocast (what the
trainer's ``bf16`` does on CPU: float32 weights, bfloat16 matrix products). The first
``warmup`` steps are not timed (allocation, kernel selection). Besides wall-clock speed
it reports the process's CPU seconds: on a machine shared with other work, tokens per
CPU-second times the number of threads estimates what the machine does when idle.

Threads: on a machine whose cores are busy with other work, torch's worker threads spend
their time waiting for each other at every operator (measured here with the two cores
shared by several jobs: 1 thread trained 2-3x faster than 2). ``threads`` (here and in
:class:`~simgym.train.sft.SftOptions`) sets torch's thread count for the run.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from simgym.train.base import load_model
from simgym.train.lora import lora_config


@dataclass(frozen=True)
class SpeedResult:
    """One measurement: the setting and what it achieved."""

    mode: str  # "full" or "lora"
    precision: str  # "fp32" or "bf16"
    batch_size: int
    seq_len: int
    steps: int
    seconds: float
    cpu_seconds: float
    tokens_per_second: float
    tokens_per_cpu_second: float
    trainable_parameters: int
    threads: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` torch threads (None: leave the setting alone)."""
    import torch

    if threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def measure_speed(
    source: str | os.PathLike[str] | None = None,
    *,
    mode: str = "full",
    bf16: bool = False,
    batch_size: int = 4,
    seq_len: int = 512,
    steps: int = 3,
    warmup: int = 1,
    gradient_checkpointing: bool = False,
    threads: int | None = None,
    model: Any = None,
) -> SpeedResult:
    """Time ``steps`` training steps of the base model (or of ``model``, already loaded)
    with ``threads`` torch threads (default: torch's own choice)."""
    with torch_threads(threads):
        return _measure(
            source, mode, bf16, batch_size, seq_len, steps, warmup, gradient_checkpointing, model
        )


def _measure(
    source: str | os.PathLike[str] | None,
    mode: str,
    bf16: bool,
    batch_size: int,
    seq_len: int,
    steps: int,
    warmup: int,
    gradient_checkpointing: bool,
    model: Any,
) -> SpeedResult:
    import torch

    if mode not in ("full", "lora"):
        raise ValueError(f"mode must be 'full' or 'lora', not {mode!r}")
    model = model if model is not None else load_model(source)
    if mode == "lora":
        from peft import get_peft_model

        model = get_peft_model(model, lora_config())
    if gradient_checkpointing:
        model.gradient_checkpointing_enable()
        if mode == "lora":
            model.enable_input_require_grads()
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    vocab = model.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (batch_size, seq_len), generator=generator)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    tokens = batch_size * seq_len * steps
    return SpeedResult(
        mode=mode,
        precision="bf16" if bf16 else "fp32",
        batch_size=batch_size,
        seq_len=seq_len,
        steps=steps,
        seconds=round(seconds, 3),
        cpu_seconds=round(cpu_seconds, 3),
        tokens_per_second=round(tokens / seconds, 1),
        tokens_per_cpu_second=round(tokens / cpu_seconds, 1),
        trainable_parameters=sum(p.numel() for p in params),
        threads=torch.get_num_threads(),
    )
