"""Scoring a probe's look by rule, and checking the hidden state's copy of the fact."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from simgym.bench.consistency.domains import PROBE_DOMAINS
from simgym.bench.consistency.probes import Probe


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str


def score_observation(probe: Probe, text: str | None, error: str | None = None) -> Verdict:
    """Was the fact reported as it should be? A present fact: the newest value is shown,
    the one before it is not, and there is no not-found error. A deleted fact: a
    not-found error and no trace of the deleted value."""
    if error:
        return Verdict(False, f"no observation: {error}")
    if not text or not text.strip():
        return Verdict(False, "no observation: empty")
    missing = PROBE_DOMAINS[probe.domain].missing.search(text) is not None
    shows_previous = probe.previous is not None and _mentions(text, probe.previous)
    if probe.current is None:  # deleted
        if shows_previous:
            return Verdict(False, f"the deleted value {probe.previous} came back")
        if not missing:
            return Verdict(False, "no not-found error for the deleted fact")
        return Verdict(True, "reported missing")
    shows_current = _mentions(text, probe.current)
    if shows_previous:
        both = " alongside the new one" if shows_current else ""
        return Verdict(False, f"shows the old value {probe.previous}{both}")
    if not shows_current:
        if missing:
            return Verdict(False, "reported missing, but it exists")
        return Verdict(False, f"the value {probe.current} is not shown")
    if missing:
        return Verdict(False, "shows the value but also a not-found error")
    return Verdict(True, f"shows {probe.current}")


def _mentions(text: str, value: str) -> bool:
    """``value`` appears as a whole token (``teal-4821`` is not in ``teal-48210``)."""
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text) is not None


def ledger_agrees(probe: Probe, state: dict[str, Any] | None) -> bool | None:
    """Does the hidden state hold the fact as it should before the look (None: no
    state)? In ``state`` mode this separates a bad patch from a model that ignored the
    state it was shown."""
    if state is None:
        return None
    found = PROBE_DOMAINS[probe.domain].locate(state, probe.fact)
    if probe.current is None:
        return found is None
    text = found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)
    return (
        found is not None
        and probe.current in text
        and (probe.previous is None or probe.previous not in text)
    )
