"""What every renderer shares: the context a template reads, HTTP reason phrases, lenient
placeholder filling and the reproducible choice of which batch items fail."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from simgym.core.types import Action

REASONS = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


class Blank(dict):
    """Fills a placeholder a rule left out with a neutral word instead of failing."""

    def __missing__(self, key: str) -> str:
        return "some"


@dataclass(frozen=True)
class Context:
    """What a template may use: the world, the action, the screen before it, parameters."""

    scenario: Any
    action: Action
    last_observation: str
    params: Mapping[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        return self.params.get(key, default)


def failing_items(items: list[Any], draw: int) -> set[int]:
    """Which of a batch's items fail: some, never none, and not all when there are two+."""
    rng = random.Random(draw)
    if len(items) < 2:
        return set(range(len(items)))
    count = rng.randint(1, len(items) - 1)
    return set(rng.sample(range(len(items)), count))


Renderer = Callable[[str, Context], str]
