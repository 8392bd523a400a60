"""Probes: one fact, changed at turn ``k`` and looked at again at turn ``k + n``."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from simgym.bench.consistency.domains import PROBE_DOMAINS, ProbeDomain, Scripted
from simgym.core.errors import SimgymError
from simgym.core.grounding import MODES as GROUNDING_MODES

OPS = ("create", "change", "delete")
MODES = ("history", "state")
GROUNDINGS = GROUNDING_MODES  # off, facts, strict
DEFAULT_GROUNDINGS = ("off", "strict")
DEFAULT_GAPS = (5, 20, 50)
MUTATION_TURN = 2  # turn k: turn 1 is scripted (the old value, or an unrelated command)

# Value tokens: a word and four digits, e.g. "teal-4821" (30 x 9000 choices).
_WORDS = (
    "teal amber coral olive ivory slate plum jade ochre rust cobalt mint lilac sand "
    "pearl onyx maple cedar birch fern moss dune ember frost harbor quartz sable tulip "
    "willow zinc"
).split()


@dataclass(frozen=True)
class Step:
    """One action of a probe episode; ``scripted`` is None when the model under test
    writes the observation."""

    role: str  # setup | mutate | filler | probe
    action: Any
    scripted: Scripted | None = None


@dataclass(frozen=True)
class Probe:
    """One fact, one change to it at turn ``k``, one look at turn ``k + gap``."""

    domain: str
    op: str  # create | change | delete
    gap: int
    index: int
    fact: str  # the file path or record id
    current: str | None  # what the look must show (None: the fact must be gone)
    previous: str | None  # what it must not show (the overwritten or deleted value)
    seed: int
    steps: tuple[Step, ...]

    @property
    def mutation_turn(self) -> int:
        return MUTATION_TURN

    @property
    def probe_turn(self) -> int:
        return MUTATION_TURN + self.gap

    def key(self, mode: str, grounding: str = "off") -> str:
        return f"{self.domain}/{label(mode, grounding)}/n{self.gap}/p{self.index}"


def label(mode: str, grounding: str = "off") -> str:
    """``history`` or ``history+strict``: a context mode and a grounding mode together.
    Grounding off keeps the plain mode name, so keys written before grounding existed
    still name the same runs."""
    return mode if grounding == "off" else f"{mode}+{grounding}"


def row_grounding(row: dict[str, Any]) -> str:
    """A row's grounding mode; rows written before grounding existed ran without it."""
    return row.get("grounding") or "off"


def _value(rng: random.Random) -> str:
    return f"{rng.choice(_WORDS)}-{rng.randrange(1000, 10000)}"


def generate_probes(
    domains: Sequence[str],
    gaps: Sequence[int] = DEFAULT_GAPS,
    probes: int = 3,
    seed: int = 0,
) -> list[Probe]:
    """``probes`` probes for each domain and gap, ops cycling create, change, delete
    (terminal starts at create, mcp at change, swe at delete).
    The same seed gives the same probes (ids, values, actions). Repeats are ignored."""
    domains, gaps = list(dict.fromkeys(domains)), list(dict.fromkeys(gaps))
    if not domains or not gaps:
        raise SimgymError("name at least one domain and one gap")
    unknown = [d for d in domains if d not in PROBE_DOMAINS]
    if unknown:
        raise SimgymError(
            f"no consistency probes for {', '.join(unknown)}; available: {', '.join(PROBE_DOMAINS)}"
        )
    bad = [g for g in gaps if not isinstance(g, int) or g < 1]
    if bad:
        raise SimgymError(f"gaps must be whole numbers of turns >= 1, not {bad}")
    if probes < 1:
        raise SimgymError("--probes must be at least 1")
    out = []
    for name in domains:
        spec = PROBE_DOMAINS[name]
        # Each domain starts the cycle at another op, so that one probe per cell still
        # covers all three ops across the domains.
        offset = list(PROBE_DOMAINS).index(name)
        for gap in gaps:
            for index in range(probes):
                rng = random.Random(f"{seed}/{name}/{gap}/{index}")
                op = OPS[(index + offset) % len(OPS)]
                out.append(_probe(spec, op, gap, index, rng))
    return out


def _probe(spec: ProbeDomain, op: str, gap: int, index: int, rng: random.Random) -> Probe:
    fact = spec.fact(f"{rng.randrange(16**4):04x}")
    old = _value(rng)
    new = _value(rng)
    while new.split("-")[0] == old.split("-")[0]:  # old and new never share a word
        new = _value(rng)
    episode_seed = rng.randrange(2**31)
    if op == "create":
        first = spec.filler(1)
        current, previous = new, None
    else:
        first = spec.setup(fact, old)
        current, previous = (new, old) if op == "change" else (None, old)
    steps = [Step("setup", first[0], first[1])]
    steps.append(Step("mutate", spec.mutate(op, fact, current, previous)))
    for turn in range(MUTATION_TURN + 1, MUTATION_TURN + gap):
        action, scripted = spec.filler(turn)
        steps.append(Step("filler", action, scripted))
    steps.append(Step("probe", spec.look(fact)))
    return Probe(spec.name, op, gap, index, fact, current, previous, episode_seed, tuple(steps))
