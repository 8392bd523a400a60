"""simgym tools as Python methods whose signatures and docstrings TRL reads back as the
tools' schemas."""

from __future__ import annotations

import inspect
import json
import keyword
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Union

from simgym.core.errors import SimgymError
from simgym.core.types import ToolSpec

if TYPE_CHECKING:
    from simgym.integrations.trl.environment import SimgymEnvironment


_RESERVED = frozenset({"reset", "get_reward"})  # TRL treats these as lifecycle, not tools


_SECTION = re.compile(r"\b(Args|Returns|Raises):")  # docstring parser's section headers


_CHOICES = re.compile(r"\(choices:.*\)\s*$", re.IGNORECASE)  # parsed as an enum at line end


_SIMPLE_KEYS = frozenset({"type", "description", "title", "default", "enum", "const", "items"})


class _Unset:
    """Default of an optional tool argument the policy left out (it is not sent)."""

    def __repr__(self) -> str:
        return "<unset>"


UNSET: Any = _Unset()


def tool_functions(cls: type) -> dict[str, Callable[..., Any]]:
    """The functions of an environment class that TRL offers as tools: public functions
    other than ``reset`` and ``get_reward`` (TRL's own rule, so prompts match)."""
    return {
        name: fn
        for name, fn in inspect.getmembers(cls, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in _RESERVED
    }


def tool_method(tool: ToolSpec, *, qualname: str | None = None) -> Callable[..., str]:
    """A method ``(self, **arguments) -> str`` for ``tool`` that steps the instance's
    environment, with the signature, annotations and Google-style docstring that
    ``transformers.utils.get_json_schema`` turns back into the tool's schema.

    Argument names that are not Python identifiers are renamed (``file-path`` becomes
    ``file_path``) and mapped back before the call; optional arguments the policy leaves
    out are not sent. Detail that a Python annotation cannot carry (nested object fields,
    formats, bounds) is added to the argument's description as its JSON schema.
    """
    properties = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    wire: dict[str, str] = {}  # python name -> schema name
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    arg_docs: list[str] = []
    for prop, schema in properties.items():
        schema = schema if isinstance(schema, dict) else {}
        py_name = _identifier(prop, taken=set(wire) | {"self"})
        wire[py_name] = prop
        annotation = _annotation(schema)
        annotations[py_name] = annotation
        parameters.append(
            inspect.Parameter(
                py_name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if prop in required else UNSET,
                annotation=annotation,
            )
        )
        arg_docs.append(f"    {py_name}: {_arg_description(prop, schema)}")
    annotations["return"] = str
    order = list(wire)

    def call(self: SimgymEnvironment, *args: Any, **kwargs: Any) -> str:
        if len(args) > len(order):
            raise TypeError(f"{tool.name}() takes {len(order)} arguments, got {len(args)}")
        kwargs.update(zip(order, args, strict=False))
        # Names the schema does not know pass through as given: the domain's validation
        # then answers with the environment's own error, which the turn records.
        arguments = {wire.get(k, k): v for k, v in kwargs.items() if v is not UNSET}
        return self._call(tool.name, arguments)

    description = _clean(tool.description) or f"Call the {tool.name} tool."
    doc = [description, ""]
    if arg_docs:
        doc += ["Args:", *arg_docs, ""]
    doc += ["Returns:", "    What the environment shows after the call."]
    call.__name__ = tool.name
    call.__qualname__ = qualname or tool.name
    call.__doc__ = "\n".join(doc)
    call.__annotations__ = annotations
    call.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    call.wire_names = dict(wire)  # type: ignore[attr-defined]
    return call


def answer_method(name: str, class_name: str) -> Callable[..., str]:
    def answer(self: SimgymEnvironment, answer: str) -> str:
        return self._answer(answer)

    answer.__name__ = name
    answer.__qualname__ = f"{class_name}.{name}"
    answer.__doc__ = (
        "Submit your final answer to the task. This ends the episode: later calls are "
        "refused.\n\nArgs:\n    answer: your final answer, in the form the task asks for\n\n"
        "Returns:\n    A confirmation."
    )
    answer.__annotations__ = {"answer": str, "return": str}
    return answer


def check_tool_name(name: str, domain: str) -> None:
    if not name or name.startswith("_"):
        raise SimgymError(
            f"the {domain} tool {name!r} cannot be offered through TRL, which hides "
            "methods whose names start with an underscore"
        )
    if name in _RESERVED:
        raise SimgymError(
            f"the {domain} tool {name!r} clashes with TRL's environment method of that name"
        )


def _identifier(name: str, taken: set[str]) -> str:
    """A Python parameter name for a schema property."""
    base = re.sub(r"\W", "_", name) or "arg"
    if base[0].isdigit():
        base = f"_{base}"
    if keyword.iskeyword(base):
        base += "_"
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}_{n}"
    return candidate


_BASIC = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}


def _annotation(schema: dict[str, Any]) -> Any:
    """The Python type whose JSON schema (as transformers writes it) matches ``schema``."""
    if "const" in schema and _literal_ok([schema["const"]]):
        return Literal[schema["const"]]  # type: ignore[valid-type]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and _literal_ok(enum):
        return Literal[tuple(enum)]  # type: ignore[valid-type]
    variants = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(variants, list) and variants:
        return _union([_annotation(v) for v in variants if isinstance(v, dict)])
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([_annotation({**schema, "type": k}) for k in kind])
    if kind in _BASIC:
        return _BASIC[kind]
    if kind == "array":
        items = schema.get("items")
        return list[_annotation(items)] if isinstance(items, dict) else list[Any]
    if kind == "object":
        extra = schema.get("additionalProperties")
        return dict[str, _annotation(extra)] if isinstance(extra, dict) else dict[str, Any]
    return Any


def _union(types: list[Any]) -> Any:
    unique = list(dict.fromkeys(types))
    if not unique:
        return Any
    return unique[0] if len(unique) == 1 else Union[tuple(unique)]  # noqa: UP007


def _literal_ok(values: list[Any]) -> bool:
    return all(v is None or type(v) in (str, int, float, bool) for v in values)


def _is_simple(schema: dict[str, Any]) -> bool:
    """Whether the annotation carries everything the schema says (bar descriptions)."""
    if set(schema) - _SIMPLE_KEYS:
        return False
    items = schema.get("items")
    if items is not None and not (isinstance(items, dict) and _is_simple(items)):
        return False
    kind = schema.get("type")
    return not (kind == "object" or (isinstance(kind, list) and "object" in kind))


def _arg_description(prop: str, schema: dict[str, Any]) -> str:
    parts = [_clean(str(schema.get("description") or "")) or f"the {prop} argument"]
    if "default" in schema:
        parts.append(f"Defaults to {json.dumps(schema['default'], ensure_ascii=False)}.")
    if not _is_simple(schema):
        detail = {k: v for k, v in schema.items() if k not in ("description", "title")}
        parts.append(f"JSON schema: {json.dumps(detail, ensure_ascii=False, sort_keys=True)}")
    if len(parts) > 1 and parts[0][-1] not in ".!?":
        parts[0] += "."
    text = " ".join(parts)
    if _CHOICES.search(text):
        text += "."  # else the docstring parser would read it as an enum
    return text


def _clean(text: str) -> str:
    """One line, with nothing the docstring parser would take for a section header."""
    return _SECTION.sub(r"\1 -", " ".join(text.split()))
