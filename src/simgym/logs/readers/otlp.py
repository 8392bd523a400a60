"""OpenTelemetry traces as OTLP JSON, the way the Collector's file exporter writes them:
one ``ExportTraceServiceRequest`` a line (``resourceSpans[].scopeSpans[].spans[]``), ids
as hex or (protobuf's own JSON) base64, enums as numbers or names.

Three kinds of span become records, read by the current semantic conventions and their
deprecated predecessors (:data:`LOOKS_FOR` says where each field is looked for):

- HTTP server spans: ``http.request.method`` (``http.method``), ``http.route``,
  ``url.path``/``url.query``/``url.full`` (``http.target``, ``http.url``),
  ``http.response.status_code`` (``http.status_code``);
- GenAI tool calls: ``gen_ai.operation.name`` "execute_tool", ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments``/``result``. A tool call has no
  HTTP status and is given none: a failed one (span status ERROR or ``error.type``) is
  ``error`` with its error body (the result, or the exception event's message);
- other SERVER spans (a "server-side handling of a remote request", HTTP or not): RPCs
  (``rpc.system.name``, ``rpc.service``, ``rpc.method``) named ``<service>/<method>``,
  anything else by the span's name; no HTTP status, the gRPC code kept aside.

Bodies come from span attributes (``http.request.body.content``,
``http.response.body.content``, any key ending in ``request.body``/``response.body``) or
span events that carry them (an event named like a request or response body, or holding
one of those attributes). Actor: ``user.id`` (``enduser.id``), ``user.name``; role:
``user.roles`` (a string array: several roles are joined, sorted, with ","), ``enduser.role``,
``enduser.scope``; session: ``session.id``, ``gen_ai.conversation.id``, else the trace (the
record then says ``session_from: trace``). A mapping file (:mod:`simgym.logs.mapping`)
names other attributes, looked at first.

Spans of one operation merge: a GenAI tool span and the HTTP span of the same call (the
HTTP span a descendant of the tool span, or its parent, in one trace) become one record,
the HTTP call's, named by its route, with the tool's name kept as ``tool`` and the tool's
arguments, result, actor and session filling what the HTTP span lacks. HTTP client spans
count only there: alone, the server's span is the call. To pair spans, the records of
files that hold tool spans wait in memory until every OTLP file of the import is read;
files without one stream, a line at a time.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from simgym.logs.jsonstream import iter_array, numbered_lines
from simgym.logs.mapping import FieldMap
from simgym.logs.model import (
    JSON,
    ImportReport,
    LogRecord,
    ObjectRef,
    maybe_json,
    query_arguments,
    route_objects,
    templatize,
)

_CLIENT = {"SPAN_KIND_CLIENT", "SPAN_KIND_PRODUCER", 3, 4}
_ERROR = {"STATUS_CODE_ERROR", 2}
_SERVER = {"SPAN_KIND_SERVER", 2}
RPC_SYSTEM_KEYS = ("rpc.system.name", "rpc.system")

METHOD_KEYS = ("http.request.method", "http.method")
PATH_KEYS = ("url.path", "http.target", "url.full", "http.url")
STATUS_KEYS = ("http.response.status_code", "http.status_code")
REQUEST_BODY_KEYS = ("http.request.body.content", "http.request.body")
RESPONSE_BODY_KEYS = ("http.response.body.content", "http.response.body")
ACTOR_KEYS = ("user.id", "enduser.id", "user.name")
ROLE_KEYS = ("user.roles", "enduser.role", "user.role", "enduser.scope")
SESSION_KEYS = ("session.id", "gen_ai.conversation.id", "mcp.session.id")
TOOL_ARGUMENT_KEYS = ("gen_ai.tool.call.arguments", "gen_ai.tool.arguments")
TOOL_RESULT_KEYS = ("gen_ai.tool.call.result", "gen_ai.tool.result")
AGENT_KEYS = ("gen_ai.agent.name", "gen_ai.agent.id")
# event attributes that hold an event's payload, in the order they are tried
_EVENT_BODY_KEYS = ("body", "content", "gen_ai.event.content", "message", "value")

LOOKS_FOR = {
    "body": "span attributes "
    + ", ".join(REQUEST_BODY_KEYS + RESPONSE_BODY_KEYS)
    + ", *.request.body, *.response.body, "
    + ", ".join(TOOL_ARGUMENT_KEYS + TOOL_RESULT_KEYS)
    + "; span events named *request*/*response* or holding those attributes",
    "actor": "span attributes " + ", ".join(ACTOR_KEYS + AGENT_KEYS),
    "role": "span attributes " + ", ".join(ROLE_KEYS),
    "session": "span attributes " + ", ".join(SESSION_KEYS) + " (else the trace id)",
    "objects": "route parameters of any name (/things/{id}, /v1/orders/{order_number}) and"
    " the answer's field holding their value, records a POST to a collection answered,"
    " records inside answers, fields named like keys (policy_id, order_number)",
}


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


def _first(attrs: dict[str, JSON], keys: Iterable[str]) -> JSON:
    for key in keys:
        if attrs.get(key) not in (None, ""):
            return attrs[key]
    return None


def _pick(
    attrs: dict[str, JSON], mapping: FieldMap | None, field: str, keys: Iterable[str]
) -> JSON:
    """A field's value: the mapped attribute first, then the standard ones."""
    if mapping is not None:
        found = mapping.first(field, attrs)
        if found is not None:
            return found[1]
    return _first(attrs, keys)


