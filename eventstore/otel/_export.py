"""Read sessions from a store and export their traces (the async edge around ``_sdk``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from eventstore.store.facade import EventStore

from ._sdk import otlp_json_line, sdk_spans, send_spans
from ._translate import SpanRecord, session_spans

__all__ = ["SessionTraces", "app_traces", "read_traces", "send_traces", "traces_json_line"]

PAGE = 1000
"""Events read per page."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionTraces:
    """The spans of one session, with what the resource needs."""

    session_id: str
    """The session (``gen_ai.conversation.id``)."""
    app_name: str
    """Its app: the resource's ``service.name``."""
    spans: tuple[SpanRecord, ...]
    """Its spans (see ``session_spans``)."""


async def read_traces(store: EventStore, session_id: str, *,
                      since: float | None = None) -> SessionTraces:
    """Return the spans of a session; with ``since`` (seconds since the epoch) only the traces
    of invocations that ended at or after it. Raises SessionNotFoundError."""
    info = await store.session_info(session_id)
    events = []
    after = 0
    while after < info.version:
        page = await store.read(session_id, after=after, upto=info.version, limit=PAGE)
        if not page:
            break
        events += page
        after = page[-1].seq or after + len(page)
    spans = session_spans(events, session_id=session_id)
    if since is not None:
        cutoff = round(since * 1_000_000_000)
        kept = {s.trace_id for s in spans if s.parent_span_id is None and s.end_ns >= cutoff}
        spans = [s for s in spans if s.trace_id in kept]
    return SessionTraces(session_id=session_id, app_name=info.app_name, spans=tuple(spans))


async def app_traces(store: EventStore, *, app_name: str,
                     since: float | None) -> AsyncIterator[SessionTraces]:
    """Yield the traces of every session of ``app_name`` updated at or after ``since`` (all
    when ``None``), in session id order; sessions with no span are skipped."""
    after: str | None = None
    while True:
        page = await store.list_sessions(app_name=app_name, after=after, limit=500)
        for info in page.sessions:
            if since is None or info.updated_at >= since:
                traces = await read_traces(store, info.id, since=since)
                if traces.spans:
                    yield traces
        if page.next_cursor is None:
            return
        after = page.next_cursor


def traces_json_line(traces: SessionTraces) -> bytes:
    """One OTLP/JSON ``ExportTraceServiceRequest`` line (no newline) for a session's spans."""
    return otlp_json_line(sdk_spans(traces.spans, service_name=traces.app_name))


async def send_traces(traces: SessionTraces, *, endpoint: str,
                      request_timeout: float | None = None) -> None:
    """Send a session's spans to an OTLP/HTTP endpoint (in a worker thread: the exporter
    blocks); the exporter retries transient failures for up to ``request_timeout`` seconds
    (None: ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``, else 10). Raises OSError saying why when the
    endpoint does not accept them (the exporter's retry log lines are not printed)."""
    spans = sdk_spans(traces.spans, service_name=traces.app_name)
    await asyncio.to_thread(send_spans, spans, endpoint=endpoint, timeout=request_timeout)
