"""The typed vocabulary shared by every part of simgym.

A :class:`Task` says what the agent should do in which world (the *scenario*). The agent
sends :class:`Action` objects; the environment answers with an :class:`Observation` inside
a :class:`StepResult`. Each exchange is kept as a :class:`Turn`, and a whole episode as a
:class:`Trajectory` (one line of JSONL on disk).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from simgym.core.errors import ActionError, TaskError
from simgym.core.safeload import loads_json

TRAJECTORY_SCHEMA_VERSION = 1


def new_id(prefix: str = "") -> str:
    """A short random identifier (12 hex digits), optionally prefixed."""
    return f"{prefix}{uuid.uuid4().hex[:12]}"


class Task(BaseModel):
    """What the agent is asked to do, and in which world.

    ``scenario`` is the domain's description of the initial world (hidden from the
    agent); it is validated against the domain's scenario schema when the episode starts.
    """

    id: str = Field(default_factory=lambda: new_id("task-"))
    instruction: str = ""
    domain: str | None = None
    scenario: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def coerce(
        cls,
        value: Task | str | Mapping[str, Any] | None,
        domain: str | None = None,
        *,
        text: Literal["instruction", "json"] = "instruction",
        bind: bool = False,
        invalid: str = "invalid task",
    ) -> Task:
        """A task from what callers hand in: a Task, its dict, a string (an instruction,
        or with ``text="json"`` the task as JSON, as dataset rows carry it), or None (an
        empty task). ``domain`` fills in a task that names none; with ``bind`` a task for
        another domain is an error. Raises :class:`TaskError`, its message led by
        ``invalid`` when the value is not a task at all."""
        try:
            if value is None:
                task = cls()
            elif isinstance(value, cls):
                task = value
            elif isinstance(value, str):
                task = cls.model_validate_json(value) if text == "json" else cls(instruction=value)
            elif isinstance(value, Mapping):
                task = cls.model_validate(dict(value))
            else:
                kind = type(value).__name__
                raise TaskError(f"{invalid}: a task is a Task, a dict or a string, not {kind}")
        except ValidationError as exc:
            raise TaskError(f"{invalid}: {exc}") from None
        if domain is None or (task.domain is not None and not bind):
            return task
        if task.domain not in (None, domain):
            raise TaskError(
                f"task {task.id!r} is for domain {task.domain!r}, not {domain!r}: play it in "
                f"the {task.domain} domain, or leave its domain out"
            )
        return task.model_copy(update={"domain": domain})


class ToolSpec(BaseModel):
    """A tool the agent may call: name, description and JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_openai(self) -> dict[str, Any]:
        """The Chat Completions ``tools=[...]`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def to_mcp(self) -> dict[str, Any]:
        """The MCP ``tools/list`` entry (``inputSchema`` in camelCase)."""
        return {"name": self.name, "description": self.description, "inputSchema": self.parameters}

    def to_plain(self) -> dict[str, Any]:
        """A flat ``{name, description, parameters}`` dict, as world-model prompts show it."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def check_arguments(self, arguments: dict[str, Any]) -> None:
        """Raise :class:`ActionError` naming each argument that breaks the schema."""
        from simgym.core.jsonschemas import validator

        errors = sorted(
            validator(self.parameters).iter_errors(arguments),
            key=lambda e: list(e.path),
        )
        if errors:
            detail = "; ".join(
                f"{'/'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in errors[:5]
            )
            raise ActionError(f"invalid arguments for tool {self.name!r}: {detail}")

    @classmethod
    def from_any(cls, spec: dict[str, Any] | ToolSpec) -> ToolSpec:
        """Read a tool from its OpenAI, MCP or plain form."""
        if isinstance(spec, ToolSpec):
            return spec
        if spec.get("type") == "function" and "function" in spec:
            spec = spec["function"]
        params = spec.get("parameters") or spec.get("inputSchema") or spec.get("input_schema")
        return cls(
            name=spec["name"],
            description=spec.get("description", ""),
            parameters=params or {"type": "object", "properties": {}},
        )


