"""The verl adapter, against verl 0.9 itself: its tool loader, its tool-call dispatch, its
RL dataset and its tool agent loop (with a scripted policy in place of a GPU server)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import simgym
from simgym.core.errors import SimgymError

pytest.importorskip("verl", reason="needs verl 0.9: pip install 'simgym[verl]'")

import hydra  # noqa: E402  (verl's agent loops are built with hydra, as verl builds them)
from omegaconf import OmegaConf  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402
from verl.experimental.agent_loop.agent_loop import (  # noqa: E402
    DictConfigWrap,
    ToolListWrap,
    _agent_loop_registry,
)
from verl.experimental.agent_loop.tool_agent_loop import AgentData, ToolAgentLoop  # noqa: E402
from verl.experimental.agent_loop.tool_parser import FunctionCall  # noqa: E402
from verl.tools.schemas import OpenAIFunctionToolSchema  # noqa: E402
from verl.tools.tool_registry import initialize_tools_from_config  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from simgym.integrations import verl as sv  # noqa: E402

SECRET = "vault-code-7781"
CUSTOMER = {
    "type": "object",
    "properties": {"customer_id": {"type": "string"}},
    "required": ["customer_id"],
}
MCP_SCENARIO = {
    "server_name": "records",
    "tools": [
        {
            "name": "search_customers",
            "description": "Find customers by name.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
        {
            "name": "get_customer",
            "description": "Fetch one customer by id.",
            "parameters": CUSTOMER,
        },
    ],
    "state": {"customers": [{"id": "C-1", "name": "Ana", "pin": SECRET}]},
    "notes": f"the vault code is {SECRET}",
}
CALLS: list[int] = []  # how many turns of history each world-model call saw


def echo_world(messages):
    """Answers each call with the action it saw and how many turns the world has seen."""
    turn = sum(1 for m in messages if m["role"] == "user")
    CALLS.append(turn)
    action = messages[-1]["content"].split("**Action:**")[-1].strip()
    return f"<predicted_observation>{json.dumps({'seen': action, 'turn': turn})}</predicted_observation>"


ECHO = simgym.FunctionWorldModel(echo_world, name="echo")


def task(task_id: str, answer: str = "Ana") -> simgym.Task:
    return simgym.Task(
        id=task_id,
        domain="mcp",
        instruction="Who is customer C-1?",
        scenario=MCP_SCENARIO,
        metadata={"answer": answer},
    )


def load_tools(tmp_path, **options):
    """The tool config written by simgym, loaded by verl's own loader."""
    options.setdefault("world_model", f"{__name__}:ECHO")
    path = tmp_path / "tools.yaml"
    sv.verl_tool_config("mcp", MCP_SCENARIO, path=path, **options)
    return {tool.name: tool for tool in initialize_tools_from_config(str(path))}


def agent_data(tools_kwargs=None, messages=None) -> AgentData:
    """verl's per-trajectory state, as its tool agent loop builds it."""
    return AgentData(
        messages=messages or [{"role": "user", "content": "Who is customer C-1?"}],
        image_data=None,
        video_data=None,
        audio_data=None,
        mm_processor_kwargs=None,
        metrics={},
        request_id="r",
        tools_kwargs=tools_kwargs or {},
    )


def kwargs_for(t: simgym.Task, names=("search_customers", "get_customer")):
    return {name: {"create_kwargs": {"task": t.model_dump_json()}} for name in names}


async def verl_call(tools, data: AgentData, name: str, arguments) -> str:
    """One tool call through verl's own dispatch (ToolAgentLoop._call_tool: create,
    execute with the trajectory's AgentData, release)."""
    loop = SimpleNamespace(
        tools=tools, max_tool_response_length=100_000, tool_response_truncate_side="right"
    )
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    call = FunctionCall(name=name, arguments=raw)
    response, _, _ = await ToolAgentLoop._call_tool(loop, call, data.tools_kwargs, data)
    return response.text


# -- the tool config ---------------------------------------------------------------------


