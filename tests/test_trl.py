"""The TRL adapter: generated environment classes, their lifecycle, and TRL's GRPOTrainer
running against simgym (a tiny policy on CPU, a function world model)."""

from __future__ import annotations

import importlib.util
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="the train extra (trl, transformers, datasets) is not installed")

from transformers.utils import get_json_schema  # noqa: E402

import simgym  # noqa: E402
from simgym.core.errors import SimgymError  # noqa: E402
from simgym.core.trajectories import read_trajectories  # noqa: E402
from simgym.integrations.trl import SimgymTRL, tool_functions  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CUSTOMERS = {
    "C-1001": {"id": "C-1001", "name": "Ana Lima", "email": "ana.lima@example.com", "tier": "gold"},
    "C-1002": {"id": "C-1002", "name": "Ben Okafor", "email": "ben@example.org", "tier": "basic"},
}

# A server whose tool schemas hold what a Python signature has to work for: names that are
# not identifiers or are keywords, enums, defaults, nullable and nested types.
TRICKY_SCENARIO = {
    "server_name": "files",
    "description": "A file store.",
    "tools": [
        {
            "name": "read-file",
            "description": "Read a file.\nReturns: the text. Args: none extra.",
            "parameters": {
                "type": "object",
                "properties": {
                    "file-path": {"type": "string", "description": "where the file is"},
                    "from": {"type": "integer", "description": "first line", "default": 1},
                    "encoding": {"type": "string", "enum": ["utf-8", "latin-1"]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "owner": {"type": ["string", "null"], "description": "who owns it"},
                    "filter": {
                        "type": "object",
                        "properties": {"min_size": {"type": "integer"}},
                        "description": "which files",
                    },
                },
                "required": ["file-path"],
            },
        },
        {"name": "list_files", "description": "", "parameters": {"type": "object"}},
    ],
}


def customer_world(messages: list[dict[str, str]]) -> str:
    """Answers with the customer the action names (a search finds Ana)."""
    action = messages[-1]["content"]
    for customer_id, record in CUSTOMERS.items():
        if customer_id in action:
            return json.dumps(record)
    return json.dumps({"customers": [CUSTOMERS["C-1001"]]})


def tier_task(task_id: str = "tier", answer: str = "gold") -> dict[str, Any]:
    return {
        "id": task_id,
        "instruction": "Which tier is customer C-1001 in?",
        "metadata": {"answer": answer},
    }


def public_tools(instance: object) -> dict[str, Any]:
    """The tools TRL finds on an environment: its own rule (grpo_trainer.py), applied here."""
    found = {}
    for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction):
        if name not in ("reset", "get_reward") and not name.startswith("_"):
            found[name] = getattr(instance, name)
    return found


def test_environment_methods_carry_the_tool_schemas_trl_extracts() -> None:
    spec = SimgymTRL(
        "mcp",
        [{"id": "a", "scenario": TRICKY_SCENARIO}],
        world_model=simgym.FunctionWorldModel(str),
    )
    env = spec.environment_factory()
    tools = public_tools(env)
    assert sorted(tools) == ["list_files", "read-file", "submit_answer"]
    assert sorted(tool_functions(type(env))) == sorted(tools)

    schema = get_json_schema(tools["read-file"])["function"]
    assert schema["name"] == "read-file"
    # "Returns:"/"Args:" inside a description must not cut it short
    assert schema["description"].startswith("Read a file. Returns - the text. Args - none")
    params = schema["parameters"]
    assert params["required"] == ["file_path"]
    props = params["properties"]
    assert list(props) == ["file_path", "from_", "encoding", "tags", "owner", "filter"]
    assert props["file_path"] == {"type": "string", "description": "where the file is"}
    assert props["from_"]["type"] == "integer"
    assert props["from_"]["description"] == "first line. Defaults to 1."
    assert props["encoding"]["enum"] == ["utf-8", "latin-1"]
    assert props["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "the tags argument",
    }
    assert props["owner"]["type"] == "string" and props["owner"]["nullable"] is True
    # a nested object's fields cannot live in a Python annotation: they go in the text
    assert props["filter"]["type"] == "object"
    assert '"min_size": {"type": "integer"}' in props["filter"]["description"]

    empty = get_json_schema(tools["list_files"])["function"]
    assert empty["description"] == "Call the list_files tool."
    assert empty["parameters"] == {"type": "object", "properties": {}}
    answer = get_json_schema(tools["submit_answer"])["function"]
    assert answer["parameters"]["required"] == ["answer"]


