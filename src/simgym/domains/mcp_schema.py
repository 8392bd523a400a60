"""A tool's input schema as the server enforces it: the refusal a call that breaks it gets.

An MCP server built with the official Python SDK (``MCPServer``) validates every call's
arguments with a pydantic model of the tool's signature before the tool runs, and
answers a call that breaks it with an error result whose text is
``Error executing tool NAME: `` and pydantic's own report::

    Error executing tool get_customer: 1 validation error for get_customerArguments
    customer_id
      String should match pattern '^C-\\d{4}$' [type=string_pattern_mismatch, ...]
        For further information visit https://errors.pydantic.dev/2.14/v/string_pattern_mismatch

(``...``: ``input_value='1009', input_type=str``)

:func:`check` rebuilds that model from the tool's JSON schema (the schema the SDK
published from it: ``type``, ``enum``/``const``, ``pattern``, ``minLength``/``maxLength``,
``minimum``/``maximum`` and their exclusive forms, ``multipleOf``, ``minItems``/
``maxItems``, ``required``, a nullable ``anyOf``, and the formats ``email``, ``date``,
``date-time`` and ``uuid``) and validates the call with pydantic, so the refusal's text is
the SDK's to the character (the model's name is the schema's ``title``, which the SDK
sets to ``<tool>Arguments``; the report's link names the pydantic version installed
here). The same model says what the tool body receives for a call it accepts (a number
given as text, an email address with its domain in lower case).

A schema with a construct this subset does not rebuild (``$ref``, ``oneOf``, nested
objects, another ``format``) is checked with ``jsonschema`` instead (``email`` format
included): a call it refuses is certainly refused, but the wording stays unknown.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import keyword
import uuid
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from simgym.core.types import ToolSpec

SDK_PREFIX = "Error executing tool {tool}: "  # mcp.server.mcpserver.tools.base.Tool.run
# Keywords that only describe a property; any other keyword is a rule this subset may miss.
DESCRIPTIVE = frozenset(
    {
        "title", "description", "default", "examples", "example", "deprecated", "readOnly",
        "writeOnly", "$comment", "type", "enum", "const", "anyOf", "format", "pattern",
        "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "multipleOf", "items", "minItems", "maxItems",
    }
)  # fmt: skip
CONSTRAINTS = {
    "pattern": "pattern",
    "minLength": "min_length",
    "maxLength": "max_length",
    "minimum": "ge",
    "maximum": "le",
    "exclusiveMinimum": "gt",
    "exclusiveMaximum": "lt",
    "multipleOf": "multiple_of",
    "minItems": "min_length",
    "maxItems": "max_length",
}
TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict[str, Any],
}
FORMATS: dict[str, Any] = {"date": dt.date, "date-time": dt.datetime, "uuid": uuid.UUID}
RESERVED = frozenset(dir(BaseModel))


class Unsupported(Exception):
    """A schema construct the pydantic rebuild does not cover."""


@dataclass
class Verdict:
    """What the server's input validation makes of a call: ``refused`` with ``message``
    (its exact text, None when only the refusal is certain) and ``reasons`` in words; for
    an accepted call, ``values``: the arguments as the tool body receives them (None
    when not known)."""

    refused: bool
    message: str | None = None
    reasons: list[str] = field(default_factory=list)
    values: dict[str, Any] | None = None


def sdk_built(tool: ToolSpec) -> bool:
    """Whether the tool's schema carries the Python SDK's mark: the title it gives every
    argument model, ``<tool>Arguments``."""
    return tool.parameters.get("title") == f"{tool.name}Arguments"


def check(tool: ToolSpec, arguments: dict[str, Any]) -> Verdict:
    """How the server's input validation answers this call (see the module docstring)."""
    try:
        model = _model(tool.name, json.dumps(tool.parameters, sort_keys=True))
    except Exception:  # Unsupported, or a pattern pydantic's regex engine does not take
        return _check_jsonschema(tool, arguments)
    try:
        validated = model.model_validate(_pre_parse(model, arguments))
    except ValidationError as exc:
        reasons = [
            f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
        ]
        message = SDK_PREFIX.format(tool=tool.name) + str(exc)
        return Verdict(True, message, reasons)
    except Exception:  # a validator that fails otherwise: what the server does is unknown
        return _check_jsonschema(tool, arguments)
    dumped = validated.model_dump(by_alias=True)
    values = {k: _received(v, dumped[k]) for k, v in arguments.items() if k in dumped}
    return Verdict(False, values=values)


def _received(given: Any, validated: Any) -> Any:
    """What the tool body receives for an argument, where JSON can say it: a number or a
    list given as text becomes one, an email address gets its domain in lower case; a
    date or a uuid keeps the text it was given, and a number its own form (``59``, not
    the ``59.0`` of a float field, which JSON does not tell apart)."""
    if isinstance(validated, dt.date | dt.datetime | uuid.UUID):
        return given
    numbers = (int, float)
    if isinstance(given, numbers) and isinstance(validated, numbers) and given == validated:
        return given
    return validated