class KeyPress(BaseModel):
    """Keystrokes sent to a terminal, then a wait of ``duration`` seconds."""

    model_config = ConfigDict(frozen=True)

    keystrokes: str
    duration: float = 1.0


ActionKind = Literal["tool_call", "keystrokes", "text"]


class Action(BaseModel):
    """One agent action: a tool call, terminal keystrokes, or free text.

    Build one with :meth:`tool_call`, :meth:`keys` or :meth:`say`, or let
    :meth:`parse` read the forms agents and files use.
    """

    kind: ActionKind
    name: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    keystrokes: list[KeyPress] = Field(default_factory=list)
    text: str | None = None

    @classmethod
    def tool_call(cls, name: str, arguments: dict[str, Any] | None = None) -> Action:
        return cls(kind="tool_call", name=name, arguments=arguments or {})

    @classmethod
    def keys(cls, *keystrokes: str | KeyPress, duration: float = 1.0) -> Action:
        presses = [
            k if isinstance(k, KeyPress) else KeyPress(keystrokes=k, duration=duration)
            for k in keystrokes
        ]
        return cls(kind="keystrokes", keystrokes=presses)

    @classmethod
    def say(cls, text: str) -> Action:
        return cls(kind="text", text=text)

    @classmethod
    def parse(cls, raw: Any) -> Action:
        """Read an action from an Action, a dict, a list of keystrokes, or a string.

        Accepted dicts: ``{"kind": ...}`` (this model), ``{"name", "arguments"}`` (a tool
        call; ``arguments`` may be a JSON string, as OpenAI sends it),
        ``{"function": {...}}`` (an OpenAI tool call), ``{"keystrokes", "duration"}``.
        A string that holds JSON is parsed as JSON; any other string is free text.
        """
        if isinstance(raw, Action):
            return raw
        if isinstance(raw, str):
            stripped = raw.strip()
            if stripped[:1] in ("{", "["):
                try:
                    return cls.parse(loads_json(stripped))
                except json.JSONDecodeError as exc:
                    raise ActionError(f"action looks like JSON but does not parse: {exc}") from None
            return cls.say(raw)
        if isinstance(raw, list):
            if not raw:
                raise ActionError("an empty list is not an action")
            try:
                return cls(kind="keystrokes", keystrokes=[KeyPress.model_validate(k) for k in raw])
            except Exception as exc:
                raise ActionError(f"a list action must hold keystroke objects: {exc}") from None
        if isinstance(raw, dict):
            return cls._parse_dict(raw)
        raise ActionError(f"cannot read an action from {type(raw).__name__}")

    @classmethod
    def _parse_dict(cls, raw: dict[str, Any]) -> Action:
        if "kind" in raw:
            try:
                return cls.model_validate(raw)
            except Exception as exc:
                raise ActionError(f"invalid action: {exc}") from None
        if isinstance(raw.get("action_type"), str):
            # AndroidWorld ({"action_type": "click", "index": 5}) and OSWorld computer_13
            # ({"action_type": "CLICK", "parameters": {...}}) JSON actions
            params = raw.get("parameters")
            if not isinstance(params, dict):
                params = {k: v for k, v in raw.items() if k != "action_type"}
            return cls.tool_call(raw["action_type"], params)
        if "function" in raw and isinstance(raw["function"], dict):
            raw = raw["function"]
        if "name" in raw:
            args = raw.get("arguments", raw.get("args", {}))
            if isinstance(args, str):
                try:
                    args = loads_json(args) if args.strip() else {}
                except json.JSONDecodeError as exc:
                    raise ActionError(
                        f"arguments of tool call {raw['name']!r} are not valid JSON: {exc}"
                    ) from None
            if not isinstance(args, dict):
                raise ActionError(f"arguments of tool call {raw['name']!r} must be an object")
            if not isinstance(raw["name"], str) or not raw["name"]:
                raise ActionError("a tool call needs a non-empty string name")
            return cls.tool_call(raw["name"], args)
        if "keystrokes" in raw:
            return cls.parse([raw])
        if "text" in raw:
            return cls.say(str(raw["text"]))
        raise ActionError(f"cannot tell what kind of action this is: keys {sorted(raw)}")

    def size(self) -> int:
        """Characters the action carries, for size limits."""
        if self.kind == "tool_call":
            return len(self.name or "") + len(json.dumps(self.arguments, ensure_ascii=False))
        if self.kind == "keystrokes":
            return sum(len(k.keystrokes) for k in self.keystrokes)
        return len(self.text or "")


