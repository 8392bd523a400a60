"""MCP: an agent calls declared tools of an MCP server; the world model returns results."""

from __future__ import annotations

import json
import re
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import json_repair
from pydantic import BaseModel, Field, field_validator, model_validator

from simgym.core.domain import Demonstration, Domain, ScenarioBase, dump_json, register_domain
from simgym.core.errors import ActionError
from simgym.core.jsonschemas import schema_problem
from simgym.core.safeload import loads_json
from simgym.core.types import Action, ToolSpec
from simgym.domains.mcp_ground import ToolBinding, check_tool_map, ground_mcp
from simgym.domains.mcp_output import MCPTool
from simgym.domains.mcp_style import observe_mcp

OUTPUT_FORMATS = {
    "json": "the raw JSON value the tool returns (an object or a list), or a JSON error "
    'object like {"error": {"code": 404, "message": "..."}}.',
    "text": "the plain text the tool returns.",
    "mcp": 'an MCP CallToolResult envelope: {"content": [{"type": "text", "text": "..."}], '
    '"isError": false}; failures set "isError": true.',
}


class HttpRoute(BaseModel):
    """The HTTP operation a tool stands for (a business world's twin): the real-http
    backend sends each call of the tool there."""

    method: str
    route: str = Field(description="the route template, path parameters in braces")
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="argument -> request header it travels in (actor -> X-Actor)",
    )


class MCPScenario(ScenarioBase):
    """An MCP server: its name, declared tools and the records behind them."""

    server_name: str = "records"
    description: str = ""
    tools: list[MCPTool] = Field(
        description="the server's tools: name, description, parameters (the input schema; "
        "inputSchema as MCP writes it) and, where the server declares one, output_schema "
        "(outputSchema: the schema of its structured result, which grounding writes exact "
        "answers from, simgym.domains.mcp_output)"
    )
    state: dict[str, Any] = Field(default_factory=dict, description="the server's data")
    output_format: Literal["json", "text", "mcp"] = "json"
    clock: datetime | None = Field(
        None,
        description="the server's clock, held at this moment (UTC) for the episode: the "
        "times it writes (a ticket's creation) are this moment. The real backend starts the "
        "server it runs with its clock held there (libfaketime); None: the server's own "
        "clock, so the times it writes are the world model's to render",
    )
    tool_map: dict[str, ToolBinding] = Field(
        default_factory=dict,
        description="how tools touch the records in state, by tool name, for grounding "
        "(simgym.domains.mcp_ground): {op: get|list|create|update|delete|none, collection: "
        "state key of a list of records, key: the field that identifies a record (id), "
        "id_arg: the argument holding it, fields: {argument: record field}; a list tool's "
        "search: {field: contains|contains_ignoring_spaces} and answer: {shape, fields}}. "
        "Tools not listed are recognised from their names and schemas; op none turns "
        "grounding off for one tool",
    )
    routes: dict[str, HttpRoute] = Field(
        default_factory=dict,
        description="tool name -> the HTTP operation it stands for, for the real-http "
        "backend (a business world's twin); the world model never reads it",
    )

    @field_validator("tools", mode="before")
    @classmethod
    def _read_tools(cls, value: Any) -> Any:
        if isinstance(value, list):  # a plain ToolSpec (from simgym.make, say) as its data
            return [
                t.model_dump() if isinstance(t, ToolSpec) and not isinstance(t, MCPTool) else t
                for t in value
            ]
        return value

    @field_validator("tools")
    @classmethod
    def _unique(cls, tools: list[MCPTool]) -> list[MCPTool]:
        if not tools:
            raise ValueError("an MCP server needs at least one tool")
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique: {names}")
        for tool in tools:
            problem = schema_problem(tool.parameters)
            if problem is not None:
                raise ValueError(f"tool {tool.name!r} has an invalid schema: {problem}")
            out = tool.output_schema
            problem = schema_problem(out) if out is not None else None
            if problem is not None:
                raise ValueError(f"tool {tool.name!r} has an invalid output schema: {problem}")
        return tools

    @field_validator("clock")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    @model_validator(mode="after")
    def _bindings(self) -> MCPScenario:
        check_tool_map(self.tools, self.state, self.tool_map)
        stray = sorted(set(self.routes) - {t.name for t in self.tools})
        if stray:
            raise ValueError(f"routes name tools the server does not declare: {stray}")
        return self

    def tool(self, name: str) -> MCPTool | None:
        return next((t for t in self.tools if t.name == name), None)


