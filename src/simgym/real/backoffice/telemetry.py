"""OpenTelemetry traces of the back office, written as the Collector's file exporter does.

Each export call appends one line: an ``ExportTraceServiceRequest`` in the protobuf JSON
mapping with camelCase field names, as OTLP/JSON specifies it. Two details follow the
OTLP/JSON rules rather than plain protobuf JSON: trace and span ids are hex strings (not
base64), and enums (``kind``, ``status.code``) are integers. :func:`read_otlp_jsonl`
undoes the id encoding and parses each line back into the protobuf message.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

SERVICE_NAME = "simgym-backoffice"
SERVICE_VERSION = "1.0.0"
_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _ids(node: Any, convert) -> None:
    """Rewrite every trace/span id in a decoded OTLP JSON tree in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                node[key] = convert(value)
            else:
                _ids(value, convert)
    elif isinstance(node, list):
        for item in node:
            _ids(item, convert)


def _b64_to_hex(value: str) -> str:
    return base64.b64decode(value).hex()


def _hex_to_b64(value: str) -> str:
    return base64.b64encode(bytes.fromhex(value)).decode("ascii")


def request_to_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON of one export request (camelCase keys, hex ids, integer enums)."""
    data = json_format.MessageToDict(request, use_integers_for_enums=True)
    _ids(data, _b64_to_hex)
    return data


def json_to_request(data: dict[str, Any]) -> ExportTraceServiceRequest:
    """Parse one OTLP/JSON line's object back into the protobuf message."""
    copy = json.loads(json.dumps(data))
    _ids(copy, _hex_to_b64)
    return json_format.Parse(json.dumps(copy), ExportTraceServiceRequest())


def read_otlp_jsonl(path: str | Path) -> Iterator[ExportTraceServiceRequest]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json_to_request(json.loads(line))


class OtlpJsonFileExporter(SpanExporter):
    """Appends each batch of spans to a file as one OTLP/JSON line."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        if not spans:
            return SpanExportResult.SUCCESS
        line = json.dumps(request_to_json(encode_spans(spans)), separators=(",", ":"))
        with self._lock, open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._closed = True

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def tracer_provider(
    path: str | Path, *, batch: bool = True, attributes: dict[str, Any] | None = None
) -> TracerProvider:
    """A tracer provider of its own (the global one is left alone) exporting to ``path``."""
    resource = Resource.create(
        {
            "service.name": SERVICE_NAME,
            "service.version": SERVICE_VERSION,
            "service.namespace": "simgym",
            **(attributes or {}),
        }
    )
    provider = TracerProvider(resource=resource)
    exporter = OtlpJsonFileExporter(path)
    processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    return provider