class Usage(BaseModel):
    """Tokens a world-model call used."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


ObservationKind = Literal["initial", "observation", "error"]


class Observation(BaseModel):
    """What the agent sees. ``kind='error'`` marks an observation made by simgym itself
    (an invalid action, a failed world model) rather than predicted by the world model."""

    text: str
    kind: ObservationKind = "observation"
    error: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class StepResult(BaseModel):
    """The answer to one ``step``, with the gym-style fields."""

    observation: Observation
    reward: float = 0.0
    done: bool = False
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict)


class Turn(BaseModel):
    """One action and what came of it, as recorded in a trajectory."""

    index: int
    action: Action | None = None
    action_text: str = ""
    observation: Observation
    reasoning: str | None = None
    raw: str | None = None
    reward: float = 0.0
    latency_s: float = 0.0
    usage: Usage = Field(default_factory=Usage)
    attempts: int = 0
    error: str | None = None
    # action: rejected before the world model; world_model: the model failed (the episode
    # ends); empty_output: the model answered nothing usable (the episode goes on)
    error_type: Literal["action", "world_model", "empty_output"] | None = None
    format_problems: list[str] = Field(default_factory=list)
    control: str | None = None
    # The hidden-state patch the world model wrote this turn, and why it was not applied
    # (a missing, malformed or schema-breaking patch); see simgym.core.state.
    state_patch: dict[str, Any] | list[dict[str, Any]] | None = None
    state_error: str | None = None
    in_history: bool = True  # False when the world model never saw this turn
    # The fault injected on this turn ({"fault", "mode", "rule", ...params}); the agent
    # never sees it.
    perturbation: dict[str, Any] | None = None
    # What grounding did on this turn ({"facts", "effects", "experience", "strict": {...}});
    # see simgym.core.grounding. Never shown to the agent.
    grounding: dict[str, Any] | None = None


class Trajectory(BaseModel):
    """One episode. Serialized as one JSONL line; see the README for the schema."""

    schema_version: int = TRAJECTORY_SCHEMA_VERSION
    episode_id: str = Field(default_factory=lambda: new_id("ep-"))
    task: Task
    domain: str
    scenario: dict[str, Any] = Field(default_factory=dict)
    world_model: dict[str, Any] = Field(default_factory=dict)
    seed: int | None = None
    system_prompt: str | None = None  # exactly what the world model was given
    initial_observation: Observation | None = None
    turns: list[Turn] = Field(default_factory=list)
    answer: str | None = None  # the agent's final answer, if it gave one
    agent: dict[str, Any] = Field(default_factory=dict)  # the policy: name and settings
    group_id: str | None = None  # episodes of one GRPO group share it (and their seed)
    sample: int | None = None  # this episode's index within its group
    total_reward: float = 0.0
    reward_parts: dict[str, float] = Field(default_factory=dict)  # each reward's own score
    # The agent's own conversation (chat messages, tool calls), for policy training.
    agent_messages: list[dict[str, Any]] = Field(default_factory=list)
    final_state: dict[str, Any] | None = None  # hidden world state at the end, if kept
    done: bool = False
    truncated: bool = False
    error: str | None = None
    started_at: float = Field(default_factory=time.time)
    finished_at: float | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)

    @property
    def key(self) -> str:
        """The episode's identity across reruns: the task id, plus ``#sample`` in a group."""
        return self.task.id if self.sample is None else f"{self.task.id}#{self.sample}"

    @property
    def final_observation(self) -> str:
        """The last observation the world produced (final answers and simgym's own
        rejections of invalid actions excluded)."""
        for turn in reversed(self.turns):
            rejected = turn.observation.kind == "error" and not turn.in_history
            if not turn.observation.metadata.get("final_answer") and not rejected:
                return turn.observation.text
        return self.initial_observation.text if self.initial_observation else ""