@pytest.mark.parametrize("domain", simgym.domain_names())
def test_every_domain_tool_config_loads_in_verl_with_matching_schemas(domain, tmp_path):
    path = tmp_path / "tools.yaml"
    config = sv.verl_tool_config(domain, world_model=f"{__name__}:ECHO", path=path)
    assert yaml.safe_load(path.read_text()) == config
    tools = initialize_tools_from_config(str(path))
    env = simgym.make(domain, world_model=ECHO)
    specs = env.domain.agent_tools(env.scenario)
    assert [t.name for t in tools] == [s.name for s in specs]
    for tool, spec in zip(tools, specs, strict=True):
        assert isinstance(tool, sv.SimgymTool)
        parsed = tool.tool_schema
        assert isinstance(parsed, OpenAIFunctionToolSchema)
        # what verl shows the policy is what simgym wrote: nothing was dropped on load
        dumped = parsed.model_dump(exclude_unset=True, exclude_none=True)
        assert dumped == sv.verl_tool_schema(spec)
        assert parsed.function.description == (spec.description or spec.name)
        props = spec.parameters.get("properties", {})
        assert list(parsed.function.parameters.properties) == list(props)
        assert parsed.function.parameters.required == spec.parameters.get("required", [])
        for name, prop in props.items():
            seen = parsed.function.parameters.properties[name]
            if "type" in prop:
                assert seen.type == prop["type"]
            else:  # anyOf: the alternatives' types
                assert seen.type == [a["type"] for a in prop["anyOf"]]
            assert seen.enum == prop.get("enum")
            if prop.get("description"):
                assert seen.description.startswith(prop["description"])


def test_what_verl_would_drop_is_told_in_the_description(tmp_path):
    config = sv.verl_tool_config("search", world_model=f"{__name__}:ECHO")
    (search,) = [t for t in config["tools"] if t["tool_schema"]["function"]["name"] == "web_search"]
    queries = search["tool_schema"]["function"]["parameters"]["properties"]["queries"]
    assert queries["type"] == "array" and "a list of string" in queries["description"]
    (keys,) = [t for t in sv.verl_tool_config("terminal", world_model="local")["tools"]]
    duration = keys["tool_schema"]["function"]["parameters"]["properties"]["duration"]
    assert "default 1" in duration["description"]


def test_bad_configs_fail_with_clear_errors(tmp_path):
    with pytest.raises(SimgymError, match="not an instance"):
        sv.verl_tool_config("mcp", MCP_SCENARIO, world_model=ECHO)
    with pytest.raises(SimgymError, match="offers no tool"):
        sv.verl_tool_config("mcp", MCP_SCENARIO, tools=["delete_everything"])
    entry = sv.verl_tool_config("mcp", MCP_SCENARIO)["tools"][0]
    with pytest.raises(SimgymError, match="unknown env_options"):
        sv.SimgymTool({**entry["config"], "env_options": {"max_turnz": 3}}, None)
    with pytest.raises(SimgymError, match="invalid simgym tool config"):
        sv.SimgymTool({**entry["config"], "wold_model": "local"}, None)
    with pytest.raises(SimgymError, match="unknown reward type"):
        sv.SimgymTool({**entry["config"], "reward": "telepathy"}, None)
    with pytest.raises(SimgymError, match="needs config.tool"):
        sv.SimgymTool(entry["config"], None)
    # an entry may name its tool instead of spelling out the schema
    tool = sv.SimgymTool({**entry["config"], "tool": "get_customer"}, None)
    assert tool.name == "get_customer" and tool.tool_schema.function.parameters.required == [
        "customer_id"
    ]
    foreign = OpenAIFunctionToolSchema.model_validate(
        {"type": "function", "function": {"name": "rm_rf", "description": "x"}}
    )
    with pytest.raises(SimgymError, match="offers no tool 'rm_rf'"):
        sv.SimgymTool(entry["config"], foreign)


# -- tools driven the way verl's tool agent loop drives them ------------------------------