def _pre_parse(model: type[BaseModel], arguments: dict[str, Any]) -> dict[str, Any]:
    """The SDK's ``pre_parse_json``: text given for a field that is not text is read as
    JSON when it holds a list or an object."""
    out = dict(arguments)
    fields = {info.alias or name: info for name, info in model.model_fields.items()}
    for key, value in arguments.items():
        info = fields.get(key)
        if info is None or not isinstance(value, str) or info.annotation is str:
            continue
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            continue
        if not isinstance(parsed, str | int | float):
            out[key] = parsed
    return out


@functools.lru_cache(maxsize=1024)
def _model(tool: str, schema_text: str) -> type[BaseModel]:
    """The pydantic model of a tool's arguments (raises :class:`Unsupported`)."""
    schema = json.loads(schema_text)
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise Unsupported("the arguments are not an object")
    if set(schema) & {"$ref", "$defs", "definitions", "allOf", "oneOf", "anyOf", "not", "if"}:
        raise Unsupported("a composed schema")
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    if not isinstance(props, dict) or not required <= set(props):
        raise Unsupported("required names a property the schema does not declare")
    fields: dict[str, Any] = {}
    for n, (name, prop) in enumerate(props.items()):
        annotation = _annotation(prop)
        default = ... if name in required else prop.get("default")
        ident = name
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
            ident = f"field_{n}"
        elif name in RESERVED or name.startswith("model_"):
            ident = f"field_{n}"
        info = Field(default, alias=name) if ident != name else Field(default)
        fields[ident] = (annotation, info)
    title = schema.get("title") if isinstance(schema.get("title"), str) else f"{tool}Arguments"
    config = ConfigDict(arbitrary_types_allowed=True, populate_by_name=False)
    return create_model(title, __config__=config, **fields)


def _annotation(prop: Any) -> Any:
    """The Python type (with its pydantic constraints) of one property's schema."""
    if prop is True or prop == {}:
        return Any
    if not isinstance(prop, dict):
        raise Unsupported("a property schema that is not an object")
    odd = set(prop) - DESCRIPTIVE
    if odd:
        raise Unsupported(f"keywords {sorted(odd)}")
    if "anyOf" in prop:
        options = prop["anyOf"]
        nulls = [o for o in options if o == {"type": "null"}]
        others = [o for o in options if o != {"type": "null"}]
        if len(nulls) != 1 or len(others) != 1:
            raise Unsupported("a union other than one type or null")
        inner = {k: v for k, v in prop.items() if k != "anyOf"}
        return _annotation({**inner, **others[0]}) | None
    kind = prop.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) != 1 or len(kind) != 2:
            raise Unsupported("a list of types other than one type and null")
        return _annotation({**prop, "type": kinds[0]}) | None
    if "const" in prop:
        base: Any = Literal[prop["const"]]
    elif "enum" in prop:
        values = prop["enum"]
        if not values or not all(isinstance(v, str | int | bool) or v is None for v in values):
            raise Unsupported("an enum of other values than text, numbers, true/false")
        base = Literal[tuple(values)]
    elif kind is None:
        base = Any
    elif kind == "string" and "format" in prop:
        base = _formatted(prop["format"])
    elif kind == "array":
        items = prop.get("items")
        base = list[_annotation(items)] if items is not None else list[Any]
    elif kind == "null":
        base = None
    elif kind in TYPES:
        if kind == "object" and (set(prop) & {"properties", "additionalProperties"}):
            raise Unsupported("a nested object")
        base = TYPES[kind]
    else:
        raise Unsupported(f"type {kind!r}")
    if "format" in prop and kind != "string":
        raise Unsupported("a format on a value that is not text")
    rules = {CONSTRAINTS[k]: v for k, v in prop.items() if k in CONSTRAINTS}
    return Annotated[base, Field(**rules)] if rules else base


def _formatted(fmt: Any) -> Any:
    if fmt == "email":
        try:
            import email_validator  # noqa: F401  (EmailStr needs it to validate)
            from pydantic import EmailStr
        except ImportError:
            raise Unsupported("format email without email-validator") from None
        return EmailStr
    if fmt in FORMATS:
        return FORMATS[fmt]
    raise Unsupported(f"format {fmt!r}")


def _check_jsonschema(tool: ToolSpec, arguments: dict[str, Any]) -> Verdict:
    """A schema the rebuild does not cover: jsonschema says whether the call breaks it
    (formats checked too); the server's wording stays unknown."""
    import jsonschema

    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    try:
        validator = jsonschema.Draft202012Validator(tool.parameters, format_checker=checker)
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
    except Exception:  # a pattern Python's re does not take: nothing is certain
        return Verdict(False)
    if not errors:
        return Verdict(False)
    reasons = [f"{'/'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in errors[:5]]
    return Verdict(True, None, reasons)
