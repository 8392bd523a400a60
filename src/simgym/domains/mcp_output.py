"""What a tool declares about its answers: MCP's ``outputSchema``, read as the layout of
the results grounding computes.

An MCP tool may declare the JSON schema of its structured result (``outputSchema``, MCP
2025-06-18). The official Python SDK derives it from the tool function's return
annotation: a pydantic model, a TypedDict or a dataclass is published as an object schema
whose properties are the model's fields in their order (nested models under ``$defs``,
referred to by ``$ref``); any other return type (a list, a number, text) is wrapped as
``{"result": ...}`` in a schema titled ``<function>Output``. Such a server answers a
successful call with the structured value and, for clients that read only text, the
same value as JSON in one text item, written by ``pydantic_core.to_json(value,
indent=2)`` (for a wrapped list, one text item per element).

So a declared output schema says, before the server has answered once, what the
episode's first answers would otherwise have to teach (:mod:`.mcp_style`):

* a record tool's answer (:func:`record_form`): which fields of the record it shows, in
  which order, and the values it fills in for fields the record lacks (a property's
  ``default``: ``currency: "EUR"``);
* a list tool's answer (:func:`list_form`): the wrapper (``{"customers": [...], "total":
  N}``), the one array of records in it, each item's fields, and what the other
  properties hold: an argument of the call echoed (a property named as an input
  argument: ``customer_id``), the number of matches (an integer named ``total``,
  ``total_count``, ``count``, ...), else the form is not known;
* how the text is written: indented by two when the tool bears the SDK's mark
  (:func:`mcp_schema.sdk_built`), one text item per element for a wrapped list.

A form is only used where every property it shows has a value: a field of the records
(of the declared JSON type) or a declared default; a property simgym cannot fill (one the
server computes, ``balance`` from ``balance_cents``) leaves the answer the model's, as
before. A form learned from the server's own answers wins over a declared one only for a
list's wrapper it could not read from the schema.

:class:`MCPTool` is the mcp scenario's tool declaration: a :class:`ToolSpec` that also
keeps ``output_schema`` (read from ``outputSchema`` too) and the MCP ``title`` and
``annotations``, so ``simgym mcp import`` loses nothing a server declares.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, model_serializer, model_validator

from simgym.core.types import ToolSpec

ITEMS = "{items}"  # mcp_style's markers (kept equal; mcp_style imports nothing from here)
COUNT = "{count}"
SDK_INDENT = 2  # pydantic_core.to_json(value, indent=2), the SDK's text of a result
# integer properties of a list answer that count every match (a limit cuts the items only)
TOTAL_NAMES = frozenset(
    {
        "total", "total_count", "totalcount", "total_results", "totalresults", "total_matches",
        "num_results", "numresults", "match_count", "matches", "total_items", "totalitems",
        "hits", "found", "count",
    }
)  # fmt: skip
# of those, names that may as well count only the items shown (which a cut tells apart)
AMBIGUOUS_COUNTS = frozenset({"count", "found"})
# keys of an MCP tools/list entry simgym does not keep (they say nothing of the answers)
WIRE_ONLY = frozenset({"_meta", "icons", "execution"})


class MCPTool(ToolSpec):
    """A tool of an MCP server as a scenario declares it: name, description, input
    schema (``parameters``, or ``inputSchema`` as the MCP wire form writes it) and, where
    the server declares it, ``output_schema`` (``outputSchema``): the JSON schema of its
    structured result, which grounding uses to write exact answers (simgym.domains.mcp_output)."""

    output_schema: dict[str, Any] | None = Field(
        None,
        description="the JSON schema of the tool's structured result (MCP outputSchema), "
        "as the server declares it",
    )
    title: str | None = Field(None, description="the tool's display name (MCP title)")
    annotations: dict[str, Any] | None = Field(
        None, description="the server's hints about the tool (MCP annotations: readOnlyHint, ...)"
    )

    @model_validator(mode="before")
    @classmethod
    def _wire_form(cls, value: Any) -> Any:
        """The OpenAI and MCP wire forms read as the plain one."""
        if not isinstance(value, dict):
            return value
        if value.get("type") == "function" and isinstance(value.get("function"), dict):
            value = value["function"]
        out = {k: v for k, v in value.items() if k not in WIRE_ONLY}
        for alias in ("inputSchema", "input_schema"):
            if alias in out:
                schema = out.pop(alias)
                out.setdefault("parameters", schema)
        if "outputSchema" in out:
            out.setdefault("output_schema", out.pop("outputSchema"))
        if not out.get("parameters"):
            out.pop("parameters", None)
        if out.get("description") is None:
            out.pop("description", None)
        return out

    @model_serializer(mode="wrap")
    def _plain(self, handler: Any) -> dict[str, Any]:
        """A tool without these MCP extras dumps as a plain :class:`ToolSpec` does."""
        data = handler(self)
        for name in ("output_schema", "title", "annotations"):
            if isinstance(data, dict) and data.get(name) is None:
                data.pop(name, None)
        return data

    def to_mcp(self) -> dict[str, Any]:
        """The MCP ``tools/list`` entry. The output schema is left out: a simulated
        server's answers carry no structured content to hold to it."""
        out = super().to_mcp()
        if self.title:
            out["title"] = self.title
        if self.annotations:
            out["annotations"] = self.annotations
        return out


