"""Resuming a trainer run that already reached its step limit.

TRL's ``GRPOTrainer``, resumed from a checkpoint that already holds ``max_steps`` steps,
takes one step more (seen with TRL 1.16: 2 -> 3 steps; transformers' plain ``Trainer``
in ``simgym train sft`` does not). These helpers tell that case apart and load the
checkpoint instead of training.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

STATE_FILE = "trainer_state.json"  # transformers' TRAINER_STATE_NAME


def reached(checkpoint: str | Path | None, max_steps: int) -> bool:
    """Whether ``checkpoint`` already holds ``max_steps`` optimizer steps."""
    if checkpoint is None:
        return False
    state = json.loads((Path(checkpoint) / STATE_FILE).read_text(encoding="utf-8"))
    return int(state.get("global_step", 0)) >= max_steps


def restore(trainer: Any, checkpoint: str | Path) -> None:
    """Put ``checkpoint``'s weights and training state into ``trainer`` without training
    (what ``train`` would leave behind had it stopped right at the checkpoint)."""
    from transformers import TrainerState

    trainer._load_from_checkpoint(str(checkpoint))  # weights, LoRA adapters included
    trainer.state = TrainerState.load_from_json(str(Path(checkpoint) / STATE_FILE))
