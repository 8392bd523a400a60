"""A plan-following agent: plays a task's plan of tool calls, filling in the ids that
the environment assigned along the way.

A plan (``simgym logs import`` writes one per mined task) is a list of tool calls whose
arguments may hold placeholders for records created earlier in the same episode::

    {"name": "post_loans", "arguments": {"customer_id": "$customers.0", ...},
     "creates": "loans.0", "logged_id": "loan-5"}
    {"name": "post_loans_loan_id_submit", "arguments": {"loan_id": "$loans.0"}}

After a step that ``creates`` a record, the agent reads the new record's id from the
observation (the JSON answer's ``id``, also inside an MCP text envelope or one level
down; else the first token shaped like ``logged_id``, e.g. ``loan-<digits>``) and binds
it to the label; a later argument ``"$loans.0"`` becomes that id. A placeholder that was
never bound is sent as written, so the failure shows in the episode. When the plan runs
out the episode stops without an answer, as a scripted one does.
"""

from __future__ import annotations

import json
import re
from typing import Any

import json_repair

from simgym.agents.base import Decision, EpisodeView

PLACEHOLDER = "$"


def created_id(observation: str, logged_id: Any = None) -> Any:
    """The id of the record an observation shows as created (None when it shows none)."""
    value = _json(observation)
    found = _id_in(value)
    if found is not None:
        return found
    if isinstance(logged_id, str):
        shape = re.fullmatch(r"(.*?)(\d+)", logged_id)
        if shape and shape.group(1):
            match = re.search(rf"(?<![\w-]){re.escape(shape.group(1))}\d+\b", observation)
            if match:
                return match.group(0)
    return None


def _json(text: str) -> Any:
    body = text.strip()
    if not body.startswith(("{", "[")):
        return None
    try:
        return json.loads(body)
    except ValueError:
        return json_repair.repair_json(body, return_objects=True)


def _id_in(value: Any, depth: int = 0) -> Any:
    if not isinstance(value, dict) or "error" in value or depth > 2:
        return None
    if isinstance(value.get("id"), str | int) and not isinstance(value.get("id"), bool):
        return value["id"]
    content = value.get("content")
    if isinstance(content, list):  # an MCP CallToolResult envelope
        for item in content:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                found = _id_in(_json(item["text"]), depth + 1)
                if found is not None:
                    return found
    for inner in value.values():
        found = _id_in(inner, depth + 1) if isinstance(inner, dict) else None
        if found is not None:
            return found
    return None


def fill(value: Any, bound: dict[str, Any]) -> Any:
    """``value`` with every bound ``$label`` string replaced by its id (deeply)."""
    if isinstance(value, str) and value.startswith(PLACEHOLDER):
        return bound.get(value[len(PLACEHOLDER) :], value)
    if isinstance(value, dict):
        return {k: fill(v, bound) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, bound) for v in value]
    return value


class PlanAgent:
    """Follows ``plan`` (or ``by_task[task_id]``), binding created ids as it goes."""

    name = "plan"

    def __init__(
        self,
        plan: list[dict[str, Any]] | None = None,
        *,
        by_task: dict[str, list[dict[str, Any]]] | None = None,
    ) -> None:
        self.plan = list(plan or [])
        self.by_task = dict(by_task or {})

    async def start(self, view: EpisodeView) -> PlanSession:
        return PlanSession(list(self.by_task.get(view.task_id, self.plan)))

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


class PlanSession:
    """One episode of a plan: the steps left and the ids bound so far."""

    def __init__(self, plan: list[dict[str, Any]]) -> None:
        self.plan = plan
        self.bound: dict[str, Any] = {}
        self.messages: list[dict[str, Any]] = []
        self._next = 0

    async def act(self, observation: str) -> Decision | None:
        self.messages.append({"role": "user", "content": observation})
        if self._next > 0:
            self._bind(self.plan[self._next - 1], observation)
        if self._next >= len(self.plan):
            return None
        step = self.plan[self._next]
        self._next += 1
        if not isinstance(step, dict):
            return Decision(action=step)
        if set(step) == {"answer"}:
            return Decision(answer=str(step["answer"]))
        action = {
            "name": step.get("name"),
            "arguments": fill(step.get("arguments", {}), self.bound),
        }
        self.messages.append(
            {"role": "assistant", "content": json.dumps(action, ensure_ascii=False)}
        )
        return Decision(action=action)

    def _bind(self, step: Any, observation: str) -> None:
        label = step.get("creates") if isinstance(step, dict) else None
        if isinstance(label, str) and label not in self.bound:
            found = created_id(observation, step.get("logged_id"))
            if found is not None:
                self.bound[label] = found