async def test_tools_of_one_trajectory_share_a_world_and_trajectories_do_not(tmp_path):
    out = tmp_path / "episodes.jsonl"
    tools = load_tools(tmp_path, trajectories=str(out))
    first, second = agent_data(kwargs_for(task("t1"))), agent_data(kwargs_for(task("t2", "Bo")))
    CALLS.clear()

    seen = await verl_call(tools, first, "search_customers", {"query": "Ana"})
    assert json.loads(seen)["turn"] == 1 and "search_customers" in json.loads(seen)["seen"]
    other = await verl_call(tools, second, "get_customer", {"customer_id": "C-9"})
    assert json.loads(other)["turn"] == 1  # a fresh world, not the first trajectory's
    seen = await verl_call(tools, first, "get_customer", {"customer_id": "C-1"})
    assert json.loads(seen)["turn"] == 2  # the other tool, the same world: it saw turn 1
    assert CALLS == [1, 1, 2]

    # bad arguments: an error observation the policy can read; the world model is not asked
    bad = await verl_call(tools, first, "get_customer", {"customer": "C-1"})
    assert bad.startswith("[simgym error]") and "customer_id" in bad
    assert CALLS == [1, 1, 2]

    first.messages += [{"role": "assistant", "content": "<think>it said Ana</think> Ana"}]
    ended = await sv.finish_trajectory(first)
    assert ended.task.id == "t1" and ended.answer == "Ana" and ended.done
    assert [t.action.name for t in ended.turns[:2]] == ["search_customers", "get_customer"]
    assert ended.turns[2].error and "get_customer" in ended.turns[2].action_text
    assert ended.turns[3].observation.metadata["final_answer"]
    assert ended.total_reward == 1.0 and ended.reward_parts == {"exact": 1.0}
    assert ended.agent == {"name": "verl", "agent_loop": "tool_agent"}
    assert ended.agent_messages[-1]["content"].endswith("Ana")
    # the second trajectory has only its own turn; no final reply: truncated, no reward
    second.messages.append({"role": "assistant", "content": "", "tool_calls": [{}]})
    other_end = await sv.finish_trajectory(second)
    assert [t.action.name for t in other_end.turns] == ["get_customer"]
    assert other_end.truncated and other_end.answer is None and other_end.total_reward == 0.0
    assert other_end.error == sv.NO_ANSWER

    written = list(simgym.read_trajectories(out))
    assert [t.task.id for t in written] == ["t1", "t2"]
    assert written[0].total_reward == 1.0
    # a call after the trajectory ended is refused, not played in a new world
    late = await verl_call(tools, first, "get_customer", {"customer_id": "C-1"})
    assert late.startswith("[simgym error]") and "closed" in late


async def test_a_fault_plan_reaches_every_world_of_the_config(tmp_path):
    plan = {"rules": [{"fault": "rate_limit", "turns": [1], "params": {"retry_after": 7}}]}
    tools = load_tools(tmp_path, perturbations=plan)
    assert tools["get_customer"].settings.perturbations["rules"][0]["fault"] == "rate_limit"
    data = agent_data(kwargs_for(task("faulty")))
    CALLS.clear()
    failed = await verl_call(tools, data, "get_customer", {"customer_id": "C-1"})
    assert "429" in failed and "retry after 7 seconds" in failed
    assert CALLS == []  # the template wrote the fault; the world model was not asked
    again = await verl_call(tools, data, "get_customer", {"customer_id": "C-1"})
    assert json.loads(again)["turn"] == 2  # turn 2 meets no fault
    ended = await sv.finish_trajectory(data)
    assert [t.perturbation["fault"] if t.perturbation else None for t in ended.turns[:2]] == [
        "rate_limit",
        None,
    ]
    with pytest.raises(SimgymError, match="unknown fault"):
        sv.verl_tool_config("mcp", MCP_SCENARIO, perturbations={"fault": "meteor"})


async def test_parallel_calls_of_one_turn_are_played_one_at_a_time_in_order(tmp_path):
    tools = load_tools(tmp_path)
    data = agent_data(kwargs_for(task("par")))
    CALLS.clear()
    texts = await asyncio.gather(
        *(verl_call(tools, data, "get_customer", {"customer_id": f"C-{i}"}) for i in range(1, 5))
    )
    assert [json.loads(t)["turn"] for t in texts] == [1, 2, 3, 4]
    assert [f"C-{i}" in json.loads(t)["seen"] for i, t in enumerate(texts, 1)] == [True] * 4
    ended = await sv.finish_trajectory(data, "Ana")
    assert [t.index for t in ended.turns] == [1, 2, 3, 4, 5]


