"""The LoRA setup used for world-model fine-tuning (``peft``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from peft import LoraConfig

# Every linear layer of a llama block, attention and MLP alike.
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def lora_config(rank: int = 16, alpha: int = 32, dropout: float = 0.0) -> LoraConfig:
    """A causal-LM LoRA config over every linear layer of the blocks."""
    from peft import LoraConfig

    return LoraConfig(
        r=rank,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=list(LORA_TARGETS),
        bias="none",
        task_type="CAUSAL_LM",
    )
