"""The mcp domain for real: every tool call goes to a live MCP server through the SDK.

:class:`RealMCP` is a world-model backend that does not predict: at the start of an
episode it connects to an MCP server, and each action (the rendered tool call
``{"name": ..., "arguments": {...}}``) is called on that server; the result comes back in
the scenario's ``output_format``::

    env = simgym.make("mcp", world_model="real-mcp")                     # records server
    env = simgym.make("mcp", world_model=RealMCP(command="my-server --stdio"))
    env = simgym.make("mcp", world_model=RealMCP(url="http://127.0.0.1:8765/mcp"))

With neither ``command`` nor ``url``, each episode starts the bundled customer-records
server (:mod:`simgym.real.mcp_servers.records`) on a fresh database in a temporary
directory, so what one episode writes is gone in the next. With ``seed_from_scenario``
that database holds the scenario's ``state`` (its customers, accounts and tickets rows)
instead of the seeded demo data, so a simulated episode and a real one start from the
same records; :meth:`RealMCP.live_state` reads the database back at the end.

One session stays open for the whole episode and is closed by ``end_episode``. Each
environment needs its own ``RealMCP`` (it holds one connection at a time).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from simgym.core.domain import get_domain
from simgym.core.errors import SimgymError, WorldModelError
from simgym.core.types import Task
from simgym.real.base import RealExecutor
from simgym.real.clock import held_clock_env
from simgym.real.mcp_import import Connection, connect_target

BACKEND_NAME = "real-mcp"
RECORDS_MODULE = "simgym.real.mcp_servers.records"


def records_command(db: str | Path) -> list[str]:
    """The command that serves the bundled records server over stdio on ``db``."""
    return [sys.executable, "-m", RECORDS_MODULE, "--db", str(db)]


class RealMCP(RealExecutor):
    """A real MCP server behind the mcp domain's interface (see the module docstring).

    Args:
        command: start this server per episode and talk over stdio (list or shell string).
        url: a streamable HTTP endpoint to connect to per episode (its state is the
            server's business: episodes are only isolated if the server isolates them).
        env: extra environment variables for a stdio server.
        timeout: seconds for connecting, and for each tool call.
        seed: the records database's seed (default server only).
        seed_from_scenario: fill the records database from the scenario's ``state``
            (default server only; see the module docstring).
    """

    name = BACKEND_NAME

    def __init__(
        self,
        *,
        command: list[str] | str | None = None,
        url: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 30.0,
        seed: int | None = None,
        seed_from_scenario: bool = False,
    ) -> None:
        super().__init__()
        if command is not None and url is not None:
            raise SimgymError("give RealMCP a command= or a url=, not both")
        self.command = command
        self.url = url
        self.env = dict(env or {})
        self.timeout = timeout
        self.seed = seed
        self.seed_from_scenario = seed_from_scenario
        self.client: Any = None
        self.output_format = "mcp"
        self._connection: Connection | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._workdir: tempfile.TemporaryDirectory[str] | None = None

    # -- episode life -----------------------------------------------------------------

    async def start_episode(self, scenario: BaseModel | dict[str, Any], task: Task) -> None:
        """Connect to the server (starting a fresh one by default). Returns None: the
        domain's own first observation (the tool list) stays the first screen."""
        await self.end_episode()
        world: Any = get_domain("mcp").scenario(scenario)
        self.output_format = world.output_format
        self.forget_turns()
        command = self.command
        cwd = None
        if command is None and self.url is None:
            self._workdir = tempfile.TemporaryDirectory(prefix="simgym-mcp-")
            cwd = self._workdir.name
            command = records_command(Path(cwd) / "records.db")
            if self.seed is not None:
                command += ["--seed", str(self.seed)]
        try:
            if cwd is not None and self.seed_from_scenario:
                _records_db(Path(cwd) / "records.db", world.state)
            env = dict(self.env)
            if world.clock is not None and command is not None:
                env = {**held_clock_env(world.clock), **env}
            self._connection = connect_target(command, self.url, env=env or None, cwd=cwd)
            await self._open(self._connection)
        except BaseException:
            await self.end_episode()
            raise
        return None

    async def _open(self, conn: Connection) -> None:
        """Open the session in a task of its own that holds it until end_episode.

        The SDK's client lives in anyio task groups, which must be left by the task that
        entered them; a dedicated owner task keeps that true even when reset and step
        run as different tasks (as they do through ``SimEnv.sync()``)."""
        import mcp

        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()

        async def hold(stop: asyncio.Event) -> None:
            try:
                async with AsyncExitStack() as stack:
                    client = mcp.Client(conn.target, read_timeout_seconds=self.timeout, cache=None)
                    await stack.enter_async_context(client)
                    ready.set_result(client)
                    await stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                elif not isinstance(exc, Exception):
                    raise

        self._owner = asyncio.create_task(hold(self._stop), name="simgym-real-mcp")
        try:
            self.client = await asyncio.wait_for(asyncio.shield(ready), self.timeout)
        except SimgymError:
            raise
        except Exception as exc:
            raise conn.explain(exc, self.timeout) from None

    async def end_episode(self) -> None:
        """Close the session; a server started for the episode stops and its database goes."""
        owner, self._owner = self._owner, None
        self.client = None
        if owner is not None:
            assert self._stop is not None
            self._stop.set()
            try:
                await asyncio.wait_for(owner, self.timeout)
            except (Exception, asyncio.CancelledError):
                owner.cancel()  # a server that does not shut down in time is left to die
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None

    async def aclose(self) -> None:
        await self.end_episode()

    def live_state(self) -> dict[str, Any] | None:
        """The bundled records server's tables now (``customers``, ``accounts``,
        ``tickets``: lists of rows), read from its database; None for another server,
        whose storage simgym cannot see."""
        if self._workdir is None or self.command is not None or self.url is not None:
            return None
        from simgym.real.mcp_servers.records import RecordsStore

        db = Path(self._workdir.name) / "records.db"
        if not db.exists():
            return None
        return dict(RecordsStore(db).snapshot())

    # -- turns ------------------------------------------------------------------------

    async def run_action(self, action_text: str) -> str:
        """Call the tool; return its result in the scenario's output format."""
        if self.client is None:
            raise WorldModelError("the real MCP backend is not connected: start_episode first")
        call = parse_call(action_text)
        if isinstance(call, str):  # not a tool call: what the server would say to it
            return format_result([{"type": "text", "text": call}], None, True, self.output_format)
        return await self._call(*call)

    async def _call(self, name: str, arguments: dict[str, Any]) -> str:
        from mcp.shared.exceptions import MCPError

        try:
            result = await self.client.call_tool(name, arguments)
        except MCPError as exc:
            # A JSON-RPC error (an unknown tool, say) is still an answer the agent sees;
            # only a dead connection ends the episode.
            text = str(exc) or type(exc).__name__
            return format_result([{"type": "text", "text": text}], None, True, self.output_format)
        except Exception as exc:
            assert self._connection is not None
            raise WorldModelError(
                f"real MCP: {self._connection.explain(exc, self.timeout)}"
            ) from None
        parts = [
            p.model_dump(mode="json", by_alias=True, exclude_none=True) for p in result.content
        ]
        return format_result(
            parts, result.structured_content, bool(result.is_error), self.output_format
        )

    def describe(self) -> dict[str, Any]:
        target = self.url or self.command or records_command("<episode temp dir>/records.db")
        return {"backend": BACKEND_NAME, "server": target}


def _records_db(path: Path, state: dict[str, Any]) -> None:
    """Create the records database at ``path`` holding ``state``'s rows."""
    from simgym.real.mcp_servers.records import RecordError, RecordsStore

    try:
        RecordsStore(path, rows=dict(state))
    except RecordError as exc:
        raise SimgymError(
            f"real MCP: the scenario's state cannot seed the records: {exc}"
        ) from None


def parse_call(action_text: str) -> tuple[str, dict[str, Any]] | str:
    """``(name, arguments)`` from a rendered tool call, or why the text is not one."""
    try:
        data = json.loads(action_text)
    except json.JSONDecodeError as exc:
        return f"not a tool call: invalid JSON ({exc.msg})"
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return 'not a tool call: expected {"name": ..., "arguments": {...}}'
    arguments = data.get("arguments") or {}
    if not isinstance(arguments, dict):
        return "not a tool call: arguments must be a JSON object"
    return data["name"], arguments


def _text_of(parts: list[dict[str, Any]]) -> str:
    """The text a person would read from content parts (non-text parts named only)."""
    texts = []
    for part in parts:
        if part.get("type") == "text":
            texts.append(str(part.get("text", "")))
        else:
            texts.append(f"[{part.get('type')} {part.get('mimeType', '')}]".replace(" ]", "]"))
    return "\n".join(texts)


def format_result(
    parts: list[dict[str, Any]], structured: Any, is_error: bool, output_format: str
) -> str:
    """A tool result as the scenario's ``output_format`` shows it (see the mcp domain)."""
    if output_format == "mcp":
        return json.dumps({"content": parts, "isError": is_error}, ensure_ascii=False)
    text = _text_of(parts)
    if output_format == "text":
        return text if not is_error or text.startswith("Error") else f"Error: {text}"
    if is_error:
        return json.dumps({"error": {"message": text}}, ensure_ascii=False)
    if structured is not None:
        return json.dumps(structured, ensure_ascii=False)
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = {"result": text}  # plain text from a tool, kept as a JSON value
    return json.dumps(value, ensure_ascii=False)