def output_schema(tool: ToolSpec) -> dict[str, Any] | None:
    """The tool's declared output schema, or None."""
    schema = getattr(tool, "output_schema", None)
    return schema if isinstance(schema, dict) and schema else None


# -- reading a schema ----------------------------------------------------------------------


def _deref(schema: Any, root: dict[str, Any], depth: int = 0) -> Any:
    """``schema`` with a local ``$ref`` (``#/$defs/Name``) followed."""
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and depth < 16:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            return None
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        extra = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**target, **extra} if isinstance(target, dict) else None
        depth += 1
    return schema


def _properties(schema: Any, root: dict[str, Any]) -> dict[str, Any] | None:
    """The properties of an object schema, in their order; None for another schema."""
    schema = _deref(schema, root)
    if not isinstance(schema, dict):
        return None
    props = schema.get("properties")
    kind = schema.get("type", "object")
    if kind != "object" or not isinstance(props, dict) or not props:
        return None
    return props


def _array_items(schema: Any, root: dict[str, Any]) -> Any:
    """The items schema of an array schema, else None."""
    schema = _deref(schema, root)
    if isinstance(schema, dict) and schema.get("type") == "array":
        return schema.get("items")
    return None


def wrapped(tool: ToolSpec, schema: dict[str, Any]) -> bool:
    """Whether the schema is the SDK's wrapper of a return value that is not an object
    (``{"result": ...}``, titled ``<function>Output``)."""
    props = schema.get("properties")
    return (
        isinstance(props, dict)
        and list(props) == ["result"]
        and schema.get("title") == f"{tool.name}Output"
    )


TYPE_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def fits(value: Any, schema: Any, root: dict[str, Any]) -> bool:
    """Whether a record's value is of the type a property declares (where it says)."""
    schema = _deref(schema, root)
    if not isinstance(schema, dict):
        return schema is not False
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        return any(fits(value, o, root) for o in options)
    kind = schema.get("type")
    if kind is None and isinstance(schema.get("properties"), dict):
        kind = "object"
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    if kinds and not any(TYPE_CHECKS.get(k, lambda v: True)(value) for k in kinds):
        return False
    if "enum" in schema and value not in schema["enum"]:
        return False
    return "const" not in schema or value == schema["const"]


# -- the forms of answers ------------------------------------------------------------------


