"""Turn a real MCP server into a simulated one: read its declared tools into an mcp scenario
(MCP SDK client code, so it sits with the real environments, not with the domains).

    scenario = await scenario_from_server(["python", "-m", "my_server"])     # stdio
    scenario = await scenario_from_server(url="http://127.0.0.1:8765/mcp")   # streamable HTTP
    env = simgym.make("mcp", scenario=scenario, world_model=...)

The scenario keeps the server's name, what it says about itself, and every tool with its
input schema, so the simulated environment accepts and rejects exactly the calls the real
server would, and its output schema where it declares one (MCP ``outputSchema``, which
the official SDK derives from a tool's return annotation), so grounding writes the
answers in the server's layout from the first call on (:mod:`simgym.domains.mcp_output`).
``output_format`` is ``"mcp"`` by default: a real server answers every call with a
CallToolResult envelope (``{"content": [...], "isError": ...}``), and simulating that same
envelope keeps simulated and recorded real episodes comparable turn by turn. The
hidden ``state`` starts empty, since a server's data cannot be read through its tool list;
``sample=N`` reads up to N records of each kind through the server's read-only tools
(:mod:`simgym.real.mcp_sample`), or fill it (or ``notes``) yourself.

Needs the ``mcp`` SDK 2.x (``pip install 'simgym[mcp]'``); it is imported on first use.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal
from urllib.parse import urlsplit

from simgym.core.errors import SimgymError
from simgym.core.sync import run_sync
from simgym.domains.mcp import MCP
from simgym.domains.mcp_style import SAMPLED
from simgym.real.mcp_sample import Sample, result_value, sample_records

MAX_PAGES = 1000  # a server whose tools/list cursors never end must not hang the import
STDERR_TAIL = 1500


@dataclass
class ServerListing:
    """What an MCP server says about itself at connect time, and every tool it declares."""

    name: str
    version: str = ""
    title: str | None = None
    description: str | None = None
    instructions: str | None = None
    protocol_version: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)  # MCP wire form (inputSchema)
    sample: Sample | None = None  # records read through read-only tools, when asked for


def _load_sdk() -> Any:
    try:
        import mcp
        from mcp.client.stdio import stdio_client  # noqa: F401  (checks it is the 2.x layout)
    except ImportError as exc:
        raise SimgymError(
            f"importing an MCP server needs the mcp SDK 2.x: pip install 'simgym[mcp]' ({exc})"
        ) from None
    return mcp


def _split_command(command: list[str] | str) -> list[str]:
    parts = shlex.split(command) if isinstance(command, str) else [str(p) for p in command]
    if not parts:
        raise SimgymError("the MCP server command is empty")
    return parts


def _describe_target(command: list[str] | None, url: str | None) -> str:
    if command is not None:
        return f"MCP server `{shlex.join(command)}`"
    if url is not None:
        return f"MCP server at {url}"
    return "in-process MCP server"


def _fallback_name(command: list[str] | None, url: str | None) -> str:
    """A server name for servers that do not identify themselves."""
    if command:
        if "-m" in command[:-1]:  # python -m package.module
            return command[command.index("-m") + 1].rsplit(".", 1)[-1]
        return Path(command[0]).stem or "mcp-server"
    if url:
        return urlsplit(url).hostname or "mcp-server"
    return "mcp-server"


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SimgymError(f"not an http(s) URL for an MCP server: {url!r}")


def _check_command(command: list[str], env: dict[str, str] | None) -> None:
    # The SDK starts the server with a trimmed environment plus ``env``; look the
    # program up on the PATH it will really get, so "not found" is reported as such.
    path = (env or {}).get("PATH")
    if shutil.which(command[0], path=path) is None:
        raise SimgymError(
            f"MCP server command not found: {command[0]!r} (is it installed and on PATH?)"
        )


def _stderr_tail(errlog: IO[str] | None) -> str:
    if errlog is None:
        return ""
    try:
        errlog.flush()
        errlog.seek(0)
        text = errlog.read().strip()
    except (OSError, ValueError):
        return ""
    if not text:
        return ""
    return "\nLast lines it wrote to stderr:\n" + text[-STDERR_TAIL:]


def _leaf_errors(exc: BaseException) -> list[BaseException]:
    """The real causes inside (nested) exception groups, which task groups raise."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaf_errors(inner)]
    return [exc]


