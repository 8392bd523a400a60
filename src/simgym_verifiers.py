"""The verifiers plugin id of simgym: ``vf-eval simgym_verifiers ...``.

verifiers finds a taskset, env and harness by an id that names an importable top-level
module exporting them through ``__all__`` (a dotted id such as
``simgym.integrations.verifiers`` is not found), so this module re-exports
:mod:`simgym.integrations.verifiers`, where everything is written and documented.
"""

from simgym.integrations.verifiers import (
    REWARD_NAME,
    SimgymChatHarness,
    SimgymEnv,
    SimgymEnvConfig,
    SimgymHarnessConfig,
    SimgymTask,
    SimgymTaskData,
    SimgymTaskset,
    SimgymTasksetConfig,
)

__all__ = [
    "REWARD_NAME",
    "SimgymChatHarness",
    "SimgymEnv",
    "SimgymEnvConfig",
    "SimgymHarnessConfig",
    "SimgymTask",
    "SimgymTaskData",
    "SimgymTaskset",
    "SimgymTasksetConfig",
]
