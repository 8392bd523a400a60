"""What an agent (a policy) is, and what it is allowed to see.

An agent is started once per episode with an :class:`EpisodeView`: the instruction, the
tools a real agent of this kind would be offered, and a hint on the action format. It
never receives the scenario, the hidden state, control instructions or reference answers;
the rollout builds the view, so an agent cannot reach them by accident. Each call to
:meth:`AgentSession.act` gets the newest observation text and returns a :class:`Decision`:
an action to take, or a final answer that ends the episode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from simgym.core.errors import PluginError, SimgymError
from simgym.core.registry import Registry
from simgym.core.types import Action, ToolSpec, Usage


class AgentError(SimgymError):
    """The policy could not act (its server is down, it timed out). Ends the episode."""


@dataclass(frozen=True)
class EpisodeView:
    """Everything an agent may know about an episode before its first observation."""

    domain: str
    instruction: str
    tools: list[ToolSpec]
    action_hint: str = ""
    task_id: str = ""
    # which of a task's k samples this episode is (None outside a group), so a policy can
    # draw each sample differently and the same way on every backend
    sample: int | None = None
    # Reads a line a person typed into an action (``simgym play`` short forms); bound to
    # the scenario by the rollout so that the agent never holds the scenario itself.
    parse_input: Callable[[str], Action] | None = None


@dataclass
class Decision:
    """One step of a policy: ``action`` to send, or ``answer`` to end the episode.

    ``action`` may be anything :meth:`Action.parse` reads (a scripted file's raw entry);
    the environment validates it. ``raw`` is the policy's own output, kept for the record.
    """

    action: Action | dict[str, Any] | str | list | None = None
    answer: str | None = None
    usage: Usage = field(default_factory=Usage)
    raw: str | None = None

    def __post_init__(self) -> None:
        if (self.action is None) == (self.answer is None):
            raise ValueError("a Decision holds exactly one of action and answer")


@runtime_checkable
class AgentSession(Protocol):
    """A policy's state within one episode."""

    async def act(self, observation: str) -> Decision:
        """The next decision, given the newest observation text (the first call gets the
        initial observation)."""
        ...

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The policy's own conversation so far (chat messages), for training data."""
        ...


@runtime_checkable
class Agent(Protocol):
    """A policy. One agent serves many concurrent episodes, one session each."""

    name: str

    async def start(self, view: EpisodeView) -> AgentSession: ...

    def describe(self) -> dict[str, Any]:
        """Name and settings, recorded on every trajectory."""
        ...


# The built-in agents, imported when first asked for (``"module:attr"``, see core.registry).
_AGENTS: Registry[Callable[..., Agent]] = Registry(
    "agent",
    {
        "careful": "simgym.agents.reference:CarefulAgent",
        "human": "simgym.agents.human:HumanAgent",
        "local": "simgym.agents.local:LocalAgent",
        "openai": "simgym.agents.openai_agent:OpenAIAgent",
        "plan": "simgym.agents.plan:PlanAgent",
        "reckless": "simgym.agents.reference:RecklessAgent",
        "scripted": "simgym.agents.scripted:ScriptedAgent",
    },
    group="simgym.agents",  # installed plugins add agents by entry point
    check=lambda name, value: _check_factory(name, value),
)


def _check_factory(name: str, value: object) -> None:
    """A ``simgym.agents`` entry point must name what builds an agent from its options."""
    if not callable(value):
        raise PluginError(f"plugin agent {name!r} is a {type(value).__name__}, not a factory")


def register_agent(name: str, factory: Callable[..., Agent]) -> None:
    """Make ``create_agent(name, **options)`` (and ``--agent name``) build ``factory``."""
    _AGENTS.register(name, factory)


def create_agent(name: str | Agent, **options: Any) -> Agent:
    """An agent by registered name (``openai``, ``local``, ``scripted``, ``human``) or
    the instance itself."""
    if not isinstance(name, str):
        return name
    return _AGENTS.get(name)(**options)


def agent_names() -> list[str]:
    return _AGENTS.names()
