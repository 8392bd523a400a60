"""Call-syntax actions: ``click('12')``, ``pyautogui.hotkey('ctrl', 's')``, read safely.

GUI agents write actions as function calls (BrowserGym, OSWorld's pyautogui code,
AndroidWorld-style agents). This module reads them with :mod:`ast`, never evaluates them:
every statement must be a call of a function in the domain's table, every argument a
literal (string, number, boolean, None, list). Arguments are bound to the table's
parameters the way Python would bind them, type-checked, and normalized to a
:class:`Call` holding ``{parameter: value}`` with defaults left out, so ``click('12')``,
``click(bid='12')`` and the tool call ``{"name": "click", "arguments": {"bid": "12"}}``
all become the same action. :func:`render_call` writes a call back in canonical syntax,
which is what the world model reads.
"""

from __future__ import annotations

import ast
import math
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from simgym.core.errors import ActionError
from simgym.core.types import Action, ToolSpec


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

ParamType = Literal["string", "integer", "number", "boolean", "array", "string|array"]
_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "True or False",
    "array": "a list of strings",
    "string|array": "a string or a list of strings",
}


@dataclass(frozen=True)
class Param:
    """One parameter. ``style`` says how it may be passed and is rendered: ``pos``
    (positionally while the ones before it are), ``kw`` (accepted either way, rendered as
    ``name=value``) or ``kwonly`` (after ``*args``). An ``id`` parameter takes element
    ids: numbers are accepted and read as strings."""

    name: str
    type: ParamType = "string"
    default: Any = REQUIRED
    choices: tuple[Any, ...] = ()
    style: Literal["pos", "kw", "kwonly"] = "pos"
    id: bool = False
    description: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class Signature:
    """A function the agent may call. ``varargs`` collects extra positional values into
    a list (``hotkey(*keys)``); ``module`` is the prefix it may be written with."""

    name: str
    params: tuple[Param, ...] = ()
    varargs: Param | None = None
    module: str | None = None
    description: str = ""

    def all_params(self) -> list[Param]:
        positional = [p for p in self.params if p.style != "kwonly"]
        rest = [p for p in self.params if p.style == "kwonly"]
        return positional + ([self.varargs] if self.varargs else []) + rest


@dataclass(frozen=True)
class Call:
    """A parsed, checked call: the function's name and its non-default arguments."""

    name: str
    args: dict[str, Any]


Table = Mapping[str, Signature]


def make_table(*signatures: Signature) -> dict[str, Signature]:
    return {s.name: s for s in signatures}


# -- reading -----------------------------------------------------------------------------


def strip_fences(text: str) -> str:
    """Drop a surrounding Markdown code fence, which agents often put around code."""
    stripped = text.strip()
    match = re.fullmatch(r"```[\w+-]*\n?(.*?)\n?```", stripped, re.DOTALL)
    return match.group(1) if match else stripped


def parse_calls(text: str, table: Table, *, max_calls: int = 1, hint: str = "") -> list[Call]:
    """Read call-syntax code into checked calls; raises :class:`ActionError`.

    ``import`` of the table's modules (``import pyautogui``) is allowed and ignored.
    """
    source = strip_fences(text)
    example = f"; write e.g. {hint}" if hint else ""
    if not source:
        raise ActionError(f"empty action{example}")
    try:
        module = ast.parse(source, mode="exec")
    except SyntaxError as exc:
        raise ActionError(f"not a valid call: {exc.msg} (line {exc.lineno}){example}") from None
    modules = {s.module for s in table.values() if s.module}
    calls: list[Call] = []
    for stmt in module.body:
        if isinstance(stmt, ast.Import) and all(
            a.name in modules and a.asname is None for a in stmt.names
        ):
            continue
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            raise ActionError(
                f"line {stmt.lineno}: only calls are allowed, not `{_snippet(stmt)}`{example}"
            )
        calls.append(_read_call(stmt.value, table))
    if not calls:
        raise ActionError(f"no action in {source[:60]!r}{example}")
    if len(calls) > max_calls:
        if max_calls == 1:
            raise ActionError(f"one action per step, got {len(calls)} calls")
        raise ActionError(f"at most {max_calls} calls per step, got {len(calls)}")
    return calls