def test_tools_step_the_world_and_get_reward_scores_the_episode(tmp_path: Path) -> None:
    seen: list[str] = []

    def world(messages: list[dict[str, str]]) -> str:
        seen.append(messages[-1]["content"])
        return customer_world(messages)

    out = tmp_path / "episodes.jsonl"
    spec = SimgymTRL(
        "mcp",
        [tier_task("right"), tier_task("wrong", answer="basic")],
        world_model=simgym.FunctionWorldModel(world),
        trajectories=out,
    )
    rows = list(spec.train_dataset)
    assert [row["task_id"] for row in rows] == ["right", "wrong"]
    assert rows[0]["prompt"][0]["role"] == "system"
    assert "submit_answer" in rows[0]["prompt"][0]["content"]
    assert rows[0]["prompt"][-1] == {"role": "user", "content": ""}

    env = spec.environment_factory()
    first = env.reset(**rows[0])
    assert "Which tier is customer C-1001 in?" in first
    assert "Customer records of a small bank" in first  # the server's own description

    assert json.loads(env.get_customer(customer_id="C-1001"))["tier"] == "gold"
    assert '"customer_id": "C-1001"' in seen[-1]  # the world model saw the call
    bad = env.get_customer()
    assert bad.startswith("[simgym error]") and "customer_id" in bad
    assert env.submit_answer(answer="gold") == "Answer submitted. The episode is over."
    refused = env.get_customer(customer_id="C-1002")
    assert "episode is over" in refused and "answer was submitted" in refused
    assert len(seen) == 1  # neither the invalid call nor the refused one reached the model

    assert env.get_reward() == 1.0
    assert env.get_reward() == 1.0  # scored once, written once
    trajectory = env.trajectory
    assert trajectory is not None
    assert [t.error_type for t in trajectory.turns] == [None, "action", None]
    assert trajectory.answer == "gold" and trajectory.done
    assert trajectory.reward_parts == {"exact": 1.0}

    second = spec.environment_factory()
    second.reset(**rows[1])
    second.get_customer(customer_id="C-1001")
    second.submit_answer(answer="gold")
    assert second.get_reward() == 0.0
    spec.close()

    written = list(read_trajectories(out))
    assert [(t.task.id, t.total_reward, t.agent["name"]) for t in written] == [
        ("right", 1.0, "trl"),
        ("wrong", 0.0, "trl"),
    ]
    assert written[0].group_id == "right" and written[0].sample == 0


def test_group_rollouts_share_the_seed_and_count_samples() -> None:
    seeds: list[Any] = []
    spec = SimgymTRL("mcp", [tier_task()], world_model=simgym.FunctionWorldModel(customer_world))
    row = spec.train_dataset[0]
    for _ in range(2):
        env = spec.environment_factory()
        env.reset(**row)
        seeds.append((env.trajectory.seed, env.trajectory.sample))
    assert seeds[0][0] == seeds[1][0] is not None
    assert [sample for _, sample in seeds] == [0, 1]


def test_renamed_arguments_reach_the_world_under_their_schema_names() -> None:
    seen: list[str] = []

    def world(messages: list[dict[str, str]]) -> str:
        seen.append(messages[-1]["content"])
        return '{"text": "hello"}'

    spec = SimgymTRL(
        "mcp",
        [{"id": "a", "scenario": TRICKY_SCENARIO}],
        world_model=simgym.FunctionWorldModel(world),
    )
    env = spec.environment_factory()
    env.reset(**spec.train_dataset[0])
    method = getattr(env, "read-file")
    assert method(file_path="/etc/motd", from_=3) == '{"text": "hello"}'
    call = json.loads(seen[-1].split("**Action:**")[-1].strip().strip("`").strip())
    # optional arguments left out are not sent; renamed ones go back to their own names
    assert call == {"name": "read-file", "arguments": {"file-path": "/etc/motd", "from": 3}}


