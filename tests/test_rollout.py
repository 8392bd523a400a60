"""Rollouts: agents acting in simulated environments over task sets (simgym.rollout)."""

from __future__ import annotations

import io
import json

import pytest

import simgym
from simgym.agents import (
    AgentError,
    Decision,
    EpisodeView,
    HumanAgent,
    ScriptedAgent,
    create_agent,
)
from simgym.agents.local import parse_tool_call
from simgym.core.types import Usage
from simgym.rollout.runner import arollout, plan_episodes

SECRET = "vault-code-7781"

MCP_SCENARIO = {
    "server_name": "records",
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
    "state": {"customers": [{"id": "C-1", "name": "Ana", "pin": SECRET}]},
    "notes": f"the vault code is {SECRET}",
}


def echo_world(messages):
    """Answers every tool call with the action it saw, as JSON."""
    action = messages[-1]["content"].split("**Action:**")[-1].strip()
    return f"<predicted_observation>{json.dumps({'seen': action})}</predicted_observation>"


def mcp_task(task_id: str, answer: str = "Ana") -> simgym.Task:
    return simgym.Task(
        id=task_id,
        domain="mcp",
        instruction="Who is customer C-1?",
        scenario=MCP_SCENARIO,
        metadata={"answer": answer},
    )


CALL = {"name": "get_customer", "arguments": {"customer_id": "C-1"}}


async def test_groups_share_seed_and_record_answers_and_rewards():
    tasks = [mcp_task("t1"), mcp_task("t2", answer="Somebody else")]
    agent = ScriptedAgent([CALL, {"answer": "Ana"}])
    results = await arollout(
        tasks,
        agent=agent,
        world_model=simgym.FunctionWorldModel(echo_world),
        group_size=3,
        concurrency=4,
    )
    assert len(results) == 6
    by_task = {}
    for t in results:
        by_task.setdefault(t.task.id, []).append(t)
    for task_id, group in by_task.items():
        assert sorted(t.sample for t in group) == [0, 1, 2]
        assert {t.group_id for t in group} == {task_id}
        assert len({t.seed for t in group}) == 1  # one world per group
        for t in group:
            assert t.done and t.answer == "Ana"
            assert t.turns[0].observation.text == json.dumps({"seen": json.dumps(CALL)})
            assert t.agent["name"] == "scripted"
            assert [m["role"] for m in t.agent_messages][:2] == ["user", "assistant"]
    assert {t.total_reward for t in by_task["t1"]} == {1.0}
    assert {t.total_reward for t in by_task["t2"]} == {0.0}
    assert all(t.reward_parts for t in results)
    # different tasks get different seeds
    assert by_task["t1"][0].seed != by_task["t2"][0].seed


async def test_resume_after_crash_runs_only_missing_episodes(tmp_path):
    out = tmp_path / "runs.jsonl"
    tasks = [mcp_task(f"t{i}") for i in range(4)]
    wm = simgym.FunctionWorldModel(echo_world)
    agent = ScriptedAgent([CALL, {"answer": "Ana"}])
    # a first run that "crashed" after two tasks, leaving a torn last line
    await arollout(tasks[:2], agent=agent, world_model=wm, out=out, group_size=2)
    with open(out, "a") as f:
        f.write('{"schema_version": 1, "episode_id": "torn')
    again = await arollout(tasks, agent=agent, world_model=wm, out=out, group_size=2)
    assert sorted(t.key for t in again) == ["t2#0", "t2#1", "t3#0", "t3#1"]
    with pytest.warns(UserWarning, match="unreadable"):  # the torn line, skipped
        keys = [t.key for t in simgym.read_trajectories(out)]
    assert sorted(keys) == sorted(f"t{i}#{s}" for i in range(4) for s in range(2))
    # a third run has nothing left to do
    assert await arollout(tasks, agent=agent, world_model=wm, out=out, group_size=2) == []


class SpyAgent:
    """Records what it was shown; answers at once."""

    name = "spy"

    def __init__(self) -> None:
        self.views: list[EpisodeView] = []
        self.observations: list[str] = []

    async def start(self, view):
        self.views.append(view)
        spy = self

        class Session:
            messages: list = []

            async def act(self, observation):
                spy.observations.append(observation)
                return Decision(answer="done")

        return Session()

    def describe(self):
        return {"name": self.name}


