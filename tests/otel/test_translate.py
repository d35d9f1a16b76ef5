"""The pure translation: a hand-written log against golden spans."""

from __future__ import annotations

import types

import pytest
from _extras import require_extra

require_extra("opentelemetry.sdk.trace", "otel")

from eventstore import (  # noqa: E402
    REQUEST_CONFIRMATION_FUNCTION,
    Content,
    Event,
    EventActions,
    FunctionCall,
    FunctionResponse,
    Part,
    ToolConfirmation,
)
from eventstore.otel import SpanEvent, SpanRecord, session_spans, span_id_of, trace_id_of  # noqa: E402

S = "sess-1"
INV1, INV2 = "inv-1", "inv-2"
AGENT = "weather_agent"
T0 = 1_800_000_000.0


def _at(offset_ms: int) -> int:
    return round((T0 + offset_ms / 1000) * 1_000_000_000)


def _ev(seq: int, offset_ms: int, *, author: str = AGENT, invocation: str = "",
        role: str = "model", parts: tuple[Part, ...] = (), **fields: object) -> Event:
    return Event(author=author, id=f"e{seq}", invocation_id=invocation, seq=seq,
                 timestamp=T0 + offset_ms / 1000,
                 content=Content(role=role, parts=parts) if parts else None,  # type: ignore[arg-type]
                 **fields)  # type: ignore[arg-type]


def _call(call_id: str, name: str, **args: object) -> Part:
    return Part(function_call=FunctionCall(id=call_id, name=name, args=dict(args)))


def _resp(call_id: str, name: str, **response: object) -> Part:
    return Part(function_response=FunctionResponse(id=call_id, name=name,
                                                   response=dict(response)))


HINT = "Costs $0.05. Approve?"
FAILED = {"kind": "execution_failed", "tool": "get_weather", "message": "no station"}
PLACEHOLDER = {"kind": "confirmation_required", "tool": "paid", "message": "wait"}
USAGE = {"provider": "openai", "model": "gpt-x", "response_id": "r1", "finish_reason":
         "tool_calls", "usage": {"prompt_tokens": 12, "completion_tokens": 5}}

LOG = [
    _ev(1, 0, author="user", role="user", parts=(Part(text="weather?"),)),
    _ev(2, 10, invocation=INV1, parts=(_call("c-ok", "get_weather", city="Paris"),
                                       _call("c-bad", "get_weather", city="Atlantis")),
        custom_metadata=USAGE, turn_complete=True),
    _ev(3, 11, invocation=INV1, started_call_ids=("c-ok", "c-bad")),
    _ev(4, 15, invocation=INV1, role="user",
        parts=(_resp("c-ok", "get_weather", temp=22), _resp("c-bad", "get_weather",
                                                            error=FAILED))),
    _ev(5, 20, invocation=INV1, parts=(_call("c-paid", "paid", days=7),)),
    _ev(6, 22, invocation=INV1, role="user", parts=(_resp("c-paid", "paid", error=PLACEHOLDER),),
        actions=EventActions(requested_tool_confirmations={"c-paid": ToolConfirmation(hint=HINT)},
                             skip_summarization=True)),
    _ev(7, 23, invocation=INV1, parts=(_call("confirm-1", REQUEST_CONFIRMATION_FUNCTION,
                                             originalFunctionCall={"id": "c-paid",
                                                                   "name": "paid"}),),
        long_running_tool_ids=("confirm-1",)),
    _ev(8, 1000, author="user", role="user",
        parts=(_resp("confirm-1", REQUEST_CONFIRMATION_FUNCTION, confirmed=True),)),
    _ev(9, 1005, invocation=INV2, started_call_ids=("c-paid",)),
    _ev(10, 1030, invocation=INV2, role="user", parts=(_resp("c-paid", "paid", report="ok"),),
        actions=EventActions(skip_summarization=True)),
    _ev(11, 1031, invocation=INV2, parts=(Part(text="report: ok"),), turn_complete=True),
]


