"""GRPO in the local agent's own format: a TRL ``rollout_func`` that plays whole episodes.

TRL's ``environment_factory`` (:class:`~simgym.integrations.trl.SimgymTRL`) shows tools
through the policy's chat template, which needs a template that knows tools. A policy
trained in the ``local`` agent's plain-text format (:mod:`simgym.agents.local`: the tools
listed in the system prompt, calls written as ``<tool_call>{...}</tool_call>``) must keep
that format in RL too, or it learns one format and is evaluated in another. This module
gives ``GRPOTrainer`` a rollout function instead::

    rollout = LocalFormatRollout(tasks, world_model=wm, env_options={"grounding": "strict"},
                                 trajectories="runs/grpo.jsonl")
    trainer = GRPOTrainer(model=policy, processing_class=tokenizer,
                          args=GRPOConfig(num_generations=4, per_device_train_batch_size=4, ...),
                          train_dataset=rollout.train_dataset,
                          reward_funcs=rollout.reward_funcs, rollout_func=rollout)

For each batch TRL hands over the prompts (one dataset row per task, repeated
``num_generations`` times); the rollout plays each task's copies as one simgym group
(:func:`~simgym.rollout.runner.arollout`, the same world, the task's own reward) with
:class:`TorchPolicy`, which generates with the trainer's current weights and writes the
conversation exactly as :class:`~simgym.agents.local.Conversation` does. Each episode comes
back as one token sequence: the local agent's first prompt, then every reply the policy
generated (``env_mask`` 1, trained) interleaved with the environment's turns as the chat
template renders them (``env_mask`` 0, not trained). The simgym reward of the episode is
passed to the reward function as ``simgym_reward``; every episode is appended to the
``trajectories`` file with the training step in its metrics (``grpo_step``).
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simgym.agents.base import Decision, EpisodeView
from simgym.agents.local import Conversation, parse_tool_call
from simgym.core.errors import SimgymError
from simgym.core.sync import run_sync
from simgym.core.types import Task, Trajectory
from simgym.rewards import build_reward

# Generates a reply: the token ids so far and a seed in, the new token ids out.
Generate = Callable[[list[int], int], list[int]]


@dataclass
class EpisodeTokens:
    """One episode as the trainer sees it: the first prompt, then everything after it,
    with ``mask`` 1 on the tokens the policy generated."""

    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)


class TorchPolicy:
    """An agent that writes the local agent's conversation with any token generator (the
    trainer's model), and records each episode's tokens for training.

    ``history_messages`` is unbounded by default: an episode is trained as one sequence,
    so no earlier turn may leave the prompt (within the local agent's default window of 12
    messages the prompts are identical)."""

    name = "torch-policy"

    def __init__(
        self,
        tokenizer: Any,
        generate: Generate,
        *,
        history_messages: int = 10_000,
        seed: int = 0,
    ) -> None:
        self.tokenizer = tokenizer
        self.generate = generate
        self.history_messages = history_messages
        self.seed = seed
        self.records: dict[tuple[str, int], EpisodeTokens] = {}

    async def start(self, view: EpisodeView) -> _TorchSession:
        record = EpisodeTokens()
        self.records[(view.task_id, view.sample or 0)] = record
        base = zlib.crc32(f"{self.seed}:{view.task_id}:{view.sample or 0}".encode())
        return _TorchSession(self, view, record, base)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "format": "local", "seed": self.seed}


class _TorchSession:
    def __init__(
        self, policy: TorchPolicy, view: EpisodeView, record: EpisodeTokens, seed: int
    ) -> None:
        self._policy = policy
        self._record = record
        self._seed = seed
        self._conversation = Conversation(view, policy.history_messages)
        self._text = ""  # the rendered text the recorded tokens stand for

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self._conversation.messages

    async def act(self, observation: str) -> Decision:
        shown = self._conversation.observe(observation)
        if len(shown) != len(self._conversation.messages):
            raise SimgymError("the conversation outgrew history_messages; raise it")
        tokenizer = self._policy.tokenizer
        rendered = tokenizer.apply_chat_template(shown, tokenize=False, add_generation_prompt=True)
        if not rendered.startswith(self._text):
            raise SimgymError("the chat template does not render the conversation as a prefix")
        new = tokenizer(rendered[len(self._text) :], add_special_tokens=False)["input_ids"]
        record = self._record
        if not record.prompt_ids:
            record.prompt_ids = list(new)
        else:
            record.completion_ids += new
            record.mask += [0] * len(new)
        steps = sum(record.mask)
        generated = self._policy.generate(
            record.prompt_ids + record.completion_ids, self._seed + steps
        )
        record.completion_ids += generated
        record.mask += [1] * len(generated)
        text = tokenizer.decode(generated, skip_special_tokens=False)
        reply = _strip_end(text, tokenizer.eos_token)
        self._text = rendered + text
        self._conversation.reply(reply)
        call = parse_tool_call(reply)
        if call is None:
            return Decision(answer=reply.strip(), raw=reply)
        return Decision(action=call, raw=reply)


def _strip_end(text: str, eos: str | None) -> str:
    """The reply without the end-of-turn token the template writes itself."""
    if eos and text.endswith(eos):
        return text[: -len(eos)]
    return text


def torch_generator(
    model: Any,
    tokenizer: Any,
    *,
    temperature: float = 0.3,
    max_tokens: int = 128,
    stop: Sequence[str] = ("</tool_call>",),
) -> Generate:
    """A :data:`Generate` over a transformers model: sampled at ``temperature`` (greedy at
    0), stopping at the end of turn or at any of ``stop`` (kept in the reply)."""
    import torch

    def generate(ids: list[int], seed: int) -> list[int]:
        torch.manual_seed(seed)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                inputs = torch.tensor([ids], device=model.device)
                out = model.generate(
                    input_ids=inputs,
                    attention_mask=torch.ones_like(inputs),
                    do_sample=temperature > 0,
                    temperature=temperature if temperature > 0 else None,
                    top_p=1.0,
                    top_k=0,
                    max_new_tokens=max_tokens,
                    stop_strings=list(stop) or None,
                    tokenizer=tokenizer,
                    eos_token_id=tokenizer.eos_token_id,
                    pad_token_id=tokenizer.pad_token_id,
                )
        finally:
            model.train(was_training)
        new = out[0, len(ids) :].tolist()
        # a batch of one pads nothing, but a pad equal to eos would trail: cut after eos
        if tokenizer.eos_token_id in new:
            new = new[: new.index(tokenizer.eos_token_id) + 1]
        return new

    return generate


class LocalFormatRollout:
    """A TRL ``rollout_func`` playing ``tasks`` in simgym worlds with the trainer's policy
    in the local agent's format (see the module docstring).

    ``world_model`` is a built world model or a name (with ``world_model_options``),
    ``env_options`` go to each episode's environment (``grounding``, ``perturbations``),
    ``reward`` is a reward spec (default: each task's own). ``max_tokens`` caps each reply;
    replies are sampled at ``temperature``, by default the trainer's own
    (``GRPOConfig.temperature``), the one its log-probabilities are computed at."""

    def __init__(
        self,
        tasks: Iterable[Task | dict[str, Any]],
        *,
        world_model: Any = "local",
        world_model_options: dict[str, Any] | None = None,
        env_options: dict[str, Any] | None = None,
        reward: Any = None,
        max_turns: int = 6,
        temperature: float | None = None,
        max_tokens: int = 128,
        trajectories: str | Path | None = None,
        seed: int = 0,
    ) -> None:
        self.tasks = [Task.coerce(t) for t in tasks]
        if not self.tasks:
            raise SimgymError("no tasks to train on")
        self._by_prompt = {_prompt_key(t): t for t in self.tasks}
        if len(self._by_prompt) != len(self.tasks):
            raise SimgymError("two tasks share an id: the rollout tells tasks apart by id")
        self.world_model = world_model
        self.world_model_options = world_model_options or {}
        self.env_options = env_options or {}
        self.reward = build_reward(reward)
        self.max_turns = max_turns
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.trajectories = Path(trajectories) if trajectories is not None else None
        self.seed = seed
        self.history: list[dict[str, Any]] = []  # per call: step, rewards, turns

    @property
    def train_dataset(self) -> Any:
        """One row per task: a ``prompt`` naming it (the policy is shown the local agent's
        own prompt, built by the rollout from the task and the world)."""
        from datasets import Dataset

        return Dataset.from_list(
            [{"prompt": [{"role": "user", "content": _prompt_key(t)}]} for t in self.tasks]
        )

    @property
    def reward_funcs(self) -> list[Callable[..., list[float]]]:
        """The reward function for ``GRPOTrainer``: each episode's simgym reward."""
        return [simgym_reward]

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        step = int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0)
        model = trainer.accelerator.unwrap_model(trainer.model)
        tokenizer = trainer.processing_class
        temperature = self.temperature
        if temperature is None:
            temperature = float(getattr(trainer.args, "temperature", 1.0))
        generate = torch_generator(
            model, tokenizer, temperature=temperature, max_tokens=self.max_tokens
        )
        return self.play(prompts, tokenizer, generate, step=step)

    def play(
        self, prompts: list[Any], tokenizer: Any, generate: Generate, *, step: int = 0
    ) -> dict[str, Any]:
        """Play one episode per prompt and return TRL's rollout fields, in prompt order."""
        tasks = [self._task_of(p) for p in prompts]
        counts = Counter(t.id for t in tasks)
        policy = TorchPolicy(tokenizer, generate, seed=self.seed * 1_000_003 + step)
        played: dict[tuple[str, int], Trajectory] = {}
        for task_id, n in counts.items():
            task = next(t for t in tasks if t.id == task_id)
            for trajectory in run_sync(self._group(task, n, policy)):
                played[(task_id, trajectory.sample or 0)] = trajectory
        out: dict[str, Any] = {
            "prompt_ids": [],
            "completion_ids": [],
            "logprobs": None,
            "env_mask": [],
            "simgym_reward": [],
            "simgym_turns": [],
        }
        seen: Counter[str] = Counter()
        for task in tasks:
            sample = seen[task.id]
            seen[task.id] += 1
            record = policy.records.get((task.id, sample))
            trajectory = played.get((task.id, sample))
            if record is None or not record.prompt_ids or not record.completion_ids:
                # the world failed before the policy spoke: nothing to train on
                eos = tokenizer.eos_token_id
                record = EpisodeTokens(prompt_ids=[eos], completion_ids=[eos], mask=[0])
            out["prompt_ids"].append(record.prompt_ids)
            out["completion_ids"].append(record.completion_ids)
            out["env_mask"].append(record.mask)
            out["simgym_reward"].append(float(trajectory.total_reward) if trajectory else 0.0)
            out["simgym_turns"].append(len(trajectory.turns) if trajectory else 0)
        self._record(step, list(played.values()), out)
        return out

    async def _group(self, task: Task, n: int, policy: TorchPolicy) -> list[Trajectory]:
        from simgym.rollout.runner import arollout

        return await arollout(
            [task],
            agent=policy,
            world_model=self.world_model,
            world_model_options=self.world_model_options,
            reward=self.reward,
            group_size=n,
            max_turns=self.max_turns,
            concurrency=1,
            env_options=self.env_options,
        )

    def _task_of(self, prompt: Any) -> Task:
        key = prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)
        try:
            return self._by_prompt[key]
        except KeyError:
            raise SimgymError(f"a prompt names no task of this rollout: {key[:80]!r}") from None

    def _record(self, step: int, played: list[Trajectory], out: dict[str, Any]) -> None:
        rewards = out["simgym_reward"]
        self.history.append(
            {
                "step": step,
                "episodes": len(rewards),
                "mean_reward": sum(rewards) / len(rewards) if rewards else 0.0,
                "rewards": rewards,
                "turns": out["simgym_turns"],
            }
        )
        if self.trajectories is None:
            return
        from simgym.core.trajectories import TrajectoryWriter

        with TrajectoryWriter(self.trajectories) as writer:
            for trajectory in played:
                trajectory.metrics["grpo_step"] = step
                writer.write(trajectory)


def simgym_reward(
    prompts: list[Any], completions: list[Any], simgym_reward: list[float], **_: Any
) -> list[float]:
    """Each episode's simgym reward, as the rollout scored it."""
    return list(simgym_reward)


def _prompt_key(task: Task) -> str:
    return f"task {task.id}"
