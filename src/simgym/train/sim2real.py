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

The controlled condition (:func:`collect_curriculum`) collects in the twin with injected
faults whose rate rises over the training tasks (a :class:`~simgym.perturb.Curriculum`),
and writes the rows easy to hard, so that training in row order (``order="sequential"``)
meets them in that order every epoch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simgym.agents.base import Agent
from simgym.agents.imitate import ImitationAgent, policy_rows
from simgym.bench.sim2real.evaluate import evaluate, succeeded
from simgym.core.trajectories import read_trajectories
from simgym.core.types import Task, Trajectory
from simgym.perturb import Curriculum, Perturbations, Rule, difficulty

# Faults a retry can clear, the ones a careful agent should meet by sending the call again:
# the curriculum's tiers unlock them in this order (timeouts first, conflicts last).
RETRYABLE: tuple[str, ...] = (
    "timeout",
    "rate_limit",
    "server_error",
    "flaky_network",
    "slow_load",
    "stale_data",
)
# A terminal's slow_load leaves a program running with no prompt back: typing the command
# again would go to that program, so it is no fault a retry clears there.
RETRYABLE_IN: dict[str, tuple[str, ...]] = {
    "terminal": tuple(kind for kind in RETRYABLE if kind != "slow_load"),
}


def retryable(domain: str) -> tuple[str, ...]:
    """The fault kinds a retry clears in ``domain`` (:data:`RETRYABLE` unless told)."""
    return RETRYABLE_IN.get(domain, RETRYABLE)


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
    format; keep the successful episodes with no rejected action, so that no row teaches a
    call the environment refused (a rerun resumes from ``out_dir``)."""
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
    kept = [t for t in episodes if succeeded(t) and t.agent_messages and not rejected(t)]
    return Collected(backend=backend, episodes=len(episodes), kept=kept)


def rejected(trajectory: Trajectory) -> bool:
    """Whether the environment refused any of the episode's actions (malformed, unknown
    tool, invalid arguments)."""
    return any(turn.error_type == "action" for turn in trajectory.turns)


def fault_plan(
    level: float,
    *,
    kinds: Sequence[str] | None = None,
    seed: int = 0,
    domain: str = "mcp",
) -> Perturbations | None:
    """The twin's faults at curriculum ``level`` in ``domain``: :func:`~simgym.perturb.difficulty`'s
    fault rate and unlocked kinds, kept to ``kinds`` (default: :func:`retryable` there),
    written by simgym's templates (deterministic), with no noise; ``None`` when nothing
    would strike."""
    settings = difficulty(level)
    allowed = retryable(domain) if kinds is None else kinds
    in_play = [kind for kind in settings.kinds if kind in allowed]
    if settings.fault_rate <= 0 or not in_play:
        return None
    rule = Rule(fault=in_play, probability=settings.fault_rate, domains=[domain], name="faults")
    return Perturbations(seed=seed, rules=[rule])


def collect_curriculum(
    tasks: Iterable[Task],
    sampler: Agent,
    out_dir: Path,
    curriculum: Curriculum,
    *,
    stages: int = 5,
    kinds: Sequence[str] | None = None,
    domain: str = "mcp",
    **options: Any,
) -> Collected:
    """:func:`collect` in the twin in ``stages`` equal shares of ``tasks``, each at the
    fault plan of the ``curriculum``'s level at its first task's index (the task index is
    the curriculum's step); the kept episodes come easy to hard. Stage ``s`` resumes from
    ``out_dir/stage-s``."""
    tasks = list(tasks)
    size = max(1, math.ceil(len(tasks) / max(1, stages)))
    episodes, kept = 0, []
    for stage, first in enumerate(range(0, len(tasks), size)):
        plan = fault_plan(curriculum.level(first), kinds=kinds, seed=stage, domain=domain)
        got = collect(
            tasks[first : first + size],
            sampler,
            out_dir / f"stage-{stage}",
            backend="sim",
            perturbations=plan,
            **options,
        )
        episodes += got.episodes
        kept += got.kept
    return Collected(backend="sim", episodes=episodes, kept=kept)


def faults_met(trajectories: Iterable[Trajectory]) -> int:
    """How many turns of ``trajectories`` met an injected fault."""
    return sum(1 for t in trajectories for turn in t.turns if turn.perturbation)


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
