"""Any OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, hosted APIs).

Requests go through :class:`~simgym.worldmodels.chat.ChatClient` (the SDK's retry rules, a
concurrency limit shared by every environment using this backend); final failures become
:class:`WorldModelError`.
"""

from __future__ import annotations

from typing import Any

from simgym.core.errors import WorldModelError
from simgym.core.worldmodel import Messages, Prediction
from simgym.worldmodels.chat import ChatClient, usage_of


class OpenAIWorldModel:
    """World model served behind ``/v1/chat/completions``.

    Unset ``base_url``, ``model`` and ``api_key`` come from ``SIMGYM_BASE_URL`` /
    ``OPENAI_BASE_URL``, ``SIMGYM_MODEL`` and ``SIMGYM_API_KEY`` / ``OPENAI_API_KEY``;
    with no model named, the server's first listed model is used.
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        temperature: float = 0.7,
        top_p: float | None = 0.9,
        max_tokens: int = 2048,
        timeout: float = 120.0,
        max_retries: int = 4,
        max_concurrency: int = 64,
        stop: list[str] | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.chat = ChatClient.from_env(
            "SIMGYM_",
            base_url,
            model,
            api_key,
            base_url_fallback="OPENAI_BASE_URL",
            missing="the openai world model needs a server: pass base_url= (CLI: --base-url) "
            "or set SIMGYM_BASE_URL, e.g. http://127.0.0.1:8000/v1",
            timeout=timeout,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
            error=WorldModelError,
            label="world model",
        )
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens
        self.stop = stop
        self.extra_body = extra_body

    @property
    def base_url(self) -> str:
        return self.chat.base_url

    @property
    def model(self) -> str | None:
        return self.chat.model

    @property
    def name(self) -> str:
        return f"openai:{self.chat.model or 'auto'}"

    async def predict(
        self,
        messages: Messages,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> Prediction:
        params: dict[str, Any] = {
            "messages": messages,
            "temperature": self.temperature if temperature is None else temperature,
            "max_tokens": max_tokens or self.max_tokens,
        }
        if self.top_p is not None:
            params["top_p"] = self.top_p
        if seed is not None:
            params["seed"] = seed
        if self.stop:
            params["stop"] = self.stop
        if self.extra_body:
            params.update(self.extra_body)
        response, latency = await self.chat.complete(params)
        choice = response.choices[0]
        message = choice.message
        extra = message.extra
        reasoning = extra.get("reasoning_content") or extra.get("reasoning")
        return Prediction.from_raw(
            message.content or "",
            reasoning_content=reasoning if isinstance(reasoning, str) else None,
            usage=usage_of(response),
            latency_s=latency,
            finish_reason=choice.finish_reason,
            model=response.model or self.chat.model,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "openai",
            "base_url": self.base_url,
            "model": self.model,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "max_concurrency": self.chat.max_concurrency,
        }

    async def aclose(self) -> None:
        await self.chat.aclose()
