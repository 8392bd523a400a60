"""One OpenAI-compatible chat client for every part of simgym that calls a model server:
world models, agents and judges.

The hot path is lean on purpose. A profile of ``benchmarks/rollout.py`` showed the
``openai`` SDK spending more CPU per request (building an httpx request, re-parsing URLs,
walking the response into typed models) than all of simgym's own work in a step, which
capped a driver at a few hundred steps per second. So requests go straight to the
server through one pooled ``aiohttp`` session per event loop, and the reply is read into
small frozen dataclasses. The SDK's behaviour is kept: the same retries (connection
errors, timeouts, 408, 409, 429 and 5xx, exponential backoff with jitter that honours
``Retry-After``, and the server's ``x-should-retry``), a timeout per attempt, and final
failures turned into the caller's own error type with a one-line message.
"""

from __future__ import annotations

import asyncio
import email.utils
import errno
import json
import os
import random
import socket
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from simgym.core.types import Usage
from simgym.core.version import __version__

if TYPE_CHECKING:
    import aiohttp

try:  # several times faster than json on a long conversation; optional
    import orjson

    def _dumps(value: Any) -> bytes:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)

    _loads = orjson.loads
except ImportError:  # pragma: no cover - orjson is a core dependency

    def _dumps(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False).encode()

    _loads = json.loads

RETRY_STATUSES = frozenset({408, 409, 429})  # and every 5xx, as the SDK does


def env_value(*names: str) -> str | None:
    """The first of these environment variables that is set and non-empty."""
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call the model asked for (``arguments`` is the JSON text it sent)."""

    id: str | None
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """The assistant message of a choice; ``extra`` holds the server's other fields
    (``reasoning_content`` from vLLM and llama.cpp, ``reasoning`` from others)."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChatChoice:
    message: ChatMessage
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class ChatReply:
    """A chat completion as simgym reads it; ``raw`` is the server's JSON, untouched."""

    choices: tuple[ChatChoice, ...]
    model: str | None
    usage: Usage
    raw: dict[str, Any]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChatReply:
        choices = []
        for choice in data.get("choices") or ():
            message = choice.get("message") or {}
            calls = tuple(
                ToolCall(
                    id=call.get("id"),
                    name=(call.get("function") or {}).get("name") or "",
                    arguments=(call.get("function") or {}).get("arguments") or "{}",
                )
                for call in message.get("tool_calls") or ()
                if isinstance(call, dict) and isinstance(call.get("function"), dict)
            )
            extra = {k: v for k, v in message.items() if k not in ("role", "content", "tool_calls")}
            content = message.get("content")
            choices.append(
                ChatChoice(
                    ChatMessage(content if isinstance(content, str) else None, calls, extra),
                    choice.get("finish_reason"),
                )
            )
        usage = data.get("usage") or {}
        return cls(
            choices=tuple(choices),
            model=data.get("model"),
            usage=Usage(
                prompt_tokens=usage.get("prompt_tokens") or 0,
                completion_tokens=usage.get("completion_tokens") or 0,
            ),
            raw=data,
        )