def _validate(action: Action, scenario: MCPScenario) -> Action:
    if action.kind == "text":
        return action  # the agent's final answer
    if action.kind != "tool_call":
        raise ActionError('the MCP domain takes tool calls: {"name": ..., "arguments": {...}}')
    tool = scenario.tool(action.name or "")
    if tool is None:
        declared = ", ".join(t.name for t in scenario.tools)
        raise ActionError(
            f"unknown tool {action.name!r}: server {scenario.server_name!r} declares {declared}"
        )
    if not scenario.simulate_invalid_actions:
        tool.check_arguments(action.arguments)
    # else a real server answers arguments that break the schema with its validation
    # error: the call stays a call of a declared tool, which grounding answers that way
    # (simgym.domains.mcp_schema)
    return action


def _render(action: Action, scenario: MCPScenario) -> str:
    if action.kind == "text":
        return action.text or ""
    return json.dumps({"name": action.name, "arguments": action.arguments}, ensure_ascii=False)


def _check(text: str, action: Action, scenario: MCPScenario) -> list[str]:
    if scenario.output_format == "text":
        return []
    try:
        value = loads_json(text)  # a model's deep or huge output is a format problem too
    except json.JSONDecodeError as exc:
        return [f"result is not valid JSON ({exc.msg} at line {exc.lineno})"]
    if scenario.output_format == "mcp":
        if not isinstance(value, dict) or not isinstance(value.get("content"), list):
            return ['result is not an MCP envelope with a "content" list']
        # The format says whether the call failed: simgym's real backend, its exact
        # answers and its faults all write the flag, so an envelope without it is broken.
        if not isinstance(value.get("isError"), bool):
            return ['the MCP envelope has no "isError": true or false']
    return []


def _repair(text: str, action: Action, scenario: MCPScenario) -> str | None:
    """Broken JSON mended (a real tool server always answers with valid JSON): unclosed
    strings and brackets, stray commas, a mangled MCP envelope. The mcp format's inner text
    is mended too when it is JSON; prose inside it is left as written."""
    if scenario.output_format == "text":
        return None
    value = json_repair.repair_json(text, return_objects=True)
    if scenario.output_format == "json":
        return json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else None
    if not isinstance(value, dict) or not isinstance(value.get("content"), list):
        return None
    content = []
    for item in value["content"]:
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            content.append({**item, "type": item.get("type", "text"), "text": _mend(item["text"])})
    if not content:
        return None
    error = value.get("isError") is True  # an absent flag means success (the MCP spec)
    return json.dumps({"content": content, "isError": error}, ensure_ascii=False)


def _mend(text: str) -> str:
    """A JSON document inside an envelope's text, mended in the layout it was written in."""
    if not text.lstrip().startswith(("{", "[")):
        return text
    try:
        loads_json(text)
        return text
    except json.JSONDecodeError:
        value = json_repair.repair_json(text, return_objects=True)
    if not isinstance(value, dict | list):
        return text
    return json.dumps(value, ensure_ascii=False, indent=2 if "\n" in text else None)


def _prefix(action: Action, scenario: MCPScenario, last_observation: str) -> str:
    """How a JSON result must begin, so a small model starts on the right foot."""
    if scenario.output_format == "mcp":
        return '{"content": [{"type": "text", "text": "'
    return "{" if scenario.output_format == "json" else ""


