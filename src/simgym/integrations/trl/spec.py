"""The task set as TRL's GRPO trainer takes it: the dataset, the environment classes, the
rewards, and the world model, reward and trajectory file they share."""

from __future__ import annotations

import itertools
import json
import threading
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from simgym.core.domain import get_domain
from simgym.core.env import SimEnv
from simgym.core.errors import SimgymError
from simgym.core.sync import run_sync
from simgym.core.types import Action, Task, ToolSpec, Trajectory
from simgym.core.worldmodel import WorldModel, create_world_model
from simgym.integrations.trl.environment import (
    ANSWERED,
    SimgymEnvironment,
    build_environment_class,
    step_text,
)
from simgym.integrations.trl.methods import tool_functions
from simgym.rollout.episode import episode_seed, score_trajectory

ANSWER_TOOL = "submit_answer"


SYSTEM_PROMPT = """You are an agent acting in a simulated {domain} environment. Reach the goal the \
user gives you by calling the tools you are offered, one call at a time, and read each \
result before deciding the next step."""


ANSWER_HINT = "When the task is done, or cannot be done, call {tool} with your final answer."


class SimgymTRL:
    """A task set in simulated environments, in the form TRL's ``GRPOTrainer`` takes.

    Args:
        domain: the domain of tasks that name none (``None``: every task names its own).
        tasks: :class:`~simgym.core.types.Task` objects, dicts, or instruction strings.
        world_model: a backend name (``local``, ``openai``, ...) with
            ``world_model_options``, or a built instance; one backend serves every
            environment, built on first use.
        reward: a reward spec for :func:`simgym.rewards.build_reward` or a built reward;
            ``None`` scores each task by its own ``metadata`` (reference answer, ...).
        extra_rewards: more rewards, each offered to TRL as its own reward function in
            :attr:`reward_funcs` (weights via ``GRPOConfig.reward_weights``, in order).
        max_turns: steps before an episode is truncated (TRL's
            ``max_tool_calling_iterations`` also bounds a rollout).
        scenario: the world of tasks that carry no scenario of their own.
        env_options: more :class:`~simgym.core.env.SimEnv` options (``temperature``,
            ``instructions``, ``perturbations``, ``validation_retries``, ...).
        seed: base seed; each task's seed is derived from it and the task id.
        system_prompt: the policy's system message (``{domain}`` is filled in); ``""``
            sends none.
        answer_tool: the name of the tool that ends an episode with an answer; ``None``
            leaves it out (then no answer is recorded).
        trajectories: a JSONL file each scored episode is appended to.
    """

    def __init__(
        self,
        domain: str | None,
        tasks: Iterable[Task | dict[str, Any] | str],
        *,
        world_model: str | WorldModel = "local",
        world_model_options: dict[str, Any] | None = None,
        reward: Any = None,
        extra_rewards: Iterable[Any] = (),
        max_turns: int = 16,
        scenario: dict[str, Any] | None = None,
        env_options: dict[str, Any] | None = None,
        seed: int | None = None,
        system_prompt: str = SYSTEM_PROMPT,
        answer_tool: str | None = ANSWER_TOOL,
        trajectories: str | Path | None = None,
    ) -> None:
        if max_turns < 1:
            raise SimgymError(f"max_turns must be at least 1, got {max_turns}")
        self.default_domain = domain
        self.tasks = _read_tasks(tasks, domain)
        self.world_model_spec = world_model
        self.world_model_options = dict(world_model_options or {})
        if not isinstance(world_model, str) and self.world_model_options:
            raise SimgymError("world_model_options were given with a ready world model instance")
        self.reward_spec = reward
        self.extra_reward_specs = list(extra_rewards)
        self.max_turns = max_turns
        self.default_scenario = scenario
        self.env_options = dict(env_options or {})
        for key in ("max_turns", "seed", "writer", "scenario"):
            if key in self.env_options:
                raise SimgymError(f"give {key} as its own argument, not in env_options")
        self.seed = seed
        self.system_prompt = system_prompt
        self.answer_tool = answer_tool
        self.trajectories = Path(trajectories) if trajectories is not None else None
        self._world_model: WorldModel | None = None
        self._reward: Any = None
        self._extra: list[Any] | None = None
        self._writer: Any = None
        self._lock = threading.Lock()
        self._samples: dict[str, itertools.count[int]] = {}
        self._instances: weakref.WeakSet[SimgymEnvironment] = weakref.WeakSet()
        self._dataset: Any = None
        self._groups = self._group_tasks()
        self._task_group = {t.id: name for name, (_, _, ts) in self._groups.items() for t in ts}
        self.environment_classes: dict[str, type[SimgymEnvironment]] = {
            name: build_environment_class(self, domain_name, tools, name)
            for name, (domain_name, tools, _) in self._groups.items()
        }

    # -- what TRL takes -----------------------------------------------------------

    @property
    def environment_factory(self) -> type[SimgymEnvironment] | dict[str, type[SimgymEnvironment]]:
        """The class to pass as ``environment_factory`` (a ``{name: class}`` dict when the
        tasks need more than one tool set)."""
        if len(self.environment_classes) == 1:
            return next(iter(self.environment_classes.values()))
        return dict(self.environment_classes)

    @property
    def train_dataset(self) -> Any:
        """A ``datasets.Dataset``, one row per task: ``prompt`` (the system message and an
        empty user message that ``reset`` fills), ``task`` (the task as JSON), ``task_id``,
        and ``environment`` when there are several environment classes."""
        if self._dataset is None:
            from datasets import Dataset

            rows: dict[str, list[Any]] = {"prompt": [], "task": [], "task_id": []}
            multi = len(self._groups) > 1
            if multi:
                rows["environment"] = []
            for name, (domain_name, _, tasks) in self._groups.items():
                for task in tasks:
                    rows["prompt"].append(self._prompt(domain_name))
                    rows["task"].append(task.model_dump_json())
                    rows["task_id"].append(task.id)
                    if multi:
                        rows["environment"].append(name)
            self._dataset = Dataset.from_dict(rows)
        return self._dataset

    @property
    def reward_funcs(self) -> list[Callable[..., list[float | None]]]:
        """Extra reward functions in TRL's form (``fn(environments=..., **kw) -> list``).
        A new list each time: TRL appends the environments' ``get_reward`` to the list it
        is given. Empty unless ``extra_rewards`` were given: the main reward already comes
        from ``get_reward``."""
        return [_trl_reward_func(self, reward) for reward in self.extra_rewards]

    def environment_class(self, task: Task | str) -> type[SimgymEnvironment]:
        """The environment class of a task (or task id) of this spec."""
        task_id = task.id if isinstance(task, Task) else task
        try:
            return self.environment_classes[self._task_group[task_id]]
        except KeyError:
            raise SimgymError(f"task {task_id!r} is not one of this spec's tasks") from None

    def demonstrate(
        self, task: Task | str, actions: Iterable[Any]
    ) -> tuple[list[dict[str, Any]], Trajectory]:
        """Play scripted actions in a task's simulated world; return the conversation the
        policy would have had under TRL (the dataset prompt, ``tool_calls`` messages, tool
        results exactly as the tool methods return them) and the episode's trajectory.

        For supervised warm starts: a policy that has never seen the tool-call format
        rarely calls a tool, and then RL has nothing to learn from. Each action is a tool
        call (``{"name", "arguments"}``, argument names as in the tool's schema) or a
        string, the final answer, which ends the demonstration. The episode is not scored
        and not written to ``trajectories``.
        """
        task_id = task.id if isinstance(task, Task) else task
        task = next((t for t in self.tasks if t.id == task_id), None)  # type: ignore[assignment]
        if task is None:
            raise SimgymError(f"task {task_id!r} is not one of this spec's tasks")
        cls = self.environment_class(task)
        functions = tool_functions(cls)
        env = self._new_env(cls.domain_name)
        observation = run_sync(env.reset(task, seed=self._seed(task)))
        messages = self._prompt(cls.domain_name)
        messages[-1] = {"role": "user", "content": self._first_message(env, task, observation.text)}
        try:
            for raw in actions:
                if isinstance(raw, str) and not raw.lstrip().startswith("{"):
                    if self.answer_tool is not None:
                        messages += _exchange(self.answer_tool, {"answer": raw}, ANSWERED)
                    run_sync(env.finish(raw))
                    messages.append({"role": "assistant", "content": ""})
                    break
                action = Action.parse(raw)
                if action.kind != "tool_call" or action.name not in functions:
                    raise SimgymError(
                        f"demonstration action {raw!r} is not a call of one of the tools "
                        f"{sorted(functions)}"
                    )
                wire = getattr(functions[action.name], "wire_names", {})
                shown = {v: k for k, v in wire.items()}
                arguments = {shown.get(k, k): v for k, v in action.arguments.items()}
                text = step_text(env, action)
                messages += _exchange(action.name, arguments, text)
                trajectory = env.trajectory
                if trajectory is not None and (trajectory.done or trajectory.truncated):
                    break
        finally:
            run_sync(env.close(reason=None))
        trajectory = env.trajectory
        assert trajectory is not None
        trajectory.agent = {"name": "demonstration"}
        return messages, trajectory

    # -- shared pieces ------------------------------------------------------------

    @property
    def world_model(self) -> WorldModel:
        """The backend every environment shares (built on first use)."""
        with self._lock:
            if self._world_model is None:
                self._world_model = create_world_model(
                    self.world_model_spec, **self.world_model_options
                )
            return self._world_model

    @property
    def reward(self) -> Any:
        """The built main reward."""
        with self._lock:
            if self._reward is None:
                self._reward = _build_reward(self.reward_spec)
            return self._reward

    @property
    def extra_rewards(self) -> list[Any]:
        with self._lock:
            if self._extra is None:
                self._extra = [_build_reward(spec) for spec in self.extra_reward_specs]
            return self._extra

    def close(self) -> None:
        """Write every episode not yet written, close the trajectory file, and close the
        world model if this spec built it."""
        for instance in list(self._instances):
            instance._settle()
        with self._lock:
            writer, self._writer = self._writer, None
            model = self._world_model if isinstance(self.world_model_spec, str) else None
            self._world_model = None
        if writer is not None:
            writer.close()
        if model is not None and hasattr(model, "aclose"):
            run_sync(model.aclose())

    def __enter__(self) -> SimgymTRL:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- used by the environments -------------------------------------------------

    def _track(self, instance: SimgymEnvironment) -> None:
        self._instances.add(instance)

    def _new_env(self, domain_name: str) -> SimEnv:
        return SimEnv(
            domain_name,
            self.world_model,
            self.default_scenario,
            max_turns=self.max_turns,
            **self.env_options,
        )

    def _row_task(self, row: dict[str, Any]) -> Task:
        raw = row.get("task")
        if raw is None:
            raise SimgymError(
                f"reset() got a row without a 'task' column (columns: {sorted(row)}); "
                "use the spec's train_dataset, or add the task as JSON"
            )
        task = Task.coerce(raw, text="json", invalid="the row's 'task' is not a valid task")
        if task.domain is None:
            if self.default_domain is None:
                raise SimgymError(f"task {task.id!r} names no domain")
            task = task.model_copy(update={"domain": self.default_domain})
        return task

    def _seed(self, task: Task) -> int:
        return episode_seed(task, self.seed)

    def _next_sample(self, task_id: str) -> int:
        with self._lock:
            return next(self._samples.setdefault(task_id, itertools.count()))

    def _prompt(self, domain_name: str) -> list[dict[str, str]]:
        messages = []
        if self.system_prompt:
            text = self.system_prompt.replace("{domain}", domain_name)
            if self.answer_tool is not None:
                text += " " + ANSWER_HINT.format(tool=self.answer_tool)
            messages.append({"role": "system", "content": text})
        messages.append({"role": "user", "content": ""})
        return messages

    def _first_message(self, env: SimEnv, task: Task, observation: str) -> str:
        parts = []
        if env.domain.name == "mcp":  # its first screen only lists the tools the policy has
            description = getattr(env.scenario, "description", "")
            if description:
                parts.append(description)
            parts.append(task.instruction.strip() or "Explore the server.")
        else:
            parts.append(task.instruction.strip() or "Explore the environment.")
            if observation.strip():
                parts.append(f"What the environment shows now:\n{observation}")
        return "\n\n".join(parts)

    def _score(self, trajectory: Trajectory, reward: Any) -> float | None:
        """Score with ``reward``; record the part (and the total for the main reward)."""
        main = reward is self.reward
        result = run_sync(score_trajectory(trajectory, reward, main=main, errors_by_name=True))
        if result is None:
            return None
        return trajectory.total_reward if main else result.value

    def _write(self, trajectory: Trajectory) -> None:
        if self.trajectories is None:
            return
        with self._lock:
            if self._writer is None:
                from simgym.core.trajectories import TrajectoryWriter

                self._writer = TrajectoryWriter(self.trajectories)
            writer = self._writer
        writer.write(trajectory)

    def _group_tasks(self) -> dict[str, tuple[str, list[ToolSpec], list[Task]]]:
        """Tasks grouped by domain and offered tools, in order of first appearance."""
        groups: dict[tuple[str, str], tuple[list[ToolSpec], list[Task]]] = {}
        for task in self.tasks:
            assert task.domain is not None
            domain = get_domain(task.domain)
            scenario = domain.scenario(task.scenario or self.default_scenario)
            tools = domain.agent_tools(scenario)
            key = (domain.name, json.dumps([t.to_plain() for t in tools], sort_keys=True))
            groups.setdefault(key, (tools, []))[1].append(task)
        named: dict[str, tuple[str, list[ToolSpec], list[Task]]] = {}
        per_domain: dict[str, int] = {}
        for (domain_name, _), (tools, tasks) in groups.items():
            per_domain[domain_name] = per_domain.get(domain_name, 0) + 1
            named[f"{domain_name}-{per_domain[domain_name]}"] = (domain_name, tools, tasks)
        return named


