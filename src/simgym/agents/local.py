"""The embedded model as a policy: a GGUF chat model run in-process, offline.

Small local models rarely speak a server's tool-calling protocol, so this agent lists the
tools in its system prompt and reads a ``<tool_call>{"name": ..., "arguments": {...}}
</tool_call>`` block (a bare JSON object works too) from each reply; a reply with neither
is its final answer. The default model is the same SmolLM2-135M the ``local`` world model
uses, which makes the whole loop run offline; expect plumbing, not skill, from it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import zlib
from typing import Any

from simgym.agents.base import AgentError, Decision, EpisodeView
from simgym.core.types import Usage

SYSTEM_PROMPT = """You are an agent in a {domain} environment. Tools you can call:
{tools}

To call a tool, reply with exactly one block:
<tool_call>{{"name": "TOOL_NAME", "arguments": {{...}}}}</tool_call>
Example: {example}
When the task is done, reply with the final answer in plain text and no tool call."""

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


class LocalAgent:
    """A GGUF policy (``model_path``; the embedded SmolLM2 when unset)."""

    name = "local"

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        # the agent reads every tool's schema: a business twin declares dozens, and the
        # embedded SmolLM2 was trained to 8192 tokens
        n_ctx: int = 8192,
        n_threads: int | None = None,
        temperature: float = 0.3,
        max_tokens: int = 128,
        history_messages: int = 12,
        sample_seeds: bool = False,
        # An agent copies ids, emails and names from what it was shown; a repetition
        # penalty (the world model's is 1.15) taxes exactly those tokens: a trained policy
        # then wrote update_email without the new address 85 times out of 85.
        repeat_penalty: float = 1.0,
    ) -> None:
        from simgym.worldmodels.local import LocalWorldModel

        try:
            # The world model's loader finds the embedded file and shares loaded models.
            self._model = LocalWorldModel(
                model_path, n_ctx=n_ctx, n_threads=n_threads, prefill=False, adapter=None
            )
        except Exception as exc:
            raise AgentError(str(exc)) from None
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.history_messages = history_messages
        self.repeat_penalty = repeat_penalty
        # Off, every episode samples with the seeds 0, 1, 2, ... (one per step), so the k
        # samples of a task are the same episode k times. On, sample n of a task gets
        # seeds of its own, from the task id and n: different samples differ, and sample
        # n meets the same seeds in every world and on a resumed run.
        self.sample_seeds = sample_seeds

    async def start(self, view: EpisodeView) -> _LocalSession:
        base = 0
        if self.sample_seeds:
            base = (zlib.crc32(view.task_id.encode()) + 7919 * (view.sample or 0)) % 2**31
        return _LocalSession(self, view, seed=base)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model_path": self._model.model_path,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "repeat_penalty": self.repeat_penalty,
            **({"sample_seeds": True} if self.sample_seeds else {}),
        }

    async def complete(self, messages: list[dict[str, Any]], seed: int | None) -> tuple[str, Usage]:
        from simgym.worldmodels.local import generate_chat

        try:
            return await asyncio.to_thread(
                generate_chat,
                self._model,
                messages,
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                seed=seed,
                stop=["</tool_call>"],
                repeat_penalty=self.repeat_penalty,
            )
        except Exception as exc:
            raise AgentError(f"local agent model failed: {type(exc).__name__}: {exc}") from None


class Conversation:
    """The local agent's side of an episode as chat messages: its system prompt (the
    tools and the call format), each observation as a user turn, each reply as an
    assistant turn. Shared by the model-driven session and by demonstrations in this
    format (:class:`simgym.agents.imitate.ImitationAgent`), so a policy is trained on the
    very prompts it later acts on."""

    def __init__(self, view: EpisodeView, history_messages: int = 12) -> None:
        self.view = view
        self.history_messages = history_messages
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt(view)}]

    def observe(self, observation: str) -> list[dict[str, Any]]:
        """Add an observation; returns the messages the model is shown for its reply (the
        system prompt, the task turn and the newest ``history_messages`` after it)."""
        if len(self.messages) == 1:
            content = f"{self.view.instruction}\n\nThe environment shows:\n{observation}"
        else:
            content = f"Result:\n{observation}"
        self.messages.append({"role": "user", "content": content})
        return shown_window(self.messages, self.history_messages)

    def reply(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})


def shown_window(messages: list[dict[str, Any]], history_messages: int) -> list[dict[str, Any]]:
    """What the model is shown of a conversation: the system prompt, the task turn and
    the newest ``history_messages`` after them."""
    return [*messages[:2], *messages[2:][-history_messages:]]


def system_prompt(view: EpisodeView) -> str:
    """The local agent's system prompt for an episode: its tools and the call format."""
    tools = "\n".join(
        f"- {t.name}: {t.description} Arguments schema: {json.dumps(t.parameters)}"
        for t in view.tools
    )
    example = (
        f'<tool_call>{{"name": "{view.tools[0].name}", "arguments": {{}}}}</tool_call>'
        if view.tools
        else "none"
    )
    return SYSTEM_PROMPT.format(domain=view.domain, tools=tools or "- none", example=example)


def reply_text(name: str, arguments: Any) -> str:
    """A tool call written the way the local agent is asked to write one."""
    call = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>{call}</tool_call>"


class _LocalSession:
    def __init__(self, agent: LocalAgent, view: EpisodeView, seed: int = 0) -> None:
        self.agent = agent
        self._seed = seed
        self.view = view
        self._conversation = Conversation(view, agent.history_messages)
        self._steps = 0

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self._conversation.messages

    async def act(self, observation: str) -> Decision:
        context = self._conversation.observe(observation)
        text, usage = await self.agent.complete(context, seed=self._seed + self._steps)
        self._steps += 1
        self._conversation.reply(text)
        call = parse_tool_call(text)
        if call is None:
            return Decision(answer=text.strip(), usage=usage, raw=text)
        return Decision(action=call, usage=usage, raw=text)


def parse_tool_call(text: str) -> dict[str, Any] | None:
    """The tool call in a reply: a ``<tool_call>`` block or a bare JSON object with a
    ``name``. Arguments that do not parse are passed on as text, for the environment to
    reject with a message the agent can read."""
    match = _TOOL_CALL.search(text)
    body = match.group(1) if match else text.strip()
    if not body.startswith(("{", "[")):
        return None
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        return {"name": _guess_name(body), "arguments": body} if match else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        data = data[0]  # some models wrap one call in a list
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    return {"name": data["name"], "arguments": data.get("arguments", {})}


def _guess_name(body: str) -> str:
    found = re.search(r'"name"\s*:\s*"([^"]+)"', body)
    return found.group(1) if found else ""
