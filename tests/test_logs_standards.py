"""Readers that follow the standards (issue 42): OTLP spans written by the OpenTelemetry
SDK under the current and the deprecated semantic conventions (attribute names taken from
``opentelemetry-semantic-conventions``, spans encoded by the SDK's own OTLP encoder, ids
in protobuf JSON's base64), HTTP and GenAI spans of one call merged into one operation,
mapping files, and the coverage report with its one-line warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")

from google.protobuf import json_format  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.semconv._incubating.attributes import (  # noqa: E402
    enduser_attributes as enduser,
)
from opentelemetry.semconv._incubating.attributes import (  # noqa: E402
    gen_ai_attributes as gen_ai,
)
from opentelemetry.semconv._incubating.attributes import (  # noqa: E402
    http_attributes as old_http,
)
from opentelemetry.semconv._incubating.attributes import (  # noqa: E402
    session_attributes as session,
)
from opentelemetry.semconv._incubating.attributes import (  # noqa: E402
    user_attributes as user,
)
from opentelemetry.semconv.attributes import (  # noqa: E402
    error_attributes,
    http_attributes,
    url_attributes,
)
from opentelemetry.trace import SpanKind, Status, StatusCode  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from simgym.core.errors import SimgymError  # noqa: E402
from simgym.logs.coverage import coverage_problems  # noqa: E402
from simgym.logs.mapping import load_map  # noqa: E402
from simgym.logs.model import ImportReport  # noqa: E402
from simgym.logs.registry import read_logs  # noqa: E402
from simgym.logs.world import build_world  # noqa: E402

EXECUTE_TOOL = gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value


class Spans:
    """A tracer of its own whose finished spans are written as the SDK encodes them."""

    def __init__(self, service: str = "purchasing") -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("test")

    def write(self, path: Path) -> Path:
        request = encode_spans(self.exporter.get_finished_spans())
        # protobuf's JSON mapping: base64 ids and enum names, as a Collector-less pipeline
        # that serialises the SDK's request writes it
        line = json.dumps(json_format.MessageToDict(request), separators=(",", ":"))
        path.write_text(line + "\n")
        return path


def _read(*paths: Path, mapping=None):
    report = ImportReport()
    return list(read_logs(list(paths), report, mapping=mapping)), report


def _server(spans: Spans, attrs: dict, *, context=None, name: str = "POST") -> None:
    with spans.tracer.start_as_current_span(
        name, kind=SpanKind.SERVER, attributes=attrs, context=context
    ):
        pass


def test_current_http_user_and_session_conventions(tmp_path: Path) -> None:
    spans = Spans()
    _server(
        spans,
        {
            http_attributes.HTTP_REQUEST_METHOD: "POST",
            http_attributes.HTTP_ROUTE: "/invoices/{invoice_id}/approve",
            url_attributes.URL_PATH: "/invoices/INV-7/approve",
            http_attributes.HTTP_RESPONSE_STATUS_CODE: 200,
            user.USER_ID: "u-42",
            user.USER_ROLES: ["clerk", "approver"],
            session.SESSION_ID: "s-1",
            "http.request.body.content": '{"note": "ok"}',
            "http.response.body.content": '{"id": "INV-7", "status": "approved"}',
        },
    )
    records, report = _read(spans.write(tmp_path / "t.json"))
    assert report.skipped_total == 0
    (r,) = records
    assert (r.method, r.operation, r.status) == ("POST", "/invoices/{invoice_id}/approve", 200)
    assert (r.actor, r.role, r.session) == ("u-42", "approver,clerk", "s-1")
    assert r.arguments == {"note": "ok"}
    assert r.response == {"id": "INV-7", "status": "approved"}
    assert [(o.type, o.id, o.state) for o in r.objects] == [
        ("invoice", "INV-7", {"id": "INV-7", "status": "approved"})
    ]
    assert "session_from" not in r.attributes


def test_deprecated_conventions_and_bodies_in_span_events(tmp_path: Path) -> None:
    spans = Spans()
    with spans.tracer.start_as_current_span(
        "GET",
        kind=SpanKind.SERVER,
        attributes={
            old_http.HTTP_METHOD: "GET",
            old_http.HTTP_TARGET: "/orders/PO-3?expand=lines",
            old_http.HTTP_STATUS_CODE: 404,
            enduser.ENDUSER_ID: "buyer-9",
            enduser.ENDUSER_ROLE: "buyer",
        },
    ) as span:
        span.add_event("http.response.body", {"body": '{"error": {"code": "not_found"}}'})
    with spans.tracer.start_as_current_span(
        "POST",
        kind=SpanKind.SERVER,
        attributes={
            http_attributes.HTTP_REQUEST_METHOD: "POST",
            url_attributes.URL_PATH: "/orders",
            http_attributes.HTTP_RESPONSE_STATUS_CODE: 201,
        },
    ) as span:
        span.add_event("request", {"http.request.body.content": '{"amount": 120}'})
        span.add_event("response", {"content": '{"id": "PO-4", "status": "draft"}'})
    records, _ = _read(spans.write(tmp_path / "t.json"))
    get, post = records
    assert (get.method, get.operation, get.status) == ("GET", "/orders/{id}", 404)
    assert (get.actor, get.role) == ("buyer-9", "buyer")
    assert get.arguments == {"expand": "lines"}  # the query, as a GET's arguments
    assert get.response == {"error": {"code": "not_found"}}
    assert get.attributes["session_from"] == "trace"  # no session attribute: the trace
    assert post.arguments == {"amount": 120}
    assert post.response == {"id": "PO-4", "status": "draft"}
    assert [(o.type, o.id, o.qualifier) for o in post.objects] == [("order", "PO-4", "created")]


def _tool_span(spans: Spans, name: str, arguments: dict, **attrs):
    return spans.tracer.start_as_current_span(
        f"{EXECUTE_TOOL} {name}",
        kind=SpanKind.INTERNAL,
        attributes={
            gen_ai.GEN_AI_OPERATION_NAME: EXECUTE_TOOL,
            gen_ai.GEN_AI_TOOL_NAME: name,
            gen_ai.GEN_AI_TOOL_CALL_ID: f"call-{name}",
            gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(arguments),
            gen_ai.GEN_AI_CONVERSATION_ID: "conv-1",
            gen_ai.GEN_AI_AGENT_NAME: "buyer-agent",
            **attrs,
        },
    )


def test_failed_tool_call_keeps_no_status_and_its_error_body(tmp_path: Path) -> None:
    spans = Spans()
    with _tool_span(spans, "approve_invoice", {"invoice": "INV-1"}) as span:
        span.set_attribute(error_attributes.ERROR_TYPE, "LimitExceeded")
        span.record_exception(ValueError('{"error": {"code": "limit_exceeded", "limit": 500}}'))
        span.set_status(Status(StatusCode.ERROR))
    with _tool_span(spans, "approve_invoice", {"invoice": "INV-2"}) as span:
        span.set_attribute(gen_ai.GEN_AI_TOOL_CALL_RESULT, '{"id": "INV-2", "status": "ok"}')
    path = spans.write(tmp_path / "tools.json")
    records, _ = _read(path)
    failed, ok = records
    assert failed.status is None and failed.error and failed.failed
    assert failed.response == {"error": {"code": "limit_exceeded", "limit": 500}}
    assert failed.arguments == {"invoice": "INV-1"}
    assert (failed.session, failed.actor) == ("conv-1", "buyer-agent")
    assert failed.attributes["error.type"] == "LimitExceeded"
    assert ok.status is None and not ok.error and ok.response == {"id": "INV-2", "status": "ok"}
    report = ImportReport()
    manifest = build_world(read_logs([path], report), tmp_path / "w", report=report)
    (op,) = json.loads((tmp_path / "w" / "interface.json").read_text())["operations"]
    assert set(op["statuses"]) == {"error", "ok"}  # never a made-up 500
    assert manifest["coverage"]["refusals"] == {"error (no status in the log)": 1}


def test_http_and_genai_spans_of_one_call_are_one_tool(tmp_path: Path) -> None:
    """An agent's exporter (tool span wrapping an HTTP client span) and the API's
    (the server span, child of the client's) write two files; one import, one tool per
    operation, whichever file holds which span."""
    agent, api = Spans("agent"), Spans("api")
    calls = [
        ("create_order", {"amount": 90}, "POST", "/orders", "/orders", 201,
         '{"id": "PO-1", "status": "draft"}'),
        ("approve_order", {"order_id": "PO-1"}, "POST", "/orders/{order_id}/approve",
         "/orders/PO-1/approve", 200, '{"id": "PO-1", "status": "approved"}'),
        ("approve_order", {"order_id": "PO-1"}, "POST", "/orders/{order_id}/approve",
         "/orders/PO-1/approve", 409, '{"error": {"code": "invalid_state"}}'),
    ]  # fmt: skip
    for tool, args, method, route, path, code, body in calls:
        with _tool_span(agent, tool, args):
            with agent.tracer.start_as_current_span(
                method,
                kind=SpanKind.CLIENT,
                attributes={
                    http_attributes.HTTP_REQUEST_METHOD: method,
                    url_attributes.URL_FULL: f"http://api.test{path}",
                    http_attributes.HTTP_RESPONSE_STATUS_CODE: code,
                },
            ) as client:
                _server(
                    api,
                    {
                        http_attributes.HTTP_REQUEST_METHOD: method,
                        http_attributes.HTTP_ROUTE: route,
                        url_attributes.URL_PATH: path,
                        http_attributes.HTTP_RESPONSE_STATUS_CODE: code,
                        user.USER_ID: "u-1",
                        "http.response.body.content": body,
                    },
                    context=trace.set_span_in_context(client),
                )
    with _tool_span(agent, "lookup_supplier", {"name": "Acme"}) as span:
        span.set_attribute(gen_ai.GEN_AI_TOOL_CALL_RESULT, '{"supplier": "S-1"}')
    files = [api.write(tmp_path / "api.json"), agent.write(tmp_path / "agent.json")]
    records, report = _read(*files)
    assert [r.key for r in records] == [
        "POST /orders",
        "POST /orders/{order_id}/approve",
        "POST /orders/{order_id}/approve",
        "lookup_supplier",
    ]
    merged = records[1]
    assert merged.attributes["tool"] == "approve_order" and merged.status == 200
    assert merged.arguments == {"order_id": "PO-1"}  # the tool's, the server had none
    assert merged.session == "conv-1" and merged.actor == "u-1"
    assert records[2].status == 409 and records[2].failed
    assert [f["records"] for f in report.files] == [3, 1]  # api.json, agent.json
    report = ImportReport()
    build_world(read_logs(files, report), tmp_path / "w", report=report)
    names = [
        op["name"]
        for op in json.loads((tmp_path / "w" / "interface.json").read_text())["operations"]
    ]
    assert sorted(names) == ["POST /orders", "POST /orders/{order_id}/approve", "lookup_supplier"]


def test_mapping_file_names_other_attributes(tmp_path: Path) -> None:
    spans = Spans()
    _server(
        spans,
        {
            http_attributes.HTTP_REQUEST_METHOD: "POST",
            http_attributes.HTTP_ROUTE: "/claims",
            http_attributes.HTTP_RESPONSE_STATUS_CODE: 201,
            "app.payload": '{"amount": 5}',
            "app.answer": '{"ref": "CL-1", "state": "open"}',
            "app.who": "agent-7",
            "app.groups": ["adjuster"],
            "app.journey": "j-1",
            "app.claim": "CL-1",
        },
    )
    path = spans.write(tmp_path / "t.json")
    (plain,), _ = _read(path)
    assert plain.arguments is None and plain.actor is None and plain.session != "j-1"
    mapfile = tmp_path / "map.yaml"
    mapfile.write_text(
        "body: app.payload\nresponse: app.answer\nactor: app.who\nrole: [app.role, app.groups]\n"
        "session: app.journey\nobjects: {claim: app.claim}\n"
    )
    (r,), _ = _read(path, mapping=load_map(mapfile))
    assert r.arguments == {"amount": 5} and r.response == {"ref": "CL-1", "state": "open"}
    assert (r.actor, r.role, r.session) == ("agent-7", "adjuster", "j-1")
    assert [(o.type, o.id) for o in r.objects] == [("claim", "CL-1")]

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"body": "x", "actr": "y"}))
    with pytest.raises(SimgymError, match="unknown key 'actr'"):
        load_map(bad)
    from simgym.cli.main import app

    result = CliRunner().invoke(
        app, ["logs", "import", str(path), "--out", str(tmp_path / "w"), "--map", str(bad)]
    )
    assert result.exit_code == 2 and "unknown key 'actr'" in result.output
    har = tmp_path / "x.har"
    har.write_text('{"log": {"entries": []}}')
    with pytest.raises(SimgymError, match="does not read a mapping file"):
        _read(har, mapping=load_map(mapfile))


def test_no_bodies_warns_in_one_line_at_import_and_inspect(tmp_path: Path) -> None:
    from simgym.cli.main import app

    spans = Spans()
    for i in range(3):
        _server(
            spans,
            {
                http_attributes.HTTP_REQUEST_METHOD: "POST",
                http_attributes.HTTP_ROUTE: "/invoices/{invoice_id}/pay",
                url_attributes.URL_PATH: f"/invoices/INV-{i}/pay",
                http_attributes.HTTP_RESPONSE_STATUS_CODE: 200 if i else 403,
                user.USER_ROLES: ["clerk"],
            },
        )
    path = spans.write(tmp_path / "t.json")
    out = tmp_path / "w"
    runner = CliRunner()
    result = runner.invoke(
        app, ["logs", "import", str(path), "--out", str(out)], env={"COLUMNS": "60"}
    )
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 2, result.output  # no bodies, no object state
    assert warnings[0].startswith(
        "WARNING: no request/response bodies found in 3 calls: the twin will hold no state"
    )
    assert "http.request.body.content" in warnings[0]  # says where it looked
    assert "roles 100%" in result.output and "actors 0%" in result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["coverage"]["twin"] is False
    assert coverage_problems(out) == manifest["coverage"]["problems"]
    assert manifest["coverage"]["operations"]["POST /invoices/{invoice_id}/pay"] == {
        "calls": 3,
        "with_objects": 3,
        "object_types": {"invoice": 3},
    }
    shown = runner.invoke(app, ["logs", "inspect", str(out)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[1] == warnings[0]  # the first thing after the title line
    # a world from before the coverage report is recounted, never passed
    del manifest["coverage"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert coverage_problems(out)[0].startswith("no request/response bodies found in 3 calls")
    assert coverage_problems(tmp_path / "nowhere")[0].startswith("not a logs world folder")


def test_world_with_bodies_and_state_has_no_problems(tmp_path: Path) -> None:
    spans = Spans()
    for i in range(2):
        _server(
            spans,
            {
                http_attributes.HTTP_REQUEST_METHOD: "POST",
                http_attributes.HTTP_ROUTE: "/orders",
                url_attributes.URL_PATH: "/orders",
                http_attributes.HTTP_RESPONSE_STATUS_CODE: 201,
                user.USER_ID: f"u-{i}",
                "http.request.body.content": '{"amount": 3}',
                "http.response.body.content": json.dumps({"id": f"PO-{i}", "status": "draft"}),
            },
        )
    report = ImportReport()
    manifest = build_world(
        read_logs([spans.write(tmp_path / "t.json")], report), tmp_path / "w", report=report
    )
    coverage = manifest["coverage"]
    assert coverage["problems"] == [] and coverage["twin"] is True
    assert coverage["fields"]["body"] == {"calls": 2, "share": 1.0}
    assert coverage["fields"]["role"] == {"calls": 0, "share": 0.0}
    assert "user.roles" in coverage["not_found"]["role"]
    assert coverage_problems(tmp_path / "w") == []


def test_spans_stream_unless_a_tool_span_must_be_paired(tmp_path: Path) -> None:
    from simgym.logs.readers.otlp import read

    spans = Spans()
    _server(
        spans,
        {
            http_attributes.HTTP_REQUEST_METHOD: "GET",
            url_attributes.URL_PATH: "/orders/PO-1",
            http_attributes.HTTP_RESPONSE_STATUS_CODE: 200,
        },
    )
    line = spans.write(tmp_path / "one.json").read_text()
    plain = tmp_path / "plain.json"
    plain.write_text(line * 3)
    report = ImportReport()
    records = read(plain, report)
    next(records)
    assert report.read == 1  # the first line only: the rest is not read yet
    assert len(list(records)) == 2 and report.read == 3

    with _tool_span(spans, "lookup", {}):
        pass
    mixed = spans.write(tmp_path / "mixed.json")
    mixed.write_text(line + mixed.read_text())
    report = ImportReport()
    records = read(mixed, report)
    next(records)
    assert report.read == 3  # every span read first, to pair them


def test_tools_served_over_http_keep_their_names(tmp_path: Path) -> None:
    """MCP over streamable HTTP: every tool call is a POST /mcp whose handler runs one
    tool. The tool names the operation; the HTTP span gives the caller. A handler that
    runs several tools (an agent endpoint) stays an operation of its own."""
    spans = Spans()
    for tool in ("open_claim", "pay_claim"):
        with spans.tracer.start_as_current_span(
            "POST /mcp",
            kind=SpanKind.SERVER,
            attributes={
                http_attributes.HTTP_REQUEST_METHOD: "POST",
                http_attributes.HTTP_ROUTE: "/mcp",
                http_attributes.HTTP_RESPONSE_STATUS_CODE: 200,
                user.USER_ID: "adjuster-3",
                session.SESSION_ID: "mcp-s1",
            },
        ):
            with spans.tracer.start_as_current_span(
                f"execute_tool {tool}",
                attributes={
                    gen_ai.GEN_AI_OPERATION_NAME: EXECUTE_TOOL,
                    gen_ai.GEN_AI_TOOL_NAME: tool,
                    gen_ai.GEN_AI_AGENT_NAME: "claims-agent",
                },
            ):
                pass
    with spans.tracer.start_as_current_span(
        "POST /chat",
        kind=SpanKind.SERVER,
        attributes={
            http_attributes.HTTP_REQUEST_METHOD: "POST",
            http_attributes.HTTP_ROUTE: "/chat",
            http_attributes.HTTP_RESPONSE_STATUS_CODE: 200,
        },
    ):
        for tool in ("open_claim", "pay_claim"):
            with _tool_span(spans, tool, {}):
                # the tool calls another service: that service's span is not the tool's
                with spans.tracer.start_as_current_span(
                    "GET",
                    kind=SpanKind.SERVER,
                    attributes={
                        http_attributes.HTTP_REQUEST_METHOD: "GET",
                        http_attributes.HTTP_ROUTE: "/claims/{claim_id}",
                        url_attributes.URL_PATH: "/claims/CL-1",
                        http_attributes.HTTP_RESPONSE_STATUS_CODE: 200,
                    },
                ) as inner:
                    with spans.tracer.start_as_current_span(
                        "GET",
                        kind=SpanKind.SERVER,
                        context=trace.set_span_in_context(inner),
                        attributes={
                            http_attributes.HTTP_REQUEST_METHOD: "GET",
                            http_attributes.HTTP_ROUTE: "/ledger/{entry_id}",
                            url_attributes.URL_PATH: "/ledger/E-1",
                            http_attributes.HTTP_RESPONSE_STATUS_CODE: 200,
                        },
                    ):
                        pass
    records, _ = _read(spans.write(tmp_path / "t.json"))
    served = [r for r in records if r.attributes.get("transport")]
    assert [(r.key, r.actor, r.session) for r in served] == [
        ("open_claim", "adjuster-3", "mcp-s1"),
        ("pay_claim", "adjuster-3", "mcp-s1"),
    ]
    keys = sorted(r.key for r in records)
    assert keys.count("POST /mcp") == 0 and keys.count("POST /chat") == 1
    # the nearest HTTP span is the tool's call; the ledger service's stays its own
    assert keys.count("GET /claims/{claim_id}") == 2 and keys.count("GET /ledger/{entry_id}") == 2
    assert {r.attributes.get("tool") for r in records if r.key.startswith("GET /claims")} == {
        "open_claim",
        "pay_claim",
    }
