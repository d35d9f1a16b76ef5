"""``LiveSpans``: the export's spans (``eventstore.otel.session_spans``), emitted as a run goes.

The spans are a function of the log alone, so the live ones are computed from the log too: after
every append the plugin folds the session's events (the invocation's cached read of the log)
into span records and emits, through the official SDK, each span that has just ended and was
not emitted yet — a ``chat`` span when its model event is stored, an ``execute_tool`` span when
the call's settling response is, the ``invoke_agent`` root when the invocation ends. Spans that
had ended before the invocation started are the earlier runs' (or the export's) business and
are never emitted again, so a session run by several processes, each with its own plugin, gets
every span once; what a user event without an invocation id ended (a long-running result
submitted from outside) is emitted by the invocation that event belongs to — the next one, as
the export counts it. Ids, times and attributes are the records', so a live trace and a later export
agree span for span. A call still open when its invocation ends (waiting for a confirmation or a
long-running result) is emitted by the run that settles it.
"""

from __future__ import annotations

import asyncio
import threading
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eventstore import Event
from eventstore.otel import SpanEmitter, SpanRecord, session_spans, trace_id_of
from runtime._plugins import Plugin

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor

    from runtime._invocation import InvocationContext

__all__ = ["LiveSpans"]


def _ended(span: SpanRecord) -> bool:
    """Whether a span of a log prefix is final: a root only once its invocation is over (the
    caller decides), a tool span once its call is settled, a chat span always."""
    return span.parent_span_id is not None and span.attributes.get("evs.tool.open") is not True


@dataclass(kw_only=True)
class _Watch:
    """What one invocation has emitted, what had ended before it started, and where in the
    log the spans it may still emit begin."""

    before: set[int]
    """Ids of the spans that had ended when the invocation started (never emitted by it)."""
    window: int
    """The seq from which the log is translated: every span this invocation can end opens at
    or after it, within an invocation whose events all lie at or after it."""
    emitted: set[int] = field(default_factory=set)
    """Ids of the spans this invocation emitted."""


def _unowned(event: Event) -> bool:
    """A user event appended before an invocation began (a message, an answer or a result
    submitted from outside — which may name the invocation of the call it answers): no run
    emitted what it ended, so the next invocation does."""
    return event.author == "user"


def _watch(log: Sequence[Event], session_id: str, start: int) -> _Watch:
    """The watch of an invocation whose first append is at seq ``start`` of ``log``."""
    prefix = [e for e in log if e.seq is not None and e.seq < start]
    # A user event before this invocation (an answer, a result submitted from outside) was
    # appended by no run: what it ended is this invocation's to emit.
    own = len(prefix)
    while own > 0 and _unowned(prefix[own - 1]):
        own -= 1
    spans = session_spans(prefix[:own], session_id=session_id)
    # Spans still to end: the open calls (under the root of the invocation that made them)
    # and this invocation's own (from ``own``). Translating from the first event of the
    # oldest of those invocations gives them exactly as a translation of the whole log does;
    # one event more gives a chat span opening there its start (the event before it).
    open_calls = {s.attributes["gen_ai.tool.call.id"] for s in spans if not _ended(s)
                  and s.parent_span_id is not None}
    callers = {e.invocation_id for e in prefix[:own] if e.invocation_id
               and any(c.id in open_calls for c in e.function_calls())}
    first = next((i for i, e in enumerate(prefix[:own]) if e.invocation_id in callers), own)
    while first > 0 and _unowned(prefix[first - 1]):
        first -= 1
    first = max(first - 1, 0)
    window = prefix[first].seq if first < len(prefix) else start
    return _Watch(before={s.span_id for s in spans if s.parent_span_id is None or _ended(s)},
                  window=window or 0)


class LiveSpans(Plugin):
    """A runner plugin (``Agent(plugins=[LiveSpans(processor)])``) that emits the session's
    GenAI spans to ``processors`` as the run appends the events that end them.

    Guarantees: every span it emits equals the span ``eventstore.otel.session_spans`` /
    ``evs export --format otlp`` gives for the same session (ids, parent, name, kind, times,
    attributes, span events, status; resource ``service.name`` = ``service_name``, by default
    the app name, as the export's); each span is emitted once, by the invocation that ends it.
    Processors are the SDK's: ``BatchSpanProcessor(OTLPSpanExporter(...))`` for a collector,
    ``SimpleSpanProcessor(InMemorySpanExporter())`` in tests. Emitting runs in a worker thread,
    never blocking the event loop. Call ``shutdown()`` at the end to flush them.

    Each append translates the log from the first event of the oldest invocation with a span
    still to end (the invocation's cached copy of the log: no extra read); the first append of
    an invocation translates the whole log once.
    """

    name = "otel-live-spans"

    def __init__(self, *processors: SpanProcessor, service_name: str | None = None) -> None:
        if not processors:
            raise ValueError("LiveSpans needs at least one span processor to send spans to.")
        self._processors = processors
        self._service_name = service_name
        self._emitters: dict[str, SpanEmitter] = {}
        self._watches: dict[tuple[str, str], _Watch] = {}
        self._lock = threading.Lock()

    async def after_append(self, ctx: InvocationContext, events: Sequence[Event]) -> None:
        """Emit the spans the appended ``events`` ended."""
        log = await ctx.events()
        key = (ctx.session_id, ctx.invocation_id)
        watch = self._watches.get(key)
        if watch is None:
            start = events[0].seq
            assert start is not None
            watch = self._watches[key] = _watch(log, ctx.session_id, start)
        await self._emit(ctx, watch, [s for s in self._spans(ctx, watch, log) if _ended(s)])

    async def after_invocation(self, ctx: InvocationContext) -> None:
        """Emit the invocation's root span (and anything its end settled)."""
        watch = self._watches.pop((ctx.session_id, ctx.invocation_id), None)
        if watch is None:
            return  # it appended nothing: no span of its own
        root = trace_id_of(ctx.session_id, ctx.invocation_id)
        await self._emit(ctx, watch, [
            s for s in self._spans(ctx, watch, await ctx.events())
            if _ended(s) or (s.parent_span_id is None and s.trace_id == root)])

    @staticmethod
    def _spans(ctx: InvocationContext, watch: _Watch, log: list[Event]) -> list[SpanRecord]:
        window = log[bisect_left(log, watch.window, key=lambda e: e.seq or 0):]
        return session_spans(window, session_id=ctx.session_id)

    async def _emit(self, ctx: InvocationContext, watch: _Watch,
                    spans: list[SpanRecord]) -> None:
        fresh = [s for s in spans if s.span_id not in watch.before
                 and s.span_id not in watch.emitted]
        if not fresh:
            return
        watch.emitted.update(s.span_id for s in fresh)
        emitter = self._emitter(ctx.app_name)
        await asyncio.to_thread(self._emit_now, emitter, fresh)

    def _emit_now(self, emitter: SpanEmitter, spans: list[SpanRecord]) -> None:
        with self._lock:  # the emitter plans the ids of the next span: one span at a time
            for span in spans:
                emitter.emit(span)

    def _emitter(self, app_name: str) -> SpanEmitter:
        name = self._service_name or app_name
        emitter = self._emitters.get(name)
        if emitter is None:
            emitter = self._emitters[name] = SpanEmitter(service_name=name,
                                                         processors=self._processors)
        return emitter

    def force_flush(self) -> None:
        """Ask the processors to export what they hold now (blocking)."""
        for processor in self._processors:
            processor.force_flush()

    def shutdown(self) -> None:
        """Flush and shut down the processors (blocking); nothing is emitted after."""
        for processor in self._processors:
            processor.shutdown()
