"""Tracing for the claims services, written as an OpenTelemetry Collector file exporter does.

Two services report: the API (``claims-api``) and the AI assistant in front of it
(``claims-copilot``). Each has its own SDK ``TracerProvider`` and resource; both hand their
finished spans, in batches, to one :class:`OtlpJsonLines` sink, which writes each batch as
one line: an ``ExportTraceServiceRequest`` encoded by the SDK's OTLP encoder and rendered in
the OTLP/JSON mapping (lowerCamelCase keys, trace and span ids as hex strings, enums as
integers, 64-bit integers as strings).

Span ids come from a seeded generator and span times from the simulated clock, and a batch
is cut after a fixed number of spans rather than after a delay, so a seed always gives the
same file.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.id_generator import IdGenerator

SDK_VERSION = "1.45.2"
_HEX_FIELDS = ("traceId", "spanId", "parentSpanId")


class SeededIds(IdGenerator):
    def __init__(self, seed: str) -> None:
        self.rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self.rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self.rng.getrandbits(128) or 1

    def is_trace_id_random(self) -> bool:
        return True


def _convert_ids(node: Any, to_hex: bool) -> None:
    if isinstance(node, dict):
        for key, value in list(node.items()):
            if key in _HEX_FIELDS and isinstance(value, str):
                node[key] = (
                    base64.b64decode(value).hex()
                    if to_hex
                    else base64.b64encode(bytes.fromhex(value)).decode("ascii")
                )
            else:
                _convert_ids(value, to_hex)
    elif isinstance(node, list):
        for item in node:
            _convert_ids(item, to_hex)


def to_otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    data = json_format.MessageToDict(request, use_integers_for_enums=True)
    _convert_ids(data, to_hex=True)
    return data


def from_otlp_json(data: dict[str, Any]) -> ExportTraceServiceRequest:
    """Parse one OTLP/JSON object (hex ids) into the protobuf message."""
    copy = json.loads(json.dumps(data))
    _convert_ids(copy, to_hex=False)
    return json_format.ParseDict(copy, ExportTraceServiceRequest())


def read_otlp_jsonl(path: str | Path) -> Iterator[ExportTraceServiceRequest]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield from_otlp_json(json.loads(line))


class OtlpJsonLines:
    """The file a collector's ``file`` exporter writes: one export request per line."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.handle = open(self.path, "w", encoding="utf-8")
        self.spans = 0
        self.lines = 0

    def write(self, spans: Sequence[ReadableSpan]) -> None:
        if not spans:
            return
        line = json.dumps(to_otlp_json(encode_spans(spans)), separators=(",", ":"))
        self.handle.write(line + "\n")
        self.spans += len(spans)
        self.lines += 1

    def close(self) -> None:
        self.handle.close()


class CountBatchProcessor(SpanProcessor):
    """Hands ended spans to the sink in batches of ``size`` (and the rest on flush)."""

    def __init__(self, sink: OtlpJsonLines, size: int = 128) -> None:
        self.sink = sink
        self.size = size
        self.buffer: list[ReadableSpan] = []

    def on_start(self, span, parent_context=None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        self.buffer.append(span)
        if len(self.buffer) >= self.size:
            self.force_flush()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        batch, self.buffer = self.buffer, []
        self.sink.write(batch)
        return True

    def shutdown(self) -> None:
        self.force_flush()


def make_provider(
    sink: OtlpJsonLines, *, service: str, version: str, instance: str, seed: str, batch: int = 128
) -> TracerProvider:
    resource = Resource(
        {
            "service.name": service,
            "service.namespace": "claims",
            "service.version": version,
            "service.instance.id": instance,
            "deployment.environment.name": "production",
            "telemetry.sdk.language": "python",
            "telemetry.sdk.name": "opentelemetry",
            "telemetry.sdk.version": SDK_VERSION,
        }
    )
    limits = SpanLimits(
        max_span_attributes=128,
        max_events=128,
        max_links=128,
        max_event_attributes=128,
        max_link_attributes=128,
        max_attribute_length=SpanLimits.UNSET,
        max_span_attribute_length=SpanLimits.UNSET,
    )
    provider = TracerProvider(resource=resource, id_generator=SeededIds(seed), span_limits=limits)
    provider.add_span_processor(CountBatchProcessor(sink, batch))
    return provider
