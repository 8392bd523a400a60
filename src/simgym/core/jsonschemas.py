"""JSON Schema checks, compiled once per distinct schema.

Every episode validates its scenario's tool schemas and every tool call's arguments;
building a ``jsonschema`` validator (and checking a schema against the metaschema) costs
far more than using one, so both are cached by the schema's canonical JSON text. The
text, not the object, is the key: schemas arrive as fresh dicts with each episode.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jsonschema


def _key(schema: dict[str, Any]) -> str:
    # every tool call asks: orjson makes the key ten times faster than json (a core dep)
    import orjson

    return orjson.dumps(
        schema, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str
    ).decode()


def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """A Draft 2020-12 validator for ``schema`` (shared: validators hold no state)."""
    return _compiled(_key(schema))


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` is not a valid Draft 2020-12 schema, or None."""
    return _checked(_key(schema))


@functools.lru_cache(maxsize=4096)
def _compiled(text: str) -> jsonschema.Draft202012Validator:
    import jsonschema  # imported here: only tool domains need it

    return jsonschema.Draft202012Validator(json.loads(text))


@functools.lru_cache(maxsize=4096)
def _checked(text: str) -> str | None:
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(json.loads(text))
    except jsonschema.SchemaError as exc:
        return exc.message
    return None
