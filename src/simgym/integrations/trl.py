"""TRL adapter: simulated environments for ``GRPOTrainer(environment_factory=...)``.

One :class:`SimgymTRL` spec gives the three things TRL's GRPO trainer takes::

    spec = SimgymTRL("mcp", tasks, world_model="openai",
                     world_model_options={"base_url": "http://wm:8000/v1", "model": "..."},
                     trajectories="episodes.jsonl")
    trainer = GRPOTrainer(model=policy, args=GRPOConfig(...), processing_class=tokenizer,
                          train_dataset=spec.train_dataset,
                          environment_factory=spec.environment_factory,
                          reward_funcs=spec.reward_funcs)
    trainer.train()
    spec.close()

How TRL (1.16) drives it, and what simgym does at each point:

- TRL builds environment instances with ``environment_factory()`` and lists the public
  methods of their class as tools, reading each method's signature and Google-style
  docstring with transformers' ``get_json_schema``. The classes here are generated from the
  domain's agent tools (:class:`~simgym.core.types.ToolSpec`): one method per tool, with a
  real :class:`inspect.Signature`, annotations and a docstring made from the tool's JSON
  schema, plus ``submit_answer(answer)``, which ends the episode with the policy's final
  answer. A call is one ``SimEnv.step``; the method returns the observation text, which TRL
  shows the policy as the tool's result (an invalid call comes back as simgym's error
  observation, so the policy sees its mistake, and is recorded like any other turn).
- Before each rollout TRL calls ``reset(**row)`` with the dataset row; the row's ``task``
  column (the task as JSON) starts a new episode, and ``reset`` returns the first user
  message: the instruction and what the environment shows at the start. The ``num_generations``
  rollouts of one task share its scenario seed (derived from the task id as in
  :func:`simgym.rollout.episode.episode_seed`), so the world answers the same action alike.
- After the rollout TRL calls ``get_reward()``, which closes the episode, scores it with the
  simgym reward (:func:`simgym.rewards.build_reward`; ``reward=None`` uses each task's own
  reward from its metadata), records the score on the trajectory and appends the trajectory
  to the ``trajectories`` JSONL file. TRL adds ``get_reward`` as a reward source by itself
  (weight 1, logged under the class name), so :attr:`SimgymTRL.reward_funcs` holds only
  *extra* rewards (``extra_rewards=``); never add one that reads ``get_reward`` again.

A policy that has never seen the tool-call format rarely calls a tool, so RL has nothing to
learn from; :meth:`SimgymTRL.demonstrate` plays scripted actions in a task's simulated world
and returns the conversation exactly as the trainer would render it, for a supervised warm
start (``examples/grpo_trl/train.py`` does this for a tiny policy).

Tools that differ between tasks (mcp scenarios declare their own tools; search scenarios
choose theirs): tasks are grouped by domain and tool set, and each group gets its own class.
With one group :attr:`~SimgymTRL.environment_factory` is that class; with several it is a
``{name: class}`` dict and the dataset gets the ``environment`` column TRL uses to route each
row, so every prompt shows exactly its own world's tools. Mixing domains works the same way.

Limits: ``GRPOTrainer`` calls the tools of a batch one after another, so world-model calls are
not concurrent there; the methods are plain blocking functions (run on simgym's background
event loop), which TRL's asynchronous trainer can run in its thread pool. The generated
classes cannot be pickled, so a trainer that ships the factory to another process needs the
spec rebuilt there.
"""

from __future__ import annotations

import inspect
import itertools
import json
import keyword
import re
import threading
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar, Literal, Union

from simgym.core.domain import get_domain
from simgym.core.env import SimEnv
from simgym.core.errors import SimgymError
from simgym.core.sync import run_sync
from simgym.core.types import Action, Task, ToolSpec, Trajectory
from simgym.core.worldmodel import WorldModel, create_world_model
from simgym.rollout.episode import episode_seed, score_trajectory

ANSWER_TOOL = "submit_answer"

SYSTEM_PROMPT = """You are an agent acting in a simulated {domain} environment. Reach the goal the \
user gives you by calling the tools you are offered, one call at a time, and read each \
result before deciding the next step."""