def _snippet(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 40 else text[:37] + "..."


def _read_call(node: ast.Call, table: Table) -> Call:
    func = node.func
    if isinstance(func, ast.Name):
        prefix, name = None, func.id
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        prefix, name = func.value.id, func.attr
    else:
        raise ActionError(f"cannot call `{_snippet(func)}`: call one of {_names(table)}")
    sig = table.get(name)
    shown = f"{prefix}.{name}" if prefix else name
    if sig is None:
        raise ActionError(f"unknown action {shown!r}; allowed: {_names(table)}")
    if prefix is not None and prefix != sig.module:
        right = f"{sig.module}.{name}" if sig.module else name
        raise ActionError(f"{shown}() is not allowed; call {right}()")
    positional = []
    for arg in node.args:
        if isinstance(arg, ast.Starred):
            raise ActionError(f"{name}(): *arguments are not allowed")
        positional.append(_literal(arg, name))
    keywords: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise ActionError(f"{name}(): **arguments are not allowed")
        if kw.arg in keywords:
            raise ActionError(f"{name}(): argument {kw.arg!r} given twice")
        keywords[kw.arg] = _literal(kw.value, name)
    return bind(sig, positional, keywords)


def _literal(node: ast.expr, name: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ActionError(
            f"{name}(): arguments must be literals (strings, numbers, lists), "
            f"not `{_snippet(node)}`"
        ) from None


def _names(table: Table) -> str:
    return ", ".join(table)


# -- binding and checking ----------------------------------------------------------------


def bind(sig: Signature, positional: list[Any], keywords: Mapping[str, Any]) -> Call:
    """Bind arguments to ``sig`` as Python would, check their types, drop defaults."""
    slots = [p for p in sig.params if p.style != "kwonly"]
    values: dict[str, Any] = {}
    for param, value in zip(slots, positional, strict=False):
        values[param.name] = value
    extra = positional[len(slots) :]
    if extra:
        if sig.varargs is None:
            raise ActionError(
                f"{sig.name}() takes at most {len(slots)} positional argument(s), "
                f"got {len(positional)}"
            )
        values[sig.varargs.name] = list(extra)
    return bind_arguments(sig, {**values, **_no_clash(sig, values, keywords)})


def _no_clash(sig: Signature, values: dict[str, Any], keywords: Mapping[str, Any]) -> Mapping:
    for key in keywords:
        if key in values:
            raise ActionError(f"{sig.name}() got two values for argument {key!r}")
    return keywords


def bind_arguments(sig: Signature, arguments: Mapping[str, Any]) -> Call:
    """Check named arguments (a tool call's) against ``sig``; returns the normalized call."""
    params = {p.name: p for p in sig.all_params()}
    unknown = [k for k in arguments if k not in params]
    if unknown:
        takes = ", ".join(params) or "no arguments"
        raise ActionError(f"{sig.name}() has no argument {unknown[0]!r}; it takes {takes}")
    args: dict[str, Any] = {}
    for name, param in params.items():
        if name not in arguments:
            if param.required:
                raise ActionError(f"{sig.name}() is missing the argument {name!r}")
            continue
        value = _check_value(sig.name, param, arguments[name])
        if param is sig.varargs and param.required and not value:
            raise ActionError(f"{sig.name}() needs at least one {name[:-1] or name}")
        if not param.required and _same(value, param.default):
            continue  # defaults are left out, so equivalent calls normalize alike
        args[name] = value
    return Call(sig.name, args)


def _same(value: Any, default: Any) -> bool:
    def number(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    if number(value) and number(default):
        return value == default
    return type(value) is type(default) and value == default


def call_from_tool(name: str, arguments: Mapping[str, Any], table: Table) -> Call:
    """A tool call ``{"name", "arguments"}`` as a checked call. ``pyautogui.click`` and
    ``click`` both name the table's ``click``."""
    sig = table.get(name) or table.get(name.rpartition(".")[2])
    if sig is None:
        raise ActionError(f"unknown action {name!r}; allowed: {_names(table)}")
    if not isinstance(arguments, Mapping):
        raise ActionError(f"{name}(): arguments must be an object")
    return bind_arguments(sig, arguments)


def _check_value(fn: str, param: Param, value: Any) -> Any:
    if value is None and param.default is None:
        return None
    checked = _coerce(param, value)
    if checked is _BAD:
        raise ActionError(
            f"{fn}(): argument {param.name!r} must be {_TYPE_WORDS[param.type]}, "
            f"got {_describe(value)}"
        )
    if param.choices:
        items = checked if isinstance(checked, list) else [checked]
        for item in items:
            if item not in param.choices:
                allowed = ", ".join(repr(c) for c in param.choices)
                raise ActionError(f"{fn}(): {param.name}={item!r} is not one of {allowed}")
    return checked


_BAD = object()


def _coerce(param: Param, value: Any) -> Any:
    kind = param.type
    if isinstance(value, tuple):
        value = list(value)
    if kind == "string" or (kind == "string|array" and not isinstance(value, list)):
        if isinstance(value, str):
            return value
        if param.id and isinstance(value, int) and not isinstance(value, bool):
            return str(value)  # agents often write click(12) for click('12')
        return _BAD
    if kind in ("array", "string|array"):
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
        return _BAD
    if isinstance(value, bool):
        return value if kind == "boolean" else _BAD
    if kind == "integer":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value if isinstance(value, int) else _BAD
    if kind == "number":
        if isinstance(value, float) and not math.isfinite(value):
            return _BAD  # 1e999 reads as inf, which no screen or page has
        return value if isinstance(value, int | float) else _BAD
    return _BAD


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 30 else text[:27] + '...'}"


# -- writing -----------------------------------------------------------------------------


def render_call(call: Call, table: Table) -> str:
    """Canonical call syntax: positional while it reads naturally, then keywords."""
    sig = table[call.name]
    parts: list[str] = []
    positional = True
    for param in sig.params:
        if param.style == "kwonly":
            continue
        if param.name not in call.args:
            positional = False
            continue
        value = _render_value(call.args[param.name])
        if positional and param.style == "pos":
            parts.append(value)
        else:
            positional = False
            parts.append(f"{param.name}={value}")
    if sig.varargs is not None:
        parts.extend(_render_value(v) for v in call.args.get(sig.varargs.name, []))
    for param in sig.params:
        if param.style == "kwonly" and param.name in call.args:
            parts.append(f"{param.name}={_render_value(call.args[param.name])}")
    prefix = f"{sig.module}." if sig.module else ""
    return f"{prefix}{sig.name}({', '.join(parts)})"


def _render_value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_render_value(v) for v in value) + "]"
    return repr(value)


def to_action(call: Call, finals: Mapping[str, str] | None = None) -> Action:
    """The :class:`Action` for a call. A final call (``finals`` maps its name to the
    parameter holding the message) becomes a ``text`` action, so it ends the episode
    without being simulated; its name and arguments stay on the action."""
    if finals and call.name in finals:
        text = call.args.get(finals[call.name], "")
        return Action(kind="text", text=str(text), name=call.name, arguments=call.args)
    return Action.tool_call(call.name, call.args)


def tool_specs(table: Table) -> list[ToolSpec]:
    """The table as tool definitions, for agents that call tools instead of writing code."""
    specs = []
    for sig in table.values():
        properties = {p.name: _schema(p) for p in sig.all_params()}
        required = [p.name for p in sig.all_params() if p.required]
        specs.append(
            ToolSpec(
                name=sig.name,
                description=sig.description,
                parameters={"type": "object", "properties": properties, "required": required},
            )
        )
    return specs


def _schema(param: Param) -> dict[str, Any]:
    string_list = {"type": "array", "items": {"type": "string"}}
    schemas: dict[str, dict[str, Any]] = {
        "array": string_list,
        "string|array": {"anyOf": [{"type": "string"}, string_list]},
    }
    schema = dict(schemas.get(param.type, {"type": param.type}))
    if param.choices:
        target = schema if param.type != "array" else schema["items"]
        target["enum"] = list(param.choices)
    if param.description:
        schema["description"] = param.description
    if not param.required and param.default is not None:
        schema["default"] = param.default
    return schema


# -- short forms for people --------------------------------------------------------------

_CALL_START = re.compile(r"\s*(?:```|import\s|[A-Za-z_][\w.]*\s*\()")


def looks_like_call(line: str) -> bool:
    """Whether typed input is code (``click('3')``) rather than a short form
    (``fill 3 call me (after 5)``)."""
    return _CALL_START.match(line) is not None


def parse_short(line: str, table: Table) -> Call:
    """What a person types in ``simgym play``: ``click 12``, ``fill 31 hello world``,
    ``hotkey ctrl s``, ``scroll 0 300``, ``noop wait_ms=500``. Words fill the parameters in
    order (``key=value`` names one); surplus words join the last text parameter."""
    head, _, rest = line.strip().partition(" ")
    sig = table.get(head) or table.get(head.rpartition(".")[2])
    if sig is None:
        raise ActionError(f"unknown action {head!r}; allowed: {_names(table)}")
    try:
        words = shlex.split(rest)
    except ValueError:  # an apostrophe in free text: "it's done"
        words = rest.split()
    params = {p.name: p for p in sig.all_params()}
    slots = [p for p in sig.params if p.style == "pos"]  # options need key=value here
    positional: list[Any] = []
    keywords: dict[str, Any] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if sep and key in params:
            keywords[key] = _from_word(params[key], value)
        else:
            positional.append(word)
    if len(positional) > len(slots) and sig.varargs is None and slots:
        last = slots[-1]
        if last.type == "string":  # free text with spaces, typed without quotes
            positional[len(slots) - 1 :] = [" ".join(positional[len(slots) - 1 :])]
    converted = [
        _from_word(slots[i], word) if i < len(slots) else word  # *args words stay text
        for i, word in enumerate(positional)
    ]
    return bind(sig, converted, keywords)


def _from_word(param: Param, word: str) -> Any:
    if word == "None" and param.default is None:
        return None
    if param.type == "integer":
        try:
            return int(word)
        except ValueError:
            return word  # the type check reports it
    if param.type == "number":
        try:
            return float(word) if any(c in word for c in ".eE") else int(word)
        except ValueError:
            return word
    if param.type == "boolean":
        return {"true": True, "false": False}.get(word.lower(), word)
    if param.type == "array":
        return [w for w in word.split(",") if w]
    return word
