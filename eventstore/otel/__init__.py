"""Sessions as OpenTelemetry traces following the GenAI semantic conventions (extra ``[otel]``).

``session_spans`` translates a log into span records (pure, deterministic ids); ``read_traces``
/ ``app_traces`` read them from a store; ``traces_json_line`` writes OTLP/JSON and
``send_traces`` posts them to an OTLP/HTTP endpoint, both through the official SDK and
exporter packages. See docs/otel.md.
"""

try:
    import opentelemetry.exporter.otlp.proto.http
    import opentelemetry.sdk.trace  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised on machines without the extra
    raise ImportError(
        "eventstore.otel needs opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http: "
        "install agent-eventstore[otel]"
    ) from exc

from ._export import SessionTraces, app_traces, read_traces, send_traces, traces_json_line
from ._sdk import SCOPE_NAME, SpanEmitter, otlp_json_line, sdk_spans, send_spans
from ._translate import (
    AttributeValue,
    SpanEvent,
    SpanRecord,
    session_spans,
    span_id_of,
    trace_id_of,
)

__all__ = [
    "SCOPE_NAME",
    "AttributeValue",
    "SessionTraces",
    "SpanEmitter",
    "SpanEvent",
    "SpanRecord",
    "app_traces",
    "otlp_json_line",
    "read_traces",
    "sdk_spans",
    "send_spans",
    "send_traces",
    "session_spans",
    "span_id_of",
    "trace_id_of",
    "traces_json_line",
]