async def test_agent_never_sees_hidden_state():
    agent = SpyAgent()
    await arollout([mcp_task("t1")], agent=agent, world_model=simgym.FunctionWorldModel(echo_world))
    (view,) = agent.views
    shown = json.dumps(
        {
            "domain": view.domain,
            "instruction": view.instruction,
            "tools": [t.model_dump() for t in view.tools],
            "hint": view.action_hint,
            "task_id": view.task_id,
        }
    )
    assert SECRET not in shown and SECRET not in " ".join(agent.observations)
    assert [t.name for t in view.tools] == ["get_customer"]
    assert not hasattr(view, "scenario") and not hasattr(view, "metadata")


async def test_turn_limit_truncates():
    agent = ScriptedAgent([CALL] * 5)
    (t,) = await arollout(
        [mcp_task("t1")],
        agent=agent,
        world_model=simgym.FunctionWorldModel(echo_world),
        max_turns=2,
    )
    assert t.truncated and not t.done and len(t.turns) == 2


class CostlyAgent:
    """Calls a tool forever, reporting 100 tokens a step; or fails on demand."""

    name = "costly"

    def __init__(self, fail_at: int | None = None) -> None:
        self.fail_at = fail_at

    async def start(self, view):
        agent = self

        class Session:
            messages: list = []
            steps = 0

            async def act(self, observation):
                self.steps += 1
                if agent.fail_at is not None and self.steps >= agent.fail_at:
                    raise AgentError("policy server went away")
                return Decision(action=CALL, usage=Usage(prompt_tokens=90, completion_tokens=10))

        return Session()

    def describe(self):
        return {"name": self.name}


async def test_agent_token_budget_ends_episode(tmp_path):
    out = tmp_path / "o.jsonl"
    (t,) = await arollout(
        [mcp_task("t1")],
        agent=CostlyAgent(),
        world_model=simgym.FunctionWorldModel(echo_world),
        max_agent_tokens=250,
        out=out,
    )
    assert t.truncated and len(t.turns) == 3
    assert "token budget" in t.error
    assert [x.key for x in simgym.read_trajectories(out)] == ["t1"]


async def test_agent_failure_is_recorded_not_raised(tmp_path):
    out = tmp_path / "o.jsonl"
    (t,) = await arollout(
        [mcp_task("t1")],
        agent=CostlyAgent(fail_at=2),
        world_model=simgym.FunctionWorldModel(echo_world),
        out=out,
    )
    assert t.truncated and len(t.turns) == 1
    assert "policy server went away" in t.error
    assert len(list(simgym.read_trajectories(out))) == 1


async def test_final_answer_in_a_domain_without_answer_action():
    """A terminal has no "answer" keystroke: the rollout ends the episode with finish()."""
    screen = "<predicted_observation>\nPython 3.11.7\nuser@devbox:~$ \n</predicted_observation>"
    task = simgym.Task(
        id="py", domain="terminal", instruction="Which Python?", metadata={"answer": "3.11.7"}
    )
    agent = ScriptedAgent(
        [{"name": "send_keys", "arguments": {"keystrokes": "python3 -V\n"}}, {"answer": "3.11.7"}]
    )
    (t,) = await arollout(
        [task], agent=agent, world_model=simgym.FunctionWorldModel(lambda m: screen)
    )
    assert t.done and t.answer == "3.11.7" and t.total_reward == 1.0
    assert t.turns[0].action.kind == "keystrokes"
    assert t.turns[-1].observation.metadata == {"final_answer": True}


def test_plan_episodes_rejects_duplicate_ids_and_is_stable():
    with pytest.raises(simgym.SimgymError, match="twice"):
        plan_episodes([mcp_task("a"), mcp_task("a")])
    first = plan_episodes([mcp_task("a")], group_size=2, seed=3)
    assert first == plan_episodes([mcp_task("a")], group_size=2, seed=3)
    assert first[0].seed == first[1].seed
    assert plan_episodes([mcp_task("a")], seed=4)[0].seed != first[0].seed


def test_unknown_agent_and_executor_are_clear_errors():
    with pytest.raises(simgym.SimgymError, match="unknown agent"):
        create_agent("telepath")
    with pytest.raises(simgym.SimgymError, match="unknown executor"):
        simgym.rollout(
            [mcp_task("a")],
            agent=ScriptedAgent([]),
            world_model=simgym.FunctionWorldModel(echo_world),
            executor="cloud",
        )


def test_sync_rollout_and_scripted_stop():
    """A script that runs out stops the episode without an error."""
    (t,) = simgym.rollout(
        [mcp_task("a")],
        agent=ScriptedAgent([CALL]),
        world_model=simgym.FunctionWorldModel(echo_world),
    )
    assert t.truncated and t.error is None and len(t.turns) == 1


