"""The verl tool: one call is one step of its trajectory's world."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from pydantic import ValidationError

from simgym.core.domain import get_domain
from simgym.core.errors import SimgymError
from simgym.integrations.verl._verl import (
    BaseTool,
    OpenAIFunctionToolSchema,
    ToolResponse,
    rollout_trace_op,
)
from simgym.integrations.verl.schema import verl_tool_schema
from simgym.integrations.verl.settings import (
    ENV_OPTIONS,
    NO_ANSWER,
    TOOL_CLASS,
    WORLD_ATTR,
    VerlToolSettings,
)
from simgym.integrations.verl.worlds import (
    WORLDS,
    World,
    episode_reward,
    fallback_task,
    open_world,
    task_from,
)


class SimgymTool(BaseTool):
    """One of a simulated environment's agent tools, as a verl tool (see the module
    docstring for how calls of one trajectory share a world)."""

    __module__ = TOOL_CLASS.rpartition(".")[0]  # the path tool configs name it by

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None) -> None:
        try:
            self.settings = VerlToolSettings.model_validate(config or {})
        except ValidationError as exc:
            raise SimgymError(f"invalid simgym tool config: {exc}") from None
        self.domain = get_domain(self.settings.domain)
        self.scenario = self.domain.scenario(self.settings.scenario)
        unknown = sorted(set(self.settings.env_options) - ENV_OPTIONS)
        if unknown:
            raise SimgymError(
                f"unknown env_options {unknown}; known: {', '.join(sorted(ENV_OPTIONS))}"
            )
        self._specs = {spec.name: spec for spec in self.domain.agent_tools(self.scenario)}
        episode_reward(self.settings)  # a bad reward spec fails here, when verl loads the tools
        super().__init__(config, tool_schema)
        if self.name not in self._specs:
            raise SimgymError(
                f"the {self.domain.name} world offers no tool {self.name!r}; "
                f"it offers: {', '.join(self._specs) or 'none'}"
            )
        self._instances: dict[str, _Instance] = {}

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        """The tool's schema: the config entry's ``tool_schema`` when it gives one (verl
        keeps it as ``self.tool_schema``; agent loops ask for it again later), else built
        from ``config.tool``."""
        given = getattr(self, "tool_schema", None)  # unset while BaseTool.__init__ runs
        if given is not None:
            return given
        name = self.settings.tool
        if name is None or name not in self._specs:
            raise SimgymError(
                "a simgym tool entry without tool_schema needs config.tool, one of: "
                + ", ".join(self._specs)
            )
        return OpenAIFunctionToolSchema.model_validate(verl_tool_schema(self._specs[name]))

    async def create(
        self, instance_id: str | None = None, **kwargs: Any
    ) -> tuple[str, ToolResponse]:
        """Note the instance's ``create_kwargs`` (verl 0.9 passes them as one keyword,
        ``BaseTool``'s contract as keywords); the world starts at the first call."""
        options = kwargs.pop("create_kwargs", None)
        options = dict(options if options is not None else kwargs)
        instance_id = instance_id or uuid4().hex
        self._instances[instance_id] = _Instance(options)
        return instance_id, ToolResponse()

    @rollout_trace_op  # traced like verl's own tools when rollout tracing is on
    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        """One call: a step of the trajectory's world. Returns the observation text, the
        step's reward and a few facts about the step."""
        instance = self._instances.get(instance_id)
        if instance is None:
            text = f"[simgym error] tool instance {instance_id!r} was not created"
            return ToolResponse(text=text), 0.0, {"error": text}
        world = _world_for(self, instance_id, instance, kwargs.get("agent_data"))
        result = world if isinstance(world, str) else await world.step(self.name, parameters)
        if isinstance(result, str):
            return ToolResponse(text=result), 0.0, {"error": result}
        info = {"turn": result.info.get("turn"), "done": result.done, "truncated": result.truncated}
        if result.info.get("error"):
            info["error"] = result.info["error"]
        return ToolResponse(text=result.observation.text), float(result.reward), info

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The reward of the instance's world so far (``BaseTool``'s contract). With
        ``answer=``, the episode first ends with that answer (and is scored and written)."""
        instance = self._instances.get(instance_id)
        key = (instance.key if instance is not None else None) or instance_id
        world = WORLDS.get(key)
        if world is None:
            raise SimgymError(f"no open world for tool instance {instance_id!r}")
        answer = kwargs.get("answer")
        if answer is None:
            return await world.peek_reward()
        WORLDS.pop(key, None)
        return (await world.end(str(answer), NO_ANSWER)).total_reward

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Forget the instance. A world of this instance id (``BaseTool``'s contract) ends
        here (``answer=`` finishes it with that answer); a world that belongs to a verl
        trajectory lives on until the trajectory ends."""
        instance = self._instances.pop(instance_id, None)
        if instance is None or instance.key is not None:
            return
        world = WORLDS.pop(instance_id, None)
        if world is not None:
            answer = kwargs.get("answer")
            await world.end(
                None if answer is None else str(answer), "the tool instance was released"
            )


@dataclass
class _Instance:
    """A created tool instance: its create kwargs, and the verl trajectory's world key
    once a call has tied it to one (None: the instance id is the world's key)."""

    options: dict[str, Any] = field(default_factory=dict)
    key: str | None = None


def _world_for(
    tool: SimgymTool, instance_id: str, instance: _Instance, agent_data: Any
) -> World | str:
    """The world this call belongs to, opened on the trajectory's first call; or an error
    text for the policy."""
    try:
        task = task_from(instance.options, tool.settings.domain)
    except SimgymError as exc:
        return f"[simgym error] {exc}"
    if agent_data is not None:
        key = getattr(agent_data, WORLD_ATTR, None)
        if key is None:
            if task is None:
                task = fallback_task(tool.settings.domain, getattr(agent_data, "messages", None))
            world = open_world(agent_data, tool.settings, task, loop_name="tool_agent")
            instance.key = world.key
            return world
        instance.key = key
    else:
        key = instance_id
    world = WORLDS.get(key)
    if world is None and agent_data is not None:
        return "[simgym error] this trajectory's episode has already been closed"
    if world is None:
        task = task or fallback_task(tool.settings.domain, None)
        world = WORLDS[key] = World(key, tool.settings, task, "direct")
        return world
    if world.settings.world_key() != tool.settings.world_key():
        return (
            f"[simgym error] tool {tool.name!r} has different world settings from the other "
            "tools of this trajectory; give all simgym tools of one config the same config"
        )
    if task is not None and task.id != world.task.id:
        return (
            f"[simgym error] tool {tool.name!r} was created for task {task.id!r}, but this "
            f"trajectory's world plays task {world.task.id!r}"
        )
    return world
