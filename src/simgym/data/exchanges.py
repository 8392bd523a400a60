"""The turns of a trajectory as the world model saw them, shared by both exporters.

Its own module so :mod:`simgym.data.export` and :mod:`simgym.data.sft` both import it
and neither imports the other back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simgym.core import contract
from simgym.core.domain import get_domain
from simgym.core.files import write_atomic
from simgym.core.grounding import Grounding, facts_block
from simgym.core.types import Trajectory


@dataclass(frozen=True)
class Exchange:
    """One turn as the world model saw it: the user message and the observation message."""

    user: dict[str, str]
    assistant: dict[str, str]
    observation: str


def system_prompt_of(
    trajectory: Trajectory,
    *,
    template: str | None = None,
    instructions: str | None = None,
    style: str | None = None,
) -> str:
    """The system prompt the episode ran with: as recorded, or (for trajectories written
    before prompts were recorded, or when ``template``/``instructions``/``style``
    override it) rebuilt from its domain and scenario. ``style`` picks the domain's own
    template (``"full"`` or ``"compact"``); a rebuilt prompt has only the control
    instructions given here."""
    overridden = template is not None or instructions is not None or style is not None
    if trajectory.system_prompt is not None and not overridden:
        return trajectory.system_prompt
    domain = get_domain(trajectory.domain)
    scenario = domain.scenario(trajectory.scenario or None)
    return domain.system_prompt(
        scenario, template=template, instructions=instructions, style=style or "full"
    )


def restyle_trajectories(source: Path, target: Path, style: str) -> Path:
    """A copy of a JSONL file whose trajectories carry the system prompt of ``style``
    (other lines, such as benchmark rows, are copied as they are); returns ``target``."""
    lines = []
    for line in source.read_text(encoding="utf-8").splitlines():
        record = json.loads(line) if line.strip() else None
        if isinstance(record, dict) and "turns" in record and "domain" in record:
            trajectory = Trajectory.model_validate(record)
            prompt = system_prompt_of(trajectory, style=style)
            line = trajectory.model_copy(update={"system_prompt": prompt}).model_dump_json()
        lines.append(line)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, "".join(f"{line}\n" for line in lines))
    return target


def exchanges(trajectory: Trajectory) -> list[Exchange]:
    """The turns in the world model's history, numbered and worded as the environment did
    (the task instruction goes with the first, a turn's control instruction with it, and
    its grounded facts when the episode ran with grounding: a model trained on these rows
    learns to render the facts it is handed)."""
    found: list[Exchange] = []
    for turn in trajectory.turns:
        if not turn.in_history:
            continue
        number = len(found) + 1
        user = contract.user_message(
            number,
            turn.action_text,
            instruction=trajectory.task.instruction if number == 1 else None,
            control=turn.control,
            grounding=[block] if (block := _recorded_facts(turn.grounding)) else (),
        )
        text = turn.observation.text
        found.append(Exchange(user, contract.assistant_message(text), text))
    return found


def _recorded_facts(record: dict[str, Any] | None) -> str | None:
    """The ``**Facts:**`` block a grounded turn was sent, rebuilt from its record."""
    if not record or not record.get("facts"):
        return None
    return facts_block(Grounding(facts=list(record["facts"])))
