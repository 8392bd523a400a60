"""The hidden state ledger: an episode's world facts as one explicit JSON document.

LLM simulators drift: a file written at turn 2 is gone at turn 30, a deleted record comes
back. The ledger keeps the facts outside the model. It is seeded from the scenario (each
domain says how), never shown to the agent, and changed only by patches the world model
writes after its observation, in a ``<state_update>`` block:

* a JSON Merge Patch (RFC 7386), an object: ``{"files": {"/tmp/a.txt": "hi", "b": null}}``
  (``null`` deletes) — the easy form for a model, and the one the prompt asks for;
* or a JSON Patch (RFC 6902), a list of operations, applied with the ``jsonpatch`` library.

A patch is applied to a copy and the result validated against the domain's JSON schema;
a missing, malformed or schema-breaking patch leaves the state as it was and is reported
(the environment records it on the turn and the episode goes on).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from simgym.core.safeload import loads_json

STATE_OPEN = "<state_update>"
STATE_CLOSE = "</state_update>"
STATE_HEADER = "**Current State:**"

_BLOCK = re.compile(r"<state_update>(.*?)(?:</state_update>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")

Patch = dict[str, Any] | list[dict[str, Any]]

# Appended to the domain's system prompt when the environment asks for state updates.
STATE_INSTRUCTIONS = """## Hidden state
The facts of this world that actions can change (files, records, settings, the current \
screen) are kept as a JSON document. When it is shown to you as **Current State:**, it is \
the truth: the observation must agree with it.
After the observation, write how this action changed those facts, as a JSON merge patch \
inside <state_update></state_update>: only the keys that changed, with their new values, \
and null for anything deleted. Write <state_update>{}</state_update> when nothing changed.
Example, after `echo hi > /tmp/a.txt` and `rm old.log` in /home/user:
<state_update>{"files": {"/tmp/a.txt": "hi\\n", "/home/user/old.log": null}}</state_update>"""


class PatchError(ValueError):
    """A state update that cannot be used; the message says why."""


def extract_update(raw: str) -> str | None:
    """The text of the last ``<state_update>`` block in a model's output (closed or not),
    or None when there is none."""
    blocks = _BLOCK.findall(raw or "")
    return blocks[-1].strip() if blocks else None


def strip_update(text: str) -> str:
    """``text`` without its ``<state_update>`` blocks (for an untagged observation)."""
    return _BLOCK.sub("", text).rstrip()


def parse_patch(text: str) -> Patch:
    """Read a patch: a JSON object (merge patch) or a list of JSON Patch operations."""
    body = _FENCE.sub("", text.strip()).strip()
    if not body:
        raise PatchError("the state update is empty")
    try:
        patch = loads_json(body)  # the model wrote it: deep nesting and huge ints are errors
    except json.JSONDecodeError as exc:
        raise PatchError(f"the state update is not valid JSON: {exc}") from None
    if isinstance(patch, dict):
        return patch
    if isinstance(patch, list):
        for i, op in enumerate(patch):
            if not isinstance(op, dict) or "op" not in op or "path" not in op:
                raise PatchError(f"JSON Patch operation {i} needs 'op' and 'path': {op!r}")
        return patch
    raise PatchError(f"a state update is an object or a list of operations, not {patch!r}")


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch (returns a new value; inputs are not changed)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def apply_patch(state: dict[str, Any], patch: Patch) -> dict[str, Any]:
    """The state after ``patch``; raises :class:`PatchError` if it does not apply."""
    if isinstance(patch, dict):
        return merge_patch(state, patch)
    import jsonpatch  # a maintained RFC 6902 implementation
    import jsonpointer

    try:
        result = jsonpatch.apply_patch(state, patch, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        raise PatchError(f"the JSON Patch does not apply: {exc}") from None
    except (TypeError, KeyError, IndexError, ValueError) as exc:
        raise PatchError(f"the JSON Patch is malformed: {exc}") from None
    if not isinstance(result, dict):
        raise PatchError("the JSON Patch replaced the whole state with a non-object")
    return result


def schema_problems(state: dict[str, Any], schema: dict[str, Any] | None) -> list[str]:
    """Where ``state`` breaks ``schema`` (empty when it conforms or there is no schema)."""
    if not schema:
        return []
    from simgym.core.jsonschemas import validator

    errors = validator(schema).iter_errors(state)
    return [
        f"{'/'.join(map(str, e.path)) or 'state'}: {e.message}"
        for e in sorted(errors, key=lambda e: list(e.path))[:5]
    ]


@dataclass
class StateUpdate:
    """What became of one turn's state update."""

    applied: bool
    patch: Patch | None = None
    error: str | None = None


class StateLedger:
    """One episode's hidden state and its validated updates."""

    def __init__(self, initial: dict[str, Any], schema: dict[str, Any] | None = None) -> None:
        problems = schema_problems(initial, schema)
        if problems:
            raise PatchError("the initial state breaks the domain's schema: " + "; ".join(problems))
        self.state = copy.deepcopy(initial)
        self.schema = schema

    def update(self, text: str | None) -> StateUpdate:
        """Apply a model's ``<state_update>`` text; the state is unchanged on any error."""
        if text is None:
            return StateUpdate(False, error="no <state_update> block in the output")
        try:
            patch = parse_patch(text)
            new_state = apply_patch(self.state, patch)
        except PatchError as exc:
            return StateUpdate(False, error=str(exc))
        problems = schema_problems(new_state, self.schema)
        if problems:
            return StateUpdate(
                False, patch, "the update breaks the state schema: " + "; ".join(problems)
            )
        self.state = new_state
        return StateUpdate(True, patch)

    def apply(self, patch: Patch) -> StateUpdate:
        """Apply a patch simgym itself computed (a grounded, certain effect); the state is
        unchanged if it does not apply or breaks the schema."""
        try:
            new_state = apply_patch(self.state, patch)
        except PatchError as exc:
            return StateUpdate(False, patch, str(exc))
        problems = schema_problems(new_state, self.schema)
        if problems:
            return StateUpdate(
                False, patch, "the effect breaks the state schema: " + "; ".join(problems)
            )
        self.state = new_state
        return StateUpdate(True, patch)

    def render(self) -> str:
        """The state as the world model is shown it (stable bytes for the same state).
        Keys starting with ``_`` are simgym's own bookkeeping (deleted records, how a
        server writes its answers, answers already given) and are left out."""
        shown = {k: v for k, v in self.state.items() if not k.startswith("_")}
        return json.dumps(shown, ensure_ascii=False, indent=1)


# -- small schema builders for domains --------------------------------------------------

STRING: dict[str, Any] = {"type": "string"}
STRING_LIST: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}


def object_schema(
    required: list[str] | None = None, **properties: dict[str, Any]
) -> dict[str, Any]:
    """A JSON schema for an object with these properties (others allowed: a model may
    record facts the domain did not foresee)."""
    return {"type": "object", "properties": properties, "required": required or []}
