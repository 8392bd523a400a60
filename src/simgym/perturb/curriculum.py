"""Curricula: difficulty that grows over training steps.

A :class:`Curriculum` maps a training step to a *level* in [0, 1] (``linear``, ``step``,
``exponential`` or ``constant`` schedule); :func:`difficulty` turns a level into concrete
settings (:class:`Difficulty`): the chance that a turn meets a fault, which fault kinds
are in play (common ones first, harder ones as the level rises), how much distracting
noise the world model adds, and how deep generated tasks go (hops of a multi-hop
question). :func:`perturbations_for_level` gives the fault plan for a level directly::

    cur = Curriculum(schedule="linear", start=0.0, end=0.5, steps=1000)
    plan = cur.perturbations(step=250)           # level 0.125
    env = simgym.make("mcp", perturbations=plan)

On the command line a curriculum is written ``SCHEDULE:START:END:STEPS`` (``step``
takes a fifth field, the number of stages), or given as a YAML/JSON file or mapping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from simgym.core.safeload import load_yaml, read_text
from simgym.perturb.faults import FaultMode
from simgym.perturb.plan import (
    PerturbationError,
    Perturbations,
    Rule,
    load_perturbations,
)

Schedule = Literal["constant", "linear", "step", "exponential"]

# Fault kinds by how hard they are to handle; a level unlocks tiers in order.
TIERS: tuple[tuple[str, ...], ...] = (
    ("timeout", "rate_limit", "server_error", "empty_results", "flaky_network"),
    ("pagination", "truncated", "auth_failure", "permission_denied", "slow_load"),
    ("stale_data", "partial_batch", "ui_dialog"),
)
TIER_LEVELS = (0.0, 0.2, 0.4)  # the level from which each tier is in play
MAX_TASK_DEPTH = 5


@dataclass(frozen=True)
class Difficulty:
    """Concrete settings for one level."""

    level: float
    fault_rate: float  # chance that a valid action meets a fault
    kinds: tuple[str, ...]  # fault kinds in play
    noise: float  # chance that the world model is asked for distracting extra output
    task_depth: int  # hops for generated tasks (1 = single lookup)

    def perturbations(
        self, domain: str | None = None, *, mode: FaultMode = "template", seed: int = 0
    ) -> Perturbations:
        """The fault plan for these settings; ``domain`` limits it to one domain."""
        domains = [domain] if domain else None
        rules: list[Rule] = []
        if self.fault_rate > 0:
            rules.append(
                Rule(
                    fault=list(self.kinds),
                    mode=mode,
                    probability=self.fault_rate,
                    domains=domains,
                    name="faults",
                )
            )
        if self.noise > 0:
            rules.append(
                Rule(
                    fault="noise",
                    mode="control",
                    probability=self.noise,
                    domains=domains,
                    name="noise",
                )
            )
        return Perturbations(seed=seed, rules=rules)


def difficulty(level: float) -> Difficulty:
    """The settings for ``level`` (0 = no faults, 1 = a fault on most turns)."""
    if not 0.0 <= level <= 1.0 or math.isnan(level):
        raise PerturbationError(f"difficulty level must be between 0 and 1, got {level}")
    kinds = tuple(
        k for tier, start in zip(TIERS, TIER_LEVELS, strict=True) if level >= start for k in tier
    )
    return Difficulty(
        level=level,
        fault_rate=round(0.8 * level, 6),  # never every turn: the agent must make progress
        kinds=kinds,
        noise=round(0.3 * level, 6),
        task_depth=1 + round(level * (MAX_TASK_DEPTH - 1)),
    )


def perturbations_for_level(
    level: float, domain: str | None = None, *, mode: FaultMode = "template", seed: int = 0
) -> Perturbations:
    """The fault plan for a difficulty level (see :func:`difficulty`)."""
    return difficulty(level).perturbations(domain, mode=mode, seed=seed)


class Curriculum(BaseModel):
    """A difficulty level over training steps, from ``start`` to ``end`` in ``steps``.

    ``linear`` climbs evenly; ``step`` climbs in ``stages`` equal stairs (the first at
    ``start``, the last at ``end``); ``exponential`` climbs slowly first and fast at the
    end (``sharpness`` sets how much); ``constant`` stays at ``start``. Past ``steps`` the
    level stays at ``end``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    schedule: Schedule = "linear"
    start: float = Field(0.0, ge=0.0, le=1.0)
    end: float = Field(1.0, ge=0.0, le=1.0)
    steps: int = Field(1000, ge=1)
    stages: int = Field(4, ge=2, description="stairs of the step schedule")
    sharpness: float = Field(4.0, gt=0.0, description="curvature of the exponential schedule")

    def level(self, step: int) -> float:
        """The difficulty level at training step ``step`` (0-based)."""
        if step < 0:
            raise PerturbationError(f"training step must be 0 or more, got {step}")
        t = min(step / self.steps, 1.0)
        if self.schedule == "constant":
            return self.start
        if self.schedule == "linear":
            share = t
        elif self.schedule == "step":
            share = min(math.floor(t * self.stages), self.stages - 1) / (self.stages - 1)
        else:
            share = math.expm1(self.sharpness * t) / math.expm1(self.sharpness)
        return round(self.start + (self.end - self.start) * share, 9)

    def difficulty(self, step: int) -> Difficulty:
        return difficulty(self.level(step))

    def perturbations(
        self,
        step: int,
        domain: str | None = None,
        *,
        mode: FaultMode = "template",
        seed: int = 0,
    ) -> Perturbations:
        """The fault plan for training step ``step``."""
        return self.difficulty(step).perturbations(domain, mode=mode, seed=seed)

    @classmethod
    def parse(cls, spec: Curriculum | str | Path | dict[str, Any]) -> Curriculum:
        """Read ``SCHEDULE:START:END:STEPS[:STAGES]``, a mapping, or a YAML/JSON file."""
        if isinstance(spec, Curriculum):
            return spec
        data: Any = spec
        if isinstance(spec, Path) or (isinstance(spec, str) and Path(spec).suffix in _FILES):
            path = Path(spec)
            if not path.is_file():
                raise PerturbationError(f"curriculum file not found: {path}")
            try:
                data = load_yaml(read_text(path))
            except yaml.YAMLError as exc:
                raise PerturbationError(f"{path}: not valid YAML/JSON: {exc}") from None
        elif isinstance(spec, str):
            data = _from_colons(spec)
        if not isinstance(data, dict):
            raise PerturbationError(f"a curriculum is a mapping, got {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise PerturbationError(f"invalid curriculum:\n{exc}") from None


_FILES = (".yaml", ".yml", ".json")
_FIELDS = ("schedule", "start", "end", "steps", "stages")


def _from_colons(text: str) -> dict[str, Any]:
    parts = [p.strip() for p in text.split(":")]
    if not 1 <= len(parts) <= len(_FIELDS) or not parts[0]:
        raise PerturbationError(
            f"curriculum {text!r}: expected SCHEDULE:START:END:STEPS[:STAGES], "
            "e.g. linear:0:0.5:1000"
        )
    data: dict[str, Any] = {"schedule": parts[0]}
    for name, raw in zip(_FIELDS[1:], parts[1:], strict=False):
        try:
            data[name] = int(raw) if name in ("steps", "stages") else float(raw)
        except ValueError:
            raise PerturbationError(
                f"curriculum {text!r}: {name} {raw!r} is not a number"
            ) from None
    return data


def env_perturbations(
    perturb: str | Path | dict | None = None,
    difficulty_level: float | None = None,
    curriculum: str | Path | dict | None = None,
    step: int = 0,
    *,
    domain: str | None = None,
    seed: int | None = None,
) -> Perturbations | None:
    """The plan a command line asks for: a spec file (``--perturb``), a fixed level
    (``--difficulty``) or a curriculum at a step (``--curriculum``, ``--step``); at
    most one of the three. ``seed`` replaces the plan's own seed when given."""
    given = [
        n
        for n, v in (
            ("perturb", perturb),
            ("difficulty", difficulty_level),
            ("curriculum", curriculum),
        )
        if v is not None
    ]
    if len(given) > 1:
        raise PerturbationError(f"choose one of --{' / --'.join(given)}, not several")
    if perturb is not None:
        plan = load_perturbations(perturb)
    elif difficulty_level is not None:
        plan = perturbations_for_level(difficulty_level, domain)
    elif curriculum is not None:
        plan = Curriculum.parse(curriculum).perturbations(step, domain)
    else:
        return None
    return plan if seed is None else plan.model_copy(update={"seed": seed})