def test_tasks_with_different_tools_get_one_environment_each() -> None:
    tasks = [
        tier_task("bank"),
        {"id": "files", "instruction": "List the files.", "scenario": TRICKY_SCENARIO},
        {"id": "shell", "domain": "terminal", "instruction": "Show the date."},
    ]
    spec = SimgymTRL("mcp", tasks, world_model=simgym.FunctionWorldModel(customer_world))
    factory = spec.environment_factory
    assert isinstance(factory, dict) and list(factory) == ["mcp-1", "mcp-2", "terminal-1"]
    assert spec.train_dataset["environment"] == ["mcp-1", "mcp-2", "terminal-1"]
    assert set(public_tools(factory["mcp-1"]())) == {
        "search_customers",
        "get_customer",
        "update_email",
        "submit_answer",
    }
    assert set(public_tools(factory["mcp-2"]())) == {"read-file", "list_files", "submit_answer"}
    assert set(public_tools(factory["terminal-1"]())) == {"send_keys", "submit_answer"}
    assert spec.environment_class("shell") is factory["terminal-1"]


def test_unscored_episodes_are_written_not_lost(tmp_path: Path) -> None:
    out = tmp_path / "episodes.jsonl"
    spec = SimgymTRL(
        "mcp",
        [tier_task("a"), tier_task("b")],
        world_model=simgym.FunctionWorldModel(customer_world),
        trajectories=out,
    )
    env = spec.environment_factory()
    env.reset(**spec.train_dataset[0])
    env.get_customer(customer_id="C-1001")
    env.reset(**spec.train_dataset[1])  # the first episode was never scored
    assert [t.task.id for t in read_trajectories(out)] == ["a"]
    spec.close()  # the second is written on close
    written = list(read_trajectories(out))
    assert [(t.task.id, t.truncated, t.error) for t in written] == [
        ("a", True, None),
        ("b", True, None),
    ]
    assert written[0].reward_parts == {}  # unscored, and recorded as such


def test_turn_limit_ends_the_episode_and_the_policy_is_told() -> None:
    spec = SimgymTRL(
        "mcp", [tier_task()], world_model=simgym.FunctionWorldModel(customer_world), max_turns=1
    )
    env = spec.environment_factory()
    env.reset(**spec.train_dataset[0])
    text = env.get_customer(customer_id="C-1001")
    assert "turn limit (1) was reached" in text
    refused = env.submit_answer(answer="gold")
    assert refused.startswith("[simgym error] the episode is over")
    assert env.trajectory.answer is None
    assert env.get_reward() == 0.0


def test_extra_rewards_become_trl_reward_functions() -> None:
    spec = SimgymTRL(
        "mcp",
        [tier_task()],
        world_model=simgym.FunctionWorldModel(customer_world),
        extra_rewards=[{"type": "contains", "name": "mentions_gold"}],
    )
    funcs = spec.reward_funcs
    assert spec.reward_funcs is not funcs  # TRL appends to the list it is given
    assert [f.__name__ for f in funcs] == ["simgym_mentions_gold"]
    envs = [spec.environment_factory() for _ in range(2)]
    for env, answer in zip(envs, ["It is gold.", "silver"], strict=True):
        env.reset(**spec.train_dataset[0])
        env.submit_answer(answer=answer)
    assert funcs[0](prompts=[], completions=[], environments=envs) == [1.0, 0.0]
    assert [env.get_reward() for env in envs] == [0.0, 0.0]  # exact match is the main one
    assert envs[0].trajectory.reward_parts == {"mentions_gold": 1.0, "exact": 0.0}
    with pytest.raises(SimgymError, match="environment_factory"):
        funcs[0](prompts=[], completions=[])


def test_a_failing_reward_leaves_the_rollout_out_and_says_why() -> None:
    class Broken:
        name = "broken"

        async def score(self, trajectory: Any) -> Any:
            raise RuntimeError("judge is down")

    spec = SimgymTRL(
        "mcp", [tier_task()], world_model=simgym.FunctionWorldModel(customer_world), reward=Broken()
    )
    env = spec.environment_factory()
    env.reset(**spec.train_dataset[0])
    assert env.get_reward() is None
    assert env.trajectory.metrics["reward_errors"] == {"broken": "RuntimeError: judge is down"}


