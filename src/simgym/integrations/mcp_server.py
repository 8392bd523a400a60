"""A simulated environment served as an MCP server: one simulated world per MCP session.

Any MCP client (Claude Code, inspect_ai, an agent framework) can then act inside a world
that a world model simulates::

    facade = SimMCPServer("terminal", simgym.world_model("local"), task="Free some disk",
                          writer=simgym.TrajectoryWriter("episodes.jsonl"))
    serve_mcp(facade, transport="http", port=8765)      # or transport="stdio"

Tools: the domain's agent tools (an mcp scenario's declared tools with their schemas,
terminal's ``send_keys``, search's ``web_search``/``web_extractor``, ...) plus
``submit_answer``, which ends the episode with the agent's answer (``answer_tool`` renames
it, ``None`` leaves it out). A call is one ``SimEnv.step``; its observation comes back as
text content. An error observation (invalid arguments, an unknown tool, a failed world
model) comes back with ``isError`` and the message. For the mcp domain the simulated result
is unwrapped the way a real server's would be: an ``mcp``-format envelope becomes the
result's own content and ``isError``, and a ``json``-format ``{"error": ...}`` object sets
``isError``.

Sessions and episodes: each session gets its own :class:`SimEnv` on the shared world-model
backend. Its world starts (``reset`` with the configured task) at the session's first tool
call, so a client that connects and only lists tools leaves no episode behind. Once the
episode has ended (an answer, a final action, the turn limit, a failed world model) further
calls are refused with ``isError`` saying why; with ``auto_reset`` the next call starts a new
episode in the same session instead. Every episode is written to ``writer`` when it ends; one
still running when its session ends (the client disconnects, deletes its HTTP session, or
idles out) or when the server stops is written then, as truncated. Nothing is dropped.

A result whose simulated output still fails the domain's format check after retries is
not an error (the tool did not fail) but carries ``format_problems`` in its ``_meta``
status, the key SimEnv's info uses. An error the agent sees never names the world model's
URL; the trajectory keeps the whole message.

Over stdio the process is the session. Over streamable HTTP each ``Mcp-Session-Id`` is a
session (at most ``max_sessions`` at once, each ended after ``session_idle_timeout`` idle
seconds; with ``token`` every request must carry it), so the server speaks the
session-based (handshake) protocol versions only: the SDK client's default ``auto`` mode
falls back to them. A client pinned to the stateless 2026-07-28 protocol has no session to
hold a world and is told so.

Needs the ``mcp`` SDK 2.x (``pip install 'simgym[mcp]'``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ValidationError

from simgym.core.domain import Domain, get_domain
from simgym.core.env import SimEnv
from simgym.core.errors import SimgymError
from simgym.core.safeload import loads_json
from simgym.core.types import StepResult, Task
from simgym.core.version import __version__
from simgym.core.worldmodel import WorldModel, require_shareable
from simgym.integrations.common import agent_safe, why_ended
from simgym.integrations.http_guard import (
    BearerAuth,
    OriginGuard,
    is_loopback,
    require_token_off_loopback,
)

try:
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
except ImportError as exc:  # pragma: no cover (the mcp extra is installed in development)
    raise SimgymError(
        f"serving MCP needs the mcp SDK 2.x: pip install 'simgym[mcp]' ({exc})"
    ) from None

ANSWER_TOOL = "submit_answer"
EPISODE_META = "simgym/episode"  # the episode's status, in each result's _meta
SESSION_ENDED = "the MCP session ended before the episode did"
SERVER_STOPPED = "the MCP server stopped before the episode ended"
MAX_SESSIONS = 64  # as the OpenEnv server: each session holds a world and a pending episode
SESSION_IDLE_TIMEOUT = 1800.0
_WORLD_KEY = "simgym.world"  # where a session's world lives in its connection's state

Transport = Literal["stdio", "http"]


class SimMCPServer:
    """The MCP face of one simulated environment (see the module docstring).

    Args:
        domain: a registered domain name or a :class:`Domain`.
        world_model: the backend every session's world shares.
        scenario: the initial world (default: the task's, else the domain's default).
        task: what each episode is about: an instruction, a :class:`Task` or its dict.
        writer: anything with ``write(trajectory)``; every episode goes there.
        answer_tool: the name of the tool that ends an episode with an answer; ``None``
            offers none (the episode then ends by the domain's own final action or the
            turn limit).
        auto_reset: start a new episode when a call arrives after the last one ended.
        close_world_model: close the backend when the server stops (it was built for it).
        name: the server name clients see (default: an mcp scenario's ``server_name``).
        env_options: :class:`SimEnv` options (``max_turns``, ``seed``, ``instructions``,
            ``system_prompt_file``, ``temperature``, ...).
    """

    def __init__(
        self,
        domain: Domain | str,
        world_model: WorldModel,
        *,
        scenario: dict[str, Any] | BaseModel | None = None,
        task: Task | str | dict[str, Any] | None = None,
        writer: Any = None,
        answer_tool: str | None = ANSWER_TOOL,
        auto_reset: bool = False,
        close_world_model: bool = False,
        name: str | None = None,
        **env_options: Any,
    ) -> None:
        self.domain = get_domain(domain) if isinstance(domain, str) else domain
        require_shareable(world_model, "the MCP server shares one backend between sessions")
        self.world_model = world_model
        self.task = Task.coerce(task, self.domain.name, bind=True)
        self.scenario = self.domain.scenario(
            scenario if scenario is not None else (self.task.scenario or None)
        )
        self.writer = writer
        self.auto_reset = auto_reset
        self.close_world_model = close_world_model
        self.env_options = env_options
        try:  # fail at start-up, not in the first session, on a bad option
            SimEnv(self.domain, world_model, self.scenario, **env_options)
        except TypeError as exc:
            raise SimgymError(f"invalid environment option: {exc}") from None
        self.agent_tools = self.domain.agent_tools(self.scenario)
        if answer_tool is not None:
            if not answer_tool.strip():
                raise SimgymError("the answer tool needs a name (or None for no answer tool)")
            if answer_tool in {t.name for t in self.agent_tools}:
                raise SimgymError(
                    f"the {self.domain.name} world already has a tool named {answer_tool!r}; "
                    "name the answer tool otherwise"
                )
        self.answer_tool = answer_tool
        self.name = (
            name or getattr(self.scenario, "server_name", None) or f"simgym-{self.domain.name}"
        )
        self._worlds: set[World] = set()
        self._single: World | None = None  # the stdio process's one world
        self._opening: anyio.Lock | None = None
        self._stopping = False

    # -- what clients see ---------------------------------------------------------------

    def tools(self) -> list[types.Tool]:
        """The tools every session is offered."""
        listed = [
            types.Tool(name=t.name, description=t.description or None, input_schema=t.parameters)
            for t in self.agent_tools
        ]
        if self.answer_tool is not None:
            listed.append(
                types.Tool(
                    name=self.answer_tool,
                    description="Submit your final answer to the task. This ends the episode: "
                    "later calls are refused.",
                    input_schema={
                        "type": "object",
                        "properties": {
                            "answer": {"type": "string", "description": "your final answer"}
                        },
                        "required": ["answer"],
                    },
                )
            )
        return listed

    def tool_names(self) -> list[str]:
        """The names every session is offered, the answer tool last."""
        names = [t.name for t in self.agent_tools]
        return names + ([self.answer_tool] if self.answer_tool is not None else [])

    def unknown_tool_message(self, name: str) -> str:
        """What a client that called a tool this server does not offer is told."""
        message = f"unknown tool {name!r}: this server's tools are {', '.join(self.tool_names())}"
        if self.answer_tool is not None:
            message += f" ({self.answer_tool} ends the episode with your answer)"
        return message

    def instructions(self) -> str:
        """What the server tells a client when it connects: the task and the first screen."""
        parts = []
        if self.domain.name == "mcp":  # what the server says about itself; its first
            if getattr(self.scenario, "description", ""):  # screen is only the tool list
                parts.append(self.scenario.description)  # type: ignore[attr-defined]
        if self.task.instruction:
            parts.append(f"Task: {self.task.instruction}")
        if self.domain.name != "mcp":
            first = self.domain.initial_observation(self.scenario)
            if first.strip():
                parts.append(f"What the environment shows now:\n{first}")
        if self.answer_tool is not None:
            parts.append(f"When you are done, call {self.answer_tool} with your answer.")
        return "\n\n".join(parts)

    def build(self, *, per_session: bool) -> Server:
        """The low-level MCP server. ``per_session``: a world per HTTP session (else one
        world for the whole process, as over stdio)."""

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=self.tools())

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            world = await (self._session_world(ctx) if per_session else self._process_world(ctx))
            return await world.call(params.name, dict(params.arguments or {}))

        server: Server[Any] = Server(
            self.name,
            version=__version__,
            instructions=self.instructions() or None,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )
        if per_session:
            server.add_request_handler("server/discover", types.RequestParams, _handshake_only)
        return server

    # -- worlds -------------------------------------------------------------------------

    async def _process_world(self, ctx: Any) -> World:
        if self._single is None:
            async with self._lock():
                if self._single is None:
                    self._single = await self._open_world("process", ctx)
        return self._single

    async def _session_world(self, ctx: Any) -> World:
        connection = _connection_of(ctx)
        if connection.session_id is None:
            raise MCPError(
                code=types.INVALID_REQUEST,
                message="this server keeps one simulated world per MCP session, and a "
                "stateless (2026-07-28) request has no session: connect with the session "
                "protocol (the SDK client's default mode='auto' does)",
            )
        world = connection.state.get(_WORLD_KEY)
        if world is None:
            async with self._lock():
                world = connection.state.get(_WORLD_KEY)
                if world is None:
                    world = await self._open_world(connection.session_id, ctx)
                    connection.state[_WORLD_KEY] = world
                    # The SDK unwinds this stack however the session ends (DELETE, idle
                    # timeout, a crash, the server stopping).
                    connection.exit_stack.push_async_callback(self._session_ended, world)
        return world

    async def _session_ended(self, world: World) -> None:
        await world.close(SERVER_STOPPED if self._stopping else SESSION_ENDED)

    async def _open_world(self, session: str, ctx: Any) -> World:
        if self._stopping:
            raise MCPError(code=types.INTERNAL_ERROR, message="the server is shutting down")
        world = World(self, session, _client_of(ctx))
        await world.start()
        self._worlds.add(world)
        return world

    def _lock(self) -> anyio.Lock:
        if self._opening is None:  # made on first use, inside the serving event loop
            self._opening = anyio.Lock()
        return self._opening

    async def aclose(self, reason: str = SERVER_STOPPED) -> None:
        """Write every open episode (as truncated, with ``reason``) and stop taking calls."""
        self._stopping = True
        for world in list(self._worlds):
            await world.close(reason)
        if self.close_world_model:
            self.close_world_model = False
            await self.world_model.aclose()

    # -- transports ---------------------------------------------------------------------

    async def serve_stdio(self) -> None:
        """Serve one client over this process's stdin/stdout until it disconnects, or until
        SIGTERM/SIGINT/SIGHUP; the open episode is written either way."""
        from mcp.server.stdio import stdio_server

        server = self.build(per_session=False)
        reason = SESSION_ENDED
        try:
            async with anyio.create_task_group() as group:

                async def stop_on_signal() -> None:
                    nonlocal reason
                    with anyio.open_signal_receiver(*_STOP_SIGNALS) as signals:
                        async for signum in signals:
                            reason = SERVER_STOPPED
                            # Write first, then stop. The SDK reads stdin in a thread that
                            # cannot be cancelled, so a client that keeps stdin open would
                            # hold the process: once the episodes are safe, exit anyway.
                            with anyio.CancelScope(shield=True):
                                await self.aclose(reason)
                            _exit_soon(128 + signum, grace_s=3.0)
                            group.cancel_scope.cancel()
                            return

                group.start_soon(stop_on_signal)
                async with stdio_server() as (read_stream, write_stream):
                    await server.run(
                        read_stream, write_stream, server.create_initialization_options()
                    )
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self.aclose(reason)

    def http_app(
        self,
        *,
        host: str = "127.0.0.1",
        path: str = "/mcp",
        session_idle_timeout: float = SESSION_IDLE_TIMEOUT,
        max_sessions: int = MAX_SESSIONS,
        token: str | None = None,
    ) -> Any:
        """A Starlette app serving streamable HTTP at ``path``; its shutdown writes every
        open episode. ``host`` is where it will listen (loopback turns on the SDK's
        DNS-rebinding protection). At most ``max_sessions`` sessions are open at once (a
        new one beyond that gets HTTP 503); one idle for ``session_idle_timeout`` seconds
        ends and its episode is written. With ``token`` every request must carry it
        (``Authorization: Bearer TOKEN``)."""
        if max_sessions < 1:
            raise SimgymError(f"max_sessions must be at least 1, not {max_sessions}")
        if session_idle_timeout <= 0:
            raise SimgymError("session_idle_timeout must be positive")
        server = self.build(per_session=True)
        app = server.streamable_http_app(
            streamable_http_path=path,
            host=host,
            session_idle_timeout=session_idle_timeout,
            max_sessions=max_sessions,
        )
        if token is not None:
            app.add_middleware(BearerAuth, token=token)
        # outermost, and stricter than the SDK's own check (which lets a page on any other
        # port of localhost in): only this server's own origin, or none
        app.add_middleware(OriginGuard, loopback=is_loopback(host))
        sessions = app.router.lifespan_context

        @asynccontextmanager
        async def lifespan(app_: Any) -> AsyncIterator[None]:
            try:
                async with sessions(app_):
                    try:
                        yield
                    finally:  # before the sessions are torn down: say why they end
                        self._stopping = True
            finally:  # the sessions' own teardown ran above; this catches any left over
                with anyio.CancelScope(shield=True):
                    await self.aclose(SERVER_STOPPED)

        app.router.lifespan_context = lifespan
        return app

    async def serve_http(
        self,
        host: str = "127.0.0.1",
        port: int = 8765,
        path: str = "/mcp",
        *,
        session_idle_timeout: float = SESSION_IDLE_TIMEOUT,
        max_sessions: int = MAX_SESSIONS,
        token: str | None = None,
        on_ready: Callable[[str], None] | None = None,
    ) -> None:
        """Serve streamable HTTP until SIGINT/SIGTERM. ``port=0`` picks a free port;
        ``on_ready(url)`` hears the endpoint once the socket is bound. Listening beyond
        loopback needs a ``token``."""
        import uvicorn

        require_token_off_loopback(host, token)
        app = self.http_app(
            host=host,
            path=path,
            session_idle_timeout=session_idle_timeout,
            max_sessions=max_sessions,
            token=token,
        )
        try:
            sock = socket.create_server((host, port), family=_family(host))
        except OSError as exc:
            raise SimgymError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        bound = sock.getsockname()[1]
        config = uvicorn.Config(
            app,
            log_level="warning",
            lifespan="on",
            # An open SSE stream would otherwise hold shutdown (and the episodes) forever.
            timeout_graceful_shutdown=5,
        )
        if on_ready is not None:
            shown = f"[{host}]" if ":" in host else host
            on_ready(f"http://{shown}:{bound}{path}")
        try:
            await uvicorn.Server(config).serve(sockets=[sock])
        finally:
            sock.close()


class World:
    """One session's simulated environment; its calls run one at a time, in order."""

    def __init__(self, facade: SimMCPServer, session: str, client: dict[str, Any]) -> None:
        self.facade = facade
        self.session = session
        self.client = client
        self.env = SimEnv(
            facade.domain,
            facade.world_model,
            facade.scenario,
            writer=facade.writer,
            **facade.env_options,
        )
        self.ended: str | None = None  # why the current episode is over, once it is
        self.closed = False
        self._calls = anyio.Lock()

    async def start(self) -> None:
        """Begin a new episode with the configured task."""
        await self.env.reset(self.facade.task, scenario=self.facade.scenario)
        trajectory = self.env.trajectory
        assert trajectory is not None
        trajectory.agent = {"name": "mcp-client", **self.client, "mcp_session": self.session}
        self.ended = None

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Apply one tool call to the world; the answer as an MCP tool result."""
        async with self._calls:
            if self.closed:
                return _error("this session's simulated world is closed")
            if self.ended is not None:
                if not self.facade.auto_reset:
                    return _error(
                        f"the episode has ended ({self.ended}); no more calls are taken in "
                        "this session. Start a new MCP session for a new episode."
                    )
                await self.start()
            try:
                if name == self.facade.answer_tool:
                    answer = arguments.get("answer")
                    if not isinstance(answer, str) or set(arguments) - {"answer"}:
                        return _error(
                            f'{name} takes one argument, "answer" (a string), '
                            f"got {json.dumps(arguments, ensure_ascii=False)[:200]}"
                        )
                    result = await self.env.finish(answer)
                else:
                    result = await self.env.step({"name": name, "arguments": arguments})
            except Exception as exc:
                # SimEnv records what goes wrong inside an episode and does not raise; this
                # is a defect or a misbehaving backend. Write the episode with the error.
                message = f"{type(exc).__name__}: {exc}"
                with anyio.CancelScope(shield=True):
                    await self.env.close(reason=f"the MCP server failed on a call: {message}")
                # A defect's message is internal (paths, addresses): the agent is told
                # only its kind; the trajectory has the whole message.
                self.ended = f"the server failed ({type(exc).__name__})"
                return _error(f"simgym failed on this call ({type(exc).__name__})")
            return self._result(name, result)

    def _result(self, name: str, result: StepResult) -> types.CallToolResult:
        observation = result.observation
        if name == self.facade.answer_tool:
            reply = _text(
                f"Answer recorded; the episode is over after {result.info['turn']} turns."
            )
        elif observation.kind == "error" and name not in self.facade.tool_names():
            # The domain's message lists the world's own tools (or, for a terminal, asks
            # for keystrokes); this client was offered a list with the answer tool too,
            # so name that list. The trajectory keeps the domain's message.
            reply = _error(self.facade.unknown_tool_message(name))
        elif observation.kind == "error":
            # A world model's failure may name its URL; the agent sees what happened, the
            # trajectory keeps the whole message.
            reply = _error(agent_safe(observation.error or observation.text))
        else:
            reply = self._unwrap(observation.text)
        if result.done or result.truncated:
            self.ended = why_ended(result, self.env.max_turns)
        status: dict[str, Any] = {
            "episode_id": result.info.get("episode_id"),
            "turn": result.info.get("turn"),
            "done": result.done,
            "truncated": result.truncated,
        }
        if result.info.get("format_problems"):
            # The world model's output still failed the domain's format check after its
            # retries. Not isError: the tool did not fail, the simulation may be off. The
            # same key as SimEnv's info (and so Gymnasium's and OpenEnv's).
            status["format_problems"] = list(result.info["format_problems"])
        reply.meta = {EPISODE_META: status}
        return reply

    def _unwrap(self, text: str) -> types.CallToolResult:
        """A simulated mcp-domain result, shaped as the real server would send it."""
        output_format = getattr(self.facade.scenario, "output_format", None)
        if self.facade.domain.name != "mcp" or output_format not in ("mcp", "json"):
            return _text(text)
        try:
            value = loads_json(text)  # the model's text: deep nesting must not raise here
        except ValueError:
            return _text(text)
        if output_format == "json":
            return _text(text, is_error=isinstance(value, dict) and set(value) == {"error"})
        if isinstance(value, dict) and isinstance(value.get("content"), list):
            envelope = {"content": value["content"], "isError": bool(value.get("isError"))}
            if value.get("structuredContent") is not None:
                envelope["structuredContent"] = value["structuredContent"]
            try:
                return types.CallToolResult.model_validate(envelope)
            except ValidationError:
                pass  # content blocks the SDK cannot carry: pass the text on as it is
        return _text(text)

    async def close(self, reason: str) -> None:
        """Write the episode if it is still running (as truncated, with ``reason``)."""
        if self.closed:
            return
        self.closed = True
        self.facade._worlds.discard(self)
        # Not under the call lock: a call stuck on the world model must not hold the
        # episode hostage; SimEnv writes an episode only once.
        await self.env.close(reason)


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT) + (
    (signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()
)


def serve_mcp(
    facade: SimMCPServer,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    path: str = "/mcp",
    session_idle_timeout: float = SESSION_IDLE_TIMEOUT,
    max_sessions: int = MAX_SESSIONS,
    token: str | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``facade`` until the client leaves (stdio) or the process is stopped (http)."""
    if transport == "stdio":
        if on_ready is not None:
            on_ready("stdio")
        anyio.run(facade.serve_stdio)
    elif transport == "http":
        if not path.startswith("/"):
            raise SimgymError(f"the HTTP path must start with '/', got {path!r}")
        anyio.run(
            partial(
                facade.serve_http,
                host,
                port,
                path,
                session_idle_timeout=session_idle_timeout,
                max_sessions=max_sessions,
                token=token,
                on_ready=on_ready,
            )
        )
    else:
        raise SimgymError(f"transport must be stdio or http, not {transport!r}")


# -- helpers ------------------------------------------------------------------------------


async def _handshake_only(ctx: Any, params: Any) -> types.DiscoverResult:
    # Advertising only the handshake versions makes clients open a session (as go-sdk's
    # stateful servers do); a world has to live somewhere between calls.
    return types.DiscoverResult(
        supported_versions=list(HANDSHAKE_PROTOCOL_VERSIONS),
        capabilities=types.ServerCapabilities(tools=types.ToolsCapability()),
    )


def _connection_of(ctx: Any) -> Any:
    """The MCP connection a request came on (its ``state`` and ``exit_stack`` are per
    session). The low-level context does not expose it yet; its session proxy holds it."""
    connection = getattr(ctx, "connection", None) or getattr(ctx.session, "_connection", None)
    if connection is None or not hasattr(connection, "exit_stack"):
        raise MCPError(
            code=types.INTERNAL_ERROR,
            message="this version of the mcp SDK does not expose the session's connection; "
            "simgym's MCP server needs mcp 2.3",
        )
    return connection


def _client_of(ctx: Any) -> dict[str, Any]:
    """Who is acting: the client's name and version, if it said."""
    params = getattr(ctx.session, "client_params", None)
    info = getattr(params, "client_info", None)
    if info is None:
        return {}
    return {"client": info.name, "client_version": info.version}


def _text(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=is_error
    )


def _error(message: str) -> types.CallToolResult:
    return _text(message, is_error=True)


def _exit_soon(status: int, grace_s: float) -> None:
    """End the process in ``grace_s`` seconds unless it has ended by itself."""

    def leave() -> None:
        time.sleep(grace_s)
        os._exit(status)

    threading.Thread(target=leave, name="simgym-mcp-exit", daemon=True).start()


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