async def test_episode_limits_and_bad_tasks_come_back_as_error_observations(tmp_path):
    tools = load_tools(tmp_path, env_options={"max_turns": 1})
    data = agent_data(kwargs_for(task("lim")))
    await verl_call(tools, data, "get_customer", {"customer_id": "C-1"})
    after = await verl_call(tools, data, "get_customer", {"customer_id": "C-1"})
    assert after.startswith("[simgym error] the episode has ended (truncated")
    data.messages.append({"role": "assistant", "content": "Ana"})
    ended = await sv.finish_trajectory(data)
    assert ended.truncated and ended.answer == "Ana"  # the reply after the turn limit

    broken = agent_data({"get_customer": {"create_kwargs": {"task": "{not json"}}})
    text = await verl_call(tools, broken, "get_customer", {"customer_id": "C-1"})
    assert text.startswith("[simgym error] invalid task")
    wrong = agent_data(kwargs_for(task("x").model_copy(update={"domain": "terminal"})))
    text = await verl_call(tools, wrong, "get_customer", {"customer_id": "C-1"})
    assert "terminal domain" in text

    # two tools of one trajectory created for different tasks: refused, not mixed
    mixed = agent_data(
        {**kwargs_for(task("a"), ["search_customers"]), **kwargs_for(task("b"), ["get_customer"])}
    )
    await verl_call(tools, mixed, "search_customers", {"query": "Ana"})
    text = await verl_call(tools, mixed, "get_customer", {"customer_id": "C-1"})
    assert "created for task 'b'" in text and "plays task 'a'" in text
    for d in (broken, wrong, mixed):
        await sv.finish_trajectory(d)


async def test_a_row_without_a_task_plays_the_first_user_message(tmp_path):
    tools = load_tools(tmp_path)
    data = agent_data(
        messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "Find Ana"}]
    )
    await verl_call(tools, data, "get_customer", {"customer_id": "C-1"})
    ended = await sv.finish_trajectory(data, "Ana")
    assert ended.task.instruction == "Find Ana" and ended.scenario["server_name"] == "records"
    assert ended.total_reward == 0.0  # the task defines no answer: scored, with the reason
    assert "no reward defined" in ended.metrics["reward_details"]["error"]


async def test_verl_dropping_a_trajectory_ends_its_world(tmp_path):
    """verl's plain tool_agent loop never says a trajectory ended: its AgentData going away
    does, and the episode is still scored and written."""
    tools = load_tools(tmp_path, trajectories=str(tmp_path / "dropped-{pid}.jsonl"))
    out = tmp_path / f"dropped-{os.getpid()}.jsonl"  # one file per worker process
    data = agent_data(kwargs_for(task("drop")))
    await verl_call(tools, data, "get_customer", {"customer_id": "C-1"})
    data.messages.append({"role": "assistant", "content": "Ana"})
    del data
    gc.collect()
    await sv.wait_closed()
    (written,) = simgym.read_trajectories(out)
    assert written.task.id == "drop" and written.answer == "Ana" and written.total_reward == 1.0
    assert written.agent["agent_loop"] == "tool_agent"


async def test_basetool_contract_create_execute_calc_reward_release(tmp_path):
    """A caller that keeps one instance id per trajectory (BaseTool's own contract)."""
    out = tmp_path / "direct.jsonl"
    tools = load_tools(tmp_path, trajectories=str(out))
    search, get = tools["search_customers"], tools["get_customer"]
    t = task("direct")
    for tool in (search, get):  # both tools, one instance id: one world
        iid, response = await tool.create("traj-1", task=t.model_dump_json())
        assert iid == "traj-1" and response.text is None
    other, _ = await get.create(None, task=task("other").model_dump())
    assert other != "traj-1"

    text, reward, info = await search.execute("traj-1", {"query": "Ana"})
    assert json.loads(text.text)["turn"] == 1 and reward == 0.0 and info["turn"] == 1
    text, _, info = await get.execute("traj-1", {"customer_id": "C-1"})
    assert json.loads(text.text)["turn"] == 2 and info == {
        "turn": 2,
        "done": False,
        "truncated": False,
    }
    text, _, _ = await get.execute(other, {"customer_id": "C-1"})
    assert json.loads(text.text)["turn"] == 1
    text, _, info = await get.execute("traj-1", {"customer_id": 7})
    assert text.text.startswith("[simgym error]") and "customer_id" in info["error"]
    missing, _, _ = await get.execute("never-created", {"customer_id": "C-1"})
    assert "was not created" in missing.text

    assert await get.calc_reward("traj-1") == 0.0  # no answer yet
    assert await get.calc_reward("traj-1", answer="Ana") == 1.0  # ends the episode
    await search.release("traj-1")
    await get.release("traj-1")
    await get.release(other)  # no answer: written as truncated
    with pytest.raises(SimgymError, match="no open world"):
        await get.calc_reward("traj-1")
    by_id = {x.task.id: x for x in simgym.read_trajectories(out)}
    assert by_id["direct"].answer == "Ana" and len(by_id["direct"].turns) == 4
    assert by_id["direct"].agent["agent_loop"] == "direct"
    assert by_id["other"].truncated and by_id["other"].total_reward == 0.0


