"""One TRL rollout slot: an episode that ``reset`` starts, tool methods step and
``get_reward`` scores."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from simgym.core.env import SimEnv
from simgym.core.errors import SimgymError
from simgym.core.sync import run_sync
from simgym.core.types import ToolSpec, Trajectory
from simgym.integrations.trl.methods import answer_method, check_tool_name, tool_method

if TYPE_CHECKING:
    from simgym.integrations.trl.spec import SimgymTRL


ANSWERED = "Answer submitted. The episode is over."


class SimgymEnvironment:
    """Base of the generated environment classes: one instance is one rollout slot.

    TRL creates instances once and reuses them: ``reset(**row)`` starts each episode, the
    tool methods act in it, ``get_reward()`` scores it. Everything that is not a tool is
    private or a property, because TRL offers every public method as a tool.
    """

    spec: ClassVar[SimgymTRL]
    domain_name: ClassVar[str]
    tool_specs: ClassVar[tuple[ToolSpec, ...]]

    def __init__(self) -> None:
        self._env: SimEnv | None = None
        self._scored = False
        self._written = False
        self._reward: float | None = None
        self.spec._track(self)

    @property
    def trajectory(self) -> Trajectory | None:
        """The current (or last) episode's record."""
        return self._env.trajectory if self._env is not None else None

    def reset(self, **row: Any) -> str:
        """Start the episode for a dataset row (its ``task`` column); return the first
        user message. An earlier episode that was never scored is written first."""
        task = self.spec._row_task(row)
        self._settle()
        if self._env is None:
            self._env = self.spec._new_env(self.domain_name)
        observation = run_sync(self._env.reset(task, seed=self.spec._seed(task)))
        trajectory = self._env.trajectory
        assert trajectory is not None
        trajectory.agent = {"name": "trl"}
        trajectory.group_id = task.id
        trajectory.sample = self.spec._next_sample(task.id)
        self._scored = self._written = False
        self._reward = None
        return self.spec._first_message(self._env, task, observation.text)

    def get_reward(self) -> float | None:
        """Score the episode (once) with the spec's reward and write it; ``None`` when the
        reward itself failed (TRL then leaves this rollout out of that reward)."""
        if self._env is None or self._env.trajectory is None:
            raise SimgymError("get_reward() before reset(): no episode to score")
        if not self._scored:
            self._close()
            self._reward = self.spec._score(self._env.trajectory, self.spec.reward)
            self._scored = True
        self._write()
        return self._reward

    # -- internals ----------------------------------------------------------------

    def _call(self, tool: str, arguments: dict[str, Any]) -> str:
        ended = self._ended()
        if ended:
            return ended
        assert self._env is not None
        return step_text(self._env, {"name": tool, "arguments": arguments})

    def _answer(self, answer: str) -> str:
        ended = self._ended()
        if ended:
            return ended
        assert self._env is not None
        run_sync(self._env.finish(answer))
        return ANSWERED

    def _ended(self) -> str | None:
        """Why no action can be taken now, or ``None`` when the episode is running."""
        if self._env is None or self._env.trajectory is None:
            return "[simgym error] no episode is running: reset() was not called"
        trajectory = self._env.trajectory
        if not (trajectory.done or trajectory.truncated or self._scored):
            return None
        if trajectory.answer is not None:
            why = "the answer was submitted"
        elif trajectory.error:
            why = trajectory.error
        elif trajectory.done:
            why = "the episode reached its final action"
        elif self._scored or len(trajectory.turns) < self._env.max_turns:
            why = "the rollout has ended"
        else:
            why = f"the turn limit ({self._env.max_turns}) was reached"
        return f"[simgym error] the episode is over ({why}); no further actions are taken"

    def _close(self) -> None:
        """End a still-running episode: the policy stopped calling tools, which is a
        normal end for a policy, so no error is recorded."""
        if self._env is not None:
            run_sync(self._env.close(reason=None))

    def _write(self) -> None:
        if self._written or self._env is None or self._env.trajectory is None:
            return
        self._written = True
        self.spec._write(self._env.trajectory)

    def _settle(self) -> None:
        """Write an episode that was never scored, so nothing is lost."""
        if self._env is not None and self._env.trajectory is not None and not self._written:
            self._close()
            self._write()


def build_environment_class(
    spec: SimgymTRL, domain: str, tools: list[ToolSpec], name: str
) -> type[SimgymEnvironment]:
    """A :class:`SimgymEnvironment` subclass whose public methods are ``tools`` (plus the
    spec's answer tool), ready for TRL to read as tools."""
    names = [tool.name for tool in tools]
    if spec.answer_tool is not None:
        if not spec.answer_tool.strip():
            raise SimgymError("answer_tool must be a non-empty name, or None")
        if spec.answer_tool in names:
            raise SimgymError(
                f"the {domain} world already has a tool named {spec.answer_tool!r}; "
                "pick another answer_tool"
            )
    class_name = "Simgym" + "".join(p.capitalize() for p in re.split(r"\W+|_", name) if p) + "Env"
    members: dict[str, Any] = {
        "__module__": __name__,
        "__doc__": f"Simulated {domain} environment ({name}): tools {', '.join(names) or 'none'}.",
        "spec": spec,
        "domain_name": domain,
        "tool_specs": tuple(tools),
    }
    for tool in tools:
        check_tool_name(tool.name, domain)
        members[tool.name] = tool_method(tool, qualname=f"{class_name}.{tool.name}")
    if spec.answer_tool is not None:
        members[spec.answer_tool] = answer_method(spec.answer_tool, class_name)
    return type(class_name, (SimgymEnvironment,), members)


def step_text(env: SimEnv, action: Any) -> str:
    """One step, as the text a tool method returns (with a note when it ended the run)."""
    result = run_sync(env.step(action))
    text = result.observation.text
    if result.truncated and result.info.get("error_type") != "world_model":
        text += f"\n[simgym] the turn limit ({env.max_turns}) was reached; the episode is over."
    return text