ANSWER_HINT = "When the task is done, or cannot be done, call {tool} with your final answer."
ANSWERED = "Answer submitted. The episode is over."

_RESERVED = frozenset({"reset", "get_reward"})  # TRL treats these as lifecycle, not tools
_SECTION = re.compile(r"\b(Args|Returns|Raises):")  # docstring parser's section headers
_CHOICES = re.compile(r"\(choices:.*\)\s*$", re.IGNORECASE)  # parsed as an enum at line end
_SIMPLE_KEYS = frozenset({"type", "description", "title", "default", "enum", "const", "items"})


class _Unset:
    """Default of an optional tool argument the policy left out (it is not sent)."""

    def __repr__(self) -> str:
        return "<unset>"


UNSET: Any = _Unset()


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
        return _step_text(self._env, {"name": tool, "arguments": arguments})

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
                text = _step_text(env, action)
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
        _check_tool_name(tool.name, domain)
        members[tool.name] = tool_method(tool, qualname=f"{class_name}.{tool.name}")
    if spec.answer_tool is not None:
        members[spec.answer_tool] = _answer_method(spec.answer_tool, class_name)
    return type(class_name, (SimgymEnvironment,), members)


def tool_functions(cls: type) -> dict[str, Callable[..., Any]]:
    """The functions of an environment class that TRL offers as tools: public functions
    other than ``reset`` and ``get_reward`` (TRL's own rule, so prompts match)."""
    return {
        name: fn
        for name, fn in inspect.getmembers(cls, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in _RESERVED
    }


def tool_method(tool: ToolSpec, *, qualname: str | None = None) -> Callable[..., str]:
    """A method ``(self, **arguments) -> str`` for ``tool`` that steps the instance's
    environment, with the signature, annotations and Google-style docstring that
    ``transformers.utils.get_json_schema`` turns back into the tool's schema.

    Argument names that are not Python identifiers are renamed (``file-path`` becomes
    ``file_path``) and mapped back before the call; optional arguments the policy leaves
    out are not sent. Detail that a Python annotation cannot carry (nested object fields,
    formats, bounds) is added to the argument's description as its JSON schema.
    """
    properties = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    wire: dict[str, str] = {}  # python name -> schema name
    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    arg_docs: list[str] = []
    for prop, schema in properties.items():
        schema = schema if isinstance(schema, dict) else {}
        py_name = _identifier(prop, taken=set(wire) | {"self"})
        wire[py_name] = prop
        annotation = _annotation(schema)
        annotations[py_name] = annotation
        parameters.append(
            inspect.Parameter(
                py_name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if prop in required else UNSET,
                annotation=annotation,
            )
        )
        arg_docs.append(f"    {py_name}: {_arg_description(prop, schema)}")
    annotations["return"] = str
    order = list(wire)

    def call(self: SimgymEnvironment, *args: Any, **kwargs: Any) -> str:
        if len(args) > len(order):
            raise TypeError(f"{tool.name}() takes {len(order)} arguments, got {len(args)}")
        kwargs.update(zip(order, args, strict=False))
        # Names the schema does not know pass through as given: the domain's validation
        # then answers with the environment's own error, which the turn records.
        arguments = {wire.get(k, k): v for k, v in kwargs.items() if v is not UNSET}
        return self._call(tool.name, arguments)

    description = _clean(tool.description) or f"Call the {tool.name} tool."
    doc = [description, ""]
    if arg_docs:
        doc += ["Args:", *arg_docs, ""]
    doc += ["Returns:", "    What the environment shows after the call."]
    call.__name__ = tool.name
    call.__qualname__ = qualname or tool.name
    call.__doc__ = "\n".join(doc)
    call.__annotations__ = annotations
    call.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    call.wire_names = dict(wire)  # type: ignore[attr-defined]
    return call


def _answer_method(name: str, class_name: str) -> Callable[..., str]:
    def answer(self: SimgymEnvironment, answer: str) -> str:
        return self._answer(answer)

    answer.__name__ = name
    answer.__qualname__ = f"{class_name}.{name}"
    answer.__doc__ = (
        "Submit your final answer to the task. This ends the episode: later calls are "
        "refused.\n\nArgs:\n    answer: your final answer, in the form the task asks for\n\n"
        "Returns:\n    A confirmation."
    )
    answer.__annotations__ = {"answer": str, "return": str}
    return answer


def _step_text(env: SimEnv, action: Any) -> str:
    """One step, as the text a tool method returns (with a note when it ended the run)."""
    result = run_sync(env.step(action))
    text = result.observation.text
    if result.truncated and result.info.get("error_type") != "world_model":
        text += f"\n[simgym] the turn limit ({env.max_turns}) was reached; the episode is over."
    return text


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


def _check_tool_name(name: str, domain: str) -> None:
    if not name or name.startswith("_"):
        raise SimgymError(
            f"the {domain} tool {name!r} cannot be offered through TRL, which hides "
            "methods whose names start with an underscore"
        )
    if name in _RESERVED:
        raise SimgymError(
            f"the {domain} tool {name!r} clashes with TRL's environment method of that name"
        )


def _identifier(name: str, taken: set[str]) -> str:
    """A Python parameter name for a schema property."""
    base = re.sub(r"\W", "_", name) or "arg"
    if base[0].isdigit():
        base = f"_{base}"
    if keyword.iskeyword(base):
        base += "_"
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}_{n}"
    return candidate