async def test_the_embedded_local_world_model_answers_verl_tool_calls(tmp_path):
    # a short system prompt (an env option carried through the YAML) keeps CPU prompt
    # evaluation small (simgym's other local-model tests use the domains' full prompts)
    prompt = (
        "You simulate the customer-records MCP server of a bank. For each tool call, reply "
        "with its JSON result inside <predicted_observation></predicted_observation>."
    )
    tools = load_tools(
        tmp_path,
        world_model="local",
        world_model_options={"max_tokens": 24},
        env_options={"validation_retries": 0, "system_prompt": prompt},
    )
    data = agent_data(kwargs_for(task("local")))
    first = await verl_call(tools, data, "search_customers", {"query": "Ana"})
    second = await verl_call(tools, data, "get_customer", {"customer_id": "C-1"})
    assert first.strip() and second.strip()
    ended = await sv.finish_trajectory(data, "Ana")
    assert ended.world_model["backend"] == "local" and ended.system_prompt == prompt
    assert [t.observation.text for t in ended.turns[:2]] == [first, second]
    assert all(t.usage.completion_tokens <= 24 for t in ended.turns[:2])


# -- datasets ----------------------------------------------------------------------------


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level tokenizer with a ChatML chat template that renders tools and Hermes
    tool calls (verl's ``hermes`` format), built here since no model files are at hand."""
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=special
    )
    tok.train_from_iterator(["a"], trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


CHAT_TEMPLATE = (
    "{%- if tools %}{{ '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{ messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{ '# Tools\\n<tools>' }}{%- for tool in tools %}{{ '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{ '\\n</tools><|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}"
    "{{ '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}"
    "{{ '<|im_start|>user\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' + (message.content or '') }}"
    "{%- for call in message.tool_calls or [] %}"
    '{{ \'<tool_call>{"name": "\' + call.function.name + \'", "arguments": \''
    " + (call.function.arguments | tojson) + '}</tool_call>' }}{%- endfor %}"
    "{{ '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{{ '<|im_start|>tool\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_rows_load_in_verls_rl_dataset(tmp_path, suffix):
    config = sv.verl_tool_config(
        "mcp", MCP_SCENARIO, world_model=f"{__name__}:ECHO", path=tmp_path / "tools.yaml"
    )
    rows = sv.verl_rows([task("d1"), task("d2", answer="Bo")], config)
    path = sv.write_verl_dataset(rows, tmp_path / f"train{suffix}")
    dataset = RLHFDataset(
        data_files=[str(path)],
        tokenizer=byte_tokenizer(),
        config=OmegaConf.create(
            {
                "cache_dir": str(tmp_path / "cache"),
                "max_prompt_length": 100_000,
                "tool_config_path": str(tmp_path / "tools.yaml"),
            }
        ),
    )
    assert len(dataset) == 2  # the length filter rendered them with the tools and kept both
    assert [s["name"] for s in (x["function"] for x in dataset.tool_schemas)] == [
        "search_customers",
        "get_customer",
    ]
    item = dataset[1]
    assert item["agent_name"] == sv.AGENT_LOOP and item["index"] == 1
    assert item["reward_model"]["ground_truth"] == "Bo"
    assert set(item["tools_kwargs"]) == {"search_customers", "get_customer"}
    carried = simgym.Task.model_validate_json(
        item["tools_kwargs"]["get_customer"]["create_kwargs"]["task"]
    )
    assert carried == task("d2", answer="Bo").model_copy(update={"domain": "mcp"})
    prompt = json.dumps(item["raw_prompt"])
    assert "Who is customer C-1?" in prompt
    assert SECRET not in prompt and "Bo" not in prompt  # hidden state and answer stay out


def test_rows_refuse_tasks_of_another_domain():
    config = sv.verl_tool_config("mcp", MCP_SCENARIO)
    with pytest.raises(SimgymError, match="terminal domain"):
        sv.verl_rows([simgym.Task(id="x", domain="terminal")], config)
    with pytest.raises(SimgymError, match="parquet or .jsonl"):
        sv.write_verl_dataset(sv.verl_rows([task("x")], config), "rows.csv")


# -- verl's agent loop --------------------------------------------------------------------


class ScriptedPolicy:
    """Stands in for verl's LLM server (vLLM/SGLang need a GPU): answers each generate
    call with the next scripted reply, as token ids."""

    def __init__(self, tokenizer, replies):
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.prompts: list[str] = []

    async def generate(self, *, request_id, prompt_ids, sampling_params, **_):
        self.prompts.append(self.tokenizer.decode(prompt_ids))
        text = self.replies.pop(0) + "<|im_end|>"
        return TokenOutput(token_ids=self.tokenizer.encode(text), stop_reason="completed")


def tool_call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def build_loop(agent_name, tools, policy, tokenizer, max_assistant_turns=None):
    """An agent loop built the way verl's AgentLoopWorker builds one per trajectory."""
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": 8192,
                    "response_length": 8192,
                    "full_determinism": False,
                    "multi_turn": {
                        "max_user_turns": None,
                        "max_assistant_turns": max_assistant_turns,
                        "max_parallel_calls": 4,
                        "max_tool_response_length": 4096,
                        "tool_response_truncate_side": "right",
                        "format": "hermes",
                    },
                }
            },
            "data": {},
        }
    )
    return hydra.utils.instantiate(
        config=_agent_loop_registry[agent_name],
        trainer_config=DictConfigWrap(config=config),
        server_manager=policy,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap(list(tools.values())),
    )