def _suffixed(attrs: dict[str, JSON], suffix: str) -> JSON:
    for key, value in attrs.items():
        if key.endswith(suffix) and value not in (None, ""):
            return value
    return None


def _role(value: JSON) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):  # user.roles: every role the caller holds
        names = sorted({str(v) for v in value if v not in (None, "")})
        return ",".join(names) or None
    return str(value)


@dataclass(slots=True)
class _Events:
    """What a span's events say: bodies and the exception, if any."""

    request: JSON = None
    response: JSON = None
    exception: dict[str, JSON] | None = None


def _event_payload(attrs: dict[str, JSON], keys: Iterable[str]) -> JSON:
    value = _first(attrs, keys)
    return maybe_json(value) if value is not None else None


def span_events(span: dict, mapping: FieldMap | None) -> _Events:
    """Bodies and the exception from a span's events: an event holding a body attribute
    (or a mapped one), or named for a request/response body ("http.request.body",
    "request", "gen_ai.tool.message") with its payload in ``body``/``content``/``message``."""
    found = _Events()
    for event in span.get("events") or []:
        if not isinstance(event, dict):
            continue
        name = str(event.get("name") or "").lower()
        attrs = attributes(event.get("attributes", []))
        if name == "exception":
            found.exception = {
                k.split(".", 1)[1]: v
                for k, v in attrs.items()
                if k in ("exception.type", "exception.message") and v not in (None, "")
            }
            continue
        request = _pick(attrs, mapping, "body", REQUEST_BODY_KEYS)
        response = _pick(attrs, mapping, "response", RESPONSE_BODY_KEYS)
        if request is None and response is None:
            payload = _event_payload(attrs, _EVENT_BODY_KEYS)
            if "request" in name or name.endswith("arguments"):
                request = payload
            elif "response" in name or "result" in name or name == "gen_ai.tool.message":
                response = payload
        if found.request is None and request not in (None, ""):
            found.request = maybe_json(request)
        if found.response is None and response not in (None, ""):
            found.response = maybe_json(response)
    return found


def _mapped_objects(attrs: dict[str, JSON], mapping: FieldMap | None) -> list[ObjectRef]:
    if mapping is None:
        return []
    return [
        ObjectRef(otype, str(attrs[name]))
        for otype, name in mapping.objects.items()
        if attrs.get(name) not in (None, "")
    ]


@dataclass(slots=True)
class _Span:
    """A span's record with what pairs it: its ids, and whether it was a client span."""

    record: LogRecord
    trace: str
    span: str
    parent: str
    client: bool = False
    file: str = ""

    @property
    def tool(self) -> bool:
        return self.record.system in ("tool", "mcp")


