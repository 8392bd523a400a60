"""A business world's real service: each tool call of the twin becomes its HTTP request.

:class:`RealHTTP` is the world-model backend ``real-http``. It runs the twin's scenario
(``simgym.logs.twin.world_scenario``: one tool per logged operation) against the service
the logs came from. The scenario's ``routes`` say which operation each tool stands for; a
call then becomes::

    post_loans_loan_id_approve {"loan_id": "L-7", "note": "ok", "actor": "u1", "role": "manager"}
    -> POST {base_url}/loans/L-7/approve   body {"note": "ok"}
       X-Actor: u1, X-Role: manager, X-Session: <one id per episode>

Path parameters fill the route (URL-quoted); the route's ``headers`` arguments travel as
headers; the rest is the JSON body, or the query string for methods without a body (GET,
HEAD, DELETE, OPTIONS). The observation is the response body exactly as the service sent
it (json output format; ``mcp`` wraps it in an envelope, ``isError`` from the status); the
status goes to the observation's metadata. A call that cannot be sent (an unknown tool, a
missing path parameter) or gets no answer (refused connection, timeout) is answered with
an error object and the episode goes on.

The service is ``base_url`` (or ``$SIMGYM_REAL_HTTP_URL``); ``serve_backoffice=True``
instead starts the bundled bank back office (:mod:`simgym.real.backoffice`, the
``logs`` extra) in-process per episode, on a fresh database in a temporary directory.

The route table travels in the scenario because ``real`` sits below ``logs`` in the
house's layers: this module never reads a world folder itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from simgym.core.domain import get_domain
from simgym.core.errors import SimgymError
from simgym.core.types import Task, new_id
from simgym.core.worldmodel import Prediction
from simgym.real.base import RealExecutor
from simgym.real.mcp import format_result, parse_call

BACKEND_NAME = "real-http"
URL_ENV = "SIMGYM_REAL_HTTP_URL"
SESSION_HEADER = "X-Session"
QUERY_METHODS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})
_PARAM = re.compile(r"\{([^}]*)\}")
# Headers go out as they are: refuse what would break the request line or be re-encoded.
_HEADER_VALUE = re.compile(r"^[\x20-\x7e]*$")


class RealHTTP(RealExecutor):
    """The service behind a business world, as a world-model backend (module docstring).

    Args:
        base_url: the service, e.g. ``http://127.0.0.1:8000`` (default: ``$SIMGYM_REAL_HTTP_URL``).
        serve_backoffice: start the demo bank back office per episode instead.
        timeout: seconds for each request.
        session_header: the header carrying the episode's session id (None: no header).
    """

    name = BACKEND_NAME

    def __init__(
        self,
        base_url: str | None = None,
        *,
        serve_backoffice: bool = False,
        timeout: float = 30.0,
        session_header: str | None = SESSION_HEADER,
    ) -> None:
        super().__init__()
        url = base_url or os.environ.get(URL_ENV) or None
        if serve_backoffice and url:
            raise SimgymError("real-http: give a base URL or serve_backoffice, not both")
        if not serve_backoffice and not url:
            raise SimgymError(
                f"real-http needs the service's URL: base_url= (--base-url URL) or ${URL_ENV}, "
                "or serve_backoffice=True (--serve-backoffice) for the demo bank"
            )
        if url and not url.startswith(("http://", "https://")):
            raise SimgymError(f"real-http: the base URL must start with http:// or https://: {url}")
        if timeout <= 0:
            raise SimgymError("real-http: timeout must be positive")
        self.base_url = url.rstrip("/") if url else None
        self.serve_backoffice = serve_backoffice
        self.timeout = float(timeout)
        self.session_header = session_header
        self.session_id: str | None = None
        self.output_format = "json"
        self._routes: dict[str, Any] = {}
        self._client: httpx.AsyncClient | None = None
        self._server: Any = None
        self._workdir: tempfile.TemporaryDirectory[str] | None = None
        self._bank: Any = None
        self._collections: dict[str, str] = {}
        self._seen: dict[str, dict[str, Any]] = {}

    # -- episode life -----------------------------------------------------------------

    async def start_episode(self, scenario: BaseModel | dict[str, Any], task: Task) -> None:
        """Open a client (and start the demo service when asked); a new session id.
        Returns None: the domain's tool list stays the first screen."""
        await self.end_episode()
        world: Any = get_domain("mcp").scenario(scenario)
        if not world.routes:
            raise SimgymError(
                "real-http runs a business world's twin, whose scenario maps tools to HTTP "
                "routes (simgym logs import ... --out DIR, then --world DIR); this scenario "
                "has no routes"
            )
        self._routes = dict(world.routes)
        self._collections = {
            name: binding.collection
            for name, binding in world.tool_map.items()
            if binding.collection and binding.op != "none"
        }
        self._seen = {}
        self.output_format = world.output_format
        self.forget_turns()
        self.session_id = new_id("simgym-")
        try:
            base_url = self.base_url or await self._start_backoffice()
            # Headers and body may go out in two writes: without NODELAY a request can
            # wait for the server's delayed ACK.
            transport = httpx.AsyncHTTPTransport(
                socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
            )
            self._client = httpx.AsyncClient(
                base_url=base_url, timeout=self.timeout, transport=transport
            )
        except BaseException:
            await self.end_episode()
            raise
        return None

    async def _start_backoffice(self) -> str:
        try:
            from simgym.real.backoffice.app import create_app
            from simgym.real.backoffice.driver import _Server
            from simgym.real.backoffice.store import Bank
        except ModuleNotFoundError as exc:
            raise SimgymError(
                f"--serve-backoffice needs the logs extra (pip install 'simgym[logs]'): {exc}"
            ) from None
        self._workdir = tempfile.TemporaryDirectory(prefix="simgym-http-")
        self._bank = Bank(str(Path(self._workdir.name) / "backoffice.db"))
        self._server = _Server(create_app(self._bank))
        return await asyncio.to_thread(self._server.__enter__)  # waits until it listens

    async def end_episode(self) -> None:
        """Close the client; a service started for the episode stops and its database goes."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
        server, self._server = self._server, None
        if server is not None:
            await asyncio.to_thread(server.__exit__, None, None, None)
        if self._bank is not None:
            self._bank.close()
            self._bank = None
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None

    async def aclose(self) -> None:
        await self.end_episode()

    # -- turns ------------------------------------------------------------------------

    async def run_turn(self, action_text: str) -> Prediction:
        """Send the call; the observation is the service's answer, its status in metadata."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        observation, metadata = await self._exchange(action_text)
        return Prediction(
            observation=observation,
            raw=observation,
            tagged=True,
            latency_s=loop.time() - start,
            model=self.name,
            finish_reason="executed",
            metadata=metadata,
        )

    async def run_action(self, action_text: str) -> str:
        return (await self._exchange(action_text))[0]

    async def _exchange(self, action_text: str) -> tuple[str, dict[str, Any]]:
        if self._client is None:
            return self._error("not_started", "no episode is running: start_episode first")
        call = parse_call(action_text)
        if isinstance(call, str):
            return self._error("bad_call", call)
        request = self._request(*call)
        if isinstance(request, tuple):
            return self._error(*request)
        method, path = request.method, request.url.raw_path.decode("ascii", "replace")
        try:
            response = await self._client.send(request)
        except httpx.TimeoutException:
            return self._error(
                "timeout", f"the service did not answer within {self.timeout:g} s", method, path
            )
        except httpx.HTTPError as exc:
            # The URL stays in the metadata, out of what the agent reads.
            return self._error(
                "connection_failed",
                f"the service could not be reached ({type(exc).__name__})",
                method,
                path,
                detail=str(exc),
            )
        meta = {"status": response.status_code, "method": method, "path": path}
        if response.is_success:
            self._keep(call[0], response)
        return self._render(response.text, response.status_code), meta

    def _keep(self, tool: str, response: httpx.Response) -> None:
        """A record the service answered with, kept as it last showed it."""
        collection = self._collections.get(tool)
        try:
            body = response.json()
        except ValueError:
            return
        if collection and isinstance(body, dict) and body.get("id") is not None:
            self._seen.setdefault(collection, {})[str(body["id"])] = body

    def live_state(self) -> dict[str, Any]:
        """The episode's records as the service's answers last showed them, by
        collection: what a record check on the real service can read without reaching
        into its database (a change no answer showed is not in it)."""
        return {name: list(records.values()) for name, records in self._seen.items()}

    def _request(self, tool: str, arguments: dict[str, Any]) -> httpx.Request | tuple[str, str]:
        """The HTTP request of a call, or (error code, message) when it cannot be sent."""
        assert self._client is not None
        spec = self._routes.get(tool)
        if spec is None:
            known = ", ".join(sorted(self._routes)) or "none"
            return "unknown_tool", f"unknown tool {tool!r}: the service's tools are {known}"
        method = spec.method.upper()
        rest = dict(arguments)
        missing: list[str] = []

        def fill(match: re.Match[str]) -> str:
            value = rest.pop(match.group(1), None)
            if value is None or value == "":
                missing.append(match.group(1))
                return ""
            return quote(str(value), safe="")  # an id with a slash stays one segment

        path = _PARAM.sub(fill, spec.route.split("?", 1)[0])
        if missing:
            return "missing_path_parameter", f"{tool} needs {', '.join(missing)} (path parameters)"
        headers = {"Accept": "application/json"}
        if self.session_header and self.session_id:
            headers[self.session_header] = self.session_id
        for argument, header in spec.headers.items():
            value = rest.pop(argument, None)
            if value is None:
                continue
            text = str(value)
            if not _HEADER_VALUE.match(text):
                return (
                    "bad_argument",
                    f"{argument} must be printable ASCII (it is sent as {header})",
                )
            headers[header] = text
        try:
            if method in QUERY_METHODS:
                return self._client.build_request(
                    method, path, params=_query(rest), headers=headers
                )
            # No arguments left means no body: the service says whether it wanted one.
            body = {"json": rest} if rest else {}
            return self._client.build_request(method, path, headers=headers, **body)
        except (httpx.HTTPError, httpx.InvalidURL, ValueError, TypeError) as exc:
            return "bad_argument", f"the call cannot be sent as HTTP: {exc}"

    def _render(self, body: str, status: int) -> str:
        """The service's answer in the scenario's output format."""
        if not body.strip():
            # An empty answer (204) would read as a failed environment: show its status.
            body = json.dumps({"status": status})
        if self.output_format == "json":
            return body
        return format_result(
            [{"type": "text", "text": body}], None, status >= 400, self.output_format
        )

    def _error(
        self,
        code: str,
        message: str,
        method: str | None = None,
        path: str | None = None,
        **extra: Any,
    ) -> tuple[str, dict[str, Any]]:
        """An answer simgym writes when the service was not asked or did not answer."""
        meta: dict[str, Any] = {"status": None, "error": code, **extra}
        if method is not None:
            meta.update(method=method, path=path)
        if self.output_format == "json":
            text = json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False)
        else:
            text = format_result(
                [{"type": "text", "text": message}], None, True, self.output_format
            )
        return text, meta

    def describe(self) -> dict[str, Any]:
        service = self.base_url or "the demo back office, in-process, a fresh database per episode"
        return {"backend": BACKEND_NAME, "service": service, "timeout": self.timeout}


def _query(arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments as query parameters: lists repeat, objects go as JSON, None is left out."""
    params: dict[str, Any] = {}
    for key, value in arguments.items():
        if value is None:
            continue
        if isinstance(value, list):
            params[key] = [_scalar(v) for v in value]
        else:
            params[key] = _scalar(value)
    return params


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)
