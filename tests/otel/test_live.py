"""``runtime.otel.LiveSpans``: a demo run's live spans, caught by the SDK's in-memory exporter,
are the spans the export makes of the same session afterwards."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from _extras import require_extra

require_extra("opentelemetry.sdk.trace", "otel")

from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from eventstore import Content, Event, EventStore, Part, open_store  # noqa: E402
from eventstore.otel import sdk_spans, session_spans  # noqa: E402
from runtime import Runner  # noqa: E402
from runtime.cli._demo import DEMO_APP, DEMO_USER, OUTLOOK, QUESTION  # noqa: E402
from runtime.cli._demo_agent import demo_runner, model_turns, script  # noqa: E402
from runtime.otel import LiveSpans  # noqa: E402
from runtime.replay import answer_confirmation, pending, submit_response  # noqa: E402


def _view(span: ReadableSpan) -> dict[str, Any]:
    """Everything an OTLP backend receives of a span."""
    assert span.context is not None
    return {
        "trace": span.context.trace_id, "span": span.context.span_id,
        "parent": span.parent.span_id if span.parent is not None else None,
        "name": span.name, "kind": span.kind, "start": span.start_time, "end": span.end_time,
        "attributes": dict(span.attributes or {}),
        "events": [(e.name, e.timestamp, dict(e.attributes or {})) for e in span.events],
        "status": (span.status.status_code, span.status.description),
        "resource": dict(span.resource.attributes),
        "scope": span.instrumentation_scope.name if span.instrumentation_scope else None,
    }


def _runner(store: EventStore, events: list[Event], exporter: InMemorySpanExporter) -> Runner:
    """The demo's runner with a fresh LiveSpans, as a new process would have it."""
    runner = demo_runner(store, events, app_name=DEMO_APP)
    runner.agent = replace(runner.agent,
                           plugins=(LiveSpans(SimpleSpanProcessor(exporter)),))
    return runner


async def _demo_with_live_spans(db: Path, exporter: InMemorySpanExporter) -> tuple[str, int]:
    """Run the demo to its end as ``evs demo --approve`` does (a run, the confirmation, a run,
    the long-running result, a run), each run with its own LiveSpans; return the session id
    and the spans emitted by the time the confirmation was answered."""
    async with await open_store(str(db), auto_upgrade=True) as store:
        sid = "demo-live"
        await store.create_session(app_name=DEMO_APP, user_id=DEMO_USER, session_id=sid,
                                   events=[Event(author="user", content=Content(
                                       role="user", parts=(Part(text=QUESTION),)))])
        after_first = -1
        for _ in range(6):
            events = await store.read(sid)
            report = pending(events, idempotent_tools=["get_weather"])
            if report.confirmations:
                after_first = len(exporter.get_finished_spans())
                [item] = report.confirmations
                assert item.confirmation_id is not None
                await answer_confirmation(store, session_id=sid,
                                          confirmation_id=item.confirmation_id, confirmed=True)
            elif report.long_running:
                for call in report.long_running:
                    await submit_response(store, session_id=sid, call_id=call.call.id,
                                          response=OUTLOOK)
            elif model_turns(events) >= len(script()):
                return sid, after_first
            result = await _runner(store, await store.read(sid), exporter).run(
                session_id=sid, user_id=DEMO_USER)
            assert result.status != "stale"
        raise AssertionError("the demo did not finish in six runs")


async def test_live_spans_equal_the_export_of_the_same_session(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    db = tmp_path / "live.db"
    sid, after_first = await _demo_with_live_spans(db, exporter)
    live = [_view(s) for s in exporter.get_finished_spans()]
    async with await open_store(str(db)) as store:
        exported = [_view(s) for s in sdk_spans(
            session_spans(await store.read(sid), session_id=sid), service_name=DEMO_APP)]
    assert len({(v["trace"], v["span"]) for v in live}) == len(live)  # each span once
    assert sorted(live, key=lambda v: v["span"]) == sorted(exported, key=lambda v: v["span"])
    names = {v["name"] for v in live}
    assert {"invoke_agent weather_agent", "chat", "execute_tool get_weather",
            "execute_tool paid_forecast", "execute_tool long_range_outlook"} <= names
    # Live means as the run goes: the first run's spans were out before anyone answered,
    # and the paid call (waiting then) only after.
    assert 0 < after_first < len(live)
    first_batch = [v["name"] for v in live[:after_first]]
    assert "execute_tool paid_forecast" not in first_batch
    assert "invoke_agent weather_agent" in first_batch


def test_live_spans_need_a_processor() -> None:
    with pytest.raises(ValueError, match="span processor"):
        LiveSpans()


def test_live_spans_public_surface() -> None:
    import runtime.otel

    assert runtime.otel.__all__ == ["LiveSpans"]


async def test_live_spans_translate_only_from_the_oldest_invocation_still_open(
    tmp_path: Path,
) -> None:
    from runtime.otel._spans import _watch

    db = tmp_path / "live.db"
    sid, _ = await _demo_with_live_spans(db, InMemorySpanExporter())
    async with await open_store(str(db)) as store:
        log = await store.read(sid)
    # The demo's runs start at seq 2, 10 (after the answer at 9) and 15 (after the result at
    # 14). The third's open call (the long-running one, answered at 14 from outside) was made
    # by the second run, whose events begin at the answer (9): one event before that, seq 8.
    assert [_watch(log, sid, start).window for start in (2, 10, 15)] == [1, 1, 8]
