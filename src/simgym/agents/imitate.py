"""Demonstrations in the local agent's own format, for training a policy by imitation.

``ImitationAgent(teacher)`` plays episodes with ``teacher``'s decisions (a scripted plan, a
calibration policy, a stronger model), while keeping the conversation the ``local`` agent
would have had in the same episode: its system prompt, its user turns, and each decision
written as the local agent is asked to write it (a ``<tool_call>`` block, or the answer as
plain text). The conversation lands in ``trajectory.agent_messages``, so the episodes a
reward accepts become supervised rows (:func:`simgym.agents.imitate.policy_rows`) whose
prompts are exactly the ones the trained local policy will be shown: rejection-sampling
fine-tuning with the teacher as the sampler.
"""

from __future__ import annotations

from typing import Any

from simgym.agents.base import Agent, AgentError, Decision, EpisodeView, create_agent
from simgym.agents.local import Conversation, reply_text, shown_window
from simgym.core.errors import ActionError
from simgym.core.types import Action, Trajectory

DONE = "Done."  # the final answer written for a teacher that simply stops


class ImitationAgent:
    """The teacher's decisions in the local agent's conversation format."""

    name = "imitate"

    def __init__(self, teacher: Agent | str, *, history_messages: int = 12, **options: Any):
        self.teacher = create_agent(teacher, **options)
        self.history_messages = history_messages

    async def start(self, view: EpisodeView) -> _ImitationSession:
        return _ImitationSession(await self.teacher.start(view), view, self.history_messages)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "teacher": self.teacher.describe(), "format": "local"}


class _ImitationSession:
    def __init__(self, teacher: Any, view: EpisodeView, history_messages: int) -> None:
        self._teacher = teacher
        self._conversation = Conversation(view, history_messages)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self._conversation.messages

    async def act(self, observation: str) -> Decision:
        self._conversation.observe(observation)
        decision = await self._teacher.act(observation)
        if decision is None:  # a script ran out: the local agent ends with an answer
            decision = Decision(answer=DONE)
        if decision.answer is not None:
            self._conversation.reply(decision.answer)
            return decision
        action = decision.action
        if not isinstance(action, Action):
            try:
                action = Action.parse(action)
            except ActionError:
                # a sampled policy wrote a call that does not parse: the environment rejects
                # and records it; the conversation keeps what the teacher wrote
                self._conversation.reply(decision.raw or str(decision.action))
                return decision
        if action.kind != "tool_call" or not action.name:
            raise AgentError(f"the local format writes tool calls only, not {action.kind!r}")
        self._conversation.reply(reply_text(action.name, action.arguments))
        return decision


def policy_rows(trajectory: Trajectory, history_messages: int = 12) -> list[dict[str, Any]]:
    """Supervised rows from one episode's ``agent_messages``: one per reply, the messages
    the policy was shown before it (windowed as :class:`Conversation` shows them) and the
    reply as the completion, with ``episode_id`` and ``turn`` so that whole-episode
    training (``simgym train sft --layout episode``) teaches every reply of an episode in
    one sequence."""
    messages = trajectory.agent_messages
    rows = []
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        shown = shown_window(messages[:index], history_messages)
        rows.append(
            {
                "messages": [{"role": m["role"], "content": m["content"]} for m in shown],
                "completion": message["content"],
                "episode_id": trajectory.episode_id,
                "turn": len(rows),
                "domain": trajectory.domain,
                "task_id": trajectory.task.id,
            }
        )
    return rows
