"""The protocol every world-model backend follows, and the registry that builds them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from simgym.core.contract import parse_output
from simgym.core.errors import PluginError, SimgymError
from simgym.core.registry import Registry
from simgym.core.types import Task, Usage

Messages = list[dict[str, str]]


class Prediction(BaseModel):
    """One world-model answer: the parsed observation plus everything needed to audit it."""

    observation: str
    reasoning: str | None = None
    raw: str = ""
    tagged: bool = False
    state_update: str | None = None  # the <state_update> block, when the model wrote one
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    finish_reason: str | None = None
    model: str | None = None
    # What a real environment reports beside the observation (an HTTP status, say); it
    # goes to the observation's metadata, never into its text.
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def from_raw(
        cls, raw: str, *, reasoning_content: str | None = None, **fields: Any
    ) -> Prediction:
        """Parse ``raw`` with the message contract and wrap it."""
        parsed = parse_output(raw, reasoning_content)
        return cls(
            observation=parsed.observation,
            reasoning=parsed.reasoning,
            raw=raw,
            tagged=parsed.tagged,
            state_update=parsed.state_update,
            **fields,
        )


@runtime_checkable
class WorldModel(Protocol):
    """Anything that predicts the next observation from contract messages.

    Backends are shared: one instance may serve thousands of environments at once, so
    ``predict`` must be safe to await concurrently (limit concurrency inside).
    ``prefix`` is text the observation is known to start with (a terminal echoes the
    command); backends that can pre-fill the answer use it, others ignore it.

    A backend that is a *real* environment also follows :class:`LiveWorld`.
    """

    name: str

    async def predict(
        self,
        messages: Messages,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> Prediction: ...

    def describe(self) -> dict[str, Any]:
        """Name and settings, recorded in every trajectory."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class LiveWorld(Protocol):
    """A world model that keeps a real world per episode (a sandboxed shell, a browser, a
    live MCP server): ``SimEnv`` builds it before the episode and tears it down after.

    It holds one world at a time, so each environment needs its own instance; adapters
    that share one backend between sessions refuse it (:func:`require_shareable`).
    """

    async def start_episode(self, scenario: BaseModel | dict[str, Any], task: Task) -> str | None:
        """Build the episode's world; return its first observation (None: the domain's)."""
        ...

    async def end_episode(self) -> None:
        """Tear the world down (safe to call when none is up)."""
        ...


@runtime_checkable
class ActionExecutor(Protocol):
    """A world that runs actions itself (a real environment): ``SimEnv`` hands it the
    rendered action, not a prompt to parse back, and asks once per turn, because running
    an action twice would change the world."""

    async def run_turn(self, action_text: str) -> Prediction:
        """Run the action; return what the environment shows."""
        ...


def require_shareable(world_model: Any, shared_by: str, name: str | None = None) -> None:
    """Refuse a :class:`LiveWorld` where ``shared_by`` (e.g. "verl trajectories share one
    backend per process") would let episodes trample its one world."""
    if isinstance(world_model, LiveWorld):
        shown = name if name is not None else getattr(world_model, "name", "?")
        raise SimgymError(
            f"world model {shown!r} is a real environment that holds one world at a time; "
            f"{shared_by}"
        )


BackendFactory = Callable[..., WorldModel]
# The built-in backends, imported when first asked for (``"module:attr"``); installed
# plugins add theirs through the ``simgym.worldmodels`` entry-point group.
_BACKENDS: Registry[BackendFactory] = Registry(
    "world model",
    {
        "local": "simgym.worldmodels.local:LocalWorldModel",
        "openai": "simgym.worldmodels.openai_backend:OpenAIWorldModel",
        "replay": "simgym.worldmodels.replay:ReplayWorldModel",
        "function": "simgym.worldmodels.function:FunctionWorldModel",
        "real-terminal": "simgym.real.terminal:RealTerminal",
        "real-swe": "simgym.real.swe:RealSWE",
        "real-web": "simgym.real.web:RealWeb",
        "real-mcp": "simgym.real.mcp:RealMCP",
        "real-search": "simgym.real.search:RealSearch",
        "real-http": "simgym.real.http:RealHTTP",
    },
    group="simgym.worldmodels",
    check=lambda name, value: _check_factory(name, value),
)


def _check_factory(name: str, value: object) -> None:
    """A ``simgym.worldmodels`` entry point must name a factory (a class or a callable
    that takes the backend's options and returns a world model)."""
    if not callable(value):
        raise PluginError(
            f"plugin world model {name!r} is a {type(value).__name__}, not a factory that "
            "builds one (a class or a function taking the backend's options)"
        )


def register_backend(name: str, factory: BackendFactory | str) -> None:
    """Make ``world_model=name`` build a backend with ``factory(**options)`` (a callable or
    a ``"module:attr"`` string naming one)."""
    _BACKENDS.register(name, factory)


def backend_names() -> list[str]:
    """Every backend name: built-ins, run-time registrations and installed plugins."""
    return _BACKENDS.names()


def backend_factory(name: str) -> BackendFactory:
    """The factory registered as ``name`` (loads a plugin's, if one declares it).

    Args:
        name: a backend name such as ``"openai"`` or a plugin's.

    Returns:
        The callable that builds the backend from its options.
    """
    return _BACKENDS.get(name)


def create_world_model(spec: str | WorldModel, **options: Any) -> WorldModel:
    """Build a backend by name (``local``, ``openai``, ``replay``, ...), or pass one through."""
    if not isinstance(spec, str):
        if options:
            raise SimgymError("options were given together with a ready world model instance")
        return spec
    factory = _BACKENDS.get(spec)
    try:
        return factory(**options)
    except TypeError as exc:
        raise SimgymError(f"bad options for world model {spec!r}: {exc}") from None