def span_record(
    span: dict, resource: dict[str, JSON], source: str, mapping: FieldMap | None = None
) -> LogRecord | str:
    """The record for one span, or the reason it is not one."""
    made = _span(span, resource, source, mapping)
    if isinstance(made, str):
        return made
    if made.client:
        return "HTTP client span (the server's span is the call)"
    return made.record


def _span(
    span: dict, resource: dict[str, JSON], source: str, mapping: FieldMap | None
) -> _Span | str:
    attrs = attributes(span.get("attributes", []))
    start = int(span.get("startTimeUnixNano", 0) or 0)
    end = int(span.get("endTimeUnixNano", 0) or 0)
    trace = hex_id(span.get("traceId"))
    named_session = _pick(attrs, mapping, "session", SESSION_KEYS)
    actor = _pick(attrs, mapping, "actor", ACTOR_KEYS)
    role = _role(_pick(attrs, mapping, "role", ROLE_KEYS))
    status = span.get("status") or {}
    failed = status.get("code") in _ERROR or attrs.get("error.type") not in (None, "")
    mapped_error = mapping.failed(attrs) if mapping else None
    if mapped_error is not None:
        failed = mapped_error
    extra: dict[str, JSON] = {"service": resource.get("service.name"), "span": span.get("name")}
    if named_session is None:
        extra["session_from"] = "trace"
    if attrs.get("error.type") not in (None, ""):
        extra["error.type"] = attrs["error.type"]
    events = span_events(span, mapping)
    common = {
        "session": str(named_session) if named_session is not None else trace,
        "time": start / 1e9 if start else None,
        "actor": str(actor) if actor is not None else None,
        "role": role,
        "duration_ms": (end - start) / 1e6 if start and end >= start else None,
        "source": source,
        "attributes": extra,
    }
    ids = {
        "trace": trace,
        "span": hex_id(span.get("spanId")),
        "parent": hex_id(span.get("parentSpanId")),
    }
    method = _first(attrs, METHOD_KEYS)
    if method is not None:
        path = _first(attrs, PATH_KEYS)
        path = str(path) if path is not None else None
        if path and "://" in path:
            path = "/" + path.split("://", 1)[1].partition("/")[2]
        route = _first(attrs, ("http.route",)) or (templatize(path) if path else None)
        if route is None:
            return "HTTP span without a route or path"
        code = _pick(attrs, mapping, "status", STATUS_KEYS)
        code = int(code) if code is not None else None
        arguments = _pick(attrs, mapping, "body", REQUEST_BODY_KEYS)
        if arguments is None:
            arguments = _suffixed(attrs, "request.body")
        arguments = maybe_json(arguments) if arguments is not None else events.request
        response = _pick(attrs, mapping, "response", RESPONSE_BODY_KEYS)
        if response is None:
            response = _suffixed(attrs, "response.body")
        response = maybe_json(response) if response is not None else events.response
        query = _first(attrs, ("url.query",))
        if query and path and "?" not in path:
            path = f"{path}?{query}"
        if arguments in (None, "") and str(method).upper() in ("GET", "DELETE"):
            arguments = query_arguments(path)
        objects = route_objects(str(route), path, response, method=str(method), arguments=arguments)
        objects += [
            o for o in _mapped_objects(attrs, mapping) if o.id not in {x.id for x in objects}
        ]
        record = LogRecord(
            system="http",
            operation=str(route),
            method=str(method).upper(),
            arguments=arguments,
            status=code,
            error=failed or (code is not None and code >= 500),
            response=response,
            objects=objects,
            path=path,
            **common,  # type: ignore[arg-type]
        )
        return _Span(record, client=span.get("kind") in _CLIENT, **ids)
    tool = _first(attrs, ("gen_ai.tool.name",))
    if tool is None and attrs.get("gen_ai.operation.name") != "execute_tool":
        if span.get("kind") in _SERVER:
            return _Span(_served_call(span, attrs, events, failed, mapping, common), **ids)
        return "span is neither a server call nor a tool call"
    if tool is None:
        return "tool span without gen_ai.tool.name"
    if actor is None:
        agent = _first(attrs, AGENT_KEYS)
        if agent is not None:  # the agent stands in for the user the span does not name
            common["actor"] = str(agent)
            extra["actor_from"] = "agent"
    arguments = _pick(attrs, mapping, "body", TOOL_ARGUMENT_KEYS)
    if arguments is None:
        arguments = _suffixed(attrs, "request.body")
    arguments = maybe_json(arguments) if arguments is not None else events.request
    result = _pick(attrs, mapping, "response", TOOL_RESULT_KEYS)
    if result is None:
        result = _suffixed(attrs, "response.body")
    result = maybe_json(result) if result is not None else events.response
    if failed and result in (None, ""):
        result = _error_body(attrs, events.exception)
    if attrs.get("gen_ai.tool.call.id") not in (None, ""):
        extra["tool_call_id"] = attrs["gen_ai.tool.call.id"]
    record = LogRecord(
        system="mcp" if any(k.startswith("mcp.") for k in attrs) else "tool",
        operation=str(tool),
        arguments=arguments,
        status=None,  # a tool call has no HTTP status; never make one up
        error=failed,
        response=result,
        objects=_mapped_objects(attrs, mapping),
        **common,  # type: ignore[arg-type]
    )
    return _Span(record, **ids)