def _explain(
    exc: BaseException, what: str, timeout: float, errlog: IO[str] | None, url: str | None
) -> SimgymError:
    """One readable SimgymError for any way connecting and listing can fail."""
    leaves = _leaf_errors(exc)
    # Prefer the most telling cause: a timeout, then a connection failure, then the rest.
    leaf = next((e for e in leaves if isinstance(e, TimeoutError)), None)
    leaf = leaf or next((e for e in leaves if _is_connect_error(e)), None) or leaves[0]
    tail = _stderr_tail(errlog)
    text = _message(leaf)
    if isinstance(leaf, TimeoutError) or "timed out" in text.lower():
        return SimgymError(f"timed out after {timeout:g} s waiting for the {what}{tail}")
    if _is_connect_error(leaf):
        return SimgymError(f"could not reach the {what}: {text}")
    if isinstance(leaf, FileNotFoundError | PermissionError):
        return SimgymError(f"could not start the {what}: {text}")
    if errlog is not None and ("closed" in text.lower() or isinstance(leaf, EOFError)):
        return SimgymError(
            f"the {what} closed the connection before answering (did it crash?){tail}"
        )
    if url is not None and "not found" in text.lower():
        text += f" (check the endpoint path; SDK servers usually serve {_default_endpoint(url)})"
    return SimgymError(f"could not read the tools of the {what}: {text}{tail}")


def _default_endpoint(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/mcp"


def _message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _is_connect_error(exc: BaseException) -> bool:
    # httpx2's transport errors are not OSErrors; match them by name so this module does
    # not have to import the HTTP client the SDK happens to use.
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"ConnectError", "ConnectTimeout", "TransportError", "NetworkError"}) or (
        isinstance(exc, ConnectionError)
    )


async def _read_listing(client: Any, fallback_name: str) -> ServerListing:
    """Server identity, instructions, and all tools, following tools/list pagination."""
    info = client.server_info
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        tools += [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools]
        cursor = page.next_cursor
        if cursor is None or cursor in seen:
            break
        seen.add(cursor)
    return ServerListing(
        name=(info.name if info else "") or fallback_name,
        version=(info.version if info else "") or "",
        title=info.title if info else None,
        description=info.description if info else None,
        instructions=client.instructions,
        protocol_version=client.protocol_version,
        tools=tools,
    )


@dataclass
class Connection:
    """How to reach one MCP server with the SDK's ``Client``, and how to explain a failure.

    ``target`` is what ``mcp.Client`` takes; for a stdio server, its stderr goes to
    ``errlog`` (kept out of the user's terminal, but at hand to explain a crash). Call
    :meth:`close` when done with the connection.
    """

    target: Any
    what: str
    argv: list[str] | None = None
    url: str | None = None
    errlog: IO[str] | None = None

    def explain(self, exc: BaseException, timeout: float) -> SimgymError:
        """One readable SimgymError for any way talking to the server failed."""
        return _explain(exc, self.what, timeout, self.errlog, self.url)

    def close(self) -> None:
        if self.errlog is not None:
            self.errlog.close()
            self.errlog = None


def connect_target(
    command: list[str] | str | None = None,
    url: str | None = None,
    *,
    server: Any = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
) -> Connection:
    """Check and resolve exactly one of ``command``, ``url`` or ``server`` (see
    :func:`fetch_server_tools`) into a :class:`Connection`; nothing is started yet."""
    if sum(x is not None for x in (command, url, server)) != 1:
        raise SimgymError("give exactly one of command=, url= or server= for the MCP server")
    mcp = _load_sdk()
    from mcp.client.stdio import stdio_client

    argv = _split_command(command) if command is not None else None
    what = _describe_target(argv, url)
    if argv is not None:
        _check_command(argv, env)
        errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        params = mcp.StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)
        return Connection(stdio_client(params, errlog=errlog), what, argv, None, errlog)
    if url is not None:
        _check_url(url)
        return Connection(url, what, None, url)
    return Connection(server, what)


