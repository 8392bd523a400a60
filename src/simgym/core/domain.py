"""What a domain is: data plus a few small functions, and the registry of domains.

A domain module (in ``simgym/domains/``) builds one :class:`Domain`, named in the
registry below as a ``"module:attr"`` string. Another package adds a domain through the
``simgym.domains`` entry-point group (``mydomain = "my_package:DOMAIN"``) and checks it with
:func:`simgym.check_domain`; code elsewhere asks a domain's :attr:`Domain.family`, never
its name, so a new domain needs no line changed outside its own package.
"""

from __future__ import annotations

import functools
import json
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from simgym.core.errors import ActionError, PluginError, ScenarioError, UnknownDomainError
from simgym.core.grounding import Grounding
from simgym.core.registry import Registry
from simgym.core.types import Action, ToolSpec

# "full": the domain's prompt with its rules and worked examples, for a served model that
# reads instructions. "compact": a few lines with the same slots, for a small model trained
# on it (every prompt token costs ~10 ms on two CPU cores before the first answer token).
PROMPT_STYLES = ("full", "compact")
# What a domain's observations are like, for the parts of simgym that treat alike the
# domains of one kind (the viewer, the bench judge's rubric, fault templates): "shell"
# (a terminal or a repository's tool output), "tool" (a tool server's results), "search"
# (ranked results and pages), "gui" (accessibility trees of screens). "" is none of them:
# such a domain gets the generic treatment everywhere.
FAMILIES = ("shell", "tool", "search", "gui")


@functools.lru_cache(maxsize=128)
def _packaged_text(path: Path) -> str:
    """A file that ships with simgym (a domain's prompt), read once per process: every
    environment fills its domain's template, a thousand of them in a large rollout."""
    return path.read_text(encoding="utf-8")


class ScenarioBase(BaseModel):
    """Fields every domain's scenario has."""

    notes: str = Field("", description="anything else true of this world (hidden state)")
    simulate_invalid_actions: bool = Field(
        False,
        description="send actions that fail validation to the world model as typed, so it "
        "simulates the environment's own error, instead of rejecting them",
    )


@dataclass(frozen=True)
class Demonstration:
    """One worked turn shown to the world model: an action and the right observation."""

    action: str
    observation: str
    note: str = ""


