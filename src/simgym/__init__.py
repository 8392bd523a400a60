"""simgym: simulated agent environments driven by language world models.

import simgym
env = simgym.make("terminal", world_model="local")
obs = env.sync().reset("Find the largest file in the home directory")
"""

from typing import TYPE_CHECKING, Any

# The public names and where they live; each module is imported on first use, so
# ``import simgym`` loads the core only (no backend, trainer, benchmark or integration).
_EXPORTS = {
    "Action": "simgym.core.types",
    "ActionError": "simgym.core.errors",
    "Demonstration": "simgym.core.domain",
    "Domain": "simgym.core.domain",
    "EpisodeStateError": "simgym.core.errors",
    "FunctionWorldModel": "simgym.worldmodels.function",
    "KeyPress": "simgym.core.types",
    "LocalWorldModel": "simgym.worldmodels.local",
    "Observation": "simgym.core.types",
    "OpenAIWorldModel": "simgym.worldmodels.openai_backend",
    "Prediction": "simgym.core.worldmodel",
    "ReplayWorldModel": "simgym.worldmodels.replay",
    "ScenarioBase": "simgym.core.domain",
    "ScenarioError": "simgym.core.errors",
    "SimEnv": "simgym.core.env",
    "SimgymError": "simgym.core.errors",
    "StepResult": "simgym.core.types",
    "SyncEnv": "simgym.core.sync",
    "Task": "simgym.core.types",
    "ToolSpec": "simgym.core.types",
    "Trajectory": "simgym.core.types",
    "TrajectoryWriter": "simgym.core.trajectories",
    "Turn": "simgym.core.types",
    "UnknownDomainError": "simgym.core.errors",
    "Usage": "simgym.core.types",
    "WorldModel": "simgym.core.worldmodel",
    "WorldModelError": "simgym.core.errors",
    "arollout": "simgym.rollout.runner",
    "check_backend": "simgym.core.conformance",
    "check_domain": "simgym.core.conformance",
    "ConformanceError": "simgym.core.errors",
    "PluginError": "simgym.core.errors",
    "domain_names": "simgym.core.domain",
    "finished_ids": "simgym.core.trajectories",
    "get_domain": "simgym.core.domain",
    "make": "simgym.build",
    "parse_output": "simgym.core.contract",
    "read_trajectories": "simgym.core.trajectories",
    "register_backend": "simgym.core.worldmodel",
    "register_domain": "simgym.core.domain",
    "run_sync": "simgym.core.sync",
    "world_model": "simgym.build",
}
# Subpackages reachable as attributes (``simgym.rollout(...)`` is a callable package).
_SUBPACKAGES = frozenset(
    {
        "agents",
        "bench",
        "core",
        "data",
        "domains",
        "experience",
        "integrations",
        "perturb",
        "real",
        "rewards",
        "rollout",
        "train",
        "worldmodels",
        "worlds",
    }
)

if TYPE_CHECKING:  # for type checkers and IDEs; at run time names load on first use
    from simgym import rollout
    from simgym.build import make, world_model
    from simgym.core.conformance import check_backend, check_domain
    from simgym.core.contract import parse_output
    from simgym.core.domain import (
        Demonstration,
        Domain,
        ScenarioBase,
        domain_names,
        get_domain,
        register_domain,
    )
    from simgym.core.env import SimEnv
    from simgym.core.errors import (
        ActionError,
        ConformanceError,
        EpisodeStateError,
        PluginError,
        ScenarioError,
        SimgymError,
        UnknownDomainError,
        WorldModelError,
    )
    from simgym.core.sync import SyncEnv, run_sync
    from simgym.core.trajectories import TrajectoryWriter, finished_ids, read_trajectories
    from simgym.core.types import (
        Action,
        KeyPress,
        Observation,
        StepResult,
        Task,
        ToolSpec,
        Trajectory,
        Turn,
        Usage,
    )
    from simgym.core.worldmodel import Prediction, WorldModel, register_backend
    from simgym.rollout.runner import arollout
    from simgym.worldmodels.function import FunctionWorldModel
    from simgym.worldmodels.local import LocalWorldModel
    from simgym.worldmodels.openai_backend import OpenAIWorldModel
    from simgym.worldmodels.replay import ReplayWorldModel


def __getattr__(name: str) -> Any:
    import importlib

    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"simgym.{name}")
    else:
        raise AttributeError(f"module 'simgym' has no attribute {name!r}")
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, *_SUBPACKAGES})


from simgym.core.version import __version__ as __version__  # noqa: E402

__all__ = [
    "Action",
    "ActionError",
    "ConformanceError",
    "Demonstration",
    "Domain",
    "EpisodeStateError",
    "FunctionWorldModel",
    "KeyPress",
    "LocalWorldModel",
    "Observation",
    "OpenAIWorldModel",
    "PluginError",
    "Prediction",
    "ReplayWorldModel",
    "ScenarioBase",
    "ScenarioError",
    "SimEnv",
    "SimgymError",
    "StepResult",
    "SyncEnv",
    "Task",
    "ToolSpec",
    "Trajectory",
    "TrajectoryWriter",
    "Turn",
    "UnknownDomainError",
    "Usage",
    "WorldModel",
    "WorldModelError",
    "arollout",
    "check_backend",
    "check_domain",
    "domain_names",
    "finished_ids",
    "get_domain",
    "make",
    "parse_output",
    "read_trajectories",
    "register_backend",
    "register_domain",
    "rollout",
    "run_sync",
    "world_model",
]
