"""Training a sim2real policy: demonstrations in the local agent's format, rows, and the
whole loop (collect in the twin, fine-tune, export, evaluate on the real server) in tiny."""

from __future__ import annotations

import json

import pytest

from simgym.agents.base import EpisodeView
from simgym.agents.imitate import DONE, ImitationAgent, policy_rows
from simgym.agents.local import Conversation, parse_tool_call, system_prompt
from simgym.bench.sim2real import ReaderAgent, evaluate, get_suite, training_tasks
from simgym.core.trajectories import read_trajectories
from simgym.core.types import Task, ToolSpec, Trajectory
from simgym.real.sandbox import bwrap_problem
from simgym.train.sim2real import collect, train_policy, write_rows

TOOLS = [ToolSpec(name="get_customer", description="Fetch one customer.")]


def test_rows_show_the_policy_what_the_local_agent_is_shown():
    view = EpisodeView(domain="mcp", instruction="Find it.", tools=TOOLS, task_id="t")
    conversation = Conversation(view, history_messages=4)
    shown = []
    for step in range(5):
        shown.append(conversation.observe(f"observation {step}"))
        conversation.reply(f"reply {step}")
    trajectory = Trajectory(
        task=Task(id="t", domain="mcp", instruction="Find it."),
        domain="mcp",
        agent_messages=conversation.messages,
    )
    rows = policy_rows(trajectory, history_messages=4)
    assert [r["messages"] for r in rows] == shown
    assert [r["completion"] for r in rows] == [f"reply {s}" for s in range(5)]
    assert [r["turn"] for r in rows] == list(range(5))
    assert rows[-1]["messages"][0]["content"] == system_prompt(view)
    # the window keeps the task turn and drops the oldest history after it
    assert "observation 1" not in json.dumps(rows[-1]["messages"])
    assert "Find it." in rows[-1]["messages"][1]["content"]


def test_demonstrations_kept_in_the_twin_are_in_the_local_agents_format(tmp_path):
    tasks = training_tasks(3)  # a lookup by id, an update by id, a search by name then a lookup
    got = collect(tasks, ReaderAgent(tasks), tmp_path / "collect", backend="sim")
    assert (got.episodes, len(got.kept)) == (3, 3)
    for trajectory in got.kept:
        messages = trajectory.agent_messages
        view = EpisodeView(
            domain="mcp",
            instruction=trajectory.task.instruction,
            tools=[ToolSpec(**t) for t in trajectory.scenario["tools"]],
        )
        assert messages[0] == {"role": "system", "content": system_prompt(view)}
        replies = [m["content"] for m in messages if m["role"] == "assistant"]
        calls = [parse_tool_call(r) for r in replies[:-1]]
        sent = [{"name": t.action.name, "arguments": t.action.arguments} for t in trajectory.turns]
        assert calls == sent[: len(calls)]
        assert parse_tool_call(replies[-1]) is None  # the final answer is plain text
        assert replies[-1] == trajectory.answer
    # the update task ends with the script's own stop, written as a short answer
    kinds = {t.task.metadata["kind"]: t for t in got.kept}
    assert kinds["update_by_id"].answer == DONE
    rows = tmp_path / "rows.jsonl"
    assert write_rows(got.kept, rows) == sum(
        sum(m["role"] == "assistant" for m in t.agent_messages) for t in got.kept
    )


def test_a_failed_demonstration_is_not_kept(tmp_path):
    task = training_tasks(1)[0]
    wrong = task.model_copy(update={"metadata": {**task.metadata, "answer": "not@this.one"}})
    got = collect([wrong], ReaderAgent([wrong]), tmp_path / "collect", backend="sim")
    assert (got.episodes, got.kept) == (1, [])


@pytest.mark.parametrize("suite", ["records", "shell"])
def test_the_whole_loop_in_tiny(tmp_path, tiny_base, suite):
    """Collect in the twin, fine-tune (a tiny random model, 2 steps), export to GGUF, and
    play a held-out task on the real backend (the records server, a sandboxed shell) with
    the exported policy."""
    if suite == "shell" and bwrap_problem() is not None:
        pytest.skip(str(bwrap_problem()))
    chosen = get_suite(suite)
    tasks = chosen.training(2)
    got = collect(tasks, ImitationAgent(ReaderAgent(tasks)), tmp_path / "collect")
    rows = tmp_path / "rows.jsonl"
    write_rows(got.kept, rows)
    policy = train_policy(
        rows,
        tmp_path / "run",
        base=str(tiny_base),
        mode="full",
        max_steps=2,
        batch_size=1,
        bf16=False,
        save_steps=1,
        threads=1,
    )
    assert got.kept and policy.is_file() and policy.stat().st_size > 0
    log = [json.loads(line) for line in (tmp_path / "run" / "loss.jsonl").read_text().splitlines()]
    assert any("loss" in record for record in log)
    assert train_policy(rows, tmp_path / "run", base=str(tiny_base)) == policy  # resumes: done
    report = evaluate(
        chosen.heldout(1),
        agent="local",
        agent_options={"model_path": str(policy), "max_tokens": 8},
        k=1,
        backends=["real"],
        max_turns=2,
        out_dir=tmp_path / "eval",
    )
    assert report["backends"]["real"]["episodes"] == 1
    (episode,) = read_trajectories(tmp_path / "eval" / "real.jsonl")
    assert episode.agent["model_path"] == str(policy)
    assert episode.agent_messages[0]["role"] == "system"
    assert episode.domain == chosen.heldout(1)[0].domain


class _SloppyTeacher:
    """Writes one call whose arguments do not parse, then the right answer."""

    name = "sloppy"

    def __init__(self, answer: str) -> None:
        self.answer = answer

    async def start(self, view):
        return _SloppySession(self.answer)

    def describe(self):
        return {"name": self.name}


class _SloppySession:
    RAW = '<tool_call>{"name": "get_customer", "arguments": {"customer_id" "C-2001"}}</tool_call>'

    def __init__(self, answer: str) -> None:
        self.answer, self.steps = answer, 0

    async def act(self, observation):
        from simgym.agents.base import Decision
        from simgym.agents.local import parse_tool_call

        self.steps += 1
        if self.steps == 1:
            return Decision(action=parse_tool_call(self.RAW), raw=self.RAW)
        return Decision(answer=self.answer)


def test_a_sampled_call_that_does_not_parse_is_recorded_and_never_taught(tmp_path):
    # a sampled policy (a later RFT round) may write broken JSON: the episode goes on, the
    # environment records the refusal, and the episode is not kept even if it succeeds
    task = training_tasks(1)[0]  # email_by_id
    answer = task.metadata["answer"]
    got = collect([task], _SloppyTeacher(answer), tmp_path, backend="sim")
    (episode,) = read_trajectories(tmp_path / "sim.jsonl")
    assert episode.turns[0].error_type == "action" and episode.total_reward == 1.0
    assert episode.agent_messages[2]["content"] == _SloppySession.RAW
    assert (got.episodes, got.kept) == (1, [])