def _exchange(name: str, arguments: dict[str, Any], result: str) -> list[dict[str, Any]]:
    """A tool call and its result as chat messages, in the form TRL's rollouts have."""
    call = {"type": "function", "function": {"name": name, "arguments": arguments}}
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": name, "content": result},
    ]


def _trl_reward_func(spec: SimgymTRL, reward: Any) -> Callable[..., list[float | None]]:
    def reward_func(environments: list[Any] | None = None, **_: Any) -> list[float | None]:
        if environments is None:
            raise SimgymError(
                "simgym reward functions read the rollouts' environments; pass "
                "environment_factory=spec.environment_factory to the trainer"
            )
        scores: list[float | None] = []
        for env in environments:
            if not isinstance(env, SimgymEnvironment) or env.trajectory is None:
                scores.append(None)  # another adapter's environment: not ours to score
                continue
            env._close()
            scores.append(spec._score(env.trajectory, reward))
        return scores

    reward_func.__name__ = f"simgym_{reward.name}"
    return reward_func


def _build_reward(spec: Any) -> Any:
    if hasattr(spec, "score") and hasattr(spec, "name"):
        return spec
    from simgym.rewards import build_reward

    return build_reward(spec)


def _read_tasks(tasks: Iterable[Task | dict[str, Any] | str], domain: str | None) -> list[Task]:
    out: list[Task] = []
    seen: set[str] = set()
    for raw in tasks:
        if raw is None:
            raise SimgymError("a task is a Task, a dict or a string, not None")
        task = Task.coerce(raw)
        if task.domain is None:
            if domain is None:
                raise SimgymError(f"task {task.id!r} names no domain and no default was given")
            task = task.model_copy(update={"domain": domain})
        get_domain(task.domain)  # fail now on an unknown domain
        if task.id in seen:
            raise SimgymError(f"task id {task.id!r} appears twice; ids must be unique")
        seen.add(task.id)
        out.append(task)
    if not out:
        raise SimgymError("no tasks given")
    return out
