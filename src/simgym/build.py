"""``simgym.make`` and ``simgym.world_model``: one call from a name to a ready environment or
backend (a module named apart from the function, so importing it never shadows
``simgym.make``)."""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import BaseModel

from simgym.core.domain import get_domain
from simgym.core.env import SimEnv
from simgym.core.worldmodel import WorldModel, create_world_model

_ENV_OPTIONS = frozenset(inspect.signature(SimEnv.__init__).parameters) - {
    "self",
    "domain",
    "world_model",
    "scenario",
}


def make(
    domain: str,
    world_model: str | WorldModel = "local",
    scenario: dict[str, Any] | BaseModel | None = None,
    **options: Any,
) -> SimEnv:
    """Build a simulated environment.

    Options that `SimEnv` takes (`max_turns`, `seed`, `system_prompt_file`,
    `instructions`, `writer`, ...) configure the environment, the rest (`base_url`,
    `model`, `temperature`, `model_path`, `trajectories`, ...) the backend. To step
    many environments against one server, build the backend once with
    `simgym.world_model` and pass the instance.

    Args:
        domain: the domain's name (`"terminal"`, `"mcp"`, ... or a plugin's).
        world_model: a backend name (`local`, `openai`, `replay`, ...) or an instance.
        scenario: the hidden initial world, as a dict or the domain's scenario model;
            None: the domain's default scenario.
        **options: environment options and backend options, as above.

    Returns:
        The async environment; `.sync()` wraps it for blocking code.
    """
    env_options = {k: v for k, v in options.items() if k in _ENV_OPTIONS}
    backend_options = {k: v for k, v in options.items() if k not in _ENV_OPTIONS}
    resolved = get_domain(domain)
    backend = create_world_model(world_model, **backend_options)
    return SimEnv(resolved, backend, scenario, **env_options)


def world_model(name: str, **options: Any) -> WorldModel:
    """Build a world-model backend by name, to share between environments.

    Args:
        name: the backend's name (`local`, `openai`, `replay`, `function`, a real
            backend such as `real-terminal`, or a plugin's).
        **options: the backend's options (`base_url`, `model`, `max_concurrency`, ...).

    Returns:
        The backend, to pass as `world_model=` to `simgym.make` or `simgym.rollout`.
    """
    return create_world_model(name, **options)