@dataclass
class RecordForm:
    """How a tool shows one record: its ``fields`` in order, values for fields the
    record may lack (``defaults``), and each field's schema (to check a value's type)."""

    fields: list[str]
    defaults: dict[str, Any] = field(default_factory=dict)
    schemas: dict[str, Any] = field(default_factory=dict)
    root: dict[str, Any] = field(default_factory=dict)

    def show(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """The record as the tool shows it; None when a field has no value simgym knows
        (or one of another type than declared)."""
        out = {}
        for name in self.fields:
            if name in record:
                value = record[name]
            elif name in self.defaults:
                value = self.defaults[name]
            else:
                return None
            schema = _deref(self.schemas.get(name, True), self.root)
            if not fits(value, schema, self.root):
                return None
            if isinstance(schema, dict) and schema.get("type") == "number" and type(value) is int:
                value = float(value)  # a float field: pydantic writes 100 as 100.0
            out[name] = value
        return out

    def unknown(self, record: dict[str, Any]) -> list[str]:
        """The fields the answer shows that neither the record nor a default fills."""
        return [f for f in self.fields if f not in record and f not in self.defaults]


def _form(props: dict[str, Any], root: dict[str, Any], fields: set[str]) -> RecordForm | None:
    """The record form of an object's properties, if they show records of a collection
    with these ``fields`` (every property a field or with a default; most of them fields)."""
    names = list(props)
    known = [n for n in names if n in fields]
    if not known or len(known) * 2 < len(names):
        return None  # not a record of this collection (a wrapper, another kind of object)
    defaults = {}
    for name in names:
        prop = _deref(props[name], root)
        if isinstance(prop, dict) and "default" in prop:
            defaults[name] = prop["default"]
    return RecordForm(names, defaults, dict(props), root)


def record_form(tool: ToolSpec, fields: set[str], key: str) -> RecordForm | None:
    """How a get/update/create tool shows its record, from its output schema: an object
    whose properties include the record's ``key`` and are mostly fields of the
    collection; None when it declares no such schema."""
    schema = output_schema(tool)
    if schema is None or wrapped(tool, schema):
        return None
    props = _properties(schema, schema)
    if props is None or key not in props:
        return None
    return _form(props, schema, fields)


@dataclass
class ListForm:
    """How a list tool shows its matches: ``shape`` (mcp_style's layout of the wrapper:
    ``{items}``, ``{count}``, ``{arg:NAME}``), each item's :class:`RecordForm`, whether
    the SDK wrapped a bare list (its text: one item per element), and whether the count
    may mean the items shown rather than every match (then a cut answer is not known)."""

    shape: Any
    item: RecordForm
    wrapped: bool = False
    ambiguous_count: bool = False
    # properties simgym cannot fill: the form is known, the answer is not
    unknown: list[str] = field(default_factory=list)


def list_form(tool: ToolSpec, fields: set[str], key: str) -> ListForm | None:
    """How a list tool shows the records it lists, from its output schema (see the module
    docstring); None when it declares none, or one that does not list this collection."""
    schema = output_schema(tool)
    if schema is None:
        return None
    inputs = tool.parameters.get("properties")
    inputs = inputs if isinstance(inputs, dict) else {}
    props = _properties(schema, schema)
    if props is None:
        return None
    if wrapped(tool, schema):
        items = _properties(_array_items(props["result"], schema), schema)
        form = _form(items, schema, fields) if items is not None else None
        if form is None or key not in form.fields:
            return None
        return ListForm(ITEMS, form, wrapped=True)
    lists = [n for n, p in props.items() if _array_items(p, schema) is not None]
    if len(lists) != 1:
        return None
    items = _properties(_array_items(props[lists[0]], schema), schema)
    form = _form(items, schema, fields) if items is not None else None
    if form is None or key not in form.fields:
        return None
    shape: dict[str, Any] = {}
    ambiguous = False
    unknown = []
    for name, prop in props.items():
        prop = _deref(prop, schema)
        kind = prop.get("type") if isinstance(prop, dict) else None
        if name == lists[0]:
            shape[name] = ITEMS
        elif name in inputs:
            shape[name] = "{arg:" + name + "}"
        elif kind == "integer" and name.lower() in TOTAL_NAMES:
            shape[name] = COUNT
            ambiguous = ambiguous or name.lower() in AMBIGUOUS_COUNTS
        elif isinstance(prop, dict) and "const" in prop:
            shape[name] = prop["const"]
        else:
            unknown.append(name)
            shape[name] = None
    return ListForm(shape, form, ambiguous_count=ambiguous, unknown=unknown)


def input_defaults(tool: ToolSpec) -> dict[str, Any]:
    """The defaults of the tool's input schema, as the tool body receives them for an
    argument left out (an echoed argument shows its default)."""
    props = tool.parameters.get("properties")
    if not isinstance(props, dict):
        return {}
    return {
        name: prop["default"]
        for name, prop in props.items()
        if isinstance(prop, dict) and "default" in prop
    }


# -- how the SDK writes a result -----------------------------------------------------------


def sdk_text(value: Any) -> str:
    """A value as the SDK's text content writes it (``pydantic_core.to_json(value,
    indent=2)``: two spaces, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False, indent=SDK_INDENT)


def wrapped_parts(items: list[Any]) -> list[dict[str, Any]]:
    """The content of a wrapped list's result: one text item per element (none for an
    empty list), each element written the SDK's way."""
    return [
        {"type": "text", "text": item if isinstance(item, str) else sdk_text(item)}
        for item in items
    ]