@dataclass(frozen=True)
class Domain:
    """Everything simgym needs to simulate one kind of environment.

    ``validate_action(action, scenario)`` returns the action, possibly normalized, or
    raises :class:`ActionError`; ``render_action`` turns it into the text the world model
    reads; ``check_observation(text, action, scenario)`` lists format problems (empty when
    fine); ``parse_input(line, scenario)`` reads what a person types in ``simgym play``;
    ``is_final(action)`` says whether the action ends the episode;
    ``observation_prefix(action, scenario, last_observation)`` is text the next
    observation must start with, which backends that can pre-fill use; ``prompt_slots``
    fills the prompt template from the scenario; ``agent_tools(scenario)`` lists the tools a
    tool-calling agent is offered (what a real agent of this kind would be given, nothing
    of the hidden state); ``initial_state(scenario)`` seeds the episode's hidden state
    ledger (:mod:`simgym.core.state`) and ``state_schema`` (JSON Schema) checks every
    update to it; ``ground(action, state, scenario)`` returns the facts the action reads
    and the effects that are certain (:mod:`simgym.core.grounding`), or None;
    ``observe(observation, action, state)`` returns a merge patch that records what an
    observation shows (a GUI's new screen), applied after the turn when grounding is on;
    ``repair(observation, action, scenario)`` returns a well-formed version of an
    observation that breaks a format the real environment always keeps (a tool server's
    JSON), or None; strict grounding uses it. A final
    action of kind ``text`` is the agent's answer and is not simulated; other final
    actions (``exit``) are simulated and then end the episode. ``family`` is one of
    :data:`FAMILIES` or ``""`` (none: generic treatment).
    """

    name: str
    description: str
    scenario_model: type[BaseModel]
    prompt_file: Path
    validate_action: Callable[[Action, Any], Action]
    render_action: Callable[[Action, Any], str]
    initial_observation: Callable[[Any], str]
    check_observation: Callable[[str, Action, Any], list[str]]
    parse_input: Callable[[str, Any], Action]
    prompt_slots: Callable[[Any], dict[str, str]]
    is_final: Callable[[Action], bool] = lambda action: False
    observation_prefix: Callable[[Action, Any, str], str] = lambda action, scenario, last: ""
    default_scenario: Callable[[], dict[str, Any]] = dict
    agent_tools: Callable[[Any], list[ToolSpec]] = lambda scenario: []
    initial_state: Callable[[Any], dict[str, Any]] = lambda scenario: {}
    ground: Callable[[Action, dict[str, Any], Any], Grounding | None] = (
        lambda action, state, scenario: None
    )
    observe: Callable[[str, Action, dict[str, Any]], dict[str, Any] | None] = (
        lambda observation, action, state: None
    )
    repair: Callable[[str, Action, Any], str | None] = lambda observation, action, scenario: None
    state_schema: dict[str, Any] | None = None
    demonstrations: tuple[Demonstration, ...] = ()
    action_hint: str = ""
    example_tasks: tuple[str, ...] = field(default=())
    family: str = ""

    def scenario(
        self, data: dict[str, Any] | BaseModel | None, *, strict: bool = False
    ) -> BaseModel:
        """Validate a scenario dict against this domain's schema. ``strict`` refuses keys
        the schema does not know, at any depth (a scenario from a user's file: a typo
        such as ``evn:`` must be an error, not a world without it)."""
        if isinstance(data, self.scenario_model):
            return data
        if isinstance(data, BaseModel):
            data = data.model_dump()
        try:
            return self.scenario_model.model_validate(
                data or self.default_scenario(), extra="forbid" if strict else None
            )
        except ValidationError as exc:
            raise ScenarioError(f"invalid {self.name} scenario:\n{exc}") from None

    def prompt_template(self, override: str | Path | None = None, *, style: str = "full") -> str:
        """The system prompt template: the user's file if given, else the domain's own in
        ``style`` (see :data:`PROMPT_STYLES`; a domain without a compact prompt uses its
        full one)."""
        if override is not None:
            path = Path(override)
            if not path.is_file():
                raise ScenarioError(f"system prompt file not found: {path}")
            return path.read_text(encoding="utf-8")
        if style not in PROMPT_STYLES:
            raise ScenarioError(f"unknown prompt style {style!r}; expected one of {PROMPT_STYLES}")
        compact = self.prompt_file.parent / "compact" / self.prompt_file.name
        if style == "compact" and compact.is_file():
            return _packaged_text(compact)
        return _packaged_text(self.prompt_file)

    def system_prompt(
        self,
        scenario: BaseModel,
        *,
        template: str | None = None,
        instructions: str | None = None,
        style: str = "full",
    ) -> str:
        """Fill the template's ``$slots`` from the scenario. Unknown slots stay as written,
        so a user's own prompt file needs only the slots it wants. ``style`` picks the
        domain's own template when ``template`` is not given."""
        slots = {
            "domain": self.name,
            "control": instructions or "None.",
            **self.prompt_slots(scenario),
        }
        # Demonstrations may use the same slots, so a small model that copies them copies
        # this world's details (its prompt, its server name) rather than another's.
        demos = string.Template(render_demonstrations(self.demonstrations)).safe_substitute(slots)
        slots["demonstrations"] = demos
        if template is None:
            template = self.prompt_template(style=style)
        return string.Template(template).safe_substitute(slots)

    def action_hint_for(self, scenario: BaseModel | None) -> str:
        """How an action looks in this scenario. A tool-call hint must name a tool the
        scenario declares: the mcp domain's static hint calls the default server's
        ``get_customer``, which an agent of another server would try and fail. When the
        hint's tool is not among the scenario's tools, the hint is a call of the first
        declared tool with its required arguments instead."""
        if scenario is None:
            return self.action_hint
        tools = self.agent_tools(scenario)
        named = _hinted_tool(self.action_hint)
        if not tools or named is None or any(t.name == named for t in tools):
            return self.action_hint
        return example_call(tools[0])

    def coerce_action(self, raw: Any, scenario: BaseModel, max_chars: int) -> Action:
        """Parse, size-check and validate an action; raises :class:`ActionError`."""
        action = Action.parse(raw)
        size = action.size()
        if size > max_chars:
            raise ActionError(f"action is too large: {size} characters (limit {max_chars})")
        return self.validate_action(action, scenario)