async def run_loop(agent_name, tools, row, replies, **options):
    tokenizer = byte_tokenizer()
    policy = ScriptedPolicy(tokenizer, replies)
    loop = build_loop(agent_name, tools, policy, tokenizer, **options)
    output = await loop.run(
        {"temperature": 1.0},
        raw_prompt=row["prompt"],
        tools_kwargs=row["extra_info"]["tools_kwargs"],
        extra_info=row["extra_info"],
        uid="group-1",
    )
    return output, policy, tokenizer


async def test_simgym_agent_loop_scores_and_records_a_verl_trajectory(tmp_path):
    out = tmp_path / "loop.jsonl"
    tools = load_tools(tmp_path, trajectories=str(out))
    config = yaml.safe_load((tmp_path / "tools.yaml").read_text())
    right, wrong = sv.verl_rows([task("L1"), task("L2", answer="Bo")], config)
    CALLS.clear()
    output, policy, tokenizer = await run_loop(
        sv.AGENT_LOOP, tools, right, [tool_call("get_customer", customer_id="C-1"), "Ana"]
    )
    assert output.reward_score == 1.0
    assert "get_customer" in policy.prompts[0]  # verl rendered simgym's tools for the policy
    assert CALLS == [1]
    (t,) = simgym.read_trajectories(out)
    assert t.episode_id == output.extra_fields["simgym_episode_id"]
    assert t.task.id == "L1" and t.answer == "Ana" and t.done and t.total_reward == 1.0
    assert t.group_id == "group-1" and t.agent["agent_loop"] == sv.AGENT_LOOP
    assert [m["role"] for m in t.agent_messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert t.agent_messages[3]["content"] == t.turns[0].observation.text
    # the observation went into the sequence as environment tokens (mask 0), not policy ones
    observation_ids = tokenizer.encode(t.turns[0].observation.text)
    masked = [i for i, m in zip(output.response_ids, output.response_mask, strict=True) if not m]
    assert any(masked[k : k + len(observation_ids)] == observation_ids for k in range(len(masked)))

    output, _, _ = await run_loop(sv.AGENT_LOOP, tools, wrong, ["Ana"])  # answers at once
    assert output.reward_score == 0.0
    t = list(simgym.read_trajectories(out))[1]
    assert t.task.id == "L2" and t.answer == "Ana" and len(t.turns) == 1  # an episode anyway


async def test_simgym_agent_loop_records_a_turn_limit_as_truncated(tmp_path):
    out = tmp_path / "limit.jsonl"
    tools = load_tools(tmp_path, trajectories=str(out))
    row = sv.verl_rows([task("cut")], yaml.safe_load((tmp_path / "tools.yaml").read_text()))[0]
    replies = [tool_call("get_customer", customer_id="C-1"), "Ana"]
    output, _, _ = await run_loop(sv.AGENT_LOOP, tools, row, replies, max_assistant_turns=2)
    assert output.reward_score == 0.0
    (t,) = simgym.read_trajectories(out)
    assert t.truncated and t.answer is None and t.error == sv.NO_ANSWER


async def test_plain_tool_agent_loop_shares_the_world_and_writes_on_drop(tmp_path):
    out = tmp_path / "plain.jsonl"
    tools = load_tools(tmp_path, trajectories=str(out))
    row = sv.verl_rows([task("P1")], yaml.safe_load((tmp_path / "tools.yaml").read_text()))[0]
    replies = [
        tool_call("search_customers", query="Ana") + tool_call("get_customer", customer_id="C-1"),
        "Ana",
    ]
    output, _, _ = await run_loop("tool_agent", tools, row, replies)
    assert output.reward_score is None  # verl's reward manager scores this loop's output
    gc.collect()
    await sv.wait_closed()
    (t,) = simgym.read_trajectories(out)
    assert [x.action.name for x in t.turns[:2]] == ["search_customers", "get_customer"]
    assert t.answer == "Ana" and t.total_reward == 1.0 and t.agent["agent_loop"] == "tool_agent"


def test_agent_loop_config_names_the_registered_loop(tmp_path):
    path = tmp_path / "agent_loops.yaml"
    (entry,) = sv.verl_agent_loop_config(path)
    assert OmegaConf.load(path)[0]["_target_"] == entry["_target_"]
    assert _agent_loop_registry[sv.AGENT_LOOP]["_target_"] == entry["_target_"]


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([{"role": "assistant", "content": "<think>hm</think>\nAna<|im_end|>"}], "Ana"),
        ([{"role": "assistant", "content": "Ana</s>"}], "Ana"),
        ([{"role": "assistant", "content": [{"type": "text", "text": "Ana"}]}], "Ana"),
        ([{"role": "assistant", "content": "x", "tool_calls": [{"id": "1"}]}], None),
        ([{"role": "tool", "content": "Ana"}], None),
        ([], None),
    ],
)
def test_final_reply_reads_the_policys_answer(messages, expected):
    assert sv.final_reply(messages, ["<EOT>"]) == expected
    assert sv.final_reply([{"role": "assistant", "content": "Ana<EOT>"}], ["<EOT>"]) == "Ana"


