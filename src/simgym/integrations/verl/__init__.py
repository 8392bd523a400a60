"""verl adapter: simgym's simulated environments as verl tools and a verl agent loop.

verl's multi-turn rollout offers a policy the tools listed in a *tool config* (YAML: one
entry per tool, ``class_name`` + ``config`` + ``tool_schema``) and plays each tool call
against a :class:`~verl.tools.base_tool.BaseTool`. :func:`verl_tool_config` writes such a
config for a domain: every tool the domain offers becomes an entry of class
:class:`SimgymTool`, and one call is one ``SimEnv.step({"name", "arguments"})``; the
observation is the tool's response (error observations included, so a policy that sends
bad arguments reads why and may correct itself).

One world per trajectory. verl 0.9 builds each tool once per worker and, in its
``tool_agent`` loop, brackets *every call* with ``create`` / ``release`` under a fresh
instance id, passing the trajectory's ``AgentData`` to ``execute``. That object is the one
thing that identifies a trajectory (a GRPO group repeats the same dataset row, so nothing
in the row can), so the world is keyed by it: the first call of a trajectory builds a
:class:`SimEnv`, stores a key on the ``AgentData`` (attribute ``_simgym_world``), and every
later call of that trajectory, whichever tool it names, steps the same world, one call at a
time in the order verl made them. A caller that follows ``BaseTool``'s own contract instead
(``create(instance_id, task=...)`` once per trajectory, several ``execute``, then
``calc_reward`` and ``release``, with no ``agent_data``) gets one world per instance id;
tools that are given the same instance id share it.

The task comes from the dataset row: ``extra_info.tools_kwargs[tool].create_kwargs.task``
(a :class:`Task` as JSON; :func:`verl_rows` writes it for every tool). A row without one
gets a task whose instruction is the conversation's first user message.

Ending, rewards and records. Use the agent loop :class:`SimgymAgentLoop`, registered as
``simgym_agent`` when verl loads the tools (the rows of :func:`verl_rows` name it in
``agent_name``): it is verl's ``tool_agent`` loop plus the episode's lifecycle. When
verl's loop ends, the policy's last reply (an assistant message without tool calls) is the
agent's answer (``env.finish``), the episode is scored with simgym's reward (the tool
config's ``reward`` spec; ``None``: each task's own, e.g. an exact match on
``metadata["answer"]``), the score becomes verl's ``reward_score`` (unless ``score:
false``), and the trajectory, with verl's conversation as ``agent_messages``, is appended to
``trajectories`` (JSONL; ``{pid}`` in the path gives each worker process its own file).
If the loop stopped on a turn or length limit before a final reply, the episode is recorded
as truncated, with no answer. With verl's plain ``tool_agent`` loop the tools still share a
world, but nobody tells them the trajectory ended: the world is ended when verl drops the
trajectory's ``AgentData`` (scored and written the same way, the answer read from the
conversation), and verl scores the response with its own reward manager.

The tool config's ``config`` block (:class:`VerlToolSettings`): ``domain``, ``scenario``
(the world tools are built from; a task's own scenario replaces it for its episode, but
the tool set stays the config's), ``world_model`` (a backend name such as ``local`` or
``openai``, or ``package.module:attribute`` naming a world-model instance or a factory),
``world_model_options``, ``env_options`` (:class:`SimEnv` options), ``reward``, ``score``,
``trajectories``. One backend per process serves every trajectory with the same settings.

Limits of verl's schema model: verl parses each ``tool_schema`` into
``OpenAIFunctionToolSchema``, which keeps only a property's ``type``, ``description`` and
``enum``. :func:`verl_tool_schema` writes what survives that (``anyOf`` becomes a type
list) and folds what would be lost (array item types, nested shapes, defaults) into the
description, so the policy still reads it; simgym checks the arguments against the full
schema either way.

Needs verl (``pip install 'simgym[verl]'``); nothing here needs a GPU.
"""

from simgym.integrations.verl.data import (
    verl_agent_loop_config,
    verl_rows,
    verl_tool_config,
    write_verl_dataset,
    write_verl_recipe,
)
from simgym.integrations.verl.loop import SimgymAgentLoop
from simgym.integrations.verl.schema import verl_tool_schema
from simgym.integrations.verl.settings import (
    AGENT_LOOP,
    AGENT_LOOP_CLASS,
    NO_ANSWER,
    PLAIN_LOOP,
    TOOL_CLASS,
    WORLD_ATTR,
    VerlToolSettings,
)
from simgym.integrations.verl.tool import SimgymTool
from simgym.integrations.verl.worlds import final_reply, finish_trajectory, open_world, wait_closed

__all__ = [
    "AGENT_LOOP",
    "AGENT_LOOP_CLASS",
    "NO_ANSWER",
    "PLAIN_LOOP",
    "TOOL_CLASS",
    "WORLD_ATTR",
    "SimgymAgentLoop",
    "SimgymTool",
    "VerlToolSettings",
    "final_reply",
    "finish_trajectory",
    "open_world",
    "verl_agent_loop_config",
    "verl_rows",
    "verl_tool_config",
    "verl_tool_schema",
    "wait_closed",
    "write_verl_dataset",
    "write_verl_recipe",
]
