"""A logged call as a call of the twin's tool: the bridge between a log and its twin.

The twin (:mod:`simgym.logs.twin`) serves each operation of a business world as a tool
whose arguments are the route's parameters, the request body's fields and, when the
logs had roles, ``actor`` and ``role``. :class:`CallMapper` turns a logged record (a line
of a world's ``sessions.jsonl``, or a masked :class:`~simgym.logs.model.LogRecord` as
JSON) into that tool call, so a logged session can be replayed through the twin (``logs
eval``) or followed by a scripted agent, and says why when a record cannot be one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from simgym.logs.twin import CONTEXT_ARGS, tool_names

_PARAM = re.compile(r"\{[^}]*\}")
_NAME = re.compile(r"^\{([^}]*)\}$")


def operation_id(method: str | None, route: str) -> str:
    """One key for one operation however its route parameters were named."""
    key = f"{method.upper()} {route}" if method else route
    return _PARAM.sub("{}", key) if method else key


def route_params(route: str, path: str | None) -> dict[str, str] | None:
    """The values of a route template's parameters in a concrete path
    (``/loans/{loan_id}/approve``, ``/loans/loan-7/approve`` -> ``{"loan_id": "loan-7"}``);
    None when the path does not fit the template."""
    if path is None:
        return None
    want = [p for p in route.split("?", 1)[0].strip("/").split("/") if p]
    got = [p for p in path.split("?", 1)[0].strip("/").split("/") if p]
    if len(want) != len(got):
        return None
    values: dict[str, str] = {}
    for part, value in zip(want, got, strict=True):
        match = _NAME.match(part)
        if match:
            values[match.group(1) or f"p{len(values)}"] = value
        elif part != value:
            return None
    return values


@dataclass(frozen=True)
class ToolCall:
    """A logged record as the twin's tool call."""

    tool: str
    arguments: dict[str, Any]
    operation: str  # the world's operation name ("POST /loans/{loan_id}/approve")


class CallMapper:
    """Maps logged records to the tool calls of one world's twin."""

    def __init__(self, operations: list[dict[str, Any]], *, roles: bool) -> None:
        self.roles = roles
        self.tools = tool_names(operations)
        self.by_id: dict[str, dict[str, Any]] = {}
        for op in operations:
            route = str(op.get("route") or op.get("name") or "")
            self.by_id[operation_id(op.get("method"), route)] = op

    def operation(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """The world's operation a record is a call of, if the world has it."""
        key = operation_id(record.get("method"), str(record.get("operation") or ""))
        return self.by_id.get(key)

    def call(self, record: dict[str, Any]) -> ToolCall | str:
        """The record as a tool call, or why it is not one (a reason, as text)."""
        op = self.operation(record)
        if op is None:
            return "operation not in the world"
        name = str(op.get("name"))
        tool = self.tools.get(name)
        if tool is None:
            return "operation not served (only 404/405 seen)"
        arguments: dict[str, Any] = {}
        if op.get("method"):
            params = route_params(str(op.get("route") or ""), record.get("path"))
            if params is None:
                params = self._params_from_objects(op, record)
            if params is None:
                return "no concrete path for the route's parameters"
            arguments.update(params)
        body = record.get("arguments")
        if isinstance(body, dict):
            arguments.update({k: v for k, v in body.items() if k not in arguments})
        elif body not in (None, "", {}):
            return "request body is not a JSON object"
        if self.roles:
            for key in CONTEXT_ARGS:
                value = record.get(key)
                if value:
                    arguments[key] = value
        return ToolCall(tool, arguments, name)

    @staticmethod
    def _params_from_objects(op: dict[str, Any], record: dict[str, Any]) -> dict[str, str] | None:
        """Route parameters from the record's objects, in order, when it kept no path."""
        names = [m.group(1) for m in map(_NAME.match, str(op.get("route")).split("/")) if m]
        if not names:
            return {}
        ids = [
            str(o["id"])
            for o in record.get("objects") or []
            if isinstance(o, dict) and o.get("qualifier") != "created" and "id" in o
        ]
        if len(ids) < len(names):
            return None
        return dict(zip(names, ids, strict=False))
