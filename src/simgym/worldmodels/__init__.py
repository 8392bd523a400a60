"""World-model backends (``simgym.core.worldmodel`` names them: ``local``, ``openai``,
``replay``, ``function``)."""

from simgym.worldmodels.function import FunctionWorldModel
from simgym.worldmodels.local import LocalWorldModel, embedded_model_path
from simgym.worldmodels.openai_backend import OpenAIWorldModel
from simgym.worldmodels.replay import ReplayWorldModel

__all__ = [
    "FunctionWorldModel",
    "LocalWorldModel",
    "OpenAIWorldModel",
    "ReplayWorldModel",
    "embedded_model_path",
]