def _served_call(
    span: dict,
    attrs: dict[str, JSON],
    events: _Events,
    failed: bool,
    mapping: FieldMap | None,
    common: dict,
) -> LogRecord:
    """A SERVER span that is not HTTP: an RPC (``rpc.system.name``/``rpc.system``,
    named ``<service>/<method>`` as gRPC spans are) or another remote request, named by
    the span. It has no HTTP status: a gRPC status code is kept as an attribute."""
    rpc = _first(attrs, RPC_SYSTEM_KEYS)
    service, method = attrs.get("rpc.service"), attrs.get("rpc.method")
    name = str(span.get("name") or "")
    if rpc is not None and service and method and "/" not in str(method):
        name = f"{service}/{method}"
    if not name:
        name = str(method or "server span")
    arguments = _pick(attrs, mapping, "body", ())
    arguments = maybe_json(arguments) if arguments is not None else events.request
    response = _pick(attrs, mapping, "response", ())
    response = maybe_json(response) if response is not None else events.response
    code = attrs.get("rpc.grpc.status_code", attrs.get("rpc.response.status_code"))
    extra = common["attributes"]
    if rpc is not None:
        extra["rpc.system"] = rpc
    if code is not None:
        extra["rpc.status_code"] = code
    if failed and response in (None, ""):
        response = _error_body(attrs, events.exception)
    return LogRecord(
        system="rpc" if rpc is not None else "server",
        operation=name,
        arguments=arguments,
        status=None,
        error=failed,
        response=response,
        objects=_mapped_objects(attrs, mapping),
        **common,
    )


def _error_body(attrs: dict[str, JSON], exception: dict[str, JSON] | None) -> JSON:
    """A failed tool call's answer when the span holds no result: the exception's message
    (JSON when it is JSON, as many tools raise their error body), else its type."""
    message = (exception or {}).get("message")
    parsed = maybe_json(message) if isinstance(message, str) else message
    if isinstance(parsed, dict):
        return parsed
    kind = (exception or {}).get("type") or attrs.get("error.type")
    if message is None and kind is None:
        return None
    error: dict[str, JSON] = {}
    if kind is not None:
        error["type"] = kind
    if message is not None:
        error["message"] = message
    return {"error": error}


def merge_spans(spans: list[_Span], report: ImportReport) -> Iterator[LogRecord]:
    """One record per operation: each tool span paired with the HTTP span of its call
    (see the module docstring); unpaired client spans are skipped."""
    for _, record in _merge(spans, report):
        if record is not None:
            yield record