def _parse_input(line: str, scenario: MCPScenario) -> Action:
    """``tool_name {"json": "args"}``, a full JSON call, or ``answer <text>``."""
    stripped = line.strip()
    if stripped.startswith("{"):
        return Action.parse(stripped)
    name, _, rest = stripped.partition(" ")
    if name == "answer":
        return Action.say(rest)
    rest = rest.strip()
    if not rest:
        return Action.tool_call(name, {})
    if rest.startswith("{"):
        try:
            return Action.tool_call(name, loads_json(rest))
        except json.JSONDecodeError as exc:
            raise ActionError(f"arguments are not valid JSON: {exc}") from None
    # key=value pairs, values read as JSON when they parse (numbers, true, null)
    args: dict[str, Any] = {}
    try:
        pairs = shlex.split(rest)
    except ValueError as exc:  # an unbalanced quote: a typing slip, not a crash
        raise ActionError(f"cannot read key=value arguments: {exc}") from None
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ActionError(f"expected key=value or a JSON object, got {pair!r}")
        try:
            args[key] = loads_json(value)
        except json.JSONDecodeError:
            args[key] = value
    return Action.tool_call(name, args)


def _slots(scenario: MCPScenario) -> dict[str, str]:
    notes = f"\n\nAlso true: {scenario.notes}" if scenario.notes else ""
    whole = dump_json(scenario.state)  # both prompts' state slots start from it
    return {
        "server_name": scenario.server_name,
        "server_description": scenario.description or "No description given.",
        "tools": tools_text(tools := [t.to_plain() for t in scenario.tools]),
        "state": state_text(scenario.state, whole=whole) + notes,
        # The compact prompt's budget: grounding names the records each call touches.
        "tool_lines": tool_signatures(tools, BRIEF_TOOL_CHARS),
        "state_brief": state_text(scenario.state, BRIEF_STATE_CHARS, whole=whole) + notes,
        "output_format": OUTPUT_FORMATS[scenario.output_format],
    }


STATE_CHARS = 6000  # a larger state is summarized in the prompt; grounding gives the rest
SAMPLE_RECORDS = 2
BRIEF_STATE_CHARS = 1500
# the compact prompt's tool lines keep their description's first sentence, at most this
# long: a twin's descriptions also list the rules it learned, which grounding enforces
# and which would fill a small model's context before the call's facts
BRIEF_TOOL_CHARS = 200


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def tools_text(tools: list[dict[str, Any]], limit: int = STATE_CHARS) -> str:
    """The tools as the prompt shows them: their JSON schemas when they are few, else one
    line each, ``name(argument, optional?): description`` (a twin of a business system
    declares dozens, and the context is the budget)."""
    whole = dump_json(tools)
    if len(whole) <= limit:
        return whole
    return tool_signatures(tools)


def tool_signatures(tools: list[dict[str, Any]], brief: int | None = None) -> str:
    """One ``- name(argument, optional?): description`` line per tool; with ``brief``,
    only the description's first sentence, cut at ``brief`` characters."""
    return "\n".join(_signature(t, brief) for t in tools)


def _first_sentence(text: str, limit: int) -> str:
    head = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0]
    return head if len(head) <= limit else head[: limit - 3].rstrip() + "..."


def _signature(tool: dict[str, Any], brief: int | None = None) -> str:
    params = tool.get("parameters") or {}
    props = params.get("properties") or {}
    needed = set(params.get("required") or [])
    args = ", ".join(name if name in needed else f"{name}?" for name in props)
    text = str(tool.get("description") or "")
    if text and brief is not None:
        text = _first_sentence(text, brief)
    note = f": {text}" if text else ""
    return f"- {tool['name']}({args}){note}"


