"""MCP (Model Context Protocol) JSON-RPC logs: JSON lines, each a JSON-RPC message, bare
or wrapped as ``{"time": ..., "session": ..., "direction": ..., "message": {...}}``.
Requests are matched to responses by ``id`` (within a session). A ``tools/call`` becomes a
record named after the tool, with its ``arguments``, the result's ``content`` (or
``structuredContent``) as the response and ``isError`` (or a JSON-RPC error) as the
error flag; other requests (``resources/read``, ``prompts/get``, ...) are records named by
their method. Notifications and the handshake are counted as skipped, with why. A tool
call's objects are read from its arguments and answer (:mod:`simgym.logs.tool_objects`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from simgym.logs.jsonstream import numbered_lines
from simgym.logs.model import JSON, ImportReport, LogRecord, parse_time
from simgym.logs.tool_objects import tool_objects

_HANDSHAKE = {"initialize", "ping", "tools/list", "resources/list", "prompts/list"}

LOOKS_FOR = {
    "body": "tools/call params.arguments and the result's content",
    "actor": "the initialize request's clientInfo.name",
    "role": "nothing (MCP carries no role)",
    "session": "each line's session or session_id (else the file)",
    "objects": "a tools/call's <type>_id arguments and an answer with an id (logs/tool_objects.py)",
}


def _content(result: dict) -> JSON:
    if result.get("structuredContent") is not None:
        return result["structuredContent"]
    content = result.get("content")
    if isinstance(content, list) and all(
        isinstance(c, dict) and c.get("type") == "text" for c in content
    ):
        text = "\n".join(str(c.get("text", "")) for c in content)
        try:
            return json.loads(text)
        except ValueError:
            return text
    return content if content is not None else result


def read(path: Path, report: ImportReport) -> Iterator[LogRecord]:
    pending: dict[tuple[str, str], tuple[dict, float | None, int]] = {}
    clients: dict[str, str] = {}
    for number, raw in numbered_lines(path):
        report.read += 1
        try:
            line = json.loads(raw)
            message = line.get("message", line) if isinstance(line, dict) else None
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                raise ValueError
        except ValueError:
            report.skip("not a JSON-RPC message")
            continue
        named = line.get("session") or line.get("session_id")
        session = str(named or path.stem)
        time = parse_time(line.get("time") or line.get("timestamp"))
        if "method" in message:
            method = message["method"]
            if method == "initialize":
                info = (message.get("params") or {}).get("clientInfo") or {}
                if info.get("name"):
                    clients[session] = str(info["name"])
            if "id" not in message:
                report.skip("notification (no reply expected)")
            elif method in _HANDSHAKE:
                report.skip(f"handshake or listing ({method})")
            else:
                pending[(session, json.dumps(message["id"]))] = (message, time, number)
            continue
        key = (session, json.dumps(message.get("id")))
        if key not in pending:
            report.skip("response to no logged request")
            continue
        request, started, _ = pending.pop(key)
        params = request.get("params") or {}
        error = message.get("error")
        result = message.get("result") if isinstance(message.get("result"), dict) else {}
        failed = error is not None or bool(result.get("isError"))
        response = error if error is not None else _content(result)
        objects = []
        if request["method"] == "tools/call":
            operation, arguments = str(params.get("name")), params.get("arguments") or {}
            objects = tool_objects(operation, arguments, response, failed)
        else:
            operation, arguments = str(request["method"]), params
        yield LogRecord(
            session=session,
            operation=operation,
            system="mcp",
            time=started,
            actor=clients.get(session),
            arguments=arguments,
            error=failed,
            response=response,
            objects=objects,
            duration_ms=(time - started) * 1000 if time and started else None,
            source=f"{path.name}:{number}",
            attributes={} if named else {"session_from": "file"},
        )
    for _ in pending:
        report.skip("request never answered")
