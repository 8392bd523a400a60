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

A policy that acts in the ``local`` agent's plain-text format (tools listed in its system
prompt, ``<tool_call>`` blocks; the sim2real policies) keeps that format in RL with
:class:`~simgym.integrations.trl.rollout.LocalFormatRollout`, TRL's ``rollout_func``: it plays
whole simgym episodes with the trainer's weights and hands them back as token sequences in
which only the policy's replies are trained.

Limits: ``GRPOTrainer`` calls the tools of a batch one after another, so world-model calls are
not concurrent there; the methods are plain blocking functions (run on simgym's background
event loop), which TRL's asynchronous trainer can run in its thread pool. The generated
classes cannot be pickled, so a trainer that ships the factory to another process needs the
spec rebuilt there.
"""

from simgym.integrations.trl.environment import (
    ANSWERED,
    SimgymEnvironment,
    build_environment_class,
)
from simgym.integrations.trl.methods import UNSET, tool_functions, tool_method
from simgym.integrations.trl.rollout import LocalFormatRollout, TorchPolicy
from simgym.integrations.trl.spec import ANSWER_HINT, ANSWER_TOOL, SYSTEM_PROMPT, SimgymTRL

__all__ = [
    "ANSWERED",
    "ANSWER_HINT",
    "ANSWER_TOOL",
    "SYSTEM_PROMPT",
    "UNSET",
    "SimgymEnvironment",
    "LocalFormatRollout",
    "SimgymTRL",
    "TorchPolicy",
    "build_environment_class",
    "tool_functions",
    "tool_method",
]