def usage_of(response: ChatReply) -> Usage:
    """Token counts of a chat completion (zeros when the server sends none)."""
    return response.usage


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url``, as the SDK honoured it:
    ``HTTP_PROXY``/``HTTPS_PROXY`` (either case) for its scheme, unless ``NO_PROXY``
    exempts its host."""
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies_environment().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass_environment(parts.hostname or ""):
        return None
    return proxy


class ChatClient:
    """``/chat/completions`` on one server, shared by many concurrent callers.

    ``error`` is the exception type failures become; ``label`` names the server's role
    in messages ("world model", "agent", "judge"). ``max_concurrency`` bounds the
    requests in flight (per event loop), and the connection pool is sized to match, so
    connections are kept alive and reused rather than opened per request.
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
        self._url = base_url.rstrip("/")
        self._proxy = env_proxy(self._url)
        self._per_loop: dict[int, tuple[aiohttp.ClientSession, asyncio.Semaphore]] = {}

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

    def _client(self) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
        """This event loop's session and concurrency gate (sessions are bound to the
        loop that made them)."""
        key = id(asyncio.get_running_loop())
        found = self._per_loop.get(key)
        if found is not None:  # every request asks: keep this path short
            return found
        import aiohttp

        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.max_concurrency + 1),
            headers={
                "Authorization": f"Bearer {self._api_key}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                "User-Agent": f"simgym/{__version__}",
            },
            timeout=aiohttp.ClientTimeout(total=self.timeout),
            raise_for_status=False,
            # The proxy comes from env_proxy, read once. aiohttp's trust_env would also
            # look for ~/.netrc credentials on a worker thread before every request:
            # half the driver's CPU at a thousand episodes in flight.
            trust_env=False,
        )
        found = self._per_loop[key] = (session, asyncio.Semaphore(self.max_concurrency))
        return found

    @property
    def proxy(self) -> str | None:
        """The proxy requests go through (from the environment), or None."""
        return self._proxy

    async def resolve_model(self) -> str:
        """The model to ask for: the one named, else the server's first listed model."""
        if self.model:
            return self.model
        try:
            listed = await self._request("GET", "/models", None)
        except self.error as exc:
            raise self.error(f"cannot list models at {self.base_url}: {exc}") from None
        data = listed.get("data") if isinstance(listed, dict) else None
        if not data or not isinstance(data[0], dict) or not data[0].get("id"):
            raise self.error(f"the server at {self.base_url} lists no models; pass model=")
        self.model = str(data[0]["id"])
        return self.model

    async def complete(self, params: dict[str, Any]) -> tuple[ChatReply, float]:
        """One chat completion (``model`` filled in when absent) and its latency in s."""
        _, limit = self._client()
        body = _dumps({"model": await self.resolve_model(), **params})
        async with limit:
            start = time.perf_counter()
            data = await self._request("POST", "/chat/completions", body)
            latency = time.perf_counter() - start
        if not isinstance(data, dict) or not data.get("choices"):
            raise self.error(f"{self.label} at {self.base_url} returned no choices")
        return ChatReply.from_json(data), latency

    async def _request(self, method: str, path: str, body: bytes | None) -> Any:
        """The decoded JSON answer, after the SDK's retries; failures as ``self.error``."""
        import aiohttp

        session, _ = self._client()
        url = self._url + path
        attempt, start = 0, time.perf_counter()
        while True:
            try:
                request = session.request(method, url, data=body, proxy=self._proxy)
                async with request as response:
                    payload = await response.read()
                    status, headers = response.status, response.headers
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                if attempt < self.max_retries:
                    await asyncio.sleep(_backoff(attempt, None))
                    attempt += 1
                    continue
                raise self._unreachable(exc, time.perf_counter() - start) from None
            if status < 400:
                try:
                    return _loads(payload)
                except ValueError:
                    raise self.error(
                        f"{self.label} at {self.base_url} answered with a body that is not "
                        f"JSON: {_short(payload.decode('utf-8', 'replace'), 120)!r}"
                    ) from None
            if attempt < self.max_retries and _should_retry(status, headers):
                await asyncio.sleep(_backoff(attempt, headers))
                attempt += 1
                continue
            raise self.error(
                f"{self.label} at {self.base_url} answered HTTP {status}: "
                f"{_short(_error_message(payload))}"
            )

    def _unreachable(self, exc: BaseException, waited: float) -> Exception:
        """A failure to get any answer, in plain words. The cause decides first: retries
        with backoff can outlast the timeout while every attempt was refused at once."""
        refused = _connect_failure(exc)
        if refused is not None:
            return self.error(f"cannot reach {self.label} at {self.base_url}: {refused}")
        if isinstance(exc, TimeoutError) and waited >= self.timeout * 0.9:
            return self.error(
                f"{self.label} at {self.base_url} timed out after {self.timeout:g}s "
                f"({self.max_retries} retries)"
            )
        return self.error(f"cannot reach {self.label} at {self.base_url}: {_root_cause(exc)}")

    async def aclose(self) -> None:
        """Close this event loop's session."""
        entry = self._per_loop.pop(id(asyncio.get_running_loop()), None)
        if entry is not None:
            await entry[0].close()


def _should_retry(status: int, headers: Any) -> bool:
    verdict = headers.get("x-should-retry")
    if verdict in ("true", "false"):  # the server's own word wins, as with the SDK
        return verdict == "true"
    return status in RETRY_STATUSES or status >= 500


def _backoff(attempt: int, headers: Any) -> float:
    """Seconds before retry ``attempt + 1``: the server's ``Retry-After`` when it asks
    for at most a minute, else 0.5 s doubling up to 8 s, less up to a quarter of jitter."""
    if headers is not None:
        wait = _retry_after(headers)
        if wait is not None and 0 < wait <= 60:
            return wait
    return min(0.5 * 2**attempt, 8.0) * (1 - 0.25 * random.random())


def _retry_after(headers: Any) -> float | None:
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return float(value)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return when.timestamp() - time.time()
    except (TypeError, ValueError, IndexError):
        return None


def _error_message(payload: bytes) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the body's text."""
    text = payload.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return text or "(empty body)"
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str):
        return error
    if isinstance(data, dict) and isinstance(data.get("detail"), str):
        return data["detail"]
    return text


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