async def fetch_server_tools(
    command: list[str] | str | None = None,
    url: str | None = None,
    *,
    server: Any = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 30,
    sample: int = 0,
) -> ServerListing:
    """Connect to an MCP server, initialize, and read its identity and every declared tool.

    With ``sample`` > 0, also read up to that many records of each kind through the
    server's read-only tools (:mod:`simgym.real.mcp_sample`: which tools, how called).
    Give exactly one of ``command`` (start it and talk over stdio; a list or a shell-style
    string), ``url`` (streamable HTTP endpoint, e.g. ``http://127.0.0.1:8765/mcp``) or
    ``server`` (an in-process ``MCPServer`` or low-level ``Server``). ``env`` adds variables
    to the small environment the SDK passes to a stdio server (PATH, HOME, ...); ``timeout``
    bounds the whole exchange. Every failure is a :class:`SimgymError` saying what went wrong.
    """
    conn = connect_target(command, url, server=server, env=env, cwd=cwd)
    mcp = _load_sdk()
    import anyio

    try:
        with anyio.fail_after(timeout):
            async with mcp.Client(conn.target, read_timeout_seconds=timeout, cache=None) as client:
                listing = await _read_listing(client, _fallback_name(conn.argv, url))
                if sample > 0:
                    listing.sample = await sample_records(listing.tools, _caller(client), sample)
                return listing
    except SimgymError:
        raise
    except Exception as exc:  # any failure below becomes one readable message
        raise conn.explain(exc, timeout) from None
    finally:
        conn.close()


def _caller(client: Any) -> Any:
    async def call(name: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
        try:
            result = await client.call_tool(name, arguments)
        except Exception:  # a refused call (invalid params, say) is only a sample less
            return True, None
        return bool(result.is_error), result_value(result)

    return call


def listing_to_scenario(
    listing: ServerListing, output_format: Literal["mcp", "json", "text"] = "mcp"
) -> dict[str, Any]:
    """The ``mcp`` domain scenario for a server listing (validated; a plain dict)."""
    about = [listing.description, listing.instructions]
    description = "\n\n".join(
        dict.fromkeys(text.strip() for text in about if text and text.strip())
    )
    scenario = {
        "server_name": listing.name,
        "description": description or (listing.title or ""),
        "tools": [_tool(tool) for tool in listing.tools],
        "state": dict(listing.sample.records) if listing.sample else {},
        "output_format": output_format,
    }
    if listing.sample and listing.sample.count():
        # grounding serves these records, and leaves an id outside them to the model
        scenario["state"][SAMPLED] = sorted(listing.sample.records)
        scenario["notes"] = (
            "The records in state are a sample read from the real server through its "
            "read-only tools; the server may hold more."
        )
    MCP.scenario(scenario)  # raises ScenarioError (a SimgymError) for a server we cannot mirror
    return scenario


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    """One tools/list entry as the scenario declares it: its input schema as
    ``parameters`` and, where the server declares them, its ``output_schema`` (the
    schema of its structured result: grounding writes exact answers from it), ``title``
    and ``annotations``."""
    out: dict[str, Any] = {
        "name": tool["name"],
        "description": tool.get("description") or tool.get("title") or "",
        "parameters": tool.get("inputSchema") or {"type": "object", "properties": {}},
    }
    if tool.get("outputSchema"):
        out["output_schema"] = tool["outputSchema"]
    if tool.get("title"):
        out["title"] = tool["title"]
    if tool.get("annotations"):
        out["annotations"] = tool["annotations"]
    return out


async def scenario_from_server(
    command: list[str] | str | None = None,
    url: str | None = None,
    *,
    server: Any = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 30,
    output_format: Literal["mcp", "json", "text"] = "mcp",
    sample: int = 0,
) -> dict[str, Any]:
    """An ``mcp`` scenario mirroring a real server's tools (see :func:`fetch_server_tools`);
    with ``sample`` > 0 its ``state`` holds up to that many records of each kind, read
    through the server's read-only tools."""
    listing = await fetch_server_tools(
        command, url, server=server, env=env, cwd=cwd, timeout=timeout, sample=sample
    )
    return listing_to_scenario(listing, output_format)


def scenario_from_server_sync(
    command: list[str] | str | None = None,
    url: str | None = None,
    *,
    server: Any = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 30,
    output_format: Literal["mcp", "json", "text"] = "mcp",
    sample: int = 0,
) -> dict[str, Any]:
    """Blocking :func:`scenario_from_server`, for scripts and the command line."""
    return run_sync(
        scenario_from_server(
            command,
            url,
            server=server,
            env=env,
            cwd=cwd,
            timeout=timeout,
            output_format=output_format,
            sample=sample,
        )
    )
