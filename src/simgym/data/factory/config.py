"""A factory run's settings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simgym.data.factory.common import DEFAULT_SPLIT, DOMAINS, FactoryError


@dataclass
class FactoryConfig:
    """A factory run (see :func:`arun_factory`)."""

    out: Path
    transitions: int = 20_000
    domains: tuple[str, ...] = DOMAINS
    concurrency: int = 4
    seed: int = 0
    weights: dict[str, float] | None = None
    max_turns: int = 40
    episode_timeout_s: float = 300.0
    web_sites: int = 24
    split: tuple[float, float, float] = DEFAULT_SPLIT
    resume: bool = True
    max_failures: int = 25
    # Facts from the hidden state go with each action and are kept on the turn, so the
    # exported rows teach a world model to render facts it is handed (simgym.core.grounding).
    grounding: str = "facts"

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        if self.concurrency < 1:
            raise FactoryError("concurrency must be at least 1")
        if (
            len(self.split) != 3
            or any(s < 0 for s in self.split)
            or abs(sum(self.split) - 1) > 1e-6
        ):
            raise FactoryError(
                f"split must be three non-negative shares summing to 1, got {self.split}"
            )