_BASIC = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}


def _annotation(schema: dict[str, Any]) -> Any:
    """The Python type whose JSON schema (as transformers writes it) matches ``schema``."""
    if "const" in schema and _literal_ok([schema["const"]]):
        return Literal[schema["const"]]  # type: ignore[valid-type]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and _literal_ok(enum):
        return Literal[tuple(enum)]  # type: ignore[valid-type]
    variants = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(variants, list) and variants:
        return _union([_annotation(v) for v in variants if isinstance(v, dict)])
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([_annotation({**schema, "type": k}) for k in kind])
    if kind in _BASIC:
        return _BASIC[kind]
    if kind == "array":
        items = schema.get("items")
        return list[_annotation(items)] if isinstance(items, dict) else list[Any]
    if kind == "object":
        extra = schema.get("additionalProperties")
        return dict[str, _annotation(extra)] if isinstance(extra, dict) else dict[str, Any]
    return Any


def _union(types: list[Any]) -> Any:
    unique = list(dict.fromkeys(types))
    if not unique:
        return Any
    return unique[0] if len(unique) == 1 else Union[tuple(unique)]  # noqa: UP007


def _literal_ok(values: list[Any]) -> bool:
    return all(v is None or type(v) in (str, int, float, bool) for v in values)


def _is_simple(schema: dict[str, Any]) -> bool:
    """Whether the annotation carries everything the schema says (bar descriptions)."""
    if set(schema) - _SIMPLE_KEYS:
        return False
    items = schema.get("items")
    if items is not None and not (isinstance(items, dict) and _is_simple(items)):
        return False
    kind = schema.get("type")
    return not (kind == "object" or (isinstance(kind, list) and "object" in kind))


def _arg_description(prop: str, schema: dict[str, Any]) -> str:
    parts = [_clean(str(schema.get("description") or "")) or f"the {prop} argument"]
    if "default" in schema:
        parts.append(f"Defaults to {json.dumps(schema['default'], ensure_ascii=False)}.")
    if not _is_simple(schema):
        detail = {k: v for k, v in schema.items() if k not in ("description", "title")}
        parts.append(f"JSON schema: {json.dumps(detail, ensure_ascii=False, sort_keys=True)}")
    if len(parts) > 1 and parts[0][-1] not in ".!?":
        parts[0] += "."
    text = " ".join(parts)
    if _CHOICES.search(text):
        text += "."  # else the docstring parser would read it as an enum
    return text


def _clean(text: str) -> str:
    """One line, with nothing the docstring parser would take for a section header."""
    return _SECTION.sub(r"\1 -", " ".join(text.split()))
