"""GRPO in the local agent's format: the TRL rollout function plays whole simgym episodes,
returns them as token sequences whose trained part is exactly the policy's replies, and
TRL's GRPOTrainer trains on them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="the train extra (trl, transformers, datasets) is not installed")

import simgym  # noqa: E402
from simgym.agents.local import system_prompt  # noqa: E402
from simgym.core.errors import SimgymError  # noqa: E402
from simgym.core.trajectories import read_trajectories  # noqa: E402
from simgym.integrations.trl.rollout import LocalFormatRollout  # noqa: E402
from simgym.rewards.base import RewardResult  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CUSTOMERS = {
    "C-1001": {"id": "C-1001", "name": "Ana Lima", "tier": "gold"},
    "C-1002": {"id": "C-1002", "name": "Ben Okafor", "tier": "basic"},
}
TOOLS = [
    {
        "name": "get_customer",
        "description": "Fetch one customer by id.",
        "parameters": {
            "type": "object",
            "properties": {"customer_id": {"type": "string"}},
            "required": ["customer_id"],
        },
    }
]


def task(task_id: str, customer: str, answer: str) -> dict[str, Any]:
    return {
        "id": task_id,
        "domain": "mcp",
        "instruction": f"Which tier is customer {customer} in?",
        "metadata": {"answer": answer},
        "scenario": {"server_name": "customer-records", "tools": TOOLS},
    }


def world(messages: list[dict[str, str]]) -> str:
    action = messages[-1]["content"]
    for customer_id, record in CUSTOMERS.items():
        if customer_id in action:
            return json.dumps(record)
    return json.dumps({"error": "no such customer"})


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from simgym.worldmodels.local import embedded_model_path

    if embedded_model_path() is None:
        pytest.skip("the embedded model (its GGUF holds the tokenizer) is not installed")
    from simgym.train.base import load_tokenizer

    return load_tokenizer(None)  # SmolLM2's own ChatML template, as the local agent uses


class ScriptedReplies:
    """A generator that writes given replies in turn (the policy under test is the
    rollout's bookkeeping, not a model): each call returns the next reply's tokens."""

    def __init__(self, tokenizer: Any, replies: list[str]) -> None:
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.contexts: list[list[int]] = []

    def __call__(self, ids: list[int], seed: int) -> list[int]:
        self.contexts.append(list(ids))
        reply = self.replies.pop(0)
        return self.tokenizer(reply, add_special_tokens=False)["input_ids"]


CALL = '<tool_call>{"name": "get_customer", "arguments": {"customer_id": "C-1001"}}</tool_call>'


def test_episodes_come_back_as_the_local_conversation_with_only_replies_trained(
    tokenizer: Any, tmp_path: Path
) -> None:
    tasks = [task("ana", "C-1001", "gold"), task("ben", "C-1002", "basic")]
    rollout = LocalFormatRollout(
        tasks,
        world_model=simgym.FunctionWorldModel(world),
        max_turns=4,
        trajectories=tmp_path / "episodes.jsonl",
    )
    eos = tokenizer.eos_token
    # ana twice (a group of two), ben once; the groups play one after another
    replies = [CALL, f"gold{eos}", f"silver{eos}", f"basic{eos}"]
    generate = ScriptedReplies(tokenizer, replies)
    prompts = [[{"role": "user", "content": "task ana"}]] * 2 + [
        [{"role": "user", "content": "task ben"}]
    ]
    out = rollout.play(prompts, tokenizer, generate, step=7)

    episodes = list(read_trajectories(tmp_path / "episodes.jsonl"))
    assert len(episodes) == 3
    assert all(t.metrics["grpo_step"] == 7 for t in episodes)
    by_key = {(t.task.id, t.sample or 0): t for t in episodes}
    assert sorted(by_key) == [("ana", 0), ("ana", 1), ("ben", 0)]
    keys = [("ana", 0), ("ana", 1), ("ben", 0)]
    # each output row is its own episode: the reward is that episode's simgym reward
    assert out["simgym_reward"] == [by_key[k].total_reward for k in keys]
    assert sorted(out["simgym_reward"]) == [0.0, 1.0, 1.0]
    assert out["logprobs"] is None

    for key, prompt_ids, completion_ids, mask in zip(
        keys, out["prompt_ids"], out["completion_ids"], out["env_mask"], strict=True
    ):
        trajectory = by_key[key]
        messages = trajectory.agent_messages
        # the prompt is the local agent's own: its system prompt with the tools, the task
        assert messages[0]["content"] == system_prompt(
            simgym.agents.base.EpisodeView(
                domain="mcp", instruction="", tools=trajectory_tools(trajectory)
            )
        )
        first = tokenizer.apply_chat_template(
            messages[:2], tokenize=False, add_generation_prompt=True
        )
        assert tokenizer.decode(prompt_ids) == first
        # prompt + completion is the whole conversation as the chat template renders it
        whole = tokenizer.apply_chat_template(messages, tokenize=False)
        assert tokenizer.decode(prompt_ids + completion_ids) == whole.rstrip("\n")
        assert len(mask) == len(completion_ids)
        # the trained tokens are exactly the policy's replies: an answer with the end of
        # turn it wrote; a call up to its closing tag, where generation stops (as the local
        # agent's does), the template's end of turn after it being the environment's
        trained = [i for i, m in zip(completion_ids, mask, strict=True) if m]
        written = [
            m["content"] + ("" if m["content"].endswith("</tool_call>") else eos)
            for m in messages
            if m["role"] == "assistant"
        ]
        assert tokenizer.decode(trained) == "".join(written)
        # and the world's answers are in the untrained part
        untrained = tokenizer.decode(
            [i for i, m in zip(completion_ids, mask, strict=True) if not m]
        )
        if trajectory.turns and trajectory.turns[0].action and trajectory.turns[0].action.name:
            assert "Ana Lima" in untrained

    # the generator saw each episode grow as one sequence: every context extends the last
    ana0 = generate.contexts[0]
    assert generate.contexts[1][: len(ana0)] == ana0
    assert rollout.history[-1]["step"] == 7


def trajectory_tools(trajectory: Any) -> list[Any]:
    from simgym.core.types import ToolSpec

    return [ToolSpec(**t) for t in trajectory.scenario["tools"]]


def test_a_prompt_that_names_no_task_is_refused(tokenizer: Any) -> None:
    rollout = LocalFormatRollout(
        [task("ana", "C-1001", "gold")], world_model=simgym.FunctionWorldModel(world)
    )
    with pytest.raises(SimgymError, match="names no task"):
        rollout.play([[{"role": "user", "content": "task zed"}]], tokenizer, lambda i, s: [])
    with pytest.raises(SimgymError, match="share an id"):
        LocalFormatRollout([task("a", "C-1001", "gold"), task("a", "C-1002", "basic")])
    with pytest.raises(SimgymError, match="no tasks"):
        LocalFormatRollout([])


class LetterShare:
    """The share of the answer that is ASCII letters: a reward that differs within a group
    of a random policy's episodes, so that GRPO has an advantage to follow."""

    name = "letter_share"

    async def score(self, trajectory: Any) -> RewardResult:
        answer = trajectory.answer or ""
        letters = sum(c.isascii() and c.isalpha() for c in answer)
        return RewardResult(value=letters / len(answer) if answer else 0.0)


def load_example() -> Any:
    path = ROOT / "examples" / "grpo_trl" / "train.py"
    spec = importlib.util.spec_from_file_location("grpo_trl_example", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_grpo_trainer_trains_with_the_rollout_function(tokenizer: Any, tmp_path: Path) -> None:
    import torch
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    policy = load_example().tiny_policy(tokenizer, hidden=32, layers=2, seed=1)
    rollout = LocalFormatRollout(
        [task("ana", "C-1001", "gold")],
        world_model=simgym.FunctionWorldModel(world),
        reward=LetterShare(),
        max_turns=2,
        max_tokens=12,
        trajectories=tmp_path / "episodes.jsonl",
    )
    trainer = GRPOTrainer(
        model=policy,
        processing_class=tokenizer,
        args=GRPOConfig(
            output_dir=str(tmp_path / "run"),
            max_steps=2,
            per_device_train_batch_size=4,
            num_generations=4,
            learning_rate=1e-2,
            temperature=1.0,
            beta=0.0,
            logging_steps=1,
            report_to="none",
            use_cpu=True,
            save_strategy="no",
        ),
        train_dataset=rollout.train_dataset,
        reward_funcs=rollout.reward_funcs,
        rollout_func=rollout,
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"),
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    episodes = list(read_trajectories(tmp_path / "episodes.jsonl"))
    assert [t.metrics["grpo_step"] for t in episodes] == [0] * 4 + [1] * 4
    assert all(t.agent["name"] == "torch-policy" for t in episodes)
    # TRL logged the rewards simgym scored, step by step
    logged = [r["reward"] for r in trainer.state.log_history if "reward" in r]
    assert logged == [
        pytest.approx(sum(t.total_reward for t in episodes[i : i + 4]) / 4, abs=1e-4)
        for i in (0, 4)
    ]
    assert [h["step"] for h in rollout.history] == [0, 1]
    # rewards differed within a group, so the policy's weights moved
    assert any(len(set(h["rewards"])) > 1 for h in rollout.history)
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(before[n], after[n]) for n in before)
    # a reply is at most max_tokens long
    assert all(len(m["content"]) < 400 for t in episodes for m in t.agent_messages[2:])


def _grpo(tokenizer: Any, tmp_path: Path, policy: Any, max_steps: int) -> Any:
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    rollout = LocalFormatRollout(
        [task(f"t{i}", f"C-100{i}", "gold") for i in range(6)],
        world_model=simgym.FunctionWorldModel(world),
        reward=LetterShare(),
        max_turns=1,
        max_tokens=8,
    )
    return GRPOTrainer(
        model=policy,
        processing_class=tokenizer,
        args=GRPOConfig(
            output_dir=str(tmp_path / "run"),
            max_steps=max_steps,
            per_device_train_batch_size=4,
            num_generations=4,
            learning_rate=1e-2,
            beta=0.0,
            save_steps=1,
            report_to="none",
            use_cpu=True,
        ),
        train_dataset=rollout.train_dataset,
        reward_funcs=rollout.reward_funcs,
        rollout_func=rollout,
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"),
    )


def test_a_grpo_run_resumed_at_its_step_limit_trains_no_step_more(
    tokenizer: Any, tmp_path: Path
) -> None:
    from simgym.train.resume import reached, restore

    example = load_example()
    first = _grpo(tokenizer, tmp_path, example.tiny_policy(tokenizer, hidden=32, layers=2), 2)
    first.train()
    checkpoint = tmp_path / "run" / "checkpoint-2"
    assert first.state.global_step == 2 and reached(checkpoint, 2) and not reached(checkpoint, 3)
    trained = {n: p.detach().clone() for n, p in first.model.named_parameters() if "lora" in n}

    policy = example.tiny_policy(tokenizer, hidden=32, layers=2)
    again = _grpo(tokenizer, tmp_path, policy, 2)
    restore(again, checkpoint)
    assert again.state.global_step == 2
    weights = dict(again.model.named_parameters())
    assert all(torch_equal(trained[n], weights[n]) for n in trained)


def torch_equal(a: Any, b: Any) -> bool:
    import torch

    return torch.equal(a.detach(), b.detach())
