"""Any OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, hosted APIs).

Retries on timeouts, 429 and 5xx are the ``openai`` SDK's own (exponential backoff that
honours ``Retry-After``); this backend adds a concurrency limit shared by every
environment that uses it, and turns final failures into :class:`WorldModelError`.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import openai

from simgym.core.errors import WorldModelError
from simgym.core.types import Usage
from simgym.core.worldmodel import Messages, Prediction


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


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
        self.base_url = base_url or _env("SIMGYM_BASE_URL", "OPENAI_BASE_URL")
        if not self.base_url:
            raise WorldModelError(
                "the openai world model needs a server: pass base_url= (CLI: --base-url) "
                "or set SIMGYM_BASE_URL, e.g. http://127.0.0.1:8000/v1"
            )
        self.model = model or _env("SIMGYM_MODEL")
        self._api_key = api_key or _env("SIMGYM_API_KEY", "OPENAI_API_KEY") or "EMPTY"
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_concurrency = max_concurrency
        self.stop = stop
        self.extra_body = extra_body
        self.name = f"openai:{self.model or 'auto'}"
        # Clients and semaphores belong to one event loop; keep one set per loop.
        self._per_loop: dict[int, tuple[openai.AsyncOpenAI, asyncio.Semaphore]] = {}
        self._model_lock: asyncio.Lock | None = None

    def _client(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        import openai  # here, not at module level: it takes most of simgym's import time

        key = id(asyncio.get_running_loop())
        if key not in self._per_loop:
            client = openai.AsyncOpenAI(
                base_url=self.base_url,
                api_key=self._api_key,
                timeout=self.timeout,
                max_retries=self.max_retries,
                http_client=_http_client(self.timeout),
            )
            self._per_loop[key] = (client, asyncio.Semaphore(self.max_concurrency))
        return self._per_loop[key]

    async def _resolve_model(self, client: openai.AsyncOpenAI) -> str:
        import openai

        if self.model:
            return self.model
        try:
            models = await client.models.list()
        except openai.OpenAIError as exc:
            raise WorldModelError(f"cannot list models at {self.base_url}: {exc}") from None
        if not models.data:
            raise WorldModelError(f"the server at {self.base_url} lists no models; pass model=")
        self.model = models.data[0].id
        self.name = f"openai:{self.model}"
        return self.model

    async def predict(
        self,
        messages: Messages,
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        prefix: str | None = None,
    ) -> Prediction:
        import openai
        from openai.types.chat import ChatCompletion

        client, limit = self._client()
        model = await self._resolve_model(client)
        params: dict[str, Any] = {
            "model": model,
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
        async with limit:
            start = time.perf_counter()
            try:
                # client.post is the SDK's documented raw-request path: same retries and
                # errors, without re-walking every message to type-check the request
                # (that walk cost more CPU than everything else here together).
                response = await client.post(
                    "/chat/completions", body=params, cast_to=ChatCompletion
                )
            except openai.APITimeoutError as exc:
                # The aiohttp transport reports a refused connection as a timeout too;
                # only a call that really waited out its timeout is called one.
                waited = time.perf_counter() - start
                if waited >= self.timeout * 0.9:
                    raise WorldModelError(
                        f"world model at {self.base_url} timed out after {self.timeout:g}s "
                        f"({self.max_retries} retries)"
                    ) from None
                raise WorldModelError(
                    f"cannot reach world model at {self.base_url}: {_root_cause(exc)}"
                ) from None
            except openai.APIConnectionError as exc:
                raise WorldModelError(
                    f"cannot reach world model at {self.base_url}: {exc.__cause__ or exc}"
                ) from None
            except openai.APIStatusError as exc:
                raise WorldModelError(
                    f"world model at {self.base_url} answered HTTP {exc.status_code}: "
                    f"{_short(exc.message)}"
                ) from None
            except openai.OpenAIError as exc:
                raise WorldModelError(f"world model call failed: {exc}") from None
            latency = time.perf_counter() - start
        if not getattr(response, "choices", None):
            raise WorldModelError(f"world model at {self.base_url} returned no choices")
        choice = response.choices[0]
        message = choice.message
        extra = message.model_extra or {}
        reasoning = extra.get("reasoning_content") or extra.get("reasoning")
        usage = Usage()
        if response.usage is not None:
            usage = Usage(
                prompt_tokens=response.usage.prompt_tokens or 0,
                completion_tokens=response.usage.completion_tokens or 0,
            )
        return Prediction.from_raw(
            message.content or "",
            reasoning_content=reasoning if isinstance(reasoning, str) else None,
            usage=usage,
            latency_s=latency,
            finish_reason=choice.finish_reason,
            model=response.model or model,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "openai",
            "base_url": self.base_url,
            "model": self.model,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "max_concurrency": self.max_concurrency,
        }

    async def aclose(self) -> None:
        key = id(asyncio.get_running_loop())
        entry = self._per_loop.pop(key, None)
        if entry is not None:
            await entry[0].close()


def _http_client(timeout: float) -> Any:
    """The SDK's aiohttp transport when installed (it spends far less CPU per request than
    the default pool when hundreds of requests are in flight), else the SDK's default."""
    import openai

    try:
        return openai.DefaultAioHttpClient(timeout=timeout)
    except RuntimeError:  # the openai[aiohttp] extra is missing
        return None


def _root_cause(exc: BaseException) -> str:
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return str(exc) or type(exc).__name__


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."
