"""The ``simgym_agent`` loop: verl's tool agent loop plus the episode's lifecycle."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.types import Task
from simgym.integrations.verl._verl import AgentData, AgentLoopOutput, ToolAgentLoop, register
from simgym.integrations.verl.settings import AGENT_LOOP, AGENT_LOOP_CLASS
from simgym.integrations.verl.tool import SimgymTool
from simgym.integrations.verl.worlds import (
    fallback_task,
    finish_trajectory,
    open_world,
    task_from,
)


@register(AGENT_LOOP)
class SimgymAgentLoop(ToolAgentLoop):
    """verl's tool agent loop with the episode's lifecycle: the world opens with the
    trajectory (so even a trajectory without tool calls is an episode), and when the loop
    ends the final reply is the answer, simgym's reward becomes verl's ``reward_score``
    and the trajectory is written (see the module docstring)."""

    # verl records a loop by its class's module and name: the public path, not this file's
    __module__ = AGENT_LOOP_CLASS.rpartition(".")[0]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        simgym_tools = [t for t in self.tools.values() if isinstance(t, SimgymTool)]
        if not simgym_tools:
            raise SimgymError(
                f"the {AGENT_LOOP} agent loop needs simgym tools in the rollout's tool config "
                "(actor_rollout_ref.rollout.multi_turn.tool_config_path)"
            )
        if len({t.settings.world_key() for t in simgym_tools}) > 1:
            raise SimgymError("all simgym tools of one tool config must share one config")
        self._simgym_tools = simgym_tools
        self._task: Task | None = None
        self._group: str | None = None
        self._agent_data: Any = None

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        self._task = _task_from_row(kwargs, self._simgym_tools)
        uid = kwargs.get("uid")
        self._group = str(uid) if uid is not None else None
        try:
            output = await super().run(sampling_params, **kwargs)
        except BaseException as exc:
            if self._agent_data is not None:
                await finish_trajectory(
                    self._agent_data, reason=f"verl's agent loop failed: {exc!r}", read_reply=False
                )
            raise
        trajectory = await finish_trajectory(self._agent_data)
        if trajectory is not None:
            if self._simgym_tools[0].settings.score:
                output.reward_score = trajectory.total_reward
            output.extra_fields["simgym_episode_id"] = trajectory.episode_id
        return output

    async def _handle_pending_state(self, agent_data: AgentData, sampling_params: dict[str, Any]):
        task = self._task or fallback_task(
            self._simgym_tools[0].settings.domain, agent_data.messages
        )
        world = open_world(agent_data, self._simgym_tools[0].settings, task)
        world.group_id = self._group
        world.special_tokens = list(getattr(self.tokenizer, "all_special_tokens", []) or [])
        self._agent_data = agent_data
        return await super()._handle_pending_state(agent_data, sampling_params)


def _task_from_row(kwargs: Mapping[str, Any], tools: Sequence[SimgymTool]) -> Task | None:
    """The task a dataset row carries for its simgym tools (the first one that has one)."""
    tools_kwargs = kwargs.get("tools_kwargs") or {}
    for tool in tools:
        entry = tools_kwargs.get(tool.name) or {}
        task = task_from(entry.get("create_kwargs"), tool.settings.domain)
        if task is not None:
            return task
    return None
