"""The business objects a tool call touched, read from the call itself, for log formats
that name no objects (MCP JSON-RPC lines): without them a world has no entity types, the
twin holds no state and no session becomes a task.

An argument named ``<type>_id`` (or ``<type>Id``) names an object of that type; a bare
``id`` names one of the type the tool's name says (``get_loan`` -> loan). A successful
answer that is a JSON object with an ``id`` is an object's state after the call: that
of the object an argument names when the ids agree, else of a new object of the tool's
type, marked ``created`` unless the tool only reads (get, list, search, ...).
"""

from __future__ import annotations

from simgym.domains.mcp_ground import ALL_VERBS, FILLER, VERBS, split_words
from simgym.logs.model import JSON, ObjectRef, singular

_READS = VERBS["get"] | VERBS["list"]


def tool_type(tool: str) -> str | None:
    """The object type a tool's name says: its last word that is no verb nor filler,
    singular (``create_customer`` -> customer, ``run_kyc`` -> kyc); None when none."""
    nouns = [w for w in split_words(tool) if w not in ALL_VERBS and w not in FILLER]
    return singular(nouns[-1]) if nouns else None


def _id_type(key: str, tool_type: str | None) -> str | None:
    words = split_words(key)
    if words == ["id"]:
        return tool_type
    if len(words) >= 2 and words[-1] == "id":
        return "_".join(words[:-1])
    return None


def tool_objects(tool: str, arguments: JSON, response: JSON, failed: bool) -> list[ObjectRef]:
    """The objects a tool call named and, when it succeeded, the one its answer shows."""
    own = tool_type(tool)
    found: list[ObjectRef] = []
    if isinstance(arguments, dict):
        for key, value in arguments.items():
            otype = _id_type(str(key), own)
            scalar = isinstance(value, str | int) and not isinstance(value, bool)
            if otype and scalar and str(value):
                found.append(ObjectRef(otype, str(value)))
    if failed or not isinstance(response, dict) or response.get("id") in (None, ""):
        return found
    shown = str(response["id"])
    for obj in found:
        if obj.id == shown:
            obj.state = response
            return found
    if own is None:
        return found
    reads = bool(set(split_words(tool)) & _READS)
    found.append(ObjectRef(own, shown, None if reads else "created", response))
    return found