def test_demonstrations_are_conversations_in_trl_form() -> None:
    spec = SimgymTRL("mcp", [tier_task()], world_model=simgym.FunctionWorldModel(customer_world))
    messages, trajectory = spec.demonstrate(
        "tier", [{"name": "get_customer", "arguments": {"customer_id": "C-1001"}}, "gold"]
    )
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    call = messages[2]["tool_calls"][0]["function"]
    assert call == {"name": "get_customer", "arguments": {"customer_id": "C-1001"}}
    assert json.loads(messages[3]["content"])["tier"] == "gold"
    assert messages[4]["tool_calls"][0]["function"]["arguments"] == {"answer": "gold"}
    assert trajectory.answer == "gold" and trajectory.agent == {"name": "demonstration"}
    with pytest.raises(SimgymError, match="not a call of one of the tools"):
        spec.demonstrate("tier", [{"name": "drop_tables", "arguments": {}}])


def test_bad_input_is_refused_clearly() -> None:
    wm = simgym.FunctionWorldModel(customer_world)
    with pytest.raises(SimgymError, match="no tasks"):
        SimgymTRL("mcp", [], world_model=wm)
    with pytest.raises(SimgymError, match="appears twice"):
        SimgymTRL("mcp", [tier_task("x"), tier_task("x")], world_model=wm)
    with pytest.raises(SimgymError, match="names no domain"):
        SimgymTRL(None, ["do something"], world_model=wm)
    clash = {**TRICKY_SCENARIO, "tools": [{"name": "submit_answer", "description": "x"}]}
    with pytest.raises(SimgymError, match="pick another answer_tool"):
        SimgymTRL("mcp", [{"id": "a", "scenario": clash}], world_model=wm)
    hidden = {**TRICKY_SCENARIO, "tools": [{"name": "_secret", "description": "x"}]}
    with pytest.raises(SimgymError, match="underscore"):
        SimgymTRL("mcp", [{"id": "a", "scenario": hidden}], world_model=wm)
    reserved = {**TRICKY_SCENARIO, "tools": [{"name": "reset", "description": "x"}]}
    with pytest.raises(SimgymError, match="clashes with TRL"):
        SimgymTRL("mcp", [{"id": "a", "scenario": reserved}], world_model=wm)
    with pytest.raises(SimgymError, match="env_options"):
        SimgymTRL("mcp", [tier_task()], world_model=wm, env_options={"max_turns": 3})
    spec = SimgymTRL("mcp", [tier_task()], world_model=wm)
    env = spec.environment_factory()
    with pytest.raises(SimgymError, match="'task' column"):
        env.reset(prompt=[])
    with pytest.raises(SimgymError, match="not a valid task"):
        env.reset(task="{not json")
    with pytest.raises(SimgymError, match="before reset"):
        env.get_reward()
    assert env.get_customer(customer_id="C-1001").startswith("[simgym error] no episode")


# -- TRL's GRPOTrainer, for real ------------------------------------------------------------