def _merge(spans: list[_Span], report: ImportReport) -> Iterator[tuple[_Span, LogRecord | None]]:
    """(span, its record), or (span, None) for a client span skipped.

    A tool span wrapping HTTP spans takes the nearest one (a server's over a client's:
    it holds the status and bodies); spans further down (calls the API made to other
    services) stay operations of their own. A tool span whose parent is an HTTP server
    span with no other tool child (a tool served over HTTP, as MCP's streamable HTTP
    does) absorbs that span: the route names the transport there, the tool the call."""
    by_id = {(s.trace, s.span): s for s in spans}
    http_of: dict[int, tuple[_Span, tuple[bool, int]]] = {}
    for s in spans:
        if s.tool:
            continue
        depth, parent = 1, by_id.get((s.trace, s.parent))
        while parent is not None and depth < 64:
            if parent.tool:
                rank = (s.client, depth)
                best = http_of.get(id(parent))
                if best is None or rank < best[1]:
                    http_of[id(parent)] = (s, rank)
                break
            parent, depth = by_id.get((parent.trace, parent.parent)), depth + 1
    wrapped = {id(h) for h, _ in http_of.values()}
    tool_children: dict[int, list[_Span]] = {}
    for s in spans:
        if s.tool and id(s) not in http_of:
            parent = by_id.get((s.trace, s.parent))
            if parent is not None and not parent.tool and not parent.client:
                tool_children.setdefault(id(parent), []).append(s)
    transport: dict[int, _Span] = {}  # tool span -> the HTTP span it absorbs
    for children in tool_children.values():
        if len(children) == 1:
            parent = by_id[(children[0].trace, children[0].parent)]
            if id(parent) not in wrapped:
                transport[id(children[0])] = parent
    absorbed = {id(h) for h in transport.values()}
    for s in spans:
        if s.tool:
            if id(s) in http_of:  # the record is the HTTP span's: its file counts it
                http = http_of[id(s)][0]
                yield http, _merged(http.record, s.record)
            elif id(s) in transport:
                yield s, _served(s.record, transport[id(s)].record)
            else:
                yield s, s.record
        elif id(s) in wrapped or id(s) in absorbed:
            continue
        elif s.client:
            report.skip("HTTP client span (the server's span is the call)", s.record.source)
            yield s, None
        else:
            yield s, s.record


def _served(tool: LogRecord, http: LogRecord) -> LogRecord:
    """A tool call served over HTTP: the tool's record, with the caller the HTTP span
    knew where the tool span does not say."""
    if http.actor and (not tool.actor or tool.attributes.get("actor_from") == "agent"):
        tool.actor = http.actor
        tool.attributes.pop("actor_from", None)
    tool.role = tool.role or http.role
    if tool.attributes.get("session_from") and not http.attributes.get("session_from"):
        tool.session = http.session
        tool.attributes.pop("session_from")
    tool.attributes["transport"] = http.key
    return tool


def _merged(http: LogRecord, tool: LogRecord) -> LogRecord:
    """The HTTP call's record, told it was the tool's call, with the tool's fields where
    the HTTP span has none."""
    if http.arguments in (None, "", {}):
        http.arguments = tool.arguments
    if http.response in (None, ""):
        http.response = tool.response
    http.actor = http.actor or tool.actor
    http.role = http.role or tool.role
    if http.attributes.get("session_from") and not tool.attributes.get("session_from"):
        http.session = tool.session
        http.attributes.pop("session_from")
    if tool.error and http.status is None:
        http.error = True
    http.attributes["tool"] = tool.operation
    if "tool_call_id" in tool.attributes:
        http.attributes["tool_call_id"] = tool.attributes["tool_call_id"]
    return http


def _spans(
    resource_spans: Iterable,
    source: str,
    report: ImportReport,
    mapping: FieldMap | None,
    out: list[_Span],
) -> None:
    for rs in resource_spans:
        if not isinstance(rs, dict):
            report.skip("malformed resourceSpans item")
            continue
        resource = attributes((rs.get("resource") or {}).get("attributes", []))
        for ss in rs.get("scopeSpans", rs.get("scope_spans", [])) or []:
            for span in ss.get("spans", []) or []:
                report.read += 1
                try:
                    made = _span(span, resource, source, mapping)
                except (TypeError, ValueError, AttributeError, KeyError):
                    made = "malformed span"
                if isinstance(made, str):
                    report.skip(made, source)
                else:
                    out.append(made)


