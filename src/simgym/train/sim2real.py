"""Training a policy for sim2real: rejection-sampled demonstrations, then fine-tuning.

One round of rejection-sampling fine-tuning (RFT), in three steps:

1. :func:`collect` plays training tasks on one backend (the twin, ``sim``, for the
   sim-trained conditions; the real server for the baseline) with a sampler policy
   wrapped in the local agent's format (:class:`~simgym.agents.imitate.ImitationAgent`)
   and keeps the episodes the task's reward accepts (reward 1), as the backend scored them:
   a twin that shows the wrong facts yields fewer, or wrong, demonstrations;
2. :func:`write_rows` turns them into supervised rows whose prompts are the local agent's own;
3. :func:`train_policy` fine-tunes the embedded SmolLM2 on them with ``simgym train sft``
   (LoRA, whole-episode sequences) and exports a GGUF file the ``local`` agent runs.

The sampler may be any agent: the ``reader`` calibration policy (it follows each task's
plan and reads ids from what the world shows, so the world decides whether it succeeds), or
the trained policy itself in a later round. Training tasks come from
:func:`~simgym.bench.sim2real.tasks.training_tasks` only; the held-out tasks never do.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simgym.agents.base import Agent
from simgym.agents.imitate import ImitationAgent, policy_rows
from simgym.bench.sim2real.evaluate import evaluate, succeeded
from simgym.core.trajectories import read_trajectories
from simgym.core.types import Task, Trajectory


@dataclass(frozen=True)
class Collected:
    """What one collection kept."""

    backend: str
    episodes: int
    kept: list[Trajectory]

    @property
    def acceptance(self) -> float:
        return len(self.kept) / self.episodes if self.episodes else 0.0


def collect(
    tasks: Iterable[Task],
    sampler: Agent,
    out_dir: Path,
    *,
    backend: str = "sim",
    k: int = 1,
    max_turns: int = 6,
    **options: Any,
) -> Collected:
    """Play ``tasks`` ``k`` times on ``backend`` with ``sampler`` in the local agent's
    format; keep the successful episodes (a rerun resumes from ``out_dir``)."""
    tasks = list(tasks)
    agent = sampler if isinstance(sampler, ImitationAgent) else ImitationAgent(sampler)
    evaluate(
        tasks,
        agent=agent,
        condition="collect",
        k=k,
        backends=[backend],
        max_turns=max_turns,
        out_dir=out_dir,
        **options,
    )
    episodes = list(read_trajectories(out_dir / f"{backend}.jsonl"))
    kept = [t for t in episodes if succeeded(t) and t.agent_messages]
    return Collected(backend=backend, episodes=len(episodes), kept=kept)


def write_rows(trajectories: Iterable[Trajectory], path: Path) -> int:
    """The episodes' policy rows as JSONL at ``path``; returns how many rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for trajectory in trajectories:
            for row in policy_rows(trajectory):
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                count += 1
    return count


def train_policy(
    rows: Path,
    out: Path,
    *,
    epochs: float = 2.0,
    max_length: int = 2048,
    lr: float = 5e-4,
    threads: int | None = None,
    out_type: str = "q8_0",
    **sft: Any,
) -> Path:
    """Fine-tune the embedded model on ``rows`` (LoRA, whole episodes) into ``out``, and
    export the merged policy as ``out/policy.gguf`` for the ``local`` agent. A rerun
    resumes an interrupted run."""
    from simgym.train.gguf_export import export_gguf
    from simgym.train.sft import MANIFEST, SftOptions, read_manifest, train_sft

    policy = out / "policy.gguf"
    manifest = read_manifest(out)
    if not (manifest and manifest.get("result") and (out / "final").is_dir()):
        options = SftOptions(
            data=rows,
            out=out,
            epochs=epochs,
            max_length=max_length,
            lr=lr,
            threads=threads,
            resume=(out / MANIFEST).is_file(),
            **sft,
        )
        train_sft(options)
    if not policy.is_file():
        export_gguf(out / "final", policy, out_type=out_type)
    return policy
