"""simgym tool schemas in the shape verl's schema model keeps whole."""

from __future__ import annotations

import json
from typing import Any

from simgym.core.types import ToolSpec


def verl_tool_schema(spec: ToolSpec) -> dict[str, Any]:
    """A simgym tool as an OpenAI function schema that verl's schema model keeps whole
    (see the module docstring)."""
    params = spec.parameters or {}
    properties = {
        name: _verl_property(prop if isinstance(prop, dict) else {})
        for name, prop in (params.get("properties") or {}).items()
    }
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description or spec.name,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(params.get("required") or []),
            },
        },
    }


def _verl_property(prop: dict[str, Any]) -> dict[str, Any]:
    """One property in the shape verl keeps (type, description, enum); what verl would
    drop is said in the description."""
    kind = prop.get("type")
    if kind is None:
        alternatives = prop.get("anyOf") or prop.get("oneOf") or []
        kinds = [a.get("type") for a in alternatives if isinstance(a, dict) and a.get("type")]
        kind = list(dict.fromkeys(kinds)) or ["string", "number", "boolean", "array", "object"]
        if len(kind) == 1:
            kind = kind[0]
    notes = []
    items = prop.get("items")
    if isinstance(items, dict):
        notes.append(f"a list of {_shape(items)}")
    elif prop.get("anyOf") or prop.get("oneOf"):
        shapes = [_shape(a) for a in prop.get("anyOf") or prop.get("oneOf") if isinstance(a, dict)]
        notes.append("one of: " + "; ".join(shapes))
    elif kind == "object" and prop.get("properties"):
        notes.append(f"shaped {_shape(prop)}")
    if "default" in prop:
        notes.append(f"default {json.dumps(prop['default'])}")
    description = prop.get("description") or ""
    if notes:
        description = f"{description} ({'; '.join(notes)})".strip()
    out: dict[str, Any] = {"type": kind}
    if description:
        out["description"] = description
    if isinstance(prop.get("enum"), list):
        out["enum"] = prop["enum"]
    return out


def _shape(schema: dict[str, Any]) -> str:
    """A short reading of a sub-schema for a description."""
    if schema.get("type") == "array" and isinstance(schema.get("items"), dict):
        return f"list of {_shape(schema['items'])}"
    if schema.get("properties") or schema.get("enum") or schema.get("anyOf"):
        keep = {
            k: schema[k] for k in ("type", "properties", "required", "enum", "anyOf") if k in schema
        }
        return json.dumps(keep, separators=(",", ":"))
    return str(schema.get("type", "any value"))