def _collect(
    path: Path, report: ImportReport, mapping: FieldMap | None, spans: list[_Span]
) -> None:
    """Every span of one file (OTLP JSON lines, or one pretty-printed request streamed one
    ``resourceSpans`` item at a time) into ``spans``."""
    first = len(spans)
    lines = numbered_lines(path)
    for number, raw in lines:
        if number == 1 and raw.strip() == b"{":
            lines.close()
            try:
                _spans(iter_array(path, "resourceSpans"), path.name, report, mapping, spans)
            except ValueError:
                report.skip("malformed OTLP JSON document (rest of it unread)")
            break
        resource_spans = _line_resources(raw, f"{path.name}:{number}", report)
        if resource_spans is None:
            continue
        _spans(resource_spans, f"{path.name}:{number}", report, mapping, spans)
    for made in spans[first:]:
        made.file = str(path)


def _line_resources(raw: bytes, where: str, report: ImportReport) -> list | None:
    """One line's ``resourceSpans`` (an ExportTraceServiceRequest per line, as the
    Collector's file exporter writes), or None, counted as a skip, when it has none."""
    try:
        request = json.loads(raw)
        resource_spans = request.get("resourceSpans", request.get("resource_spans"))
        if not isinstance(resource_spans, list):
            raise ValueError("no resourceSpans")
    except (ValueError, AttributeError):
        report.read += 1
        report.skip("unreadable OTLP line", where)
        return None
    return resource_spans


_TOOL_MARK = b"execute_tool"
_CHUNK = 1 << 20


def has_tool_spans(paths: Iterable[Path]) -> bool:
    """Whether any file may hold a GenAI tool span (its operation name appears in the
    bytes): only then must spans wait to be paired."""
    for path in paths:
        with open(path, "rb") as f:
            tail = b""
            while chunk := f.read(_CHUNK):
                if _TOOL_MARK in tail + chunk or b"gen_ai.tool.name" in tail + chunk:
                    return True
                tail = chunk[-32:]
    return False


def _stream(path: Path, report: ImportReport, mapping: FieldMap | None) -> Iterator[_Span]:
    """Spans one at a time (no tool span to pair them with: nothing need wait)."""
    spans: list[_Span] = []
    lines = numbered_lines(path)
    for number, raw in lines:
        if number == 1 and raw.strip() == b"{":
            lines.close()
            _collect(path, report, mapping, spans)  # one document: its own streaming
            yield from spans
            return
        resource_spans = _line_resources(raw, f"{path.name}:{number}", report)
        if resource_spans is None:
            continue
        _spans(resource_spans, f"{path.name}:{number}", report, mapping, spans)
        for made in spans:
            made.file = str(path)
        yield from spans
        spans.clear()


def read(
    path: Path, report: ImportReport, *, mapping: FieldMap | None = None
) -> Iterator[LogRecord]:
    """Records from one OTLP JSON file (its spans paired within the file)."""
    counts: dict[str, dict[str, int]] = {}
    yield from read_together([path], report, counts, mapping=mapping)


def read_together(
    paths: list[Path],
    report: ImportReport,
    counts: dict[str, dict[str, int]],
    *,
    mapping: FieldMap | None = None,
) -> Iterator[LogRecord]:
    """Records from several OTLP files read as one: the spans of a call may sit in
    different files (a tool-calling agent's exporter and the API's). ``counts`` gets,
    per file, the spans read and skipped and the records they became. Without a tool
    span in any file the spans stream, one export line at a time."""
    if not has_tool_spans(paths):
        for path in paths:
            read, skipped, records = report.read, report.skipped_total, 0
            for made in _stream(path, report, mapping):
                if made.client:
                    report.skip(
                        "HTTP client span (the server's span is the call)", made.record.source
                    )
                else:
                    records += 1
                    yield made.record
            counts[str(path)] = {
                "read": report.read - read,
                "skipped": report.skipped_total - skipped,
                "records": records,
            }
        return
    spans: list[_Span] = []
    for path in paths:
        read, skipped = report.read, report.skipped_total
        _collect(path, report, mapping, spans)
        counts[str(path)] = {
            "read": report.read - read,
            "skipped": report.skipped_total - skipped,
            "records": 0,
        }
    for made, record in _merge(spans, report):
        if record is None:
            counts[made.file]["skipped"] += 1
        else:
            counts[made.file]["records"] += 1
            yield record