# -- the shipped example -----------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "verl"


def test_example_prepare_writes_configs_and_data_verl_reads(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE / "prepare.py"), "--out", str(tmp_path), "--val", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    tools = initialize_tools_from_config(str(tmp_path / "tools.yaml"))
    assert [t.name for t in tools] == ["search_customers", "get_customer", "update_email"]
    assert tools[0].settings.trajectories == str(tmp_path / "episodes-{pid}.jsonl")
    loops = OmegaConf.load(tmp_path / "agent_loops.yaml")
    assert loops[0]["_target_"] == "simgym.integrations.verl.SimgymAgentLoop"
    import pyarrow.parquet as pq

    train = pq.read_table(tmp_path / "train.parquet").to_pylist()
    val = pq.read_table(tmp_path / "val.parquet").to_pylist()
    assert len(train) == 4 and len(val) == 2
    create = train[0]["extra_info"]["tools_kwargs"]["update_email"]["create_kwargs"]
    assert simgym.Task.model_validate_json(create["task"]).metadata["answer"] == "gold"


def test_shipped_tool_config_is_current_and_loads_in_verl():
    shipped = yaml.safe_load((EXAMPLE / "config" / "mcp_tools.yaml").read_text())
    assert shipped == sv.verl_tool_config(
        "mcp",
        world_model="openai",
        world_model_options={
            "base_url": "http://127.0.0.1:8000/v1",
            "model": "agentworld",
            "max_tokens": 512,
        },
        env_options={"max_turns": 8},
        trajectories="/tmp/simgym-verl/episodes-{pid}.jsonl",
    )
    # a fresh process, as a verl rollout worker: verl imports the tool class by its path,
    # which registers the simgym_agent loop; the world model is built lazily (no server yet)
    script = (
        "from verl.tools.tool_registry import initialize_tools_from_config as load\n"
        "from verl.experimental.agent_loop.agent_loop import _agent_loop_registry as loops\n"
        f"tools = load({str(EXAMPLE / 'config' / 'mcp_tools.yaml')!r})\n"
        "print('RESULT', [t.name for t in tools], loops['simgym_agent']['_target_'])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd="/"
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("RESULT")]
    assert line == (
        "RESULT ['search_customers', 'get_customer', 'update_email'] "
        "simgym.integrations.verl.SimgymAgentLoop"
    )