def state_text(state: dict[str, Any], limit: int = STATE_CHARS, *, whole: str | None = None) -> str:
    """The initial state as the prompt shows it: whole when small; else each collection's
    size and first records (a business world holds thousands of records, and each
    call's grounded facts name the records it touches). ``whole``: the state's JSON when
    the caller already has it (a large world's costs milliseconds to write)."""
    if not state:
        return "Nothing recorded yet."
    whole = dump_json(state) if whole is None else whole
    if len(whole) <= limit:
        return whole
    parts = []
    used = 0
    for name, value in state.items():
        if isinstance(value, list):
            # sample records while they fit the limit (a brief prompt may show none)
            samples = []
            for record in value[:SAMPLE_RECORDS]:
                text = _compact(record)
                if used + len(text) > limit:
                    break
                samples.append(text)
                used += len(text)
            more = len(value) - len(samples)
            tail = f" ... and {more} more" if more > 0 and samples else ""
            shown = f": [{', '.join(samples)}{tail}]" if samples else ""
            parts.append(f"{name} ({len(value)} records){shown}")
        else:
            text = _compact(value)[: min(500, max(limit - used, 80))]
            used += len(text)
            parts.append(f"{name}: {text}")
    return "\n".join(parts)


def _initial(scenario: MCPScenario) -> str:
    tools = "\n".join(f"- {t.name}: {t.description}" for t in scenario.tools)
    return f"Connected to MCP server '{scenario.server_name}'. Tools:\n{tools}"


def _default() -> dict[str, Any]:
    return {
        "server_name": "customer-records",
        "description": "Customer records of a small bank's support desk.",
        "tools": [
            {
                "name": "search_customers",
                "description": "Find customers by name or email.",
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}},
                    "required": ["query"],
                },
            },
            {
                "name": "get_customer",
                "description": "Fetch one customer by id.",
                "parameters": {
                    "type": "object",
                    "properties": {"customer_id": {"type": "string"}},
                    "required": ["customer_id"],
                },
            },
            {
                "name": "update_email",
                "description": "Change a customer's email address.",
                "parameters": {
                    "type": "object",
                    "properties": {"customer_id": {"type": "string"}, "email": {"type": "string"}},
                    "required": ["customer_id", "email"],
                },
            },
        ],
        "state": {
            "customers": [
                {
                    "id": "C-1001",
                    "name": "Ana Lima",
                    "email": "ana.lima@example.com",
                    "tier": "gold",
                },
                {"id": "C-1002", "name": "Ben Okafor", "email": "ben@example.org", "tier": "basic"},
            ]
        },
    }


DEMONSTRATIONS = (
    Demonstration(
        action='{"name": "list_tickets", "arguments": {"status": "open"}}',
        observation='{"tickets": [{"id": "T-7", "title": "Printer jam", "status": "open"}], '
        '"total": 1}',
    ),
    Demonstration(
        action='{"name": "get_ticket", "arguments": {"ticket_id": "T-99"}}',
        observation='{"error": {"code": 404, "message": "ticket T-99 not found"}}',
        note="a missing record",
    ),
)

MCP = register_domain(
    Domain(
        name="mcp",
        family="tool",
        description="An MCP tool server: tool calls in, tool results out.",
        scenario_model=MCPScenario,
        prompt_file=Path(__file__).parent / "prompts" / "mcp.md",
        validate_action=_validate,
        render_action=_render,
        initial_observation=_initial,
        check_observation=_check,
        parse_input=_parse_input,
        prompt_slots=_slots,
        is_final=lambda action: action.kind == "text",
        observation_prefix=_prefix,
        repair=_repair,
        default_scenario=_default,
        demonstrations=DEMONSTRATIONS,
        action_hint='{"name": "get_customer", "arguments": {"customer_id": "C-1001"}}',
        agent_tools=lambda scenario: list(scenario.tools),
        initial_state=lambda s: dict(s.state),
        state_schema={"type": "object"},
        ground=ground_mcp,
        observe=observe_mcp,
    )
)
