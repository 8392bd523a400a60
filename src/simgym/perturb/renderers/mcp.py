"""MCP fault templates: a JSON-RPC error, an ``isError`` envelope or plain text, as the
scenario's output format asks, or a result that pages, truncates or fails in part."""

from __future__ import annotations

import json
from typing import Any

from simgym.perturb.renderers._base import REASONS, Context, failing_items


def render_mcp(kind: str, ctx: Context) -> str:
    scenario, tool = ctx.scenario, ctx.action.name or "tool"
    key = _collection_key(scenario, tool)
    error: tuple[int, str, dict[str, Any] | None] | None = None
    value: dict[str, Any] | None = None
    text = ""
    message = ctx.get("message")
    if kind == "auth_failure":
        error = (
            ctx.get("status"),
            message or "Unauthorized: the access token is invalid or has expired",
            None,
        )
    elif kind == "permission_denied":
        error = (ctx.get("status"), message or f"Forbidden: this token may not call {tool}", None)
    elif kind == "timeout":
        error = (-32001, message or f"Request timed out after {ctx.get('seconds')} seconds", None)
    elif kind == "rate_limit":
        after = ctx.get("retry_after")
        error = (
            ctx.get("status"),
            message or f"Too Many Requests: rate limit exceeded, retry after {after} seconds",
            {"retry_after": after},
        )
    elif kind == "server_error":
        status = ctx.get("status")
        error = (status, message or REASONS.get(status, "Server Error"), None)
    elif kind == "stale_data":
        error = (
            409,
            message or "Conflict: the record changed since it was read; fetch it again and retry",
            None,
        )
    elif kind == "flaky_network":
        error = (-32000, message or f"Connection closed: {ctx.get('network_error')}", None)
    elif kind == "pagination":
        value = {
            key: [],
            "has_more": True,
            "next_cursor": ctx.get("cursor"),
            "page": 1,
            "total_pages": ctx.get("pages"),
        }
        text = (
            f"Page 1 of {ctx.get('pages')}: no items on this page. "
            f"Call {tool} again with cursor {ctx.get('cursor')} for more."
        )
    elif kind == "truncated":
        value = {
            key: [],
            "truncated": True,
            "omitted": ctx.get("omitted"),
            "message": message
            or "the result exceeded the size limit and was cut; narrow the request",
        }
        text = f"[result truncated: {ctx.get('omitted')} items omitted; narrow the request]"
    elif kind == "empty_results":
        value, text = {key: [], "total": 0}, "No results."
    elif kind == "partial_batch":
        value, text = _mcp_batch(ctx, tool)
    elif kind == "ui_dialog":
        value = {
            "status": "confirmation_required",
            "title": ctx.get("title"),
            "message": ctx.get("text"),
            "options": ctx.get("buttons"),
        }
        text = f"{ctx.get('title')}: {ctx.get('text')} Waiting for the user to confirm."
    elif kind == "slow_load":
        value = {
            "status": "pending",
            "message": f"still processing after {ctx.get('seconds')} seconds; call {tool} "
            "again later for the result",
        }
        text = f"Still processing after {ctx.get('seconds')} seconds; try again later."
    return _mcp_format(scenario.output_format, error, value, text)


def _mcp_batch(ctx: Context, tool: str) -> tuple[dict[str, Any], str]:
    items = next((v for v in ctx.action.arguments.values() if isinstance(v, list) and v), None)
    if items is None:
        message = f"{tool} was only partly applied: one of its steps failed; re-check the result"
        return {"status": "partial_failure", "message": message}, message
    failing = failing_items(items, ctx.get("draw", 0))
    results = [
        {"item": item, "ok": False, "error": {"code": 500, "message": "failed to process item"}}
        if i in failing
        else {"item": item, "ok": True}
        for i, item in enumerate(items)
    ]
    value = {
        "status": "partial_failure",
        "succeeded": len(items) - len(failing),
        "failed": len(failing),
        "results": results,
    }
    lines = [f"{'FAILED' if r['ok'] is False else 'ok'}: {r['item']}" for r in results]
    return value, f"{len(failing)} of {len(items)} items failed:\n" + "\n".join(lines)


def _mcp_format(
    output_format: str,
    error: tuple[int, str, dict[str, Any] | None] | None,
    value: dict[str, Any] | None,
    text: str,
) -> str:
    if error is not None:
        code, message, data = error
        if output_format == "json":
            body: dict[str, Any] = {"code": code, "message": message}
            if data:
                body["data"] = data
            return json.dumps({"error": body}, ensure_ascii=False)
        line = f"Error {code}: {message}"
        if output_format == "mcp":
            return json.dumps({"content": [{"type": "text", "text": line}], "isError": True})
        return line
    assert value is not None
    if output_format == "json":
        return json.dumps(value, ensure_ascii=False)
    if output_format == "mcp":
        payload = json.dumps(value, ensure_ascii=False)
        return json.dumps({"content": [{"type": "text", "text": payload}], "isError": False})
    return text


def _collection_key(scenario: Any, tool: str) -> str:
    """The name a list result of ``tool`` likely has: a list in the server's state whose
    name the tool mentions (``search_customers`` -> ``customers``), else ``results``."""
    words = set(tool.lower().split("_"))
    state = getattr(scenario, "state", {}) or {}
    for name, value in state.items():
        if isinstance(value, list) and (name.lower() in words or name.lower()[:-1] in words):
            return name
    return "results"
