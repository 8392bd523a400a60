"""Running many episodes: ``simgym.rollout(tasks, agent=..., world_model=...)``.

The package is callable so that ``simgym.rollout(...)`` (the blocking
:func:`simgym.rollout.runner.rollout`) and ``simgym.rollout.runner`` both work.
"""

import sys
import types
from typing import Any


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from simgym.rollout.runner import rollout

        return rollout(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
