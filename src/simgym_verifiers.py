"""The verifiers plugin id of simgym: ``vf-eval simgym_verifiers ...``.

verifiers finds a taskset, env and harness by an id that names an importable top-level
module exporting them through ``__all__`` (a dotted id such as
``simgym.integrations.verifiers`` is not found), so this module re-exports
:mod:`simgym.integrations.verifiers`, where everything is written and documented.
"""

from simgym.integrations import verifiers as _adapter
from simgym.integrations.verifiers import *  # noqa: F403  (the adapter's __all__)

__all__ = list(_adapter.__all__)
