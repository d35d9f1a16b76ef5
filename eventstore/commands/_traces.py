"""``evs export --format otlp``: sessions as OpenTelemetry traces (needs the ``[otel]`` extra)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, BinaryIO

from eventstore.store.facade import EventStore

from ._common import EXIT_USAGE, CliError, printable

if TYPE_CHECKING:
    from ..otel import SessionTraces

__all__ = ["check_otlp_options", "parse_since", "send_otlp", "write_otlp"]


def parse_since(value: str | None) -> float | None:
    """Seconds since the epoch of an ISO date or date-time (naive means UTC); CliError (usage)
    naming the value when it is neither."""
    if value is None:
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise CliError(f"--since {printable(value)!r} is not an ISO date or date-time "
                       "(2026-11-01 or 2026-11-01T12:00:00+00:00).", code=EXIT_USAGE) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


def check_otlp_options(*, otlp: bool, session_id: str | None, app: str | None,
                       since: str | None, endpoint: str | None, output: object) -> None:
    """CliError (usage) for a combination of export options that does not fit together."""
    if not otlp:
        # With jsonl, --app is the session's app (it picks one of several holding the id).
        extra = [name for name, value in (("--since", since), ("--endpoint", endpoint))
                 if value is not None]
        if extra:
            raise CliError(f"{', '.join(extra)} only apply to --format otlp.", code=EXIT_USAGE)
        if session_id is None:
            raise CliError("Missing argument SESSION_ID.", code=EXIT_USAGE)
        return
    if (session_id is None) == (app is None):
        raise CliError("Give either SESSION_ID or --app (with --format otlp).", code=EXIT_USAGE)
    if endpoint is not None and output is not None:
        raise CliError("Give either --output or --endpoint, not both.", code=EXIT_USAGE)


async def _traces(store: EventStore, *, session_id: str | None, app: str | None,
                  since: float | None) -> AsyncIterator[SessionTraces]:
    try:
        from ..otel import app_traces, read_traces
    except ImportError as exc:
        raise CliError(str(exc)) from exc

    if session_id is not None:
        yield await read_traces(store, session_id, since=since)
        return
    assert app is not None
    async for traces in app_traces(store, app_name=app, since=since):
        yield traces


async def write_otlp(store: EventStore, sink: BinaryIO, *, session_id: str | None,
                     app: str | None, since: float | None) -> tuple[int, int]:
    """Write one OTLP/JSON ``ExportTraceServiceRequest`` line per session to ``sink``; return
    how many sessions and spans were written."""
    sessions = spans = 0
    async for traces in _traces(store, session_id=session_id, app=app, since=since):
        if traces.spans:
            from ..otel import traces_json_line

            await asyncio.to_thread(sink.write, traces_json_line(traces) + b"\n")
            sessions, spans = sessions + 1, spans + len(traces.spans)
    await asyncio.to_thread(sink.flush)
    return sessions, spans


def _traces_url(endpoint: str) -> str:
    """The traces URL of an endpoint given as a base (``http://host:4318``) or in full."""
    _, sep, rest = endpoint.partition("://")
    if sep and "/" not in rest.rstrip("/"):
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint


async def send_otlp(store: EventStore, *, endpoint: str, session_id: str | None,
                    app: str | None, since: float | None) -> int:
    """Send each session's spans to the OTLP/HTTP endpoint; return how many spans were sent.
    CliError naming the endpoint when it refuses them."""
    url = _traces_url(endpoint)
    sent = sessions = 0
    async for traces in _traces(store, session_id=session_id, app=app, since=since):
        if not traces.spans:
            continue
        from ..otel import send_traces

        try:
            await send_traces(traces, endpoint=url)
        except OSError as exc:
            raise CliError(f"{exc} {_sent_before(traces.session_id, sessions, sent)}"
                           ) from exc
        sent += len(traces.spans)
        sessions += 1
    return sent


def _sent_before(session_id: str, sessions: int, spans: int) -> str:
    """What had been sent when the export of ``session_id`` failed, by count."""
    failed = printable(session_id)
    if sessions == 0:
        return f"Nothing was sent (session {failed})."
    before = "the session" if sessions == 1 else f"the {sessions} sessions"
    were = "was" if sessions == 1 else "were"
    return f"Session {failed} was not sent; {before} before it {were} ({spans} span(s))."
