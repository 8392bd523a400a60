"""Reward specs to rewards: :func:`build_reward` and :func:`register_reward`.

A spec is one of:

* ``None``: the *task reward*, which reads each episode's own ``task.metadata["reward"]``
  spec when it scores (exact match on ``metadata["answer"]`` when there is no spec);
* a name: ``"exact"``, ``"f1"``, ``"judge"``, ... (see :func:`reward_names`);
* a dict ``{"type": name, **options}`` (``name`` relabels the reward's part);
* a list of specs, or ``{"type": "hybrid", "parts": [...]}``: a weighted hybrid whose
  parts may carry ``"weight"`` (default 1);
* a reward object, used as it is.

Specs are plain data, so they travel in YAML, JSON and to other machines. Installed
packages add reward types through the ``simgym.rewards`` entry-point group (a factory
taking the spec's options), read only when a type is not built in.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from simgym.core.errors import SimgymError
from simgym.core.registry import load_plugin, plugin_entry_points
from simgym.core.types import Trajectory
from simgym.rewards._records import RecordChecks
from simgym.rewards._state import StateCheck
from simgym.rewards._tables import TableF1
from simgym.rewards._text import Contains, ExactMatch, RegexMatch, TokenF1
from simgym.rewards._tools import ToolCallCheck
from simgym.rewards.base import Reward, RewardResult
from simgym.rewards.hybrid import HybridReward

RewardFactory = Callable[..., Reward]
PLUGIN_GROUP = "simgym.rewards"


def _judge(**options: Any) -> Reward:
    from simgym.rewards.judge import RubricJudge  # the chat client only when a judge is used

    return RubricJudge(**options)


def _observation_state(**options: Any) -> Reward:
    options.setdefault("name", "observation_state")
    options.setdefault("source", "final_observation")
    return StateCheck(**options)


_FACTORIES: dict[str, RewardFactory] = {
    "exact": ExactMatch,
    "f1": TokenF1,
    "contains": Contains,
    "regex": RegexMatch,
    "state": StateCheck,
    "records": RecordChecks,
    "observation_state": _observation_state,
    "tool_call": ToolCallCheck,
    "table_f1": TableF1,
    "judge": _judge,
}
_ALIASES = {
    "exact_match": "exact",
    "em": "exact",
    "token_f1": "f1",
    "tool_calls": "tool_call",
    "table": "table_f1",
    "rubric": "judge",
}


def register_reward(name: str, factory: RewardFactory) -> None:
    """Make the spec ``name`` (or ``{"type": name, ...}``) build ``factory(**options)``."""
    if not isinstance(name, str) or not name or name in ("hybrid", "task"):
        raise SimgymError(f"cannot register a reward named {name!r}")
    _FACTORIES[name] = factory


def reward_names() -> list[str]:
    """Every name a spec may use (aliases and installed plugins' included)."""
    return sorted({*_FACTORIES, *_ALIASES, "hybrid", "task", *plugin_entry_points(PLUGIN_GROUP)})


def _factory(kind: str) -> RewardFactory | None:
    """The factory of a reward type: built in, registered, or an installed plugin's."""
    name = _ALIASES.get(kind, kind)
    factory = _FACTORIES.get(name)
    if factory is None:
        loaded = load_plugin(PLUGIN_GROUP, name, "reward")
        if loaded is not None:
            if not callable(loaded):
                raise SimgymError(
                    f"plugin reward {name!r} is a {type(loaded).__name__}, not a factory"
                )
            factory = _FACTORIES[name] = loaded  # type: ignore[assignment]
    return factory


def build_reward(spec: Any = None) -> Reward:
    """A reward from a spec (see the module docstring). Raises :class:`SimgymError`
    for an unknown type or bad options."""
    if spec is None:
        return TaskReward()
    if isinstance(spec, str):
        return _from_dict({"type": spec})
    if isinstance(spec, list):
        return _hybrid(spec, None)
    if isinstance(spec, dict):
        options = dict(spec)
        options.pop("weight", None)  # a lone reward's weight changes nothing
        return _from_dict(options)
    if hasattr(spec, "score") and hasattr(spec, "name"):
        return spec
    raise SimgymError(
        f"a reward spec is None, a name, a dict with 'type', or a list; got {type(spec).__name__}"
    )


def _from_dict(spec: dict[str, Any]) -> Reward:
    options = dict(spec)
    kind = options.pop("type", None)
    if not isinstance(kind, str) or not kind:
        raise SimgymError(f"a reward spec needs a 'type' name: {spec!r}")
    if kind == "task":
        if options:
            raise SimgymError(f"the task reward takes no options: {sorted(options)}")
        return TaskReward()
    if kind == "hybrid":
        parts = options.pop("parts", None)
        name = options.pop("name", None)
        if options:
            raise SimgymError(f"a hybrid reward takes 'parts' and 'name'; got {sorted(options)}")
        if not isinstance(parts, list):
            raise SimgymError("a hybrid reward needs 'parts': a list of reward specs")
        return _hybrid(parts, name)
    factory = _factory(kind)
    if factory is None:
        raise SimgymError(f"unknown reward type {kind!r}; available: {', '.join(reward_names())}")
    try:
        return factory(**options)
    except TypeError as exc:
        raise SimgymError(f"bad options for reward {kind!r}: {exc}") from None


def _hybrid(parts: list[Any], name: str | None) -> Reward:
    built: list[tuple[Reward, float]] = []
    for part in parts:
        weight: Any = 1.0
        if isinstance(part, dict):
            part = dict(part)
            weight = part.pop("weight", 1.0)
        built.append((build_reward(part), weight))
    return HybridReward(built, name=name)


def _spec_key(spec: Any) -> str:
    return json.dumps(spec, sort_keys=True, ensure_ascii=False, default=repr)


class TaskReward:
    """Scores each episode by its own task's ``metadata["reward"]`` spec; without one,
    exact match on ``metadata["answer"]``/``["answers"]``; with neither, 0.0 and a detail
    saying no reward is defined. Built rewards are kept per spec (a judge's client is
    made once)."""

    name = "task"

    def __init__(self) -> None:
        self._built: dict[str, Reward] = {}

    def reward_for(self, trajectory: Trajectory) -> Reward | None:
        """The reward this episode's task asks for (None when it defines none)."""
        meta = trajectory.task.metadata
        spec = meta.get("reward")
        if spec is None:
            if meta.get("answer") is None and meta.get("answers") is None:
                return None
            spec = "exact"
        key = _spec_key(spec)
        if key not in self._built:
            reward = build_reward(spec)
            if isinstance(reward, TaskReward):
                raise SimgymError("a task's reward spec cannot be the task reward itself")
            self._built[key] = reward
        return self._built[key]

    async def score(self, trajectory: Trajectory) -> RewardResult:
        try:
            reward = self.reward_for(trajectory)
        except SimgymError as exc:
            return self._zero(f"bad metadata 'reward' in task {trajectory.task.id!r}: {exc}")
        if reward is None:
            return self._zero(
                f"no reward defined: task {trajectory.task.id!r} has no metadata 'reward' "
                "or 'answer'"
            )
        return await reward.score(trajectory)

    def _zero(self, error: str) -> RewardResult:
        return RewardResult(value=0.0, parts={self.name: 0.0}, details={"error": error})

    async def aclose(self) -> None:
        for reward in self._built.values():
            close = getattr(reward, "aclose", None)
            if close is not None:
                await close()
