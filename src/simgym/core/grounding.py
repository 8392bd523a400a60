"""Grounding: facts come from the hidden state and from recorded experience; the world
model renders them.

Before each simulated action the environment asks its domain to *ground* the action
against the episode's hidden state ledger (:mod:`simgym.core.state`):
``domain.ground(action, state, scenario) -> Grounding | None``. A :class:`Grounding` says

* ``facts``: what the action reads, as short lines (a file's content, the working
  directory, the record a tool call fetches). They go to the world model in a
  ``**Facts:**`` block of the newest user turn, before ``**Action:**``;
* ``effects``: what the action certainly changes, as a JSON merge patch (RFC 7386) that
  simgym applies to the ledger itself after the turn (a model's ``<state_update>``
  covers only what simgym cannot know);
* ``observation``: the whole observation, when simgym can compute it exactly (``pwd``,
  ``cat`` of a known file, a record lookup). Strict mode falls back to it when the
  model's answer disagrees;
* ``expect`` / ``forbid``: text the observation must or must not contain (a listing must
  name every file; a deleted value must not come back), for strict mode's check;
* ``reshape``: for an observation the state does not decide whole, a function that
  rewrites the model's answer into the layout the state does know (a list tool's wrapper
  as the server wrote it, the fields its items show), keeping what the model said where
  the state is silent; strict mode applies it and records the model's own text.

An *experience source* (``simgym.experience``) adds the most similar recorded real
transitions as a ``**Similar recorded transitions:**`` block, the idea behind replay
buffers of real experience: the model sees how this kind of action really answered.

Modes (``SimEnv(grounding=...)``): ``"off"`` sends nothing and applies nothing;
``"facts"`` sends facts and experience and applies certain effects; ``"strict"`` also
checks each observation against the facts, asks once more with the problems named, and
then corrects it (the exact observation when there is one), recording on the turn what
it did. Earlier messages never change, so server prefix caches keep hitting; the agent
never sees facts, state or retrieved transitions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from simgym.core.execution import Run, RunResult
from simgym.core.safeload import loads_json

GroundingMode = Literal["off", "facts", "strict"]
MODES: tuple[str, ...] = ("off", "facts", "strict")
FACTS_HEADER = "**Facts:**"
EXPERIENCE_HEADER = "**Similar recorded transitions:**"
FACTS_NOTE = "(true in this world right now; the observation must agree with them)"
EXPERIENCE_NOTE = "(real answers to similar actions elsewhere; match their format, not their facts)"


@dataclass
class Grounding:
    """What the hidden state says about one action (see the module docstring)."""

    facts: list[str] = field(default_factory=list)
    effects: dict[str, Any] | None = None
    observation: str | None = None
    expect: list[str] = field(default_factory=list)
    forbid: list[str] = field(default_factory=list)
    reshape: Callable[[str], str | None] | None = None  # None: nothing to rewrite
    run: Run | None = None
    # None from settle: the run does not stand for the world (the host lacks a program)
    settle: Callable[[RunResult], Grounding | None] | None = None

    def is_empty(self) -> bool:
        return not (
            self.facts or self.effects or self.observation is not None or self.expect or self.run
        )

    def problems(self, observation: str) -> list[str]:
        """Where ``observation`` disagrees with the grounded facts (empty when it agrees)."""
        if self.observation is not None:
            if _same(observation, self.observation):
                return []
        found = []
        for text in self.expect:
            if text not in observation:
                found.append(f"the observation must show {_short(text)}")
        for text in self.forbid:
            if text and text in observation:
                found.append(f"the observation must not show {_short(text)}")
        if self.observation is not None and not found:
            found.append("the observation differs from the exact output the state determines")
        return found

    def record(self) -> dict[str, Any]:
        """The grounding as kept on a turn (``Turn.grounding``)."""
        out: dict[str, Any] = {"facts": list(self.facts)}
        if self.effects:
            out["effects"] = self.effects
        if self.observation is not None:
            out["exact"] = True
        return out


@dataclass(frozen=True)
class Experience:
    """One recorded transition: an action and the observation it really got."""

    action: str
    observation: str
    source: str = ""  # where it was recorded (file, run or log)
    score: float = 0.0  # retrieval score, higher is more similar


@runtime_checkable
class ExperienceSource(Protocol):
    """Anything that finds recorded transitions like an action (``simgym.experience``).
    Must be safe to call from many environments; it runs on the event loop's thread."""

    def similar(self, domain: str, action_text: str, *, k: int) -> Sequence[Experience]: ...


MAX_FACTS_CHARS = 4000  # a list of a thousand records must not crowd out the prompt


def facts_block(grounding: Grounding | None, max_chars: int = MAX_FACTS_CHARS) -> str | None:
    """The ``**Facts:**`` block for a user turn, or None when there is nothing to say;
    facts past ``max_chars`` are counted, not shown (the first ones come first)."""
    if grounding is None or not grounding.facts:
        return None
    lines = [f"{FACTS_HEADER} {FACTS_NOTE}"]
    used = 0
    for i, fact in enumerate(grounding.facts):
        line = fact if fact.startswith("- ") else f"- {fact}"
        if used + len(line) > max_chars and i:
            lines.append(f"- ... and {len(grounding.facts) - i} more facts of the same kind")
            break
        lines.append(line)
        used += len(line)
    return "\n".join(lines)


def experience_block(items: Sequence[Experience], max_chars: int) -> str | None:
    """The retrieved transitions as a block, best first, within ``max_chars``."""
    parts: list[str] = []
    used = 0
    for i, item in enumerate(items, 1):
        piece = (
            f"Example {i}\nAction: {item.action.strip()}\nObservation:\n{item.observation.rstrip()}"
        )
        if used + len(piece) > max_chars:
            room = max_chars - used - len("Example 1\nAction: \nObservation:\n") - 20
            if parts or room < 80:
                break
            piece = piece[: max_chars - used - 4] + " ..."
        parts.append(piece)
        used += len(piece) + 2
    if not parts:
        return None
    return f"{EXPERIENCE_HEADER} {EXPERIENCE_NOTE}\n" + "\n\n".join(parts)


def retry_note(problems: Sequence[str]) -> str:
    """The control line strict mode adds when it asks again."""
    return "Your last answer disagreed with the facts: " + "; ".join(problems) + ". Answer again."


def _same(observation: str, exact: str) -> bool:
    """Equal up to trailing blanks, or as JSON values (a pretty-printed record is right)."""
    if _normalize(observation) == _normalize(exact):
        return True
    if exact.lstrip()[:1] in ("{", "["):
        try:
            return loads_json(observation) == loads_json(exact)
        except ValueError:  # JSONDecodeError, also for a model's deep or huge output
            return False
    return False


def _normalize(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def _short(text: str, limit: int = 60) -> str:
    one = text.replace("\n", "\\n")
    return repr(one if len(one) <= limit else one[: limit - 3] + "...")
