"""A tool-calling agent behind any OpenAI-compatible server (vLLM, SGLang, llama.cpp, ...).

The agent keeps a chat: a system message, the instruction with the first observation,
then its own ``assistant`` messages with ``tool_calls`` and one ``tool`` message per call
holding what the environment answered. Several calls in one message are played one step
each, in order. A reply with no tool call is the final answer. Tool arguments are passed
on as the model wrote them, so malformed JSON becomes the environment's error observation
(which the agent sees and may correct) instead of a crash.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from simgym.agents.base import AgentError, Decision, EpisodeView
from simgym.core.types import Usage
from simgym.worldmodels.chat import ChatClient, usage_of

SYSTEM_PROMPT = """You are an agent working in a {domain} environment. Reach the goal the \
user gives you by calling the tools you are offered, one step at a time, and read each \
result before deciding the next step. When the task is done, or cannot be done, stop \
calling tools and reply with your final answer in plain text."""


class OpenAIAgent:
    """A policy served at ``base_url`` (``SIMGYM_AGENT_BASE_URL`` when unset)."""

    name = "openai"

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        temperature: float = 0.7,
        max_tokens: int = 1024,
        system_prompt: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 4,
        max_concurrency: int = 64,
        tool_choice: str | dict[str, Any] | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.chat = ChatClient.from_env(
            "SIMGYM_AGENT_",
            base_url,
            model,
            api_key,
            missing="the openai agent needs a server: pass base_url= (CLI: --agent-base-url) "
            "or set SIMGYM_AGENT_BASE_URL",
            timeout=timeout,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
            error=AgentError,
            label="agent",
        )
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.system_prompt = system_prompt or SYSTEM_PROMPT
        self.tool_choice = tool_choice  # e.g. "required"; None leaves it to the server
        self.extra_body = extra_body or {}

    async def start(self, view: EpisodeView) -> _ChatSession:
        return _ChatSession(self, view)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "base_url": self.chat.base_url,
            "model": self.chat.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }

    async def aclose(self) -> None:
        await self.chat.aclose()


class _ChatSession:
    def __init__(self, agent: OpenAIAgent, view: EpisodeView) -> None:
        self.agent = agent
        self.view = view
        self.tools = [tool.to_openai() for tool in view.tools]
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": agent.system_prompt.format(domain=view.domain)}
        ]
        self._pending: deque[dict[str, Any]] = deque()  # tool calls not yet played
        self._waiting: str | None = None  # the call whose result comes next

    async def act(self, observation: str) -> Decision:
        if self._waiting is None and len(self.messages) == 1:
            self.messages.append(
                {"role": "user", "content": _first_message(self.view, observation)}
            )
        elif self._waiting is not None:
            self.messages.append(
                {"role": "tool", "tool_call_id": self._waiting, "content": observation}
            )
        else:  # a policy that answered in text yet was asked again: show it as a user turn
            self.messages.append({"role": "user", "content": observation})
        self._waiting = None
        usage = Usage()
        if not self._pending:
            usage = await self._ask()
            if not self._pending:
                return Decision(answer=self.messages[-1].get("content") or "", usage=usage)
        call = self._pending.popleft()
        self._waiting = call["id"]
        function = call.get("function") or {}
        raw = {"name": function.get("name") or "", "arguments": function.get("arguments") or "{}"}
        return Decision(action=raw, usage=usage, raw=json.dumps(raw, ensure_ascii=False))

    async def _ask(self) -> Usage:
        params: dict[str, Any] = {
            "messages": self.messages,
            "temperature": self.agent.temperature,
            "max_tokens": self.agent.max_tokens,
            **self.agent.extra_body,
        }
        if self.tools:
            params["tools"] = self.tools
            if self.agent.tool_choice is not None:
                params["tool_choice"] = self.agent.tool_choice
        response, _ = await self.agent.chat.complete(params)
        message = response.choices[0].message
        calls = [
            {
                "id": call.id or f"call_{len(self.messages)}_{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for i, call in enumerate(message.tool_calls)
        ]
        entry: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
        if calls:
            entry["tool_calls"] = calls
        self.messages.append(entry)
        self._pending.extend(calls)
        return usage_of(response)


def _first_message(view: EpisodeView, observation: str) -> str:
    parts = [view.instruction.strip() or "Explore the environment."]
    if observation.strip():
        parts.append(f"What the environment shows now:\n{observation}")
    return "\n\n".join(parts)