async def test_human_agent_reads_piped_lines():
    shown: list[str] = []
    lines = io.StringIO(
        '{"name": "get_customer", "arguments": {"customer_id": "C-1"}}\n'
        "not json at all {\n/answer Ana\n"
    )
    agent = HumanAgent(stdin=lines, show=shown.append)
    (t,) = await arollout(
        [mcp_task("h")], agent=agent, world_model=simgym.FunctionWorldModel(echo_world)
    )
    # the JSON line is a tool call; the broken line is free text, which the MCP domain
    # takes as the final answer
    assert t.turns[0].action.name == "get_customer"
    assert t.done
    assert any("Who is customer C-1?" in s for s in shown)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '<tool_call>{"name": "ls", "arguments": {"path": "/"}}</tool_call>',
            {"name": "ls", "arguments": {"path": "/"}},
        ),
        ('{"name": "ls", "arguments": {}}', {"name": "ls", "arguments": {}}),
        ('<tool_call>[{"name": "ls", "arguments": {}}]', {"name": "ls", "arguments": {}}),
        (
            '<tool_call>{"name": "ls", "arguments": {"path": </tool_call>',
            {"name": "ls", "arguments": '{"name": "ls", "arguments": {"path":'},
        ),
        ("The answer is 42.", None),
        ('{"no_name": 1}', None),
    ],
)
def test_local_agent_reads_tool_calls(text, expected):
    assert parse_tool_call(text) == expected


async def test_local_agent_runs_an_episode_offline():
    """The embedded model as the policy and as the world: the whole loop offline."""
    (t,) = await arollout(
        [mcp_task("loc")],
        agent="local",
        world_model="local",
        max_turns=2,
        agent_options={"max_tokens": 48},
        world_model_options={"max_tokens": 48},
    )
    assert t.agent["name"] == "local"
    assert t.agent_messages[0]["role"] == "system"
    assert "get_customer" in t.agent_messages[0]["content"]
    assert len(t.turns) >= 1 and (t.done or t.truncated)


async def test_openai_agent_calls_tools_on_a_real_server(llama_tools_server, tmp_path):
    """A tool-calling policy behind a real OpenAI-compatible server (llama.cpp) drives
    the simulated MCP server: tool calls become steps, results go back as tool messages."""
    out = tmp_path / "o.jsonl"
    (t,) = await arollout(
        [mcp_task("oa")],
        agent="openai",
        agent_options={
            "base_url": llama_tools_server,
            "model": "smollm2",
            "max_tokens": 48,
            "temperature": 0.0,
            # llama.cpp's grammar then guarantees a well-formed call
            "tool_choice": {"type": "function", "function": {"name": "get_customer"}},
        },
        world_model=simgym.FunctionWorldModel(echo_world),
        max_turns=2,
        out=out,
    )
    assert t.agent["name"] == "openai" and t.agent["model"] == "smollm2"
    roles = [m["role"] for m in t.agent_messages]
    assert roles[:3] == ["system", "user", "assistant"]
    calls = t.agent_messages[2].get("tool_calls")
    assert calls and calls[0]["function"]["name"] == "get_customer"
    # the call was played as a step, and its result went back to the policy
    assert t.turns[0].action_text.startswith('{"name": "get_customer"') or t.turns[0].error
    assert roles[3] == "tool" and t.agent_messages[3]["tool_call_id"] == calls[0]["id"]
    assert t.agent_messages[3]["content"] == t.turns[0].observation.text
    assert [x.key for x in simgym.read_trajectories(out)] == ["oa"]


async def test_openai_agent_server_down_ends_episode_cleanly():
    from conftest import free_port

    (t,) = await arollout(
        [mcp_task("down")],
        agent="openai",
        agent_options={
            "base_url": f"http://127.0.0.1:{free_port()}/v1",
            "model": "m",
            "max_retries": 0,
        },
        world_model=simgym.FunctionWorldModel(echo_world),
    )
    assert t.truncated and "cannot reach agent" in t.error


async def test_the_local_agent_copies_without_a_repetition_penalty():
    """The agent decodes with its own repeat_penalty (1.0: it must copy ids and addresses
    it was shown), not the world model's 1.15; the setting is recorded and reaches the model."""
    from simgym.agents.local import LocalAgent

    agent = LocalAgent(temperature=0.0, max_tokens=24)
    assert agent.describe()["repeat_penalty"] == 1.0
    prompt = [{"role": "user", "content": "Repeat exactly: ab-12 ab-12 ab-12 ab-12 ab-12 ab-12"}]
    plain, _ = await agent.complete(prompt, seed=0)
    agent.repeat_penalty = 3.0
    taxed, _ = await agent.complete(prompt, seed=0)
    assert plain != taxed  # the penalty is the agent's own, and it changes what is written
    assert plain.count("ab-12") > taxed.count("ab-12")
