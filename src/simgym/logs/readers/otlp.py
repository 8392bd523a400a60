"""OpenTelemetry traces as OTLP JSON, the way the Collector's file exporter writes them:
one ``ExportTraceServiceRequest`` a line (``resourceSpans[].scopeSpans[].spans[]``).

Two kinds of span become records: HTTP server spans (``http.request.method``,
``http.route``, ``http.response.status_code``, or the older ``http.method``,
``http.target``, ``http.status_code``) and GenAI tool calls (``gen_ai.operation.name``
"execute_tool", ``gen_ai.tool.name``, ``gen_ai.tool.call.arguments``/``result``).
Bodies come from attributes whose keys end in "request.body" / "response.body"; the
session from ``session.id`` (or ``gen_ai.conversation.id``, else the trace id); the actor
and role from ``enduser.id`` / ``user.id`` and ``enduser.role`` / ``user.role``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from pathlib import Path

from simgym.logs.jsonstream import iter_array, numbered_lines
from simgym.logs.model import (
    JSON,
    ImportReport,
    LogRecord,
    maybe_json,
    query_arguments,
    route_objects,
    templatize,
)

_CLIENT = {"SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", 3, 4}


def any_value(value: dict) -> JSON:
    """The Python value of an OTLP ``AnyValue`` (JSON form; 64-bit ints come as text)."""
    if not isinstance(value, dict) or not value:
        return None
    kind, raw = next(iter(value.items()))
    if kind == "intValue":
        return int(raw)
    if kind == "doubleValue":
        return float(raw)
    if kind == "arrayValue":
        return [any_value(v) for v in raw.get("values", [])]
    if kind == "kvlistValue":
        return attributes(raw.get("values", []))
    return raw  # stringValue, boolValue, bytesValue (base64 text)


def attributes(pairs: list) -> dict[str, JSON]:
    return {p["key"]: any_value(p.get("value", {})) for p in pairs if isinstance(p, dict)}


def hex_id(value: object) -> str:
    """A trace or span id as hex: OTLP JSON writes hex, protobuf's JSON writes base64."""
    text = str(value or "")
    if len(text) in (16, 32) and all(c in "0123456789abcdefABCDEF" for c in text):
        return text.lower()
    try:
        return base64.b64decode(text, validate=True).hex()
    except (binascii.Error, ValueError):
        return text


def _first(attrs: dict[str, JSON], *keys: str) -> JSON:
    for key in keys:
        if attrs.get(key) is not None:
            return attrs[key]
    return None


def _body(attrs: dict[str, JSON], suffix: str) -> JSON:
    for key, value in attrs.items():
        if key.endswith(suffix):
            return maybe_json(value)
    return None


def span_record(span: dict, resource: dict[str, JSON], source: str) -> LogRecord | str:
    """The record for one span, or the reason it is not one."""
    attrs = attributes(span.get("attributes", []))
    start = int(span.get("startTimeUnixNano", 0) or 0)
    end = int(span.get("endTimeUnixNano", 0) or 0)
    session = str(
        _first(attrs, "session.id", "gen_ai.conversation.id", "mcp.session.id")
        or hex_id(span.get("traceId"))
    )
    actor = _first(attrs, "enduser.id", "user.id", "gen_ai.agent.name")
    role = _first(attrs, "enduser.role", "user.role", "enduser.scope")
    status = span.get("status") or {}
    error = status.get("code") in ("STATUS_CODE_ERROR", 2)
    common = {
        "session": session,
        "time": start / 1e9 if start else None,
        "actor": str(actor) if actor is not None else None,
        "role": str(role) if role is not None else None,
        "duration_ms": (end - start) / 1e6 if start and end >= start else None,
        "source": source,
        "attributes": {"service": resource.get("service.name"), "span": span.get("name")},
    }
    method = _first(attrs, "http.request.method", "http.method")
    if method is not None:
        if span.get("kind") in _CLIENT:
            return "HTTP client span (the server's span is the call)"
        path = _first(attrs, "url.path", "http.target", "url.full", "http.url")
        path = str(path) if path is not None else None
        if path and "://" in path:
            path = "/" + path.split("://", 1)[1].partition("/")[2]
        route = _first(attrs, "http.route") or (templatize(path) if path else None)
        if route is None:
            return "HTTP span without a route or path"
        code = _first(attrs, "http.response.status_code", "http.status_code")
        code = int(code) if code is not None else None
        arguments = _body(attrs, "request.body")
        response = _body(attrs, "response.body")
        query = _first(attrs, "url.query")
        if query and path and "?" not in path:
            path = f"{path}?{query}"
        if arguments in (None, "") and str(method).upper() in ("GET", "DELETE"):
            arguments = query_arguments(path)
        return LogRecord(
            system="http",
            operation=str(route),
            method=str(method).upper(),
            arguments=arguments,
            status=code,
            error=error or (code is not None and code >= 500),
            response=response,
            objects=route_objects(str(route), path, response),
            path=path,
            **common,
        )
    tool = _first(attrs, "gen_ai.tool.name")
    if tool is not None or attrs.get("gen_ai.operation.name") == "execute_tool":
        if tool is None:
            return "tool span without gen_ai.tool.name"
        arguments = maybe_json(_first(attrs, "gen_ai.tool.call.arguments", "gen_ai.tool.arguments"))
        if arguments is None:
            arguments = _body(attrs, "request.body")
        result = maybe_json(_first(attrs, "gen_ai.tool.call.result", "gen_ai.tool.result"))
        if result is None:
            result = _body(attrs, "response.body")
        system = "mcp" if any(k.startswith("mcp.") for k in attrs) else "tool"
        return LogRecord(
            system=system,
            operation=str(tool),
            arguments=arguments,
            error=error or attrs.get("error.type") is not None,
            response=result,
            **common,
        )
    return "span is neither an HTTP server call nor a tool call"


def _spans(resource_spans: list, source: str, report: ImportReport) -> Iterator[LogRecord]:
    for rs in resource_spans:
        if not isinstance(rs, dict):
            report.skip("malformed resourceSpans item")
            continue
        resource = attributes((rs.get("resource") or {}).get("attributes", []))
        for ss in rs.get("scopeSpans", rs.get("scope_spans", [])) or []:
            for span in ss.get("spans", []) or []:
                report.read += 1
                try:
                    made = span_record(span, resource, source)
                except (TypeError, ValueError, AttributeError, KeyError):
                    made = "malformed span"
                if isinstance(made, str):
                    report.skip(made)
                else:
                    yield made


def read(path: Path, report: ImportReport) -> Iterator[LogRecord]:
    """Records from an OTLP JSON lines file (each line one export request). A file that
    is one pretty-printed request (its first line is just "{") is streamed instead, one
    ``resourceSpans`` item at a time."""
    lines = numbered_lines(path)
    for number, raw in lines:
        if number == 1 and raw.strip() == b"{":
            lines.close()
            try:
                yield from _spans(iter_array(path, "resourceSpans"), path.name, report)
            except ValueError:
                report.skip("malformed OTLP JSON document (rest of it unread)")
            return
        try:
            request = json.loads(raw)
            resource_spans = request.get("resourceSpans", request.get("resource_spans"))
            if not isinstance(resource_spans, list):
                raise ValueError("no resourceSpans")
        except (ValueError, AttributeError):
            report.read += 1
            report.skip("unreadable OTLP line")
            continue
        yield from _spans(resource_spans, f"{path.name}:{number}", report)