def test_session_spans_golden() -> None:
    root1 = span_id_of(S, 1, "invoke_agent")
    root2 = span_id_of(S, 8, "invoke_agent")
    t1, t2 = trace_id_of(S, INV1), trace_id_of(S, INV2)
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.type": "function"}
    expected = [
        SpanRecord(trace_id=t1, span_id=root1, parent_span_id=None,
                   name="invoke_agent weather_agent", kind="internal", start_ns=_at(0),
                   end_ns=_at(23), attributes={
                       "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT,
                       "gen_ai.conversation.id": S, "evs.invocation.id": INV1,
                       "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 5}),
        SpanRecord(trace_id=t1, span_id=span_id_of(S, 2, "chat"), parent_span_id=root1,
                   name="chat gpt-x", kind="client", start_ns=_at(0), end_ns=_at(10),
                   attributes={"gen_ai.operation.name": "chat",
                               "gen_ai.provider.name": "openai", "gen_ai.conversation.id": S,
                               "gen_ai.response.model": "gpt-x", "gen_ai.response.id": "r1",
                               "gen_ai.response.finish_reasons": ("tool_calls",),
                               "gen_ai.usage.input_tokens": 12,
                               "gen_ai.usage.output_tokens": 5}),
        SpanRecord(trace_id=t1, span_id=span_id_of(S, 2, "execute_tool:c-ok"),
                   parent_span_id=root1, name="execute_tool get_weather", kind="internal",
                   start_ns=_at(10), end_ns=_at(15),
                   attributes={**tool, "gen_ai.tool.name": "get_weather",
                               "gen_ai.tool.call.id": "c-ok", "gen_ai.conversation.id": S},
                   events=(SpanEvent(name="evs.tool.started", time_ns=_at(11),
                                     attributes={"evs.invocation.id": INV1}),)),
        SpanRecord(trace_id=t1, span_id=span_id_of(S, 2, "execute_tool:c-bad"),
                   parent_span_id=root1, name="execute_tool get_weather", kind="internal",
                   start_ns=_at(10), end_ns=_at(15),
                   attributes={**tool, "gen_ai.tool.name": "get_weather",
                               "gen_ai.tool.call.id": "c-bad", "gen_ai.conversation.id": S,
                               "error.type": "execution_failed"},
                   events=(SpanEvent(name="evs.tool.started", time_ns=_at(11),
                                     attributes={"evs.invocation.id": INV1}),),
                   error="no station"),
        SpanRecord(trace_id=t1, span_id=span_id_of(S, 5, "chat"), parent_span_id=root1,
                   name="chat", kind="client", start_ns=_at(15), end_ns=_at(20),
                   attributes={"gen_ai.operation.name": "chat", "gen_ai.conversation.id": S}),
        SpanRecord(trace_id=t1, span_id=span_id_of(S, 5, "execute_tool:c-paid"),
                   parent_span_id=root1, name="execute_tool paid", kind="internal",
                   start_ns=_at(20), end_ns=_at(1030),
                   attributes={**tool, "gen_ai.tool.name": "paid",
                               "gen_ai.tool.call.id": "c-paid", "gen_ai.conversation.id": S},
                   events=(
                       SpanEvent(name="evs.confirmation.requested", time_ns=_at(22),
                                 attributes={"evs.confirmation.hint": HINT}),
                       SpanEvent(name="evs.confirmation.answered", time_ns=_at(1000),
                                 attributes={"evs.confirmation.id": "confirm-1",
                                             "evs.confirmation.confirmed": True}),
                       SpanEvent(name="evs.tool.started", time_ns=_at(1005),
                                 attributes={"evs.invocation.id": INV2}),
                   )),
        SpanRecord(trace_id=t2, span_id=root2, parent_span_id=None,
                   name="invoke_agent weather_agent", kind="internal", start_ns=_at(1000),
                   end_ns=_at(1031), attributes={
                       "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT,
                       "gen_ai.conversation.id": S, "evs.invocation.id": INV2}),
    ]
    assert session_spans(LOG, session_id=S) == expected


def test_ids_are_pinned_hashes() -> None:
    # The recipe is part of the contract: a change would give every re-export new ids.
    assert f"{trace_id_of('s', 'i'):032x}" == TRACE_GOLDEN
    assert f"{span_id_of('s', 1, 'chat'):016x}" == SPAN_GOLDEN
    assert trace_id_of("s", "i") != trace_id_of("s", "j") != trace_id_of("t", "i")
    assert span_id_of("s", 1, "chat") != span_id_of("s", 2, "chat")


TRACE_GOLDEN = "743ddf86c1c5fe0df6d943141baa660b"  # sha256("evs-trace\\0s\\0i")[:16]
SPAN_GOLDEN = "bec9d7941866431b"


def test_open_call_ends_at_the_log_head() -> None:
    log = LOG[:7]
    paid = [s for s in session_spans(log, session_id=S) if s.name == "execute_tool paid"]
    assert len(paid) == 1
    assert paid[0].end_ns == _at(23)
    assert paid[0].attributes["evs.tool.open"] is True


def test_trailing_user_message_without_invocation_makes_no_trace() -> None:
    spans = session_spans(LOG[:1], session_id=S)
    assert spans == []


def test_unstored_event_is_refused() -> None:
    with pytest.raises(ValueError, match="no seq"):
        session_spans([Event(author=AGENT, invocation_id=INV1)], session_id=S)


def test_anthropic_and_gemini_usage_keys() -> None:
    for metadata, provider in (
        ({"provider": "anthropic", "usage": {"input_tokens": 3, "output_tokens": 4}},
         "anthropic"),
        ({"provider": "gemini", "usage": {"promptTokenCount": 3, "candidatesTokenCount": 4}},
         "gcp.gemini"),
    ):
        event = _ev(1, 0, invocation=INV1, parts=(Part(text="hi"),), custom_metadata=metadata)
        chat = session_spans([event], session_id=S)[1]
        assert chat.attributes["gen_ai.provider.name"] == provider
        assert chat.attributes["gen_ai.usage.input_tokens"] == 3
        assert chat.attributes["gen_ai.usage.output_tokens"] == 4


def test_rejected_confirmation_is_an_error_with_the_answer_recorded() -> None:
    rejected = {"kind": "confirmation_rejected", "tool": "paid", "message": "refused"}
    log = [*LOG[:7],
           _ev(8, 1000, author="user", role="user",
               parts=(_resp("confirm-1", REQUEST_CONFIRMATION_FUNCTION,
                            response='{"confirmed": false}'),)),
           _ev(9, 1010, invocation=INV2, role="user",
               parts=(_resp("c-paid", "paid", error=rejected),))]
    paid = next(s for s in session_spans(log, session_id=S) if s.name == "execute_tool paid")
    assert paid.attributes["error.type"] == "confirmation_rejected"
    assert paid.error == "refused"
    assert paid.end_ns == _at(1010)
    assert [e.attributes.get("evs.confirmation.confirmed") for e in paid.events
            if e.name == "evs.confirmation.answered"] == [False]


def test_public_surface() -> None:
    import eventstore.otel as otel

    public = {n for n in dir(otel) if not n.startswith("_") and n != "annotations"
              and not isinstance(getattr(otel, n), types.ModuleType)}
    assert sorted(otel.__all__) == sorted(public)
    assert len(otel.__all__) == len(public)