def load_example() -> Any:
    path = ROOT / "examples" / "grpo_trl" / "train.py"
    module_spec = importlib.util.spec_from_file_location("grpo_trl_example", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example() -> Any:
    from simgym.worldmodels.local import embedded_model_path

    if embedded_model_path() is None:
        pytest.skip("the embedded model (its GGUF holds the tokenizer) is not installed")
    return load_example()


@pytest.fixture(scope="module")
def tokenizer(example: Any) -> Any:
    return example.embedded_tokenizer()


def test_embedded_tokenizer_renders_tool_calls(tokenizer: Any) -> None:
    from trl.chat_template_utils import is_chat_template_prefix_preserving, supports_tool_calling

    assert len(tokenizer) == 49152
    ids = tokenizer("<|im_start|>user\nhi 42<|im_end|>")["input_ids"]
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert tokenizer.decode(ids) == "<|im_start|>user\nhi 42<|im_end|>"
    assert supports_tool_calling(tokenizer)
    assert is_chat_template_prefix_preserving(tokenizer)  # TRL's multi-turn requirement

    # the prompt as TRL renders it: the dataset's messages, reset's text, the env's methods
    spec = SimgymTRL(
        "mcp",
        [{"id": "a", "scenario": TRICKY_SCENARIO}],
        world_model=simgym.FunctionWorldModel(str),
    )
    env = spec.environment_factory()
    row = spec.train_dataset[0]
    prompt = row["prompt"][:-1] + [{"role": "user", "content": env.reset(**row)}]
    text = tokenizer.apply_chat_template(
        prompt, tools=list(public_tools(env).values()), add_generation_prompt=True, tokenize=False
    )
    assert '"name": "read-file"' in text and '"file_path"' in text
    assert '"name": "submit_answer"' in text
    assert text.endswith("<|im_start|>assistant\n")


def test_embedded_tokenizer_parses_tool_calls(tokenizer: Any) -> None:
    pytest.importorskip("jmespath", reason="transformers < 5.13 parses tool calls with jmespath")
    from trl.chat_template_utils import add_response_schema

    add_response_schema(tokenizer)
    text = (
        '<tool_call>\n{"name": "get_customer", "arguments": {"customer_id": "C-1"}}\n</tool_call>'
    )
    parsed = tokenizer.parse_response(tokenizer(text + "<|im_end|>")["input_ids"])
    assert parsed["tool_calls"][0]["function"] == {
        "name": "get_customer",
        "arguments": {"customer_id": "C-1"},
    }


# One tool and one task keep the prompt short: the warm start and the rollouts cost about
# as many tokens as the prompt holds.
ONE_TOOL_TASK = {
    "domain": "mcp",
    "task": {
        "id": "tier-c1001",
        "instruction": "Which tier is customer C-1001 in?",
        "metadata": {"answer": "gold"},
    },
    "scenario": {
        "server_name": "customer-records",
        "tools": [
            {
                "name": "get_customer",
                "description": "Fetch one customer by id.",
                "parameters": {
                    "type": "object",
                    "properties": {"customer_id": {"type": "string"}},
                    "required": ["customer_id"],
                },
            }
        ],
        "state": {"customers": list(CUSTOMERS.values())},
    },
    "actions": [{"name": "get_customer", "arguments": {"customer_id": "C-1001"}}, "gold"],
}


def test_grpo_trainer_trains_against_simgym(example: Any, tmp_path: Path) -> None:
    pytest.importorskip(
        "jmespath", reason="TRL's tool calling needs jmespath on transformers < 5.13"
    )
    seen: list[str] = []

    def world(messages: list[dict[str, str]]) -> str:
        seen.append(messages[-1]["content"])
        return customer_world(messages)

    tasks = tmp_path / "task.json"
    tasks.write_text(json.dumps(ONE_TOOL_TASK))
    out = tmp_path / "episodes.jsonl"
    summary = example.main(
        [
            "--tasks", str(tasks),
            "--steps", "2",
            "--num-generations", "2",
            "--batch-size", "2",
            "--max-completion-length", "160",
            "--max-turns", "3",
            "--warm-start-steps", "80",
            "--temperature", "0.3",
            "--trajectories", str(out),
            "--output-dir", str(tmp_path / "run"),
        ],
        world_model=simgym.FunctionWorldModel(world),
    )  # fmt: skip
    assert summary["steps"] == 2
    assert summary["warm_start_loss"] < 0.5
    episodes = list(read_trajectories(out))
    # every rollout was reset, played and scored by simgym: 2 steps x 2 rollouts
    assert len(episodes) == 4
    assert all(t.agent == {"name": "trl"} and "exact" in t.reward_parts for t in episodes)
    # what TRL logged as each step's reward is what simgym scored
    per_step = [episodes[0:2], episodes[2:4]]
    assert summary["reward_per_step"] == [
        pytest.approx(sum(t.total_reward for t in step) / 2, abs=1e-4) for step in per_step
    ]
    # the warm-started policy calls the tools: TRL parsed its calls, ran the generated
    # methods, and the world model simulated them
    calls = [
        turn
        for t in episodes
        for turn in t.turns
        if turn.action and turn.action.kind == "tool_call"
    ]
    assert calls and seen and summary["tool_calls_per_rollout"][0] > 0
    assert all(turn.action.name == "get_customer" for turn in calls)
    assert any(t.answer is not None for t in episodes)  # and it submitted answers