def _hinted_tool(hint: str) -> str | None:
    """The tool a hint that is one JSON tool call names (None for any other hint)."""
    try:
        value = json.loads(hint)
    except ValueError:
        return None
    name = value.get("name") if isinstance(value, dict) else None
    return name if isinstance(name, str) else None


# A stand-in value per JSON Schema type, for arguments whose schema gives no example.
_PLACEHOLDERS: dict[str, Any] = {
    "string": "...",
    "integer": 1,
    "number": 1,
    "boolean": True,
    "array": [],
    "object": {},
}


def example_call(tool: ToolSpec) -> str:
    """``{"name": ..., "arguments": {...}}`` for ``tool``, with its required arguments
    filled from the schema's examples, default, enum or const, else a placeholder."""
    properties = tool.parameters.get("properties") or {}
    arguments: dict[str, Any] = {}
    for key in tool.parameters.get("required") or []:
        schema = properties.get(key) if isinstance(properties.get(key), dict) else {}
        arguments[key] = _example_value(schema)
    return json.dumps({"name": tool.name, "arguments": arguments}, ensure_ascii=False)


def _example_value(schema: dict[str, Any]) -> Any:
    if isinstance(schema.get("examples"), list) and schema["examples"]:
        return schema["examples"][0]
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]: the first named type
        kind = next((k for k in kind if k != "null"), None)
    return _PLACEHOLDERS.get(kind, "...") if isinstance(kind, str) else "..."


def render_demonstrations(demos: tuple[Demonstration, ...]) -> str:
    blocks = []
    for i, demo in enumerate(demos, 1):
        note = f" ({demo.note})" if demo.note else ""
        blocks.append(
            f"Example {i}{note}\n**Action:**\n{demo.action}\n"
            f"<predicted_observation>\n{demo.observation}\n</predicted_observation>"
        )
    return "\n\n".join(blocks) if blocks else "None."


def dump_json(value: Any) -> str:
    """Stable, readable JSON for prompts (same input, same bytes: prefix caches stay warm)."""
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False)


def _check_plugin(name: str, value: object) -> None:
    """A ``simgym.domains`` entry point must name a :class:`Domain` of the same name."""
    if not isinstance(value, Domain):
        raise PluginError(
            f"plugin domain {name!r} is a {type(value).__name__}, not a simgym.Domain "
            "(its entry point must name the Domain object itself)"
        )
    if value.name != name:
        raise PluginError(
            f"plugin domain entry point {name!r} names a Domain called {value.name!r}; "
            "the two must agree"
        )


# The built-in domains, imported when first asked for (``"module:attr"``, see core.registry);
# installed plugins add theirs through the ``simgym.domains`` entry-point group.
_DOMAINS: Registry[Domain] = Registry(
    "domain",
    {
        "android": "simgym.domains.android:ANDROID",
        "mcp": "simgym.domains.mcp:MCP",
        "os": "simgym.domains.os:OS",
        "search": "simgym.domains.search:SEARCH",
        "swe": "simgym.domains.swe:SWE",
        "terminal": "simgym.domains.terminal:TERMINAL",
        "web": "simgym.domains.web:WEB",
    },
    error=UnknownDomainError,
    group="simgym.domains",
    check=_check_plugin,
)


def register_domain(domain: Domain) -> Domain:
    """Make ``get_domain(domain.name)`` (and ``simgym.make(name)``) find ``domain``."""
    _DOMAINS.register(domain.name, domain)
    return domain


def get_domain(name: str) -> Domain:
    """The domain registered as ``name`` (built-in, registered, or an installed plugin's).

    Args:
        name: the domain's name, e.g. ``"terminal"``.

    Returns:
        The :class:`Domain`.

    Raises:
        UnknownDomainError: no domain has that name.
        PluginError: the plugin that declares it failed to load.
    """
    return _DOMAINS.get(name)


def domain_names() -> list[str]:
    """Every domain name: the built-ins, run-time registrations and installed plugins."""
    return _DOMAINS.names()


def family_of(name: str) -> str:
    """The family of the domain ``name`` (see :data:`FAMILIES`), ``""`` when it has none
    or is not installed here (a trajectory recorded with a plugin this machine lacks).

    Args:
        name: a domain name.

    Returns:
        ``"shell"``, ``"tool"``, ``"search"``, ``"gui"`` or ``""``.
    """
    try:
        return get_domain(name).family
    except (UnknownDomainError, PluginError):
        return ""
