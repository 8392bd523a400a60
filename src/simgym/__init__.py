"""simgym: simulated agent environments driven by language world models.

import simgym
env = simgym.make("terminal", world_model="local")
obs = env.sync().reset("Find the largest file in the home directory")
"""

from simgym import rollout  # (a callable package: simgym.rollout(tasks, ...))
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
    EpisodeStateError,
    ScenarioError,
    SimgymError,
    UnknownDomainError,
    WorldModelError,
)
from simgym.core.sync import SyncEnv, run_sync
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
from simgym.data.trajectories import TrajectoryWriter, finished_ids, read_trajectories
from simgym.make import make, world_model
from simgym.rollout.runner import arollout
from simgym.worldmodels import (
    FunctionWorldModel,
    LocalWorldModel,
    OpenAIWorldModel,
    ReplayWorldModel,
)

__version__ = "0.1.0"

__all__ = [
    "Action",
    "ActionError",
    "Demonstration",
    "Domain",
    "EpisodeStateError",
    "FunctionWorldModel",
    "KeyPress",
    "LocalWorldModel",
    "Observation",
    "OpenAIWorldModel",
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
