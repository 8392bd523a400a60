"""One OpenAI-compatible chat client for every part of simgym that calls a model server:
world models, agents and judges.

Retries on timeouts, 429 and 5xx are the ``openai`` SDK's own (exponential backoff that
honours ``Retry-After``). This adds what the SDK leaves to its user: one client and one
concurrency limit per event loop (clients are bound to the loop that made them), the
server's first model when none is named, and final failures turned into the caller's own
error type with a one-line message.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import time
from typing import TYPE_CHECKING, Any

from simgym.core.types import Usage

if TYPE_CHECKING:
    import openai
    from openai.types.chat import ChatCompletion


def env_value(*names: str) -> str | None:
    """The first of these environment variables that is set and non-empty."""
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def usage_of(response: Any) -> Usage:
    """Token counts of a chat completion (zeros when the server sends none)."""
    if getattr(response, "usage", None) is None:
        return Usage()
    return Usage(
        prompt_tokens=response.usage.prompt_tokens or 0,
        completion_tokens=response.usage.completion_tokens or 0,
    )


class ChatClient:
    """``/chat/completions`` on one server, shared by many concurrent callers.

    ``error`` is the exception type failures become; ``label`` names the server's role
    in messages ("world model", "agent", "judge").
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        max_retries: int = 4,
        max_concurrency: int = 64,
        error: type[Exception] = RuntimeError,
        label: str = "model server",
    ) -> None:
        self.base_url = base_url
        self.model = model
        self._api_key = api_key or "EMPTY"
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_concurrency = max_concurrency
        self.error = error
        self.label = label
        self._per_loop: dict[int, tuple[openai.AsyncOpenAI, asyncio.Semaphore]] = {}

    @classmethod
    def from_env(
        cls,
        prefix: str,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        base_url_fallback: str | None = None,
        missing: str,
        error: type[Exception] = RuntimeError,
        **options: Any,
    ) -> ChatClient:
        """A client whose unset arguments come from ``{prefix}BASE_URL``, ``{prefix}MODEL``
        and ``{prefix}API_KEY`` (then ``OPENAI_API_KEY``), so every role (world model,
        agent, judge) reads its server the same way. Raises ``error(missing)`` when no
        base URL is found (``base_url_fallback`` names one more variable to try)."""
        names = [f"{prefix}BASE_URL"] + ([base_url_fallback] if base_url_fallback else [])
        base_url = base_url or env_value(*names)
        if not base_url:
            raise error(missing)
        return cls(
            base_url,
            model or env_value(f"{prefix}MODEL"),
            api_key or env_value(f"{prefix}API_KEY", "OPENAI_API_KEY"),
            error=error,
            **options,
        )

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

    async def resolve_model(self) -> str:
        """The model to ask for: the one named, else the server's first listed model."""
        import openai

        if self.model:
            return self.model
        client, _ = self._client()
        try:
            models = await client.models.list()
        except openai.OpenAIError as exc:
            raise self.error(f"cannot list models at {self.base_url}: {exc}") from None
        if not models.data:
            raise self.error(f"the server at {self.base_url} lists no models; pass model=")
        self.model = models.data[0].id
        return self.model

    async def complete(self, params: dict[str, Any]) -> tuple[ChatCompletion, float]:
        """One chat completion (``model`` filled in when absent) and its latency in s."""
        import openai
        from openai.types.chat import ChatCompletion

        client, limit = self._client()
        body = {"model": await self.resolve_model(), **params}
        async with limit:
            start = time.perf_counter()
            try:
                # client.post is the SDK's documented raw-request path: same retries and
                # errors, without re-walking every message to type-check the request
                # (that walk cost more CPU than everything else here together).
                response = await client.post("/chat/completions", body=body, cast_to=ChatCompletion)
            except openai.APITimeoutError as exc:
                # The aiohttp transport reports a refused connection as a timeout too;
                # only a call that really waited out its timeout is called one. The
                # cause decides first: retries with backoff can outlast the timeout
                # while every attempt was refused at once.
                waited = time.perf_counter() - start
                refused = _connect_failure(exc)
                if refused is not None:
                    raise self.error(
                        f"cannot reach {self.label} at {self.base_url}: {refused}"
                    ) from None
                if waited >= self.timeout * 0.9:
                    raise self.error(
                        f"{self.label} at {self.base_url} timed out after {self.timeout:g}s "
                        f"({self.max_retries} retries)"
                    ) from None
                raise self.error(
                    f"cannot reach {self.label} at {self.base_url}: {_root_cause(exc)}"
                ) from None
            except openai.APIConnectionError as exc:
                reason = _connect_failure(exc) or exc.__cause__ or exc
                raise self.error(
                    f"cannot reach {self.label} at {self.base_url}: {reason}"
                ) from None
            except openai.APIStatusError as exc:
                raise self.error(
                    f"{self.label} at {self.base_url} answered HTTP {exc.status_code}: "
                    f"{_short(exc.message)}"
                ) from None
            except openai.OpenAIError as exc:
                raise self.error(f"{self.label} call failed: {exc}") from None
            latency = time.perf_counter() - start
        if not getattr(response, "choices", None):
            raise self.error(f"{self.label} at {self.base_url} returned no choices")
        return response, latency

    async def aclose(self) -> None:
        """Close this event loop's client."""
        entry = self._per_loop.pop(id(asyncio.get_running_loop()), None)
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


def _connect_failure(exc: BaseException) -> str | None:
    """What went wrong connecting, in plain words, if the chain of causes says: the
    server refused, or the name did not resolve. ``None`` when it was something else."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError) or (
            isinstance(current, OSError) and current.errno == errno.ECONNREFUSED
        ):
            return "connection refused (is the server running on that port?)"
        if isinstance(current, socket.gaierror):
            return f"the host name did not resolve ({current.strerror or current})"
        # aiohttp keeps the socket's error beside the chain, not in it.
        todo += [current.__cause__, current.__context__, getattr(current, "os_error", None)]
    return None


def _root_cause(exc: BaseException) -> str:
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return str(exc) or type(exc).__name__


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."
