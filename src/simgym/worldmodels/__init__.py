"""World-model backends. Importing this package registers them by name."""

from simgym.core.worldmodel import register_backend
from simgym.worldmodels.function import FunctionWorldModel
from simgym.worldmodels.local import LocalWorldModel, embedded_model_path
from simgym.worldmodels.openai_backend import OpenAIWorldModel
from simgym.worldmodels.replay import ReplayWorldModel

register_backend("local", LocalWorldModel)
register_backend("openai", OpenAIWorldModel)
register_backend("replay", ReplayWorldModel)
register_backend("function", FunctionWorldModel)

__all__ = [
    "FunctionWorldModel",
    "LocalWorldModel",
    "OpenAIWorldModel",
    "ReplayWorldModel",
    "embedded_model_path",
]
