"""Shared pieces of the trajectory factory: constants, errors, the episode plan, the
program type and the vocabulary and random helpers every generator draws from.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.types import Task

DOMAINS = ("terminal", "swe", "mcp", "search", "web")
SPLITS = ("train", "val", "test")
DEFAULT_SPLIT = (0.90, 0.05, 0.05)
RAW_FILE = "raw.jsonl"
MANIFEST_FILE = "manifest.json"
FORMAT = "simgym-factory/1"

# A program yields actions (anything SimEnv.step takes), receives each observation's
# text, and may return the agent's final answer.
Program = Generator[Any, str, "str | None"]
ProgramFactory = Callable[[str], Program]


class FactoryError(SimgymError):
    """The factory cannot run as asked (a backend is missing, the output is taken)."""


@dataclass
class EpisodePlan:
    """One episode to record: the task (with its scenario) and the program that acts."""

    id: str
    domain: str
    index: int
    task: Task
    program: ProgramFactory
    expected_turns: int
    setup: dict[str, Any] = field(default_factory=dict)  # what the backend slot needs


# -- shared vocabulary ----------------------------------------------------------------------

FIRST_NAMES = (
    "Ana", "Ben", "Chloe", "Dmitri", "Elif", "Farah", "Gustavo", "Hana", "Ivan", "Jonas",
    "Kemi", "Lena", "Marco", "Nadia", "Omar", "Priya", "Quentin", "Rosa", "Sven", "Tariq",
    "Uma", "Viktor", "Wen", "Yusuf", "Zoe",
)  # fmt: skip
LAST_NAMES = (
    "Lima", "Okafor", "Novak", "Haddad", "Moreau", "Tanaka", "Silva", "Berg", "Mensah",
    "Rossi", "Quinn", "Vidal", "Moura", "Kowalski", "Nguyen", "Ortiz", "Petrov", "Sato",
    "Weber", "Yilmaz",
)  # fmt: skip
CODE_WORDS = (
    "atlas", "beacon", "cobalt", "delta", "ember", "falcon", "garnet", "harbor", "iris",
    "juniper", "kestrel", "lumen", "meridian", "nimbus", "orchid", "pylon", "quartz",
    "raven", "summit", "tundra", "vertex", "willow", "zephyr",
)  # fmt: skip
MAIL_DOMAINS = ("example.com", "example.org", "example.net", "mail.example.com")


def _person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"


def _email(rng: random.Random, name: str | None = None) -> str:
    name = name or _person(rng)
    local = name.lower().replace(" ", rng.choice((".", "", "_")))
    return f"{local}@{rng.choice(MAIL_DOMAINS)}"


def _length(rng: random.Random) -> int:
    """Actions in an episode: mostly short and medium, one in five long."""
    roll = rng.random()
    if roll < 0.4:
        return rng.randint(4, 8)
    if roll < 0.8:
        return rng.randint(9, 16)
    return rng.randint(18, 28)


def _weighted(rng: random.Random, options: dict[str, float]) -> str:
    names = [name for name, weight in options.items() if weight > 0]
    return rng.choices(names, [options[n] for n in names])[0]


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}
