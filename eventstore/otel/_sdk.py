"""The I/O shell: ``SpanRecord`` values through the official OpenTelemetry SDK and exporters.

Spans are made by the SDK's own tracer (explicit start/end times, ids from the records through a
planned ``IdGenerator``), encoded by ``opentelemetry-exporter-otlp-proto-common`` and sent by
``OTLPSpanExporter`` — the wire format is never written by hand here.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Sequence
from typing import Any

import orjson
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)

from ._translate import SpanRecord

__all__ = ["SCOPE_NAME", "SpanEmitter", "otlp_json_line", "sdk_spans", "send_spans"]

SCOPE_NAME = "agent-eventstore"
"""Instrumentation scope (and default ``service.name``) of the exported spans."""

_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}


class _Planned(IdGenerator):
    """Hands out the ids the next span must get (set just before the tracer asks)."""

    def __init__(self) -> None:
        self.span_id = 0
        self.trace_id = 0

    def generate_span_id(self) -> int:
        return self.span_id

    def generate_trace_id(self) -> int:
        return self.trace_id


class _Collect(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


class SpanEmitter:
    """Emits ``SpanRecord`` values as SDK spans to the given span processors (an exporter's
    ``SimpleSpanProcessor`` or ``BatchSpanProcessor``, say), each span ending as it is emitted.

    Its own ``TracerProvider`` gives every span exactly the record's ids, times, attributes,
    events and status, with resource ``service.name`` = ``service_name``, whatever the
    ``OTEL_*`` environment says. ``shutdown()`` flushes and shuts down the processors."""

    def __init__(self, *, service_name: str, processors: Sequence[SpanProcessor]) -> None:
        self._ids = _Planned()
        self._provider = TracerProvider(
            resource=Resource({"service.name": service_name}), id_generator=self._ids,
            sampler=ALWAYS_ON,
            span_limits=SpanLimits(max_attributes=1000, max_events=10_000,
                                   max_span_attributes=1000, max_event_attributes=1000,
                                   max_attribute_length=None),
            shutdown_on_exit=False,
        )
        for processor in processors:
            self._provider.add_span_processor(processor)
        self._tracer = self._provider.get_tracer(SCOPE_NAME)

    def emit(self, record: SpanRecord) -> None:
        """Start and end the span of ``record`` (the processors see it end)."""
        self._ids.trace_id, self._ids.span_id = record.trace_id, record.span_id
        context = None
        if record.parent_span_id is not None:
            parent = SpanContext(trace_id=record.trace_id, span_id=record.parent_span_id,
                                 is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
            context = set_span_in_context(NonRecordingSpan(parent))
        span = self._tracer.start_span(record.name, context=context, kind=_KINDS[record.kind],
                                       attributes=dict(record.attributes),
                                       start_time=record.start_ns)
        for event in record.events:
            span.add_event(event.name, attributes=dict(event.attributes),
                           timestamp=event.time_ns)
        if record.error is not None:
            span.set_status(StatusCode.ERROR, record.error)
        span.end(end_time=record.end_ns)

    def force_flush(self) -> None:
        """Ask the processors to export what they hold now."""
        self._provider.force_flush()

    def shutdown(self) -> None:
        """Flush and shut down the processors; nothing is emitted after."""
        self._provider.shutdown()


def sdk_spans(records: Sequence[SpanRecord], *, service_name: str) -> list[ReadableSpan]:
    """Return the SDK spans of ``records``, in order, with resource ``service.name`` =
    ``service_name``; ids, times, attributes, events and status are exactly the records'."""
    collected = _Collect()
    emitter = SpanEmitter(service_name=service_name, processors=[collected])
    for record in records:
        emitter.emit(record)
    emitter.shutdown()
    return collected.spans


def _hex_ids(message: dict[str, Any]) -> None:
    """OTLP/JSON spells trace and span ids in hex where proto3 JSON uses base64."""
    for resource in message.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()


def otlp_json_line(spans: Sequence[ReadableSpan]) -> bytes:
    """Return one ``ExportTraceServiceRequest`` of ``spans`` in the OTLP/JSON encoding (enum
    values as integers, ids in hex), as one line without its newline."""
    message = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    _hex_ids(message)
    return orjson.dumps(message)


class _Captured(logging.Filter):
    """Takes the exporter's log records of one thread (its retry warnings and its final error)
    out of the logging tree, keeping them to say in one error why the export failed; records
    of other threads pass (another exporter of the process keeps its logging)."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self.thread:
            return True
        self.records.append(record)
        return False


def _innermost(error: BaseException) -> str:
    """What an exception chain comes down to: the OS's words for the innermost OSError
    (``Connection refused``), else the innermost exception's text."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen and len(seen) < 20:
        seen.append(current)
        reason = getattr(current, "reason", None)  # urllib3's MaxRetryError holds the cause
        wrapped = current.args[0] if current.args else None
        current = (current.__cause__ or current.__context__
                   or (reason if isinstance(reason, BaseException) else None)
                   or (wrapped if isinstance(wrapped, BaseException) else None))
    for found in reversed(seen):
        if isinstance(found, OSError) and found.strerror:
            return found.strerror
    text = str(seen[-1]) or type(seen[-1]).__name__
    return text if len(text) <= 200 else f"{text[:200]}…"


def _why(records: Sequence[logging.LogRecord]) -> str:
    """``: <reason> (after N attempts)`` from the exporter's records, or nothing."""
    reason: object = None
    status: object = None
    attempts = 1
    for record in records:
        args = record.args if isinstance(record.args, tuple) else ()
        message = record.msg if isinstance(record.msg, str) else ""
        if message.startswith("Transient error") and args:
            reason, attempts = args[0], attempts + 1
        elif (message.startswith("Failed to export") and "batch code:" in message
              and len(args) >= 2):
            # "... span batch code: %s, reason: %s" up to 1.44, "... %s batch code: %s,
            # reason: %s" (the kind first) from 1.45: the status and reason come last.
            status, reason = args[-2], args[-1]
    if reason is None:
        return ""
    text = _innermost(reason) if isinstance(reason, BaseException) else str(reason)
    if status is not None:
        text = f"HTTP {status} {text}"
    tried = f" (after {attempts} attempts)" if attempts > 1 else ""
    return f": {text}{tried}"


def send_spans(spans: Sequence[ReadableSpan], *, endpoint: str,
               timeout: float | None = None) -> None:
    """Send ``spans`` to an OTLP/HTTP (protobuf) traces endpoint in one request (blocking);
    the exporter retries transient failures within ``timeout`` seconds (None: its own default,
    ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` or 10).

    Raises OSError naming the endpoint and the reason when the exporter reports a failure.
    The exporter's own log lines of this call (one per retry) do not reach the logging tree:
    the error says what they said."""
    logger = logging.getLogger(OTLPSpanExporter.__module__)
    captured = _Captured()
    logger.addFilter(captured)
    try:
        exporter = OTLPSpanExporter(endpoint=endpoint, timeout=timeout)
        try:
            result = exporter.export(spans)
        finally:
            exporter.shutdown()  # type: ignore[no-untyped-call]
    finally:
        logger.removeFilter(captured)
    if result is not SpanExportResult.SUCCESS:
        raise OSError(
            f"The OTLP endpoint {endpoint} did not accept the spans{_why(captured.records)}."
        )