def _row_task(row) -> simgym.Task:
    kwargs = row["extra_info"]["tools_kwargs"]["get_customer"]["create_kwargs"]
    return simgym.Task.model_validate_json(kwargs["task"])


async def test_sim2real_verl_data_plays_the_twin_and_scores_with_each_tasks_reward(tmp_path):
    """The sim2real GRPO recipe's inputs (examples/sim2real/verl_prepare.py): verl loads
    them, a row's task plays in its own bank with strict grounding, and the task's own
    reward scores the episode; validation banks are neither training nor held-out ones."""
    import importlib.util

    import pyarrow.parquet as pq

    from simgym.bench.sim2real import heldout_tasks, training_tasks

    path = EXAMPLE.parent / "sim2real" / "verl_prepare.py"
    spec = importlib.util.spec_from_file_location("sim2real_verl_prepare", path)
    prepare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prepare)
    paths = prepare.main(["--out", str(tmp_path), "--train-tasks", "7", "--val-tasks", "7"])
    tools = {t.name: t for t in initialize_tools_from_config(str(paths["tools"]))}
    settings = tools["get_customer"].settings
    assert settings.env_options == {"max_turns": 10, "grounding": "strict"}
    assert settings.perturbations is None and settings.reward is None  # each task's own
    train = pq.read_table(paths["train"]).to_pylist()
    val = pq.read_table(paths["val"]).to_pylist()
    trained, validated = [_row_task(r) for r in train], [_row_task(r) for r in val]
    assert [t.id for t in trained] == [t.id for t in training_tasks(7)]
    assert len(validated) == 7

    def names(tasks):
        return {c["name"] for t in tasks for c in t.scenario["state"]["customers"]}

    assert not names(validated) & names(heldout_tasks())
    assert not {t.id for t in validated} & {t.id for t in training_tasks(700)}

    # the first task is a lookup by id: fetch the record, answer its email
    task = trained[0]
    assert task.metadata["kind"] == "email_by_id"
    data = agent_data(train[0]["extra_info"]["tools_kwargs"])
    (call,) = [s for s in task.metadata["solution"] if "name" in s]
    shown = json.loads(await verl_call(tools, data, call["name"], call["arguments"]))
    assert shown["email"] in task.metadata["answer"]
    data.messages.append({"role": "assistant", "content": shown["email"]})
    ended = await sv.finish_trajectory(data)
    assert ended.total_reward == 1.0 and ended.task.id == task.id

    faulty = prepare.main(
        ["--out", str(tmp_path / "f"), "--train-tasks", "7", "--val-tasks", "7", "--faults", "0.5"]
    )
    plan = initialize_tools_from_config(str(faulty["tools"]))[0].settings.perturbations
    (rule,) = plan["rules"]
    assert rule["probability"] == 0.4 and "timeout" in rule["fault"]
