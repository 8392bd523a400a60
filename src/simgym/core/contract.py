"""The message contract between simgym and a world model.

It is the layout Qwen-AgentWorld was trained on and AgentWorldBench samples use:

* one ``system`` message: the domain's world-model prompt, filled with the scenario;
* per earlier turn, a ``user`` message (``### Turn N``, optional task and control lines,
  then ``**Action:**`` and the action) and an ``assistant`` message holding that turn's
  observation after ``**Environment Observation:**``;
* a last ``user`` message with the action to simulate.

The model may think in ``<think>...</think>`` and should wrap its answer in
``<predicted_observation>...</predicted_observation>``. :func:`parse_output` is forgiving:
it drops reasoning (closed, unclosed, or only closed), takes the last tagged block (also an
unclosed one, as when generation stops at the closing tag), and otherwise falls back to
the whole remaining text.

Earlier messages are never rewritten during an episode, so each request repeats the
previous one as a prefix and server-side prefix caches hit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from simgym.core.state import STATE_HEADER, extract_update, strip_update

OBSERVATION_HEADER = "**Environment Observation:**"
ACTION_HEADER = "**Action:**"
OPEN_TAG = "<predicted_observation>"
CLOSE_TAG = "</predicted_observation>"

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_OPEN = re.compile(re.escape(OPEN_TAG), re.IGNORECASE)
_CLOSE = re.compile(re.escape(CLOSE_TAG), re.IGNORECASE)


def user_message(
    turn: int,
    action_text: str,
    *,
    instruction: str | None = None,
    control: str | None = None,
    state: str | None = None,
    grounding: Sequence[str] = (),
) -> dict[str, str]:
    """The ``user`` message for turn ``turn`` (1-based); ``state`` is the hidden state
    (JSON) that ``state`` context mode sends in place of the full history; ``grounding``
    holds the turn's facts and retrieved transitions (:mod:`simgym.core.grounding`),
    placed just before the action."""
    parts = [f"### Turn {turn}"]
    if instruction:
        parts.append(f"**Task:** {instruction}")
    if state is not None:
        parts.append(f"{STATE_HEADER}\n```json\n{state}\n```")
    if control:
        parts.append(f"**Control instruction:** {control}")
    parts.extend(block for block in grounding if block)
    parts.append(f"{ACTION_HEADER}\n{action_text}")
    return {"role": "user", "content": "\n\n".join(parts)}


def assistant_message(observation: str) -> dict[str, str]:
    """The ``assistant`` message that records a turn's observation in the history."""
    return {"role": "assistant", "content": f"{OBSERVATION_HEADER}\n{observation}"}


def action_text_of(user_content: str) -> str:
    """The action part of a ``user`` message (inverse of :func:`user_message`)."""
    head, sep, tail = user_content.rpartition(ACTION_HEADER)
    return tail.lstrip("\n") if sep else user_content


@dataclass(frozen=True)
class ParsedOutput:
    """A world model's raw text split into observation and reasoning."""

    observation: str
    reasoning: str | None
    tagged: bool  # True when the observation came from a <predicted_observation> block
    state_update: str | None = None  # the last <state_update> block's text, if any


def parse_output(raw: str, reasoning_content: str | None = None) -> ParsedOutput:
    """Split raw model output into (observation, reasoning); see the module docstring."""
    text = raw or ""
    reasoning_parts: list[str] = [reasoning_content] if reasoning_content else []

    for block in _THINK_BLOCK.findall(text):
        reasoning_parts.append(block[len("<think>") : -len("</think>")])
    text = _THINK_BLOCK.sub("", text)

    # A close tag with no opener: chat templates that pre-fill "<think>" leave only this.
    lower = text.lower()
    if "</think>" in lower and "<think>" not in lower:
        cut = lower.rfind("</think>")
        reasoning_parts.append(text[:cut])
        text = text[cut + len("</think>") :]
        lower = text.lower()

    # An opener with no close: reasoning ran on. An observation may still follow it.
    if "<think>" in lower:
        cut = lower.find("<think>")
        rest = text[cut + len("<think>") :]
        pred_at = rest.lower().find(OPEN_TAG)
        if pred_at >= 0:
            reasoning_parts.append(rest[:pred_at])
            text = text[:cut] + rest[pred_at:]
        else:
            reasoning_parts.append(rest)
            text = text[:cut]

    reasoning = "\n".join(p.strip() for p in reasoning_parts if p and p.strip()) or None

    # The hidden-state patch is not part of what the agent sees (see core/state.py).
    update = extract_update(text)
    if update is not None:
        text = strip_update(text)

    # The last non-empty tagged block wins (closed or not): a model that opens a fresh
    # tag and stops right away should not erase the observation it just wrote.
    pieces = _OPEN.split(text)
    if len(pieces) > 1:
        for piece in reversed(pieces[1:]):
            content = _CLOSE.split(piece)[0]
            if content.strip():
                return ParsedOutput(_clean(content), reasoning, True, update)
        return ParsedOutput("", reasoning, True, update)
    return ParsedOutput(_clean(text.replace(CLOSE_TAG, "")), reasoning, False, update)


def _clean(observation: str) -> str:
    observation = observation.strip("\n")
    if observation.lstrip().startswith(OBSERVATION_HEADER):
        observation = observation.lstrip()[len(OBSERVATION_HEADER) :].lstrip("\n")
    return observation.rstrip()
