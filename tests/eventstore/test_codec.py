"""The codec: every event shape survives encode → decode on both paths; kinds; upcasting."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import orjson
import pydantic
import pytest
from _evs_support import events, json_values
from hypothesis import given, settings
from hypothesis import strategies as st

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    SCHEMA_VERSION,
    ArtifactRef,
    Content,
    CorruptEventError,
    Event,
    EventActions,
    EventKind,
    EventStore,
    FunctionCall,
    FunctionResponse,
    InvalidEventError,
    Part,
    StoredEvent,
    ToolConfirmation,
    _codec,
    event_kind,
    register_upcaster,
)
from eventstore._codec import decode_event, decode_trusted, encode_event

CODEC_SETTINGS = settings(max_examples=80, deadline=None)


def _round_trips(event: Event) -> None:
    payload = encode_event(event)
    expected = dataclasses.replace(event, seq=7)
    assert decode_trusted(payload, seq=7) == expected
    assert decode_event(payload, schema_version=SCHEMA_VERSION, seq=7) == expected
    # Deterministic: the decoded event encodes to the very same bytes.
    assert encode_event(decode_trusted(payload, seq=7)) == payload


@CODEC_SETTINGS
@given(events)
def test_codec_round_trips_any_event(event: Event) -> None:
    _round_trips(event)


SHAPES = [
    pytest.param(Event(author="user", id="t", content=Content(role="user", parts=(
        Part(text="hello"), Part(text="")))), id="text"),
    pytest.param(Event(author="a", id="fc", turn_complete=True, content=Content(
        role="model", parts=(
        Part(text="let me look"),
        Part(function_call=FunctionCall(id="c1", name="f", args={"x": [1, {"y": None}]})),
        Part(function_call=FunctionCall(id="c2", name="g")),
    ))), id="function-call"),
    pytest.param(Event(author="a", id="fr", content=Content(role="user", parts=(
        Part(function_response=FunctionResponse(id="c1", name="f", response={"result": 1.5})),
        Part(function_response=FunctionResponse(
            id="c2", name="g", response={"error": {"kind": "not_found", "message": "é ✓"}})),
    ))), id="function-response"),
    pytest.param(Event(author="a", id="ar", content=Content(role="model", parts=(
        Part(artifact=ArtifactRef(filename="user:report.pdf", version=3,
                                  mime_type="application/pdf")),
        Part(artifact=ArtifactRef(filename="plain", version=0)),
    )), actions=EventActions(artifact_delta={"user:report.pdf": 3, "plain": 0})),
        id="artifact-ref"),
    pytest.param(Event(author="a", id="cr", long_running_tool_ids=("confirm-1",),
                       content=Content(role="model", parts=(Part(function_call=FunctionCall(
                           id="confirm-1", name=REQUEST_CONFIRMATION_FUNCTION,
                           args={"originalFunctionCall": {"id": "c1", "name": "f", "args": {}},
                                 "toolConfirmation": {"hint": "ok?", "confirmed": False}})),)),
                       actions=EventActions(requested_tool_confirmations={
                           "c1": ToolConfirmation(hint="ok?", payload={"limit": 3}),
                           "c2": ToolConfirmation(confirmed=True, payload=[1, "two"]),
                       })), id="confirmation-request"),
    pytest.param(Event(author="user", id="ca", content=Content(role="user", parts=(
        Part(function_response=FunctionResponse(
            id="confirm-1", name=REQUEST_CONFIRMATION_FUNCTION,
            response={"confirmed": True, "payload": None})),))), id="confirmation-answer"),
    pytest.param(Event(author="a", id="act", actions=EventActions(
        state_delta={"a": 1, "user:b": {"n": [1, 2]}, "app:c": None},
        skip_summarization=True, escalate=True, transfer_to_agent="helper")), id="actions"),
    pytest.param(Event(author="a", id="lr", long_running_tool_ids=("c1", "c2"),
                       content=Content(role="model", parts=(Part(function_call=FunctionCall(
                           id="c1", name="slow")),))), id="long-running-ids"),
    pytest.param(Event(author="a", id="st", started_call_ids=("c1", "c2"),
                       custom_metadata={"idempotency_keys": {"c1": "k1", "c2": "k2"}}),
                 id="started-call-ids"),
    pytest.param(Event(author="a", id="md", invocation_id="inv-1", branch="root.child",
                       timestamp=1_700_000_000.123456, error_code="E42", error_message="boom",
                       custom_metadata={"trace": {"span": "abc", "n": [1, 2.5, True, None]}}),
                 id="metadata-and-errors"),
]


@pytest.mark.parametrize("event", SHAPES)
def test_codec_round_trips_each_shape(event: Event) -> None:
    _round_trips(event)


def test_codec_encoding_ignores_seq() -> None:
    event = Event(author="a", id="e")
    assert encode_event(dataclasses.replace(event, seq=12)) == encode_event(event)


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        pytest.param(Event(author="user", content=Content(role="user", parts=(
            Part(text="hi"),))), EventKind.MESSAGE, id="message"),
        pytest.param(Event(author="a"), EventKind.MESSAGE, id="empty-is-message"),
        pytest.param(Event(author="a", content=Content(role="model", parts=(
            Part(text="x"), Part(function_call=FunctionCall(id="c", name="f"))))),
            EventKind.FUNCTION_CALL, id="function-call"),
        pytest.param(Event(author="a", content=Content(role="user", parts=(
            Part(function_response=FunctionResponse(id="c", name="f")),))),
            EventKind.FUNCTION_RESPONSE, id="function-response"),
        pytest.param(Event(author="a", content=Content(role="model", parts=(
            Part(function_call=FunctionCall(id="c", name="f")),
            Part(function_call=FunctionCall(id="k", name=REQUEST_CONFIRMATION_FUNCTION))))),
            EventKind.CONFIRMATION_REQUEST, id="confirmation-request"),
        pytest.param(Event(author="user", content=Content(role="user", parts=(
            Part(function_response=FunctionResponse(id="k", name=REQUEST_CONFIRMATION_FUNCTION)),
        ))), EventKind.CONFIRMATION_ANSWER, id="confirmation-answer"),
        pytest.param(Event(author="a", actions=EventActions(state_delta={"a": 1})),
                     EventKind.STATE_DELTA, id="state-delta"),
        pytest.param(Event(author="user", content=Content(role="user", parts=(Part(text="x"),)),
                           actions=EventActions(state_delta={"a": 1})),
                     EventKind.MESSAGE, id="message-with-delta"),
        pytest.param(Event(author="a", started_call_ids=("c",),
                           actions=EventActions(state_delta={"a": 1})),
                     EventKind.EXECUTION_STARTED, id="execution-started"),
    ],
)
def test_event_kind_names_each_kind(event: Event, kind: str) -> None:
    assert event_kind(event) == kind
    assert kind in EventKind.ALL


def _kind_by_definition(event: Event) -> str:
    """``event_kind`` as the protocol states it, written plainly (the store's one-pass version
    must agree with it on every event)."""
    if event.started_call_ids:
        return EventKind.EXECUTION_STARTED
    calls = event.function_calls()
    if calls:
        if any(c.name == REQUEST_CONFIRMATION_FUNCTION for c in calls):
            return EventKind.CONFIRMATION_REQUEST
        return EventKind.FUNCTION_CALL
    responses = event.function_responses()
    if responses:
        if any(r.name == REQUEST_CONFIRMATION_FUNCTION for r in responses):
            return EventKind.CONFIRMATION_ANSWER
        return EventKind.FUNCTION_RESPONSE
    if event.content is None and (event.actions.state_delta or event.actions.state_deletions):
        return EventKind.STATE_DELTA  # an event without content that sets or deletes state
    return EventKind.MESSAGE


_names = st.sampled_from(["f", REQUEST_CONFIRMATION_FUNCTION])
_parts = st.lists(st.one_of(
    st.builds(lambda t: Part(text=t), st.text(max_size=3)),
    st.builds(lambda n: Part(function_call=FunctionCall(id="c", name=n)), _names),
    st.builds(lambda n: Part(function_response=FunctionResponse(id="c", name=n)), _names),
), max_size=4)


@CODEC_SETTINGS
@given(parts=st.none() | _parts, started=st.booleans(), delta=st.booleans())
def test_event_kind_agrees_with_its_definition_on_mixed_parts(
    parts: list[Part] | None, started: bool, delta: bool
) -> None:
    event = Event(
        author="a",
        content=None if parts is None else Content(role="model", parts=tuple(parts)),
        started_call_ids=("c",) if started else (),
        actions=EventActions(state_delta={"k": 1} if delta else {}),
    )
    assert event_kind(event) == _kind_by_definition(event)


@CODEC_SETTINGS
@given(events)
def test_event_kind_agrees_with_its_definition(event: Event) -> None:
    assert event_kind(event) == _kind_by_definition(event)


@CODEC_SETTINGS
@given(events, st.integers(min_value=1, max_value=2**31))
def test_with_seq_is_replace_with_the_same_values(event: Event, seq: int) -> None:
    copy = _codec.with_seq(event, seq)
    assert copy == dataclasses.replace(event, seq=seq)
    for field in dataclasses.fields(Event):
        if field.name != "seq":
            assert getattr(copy, field.name) is getattr(event, field.name), field.name


@CODEC_SETTINGS
@given(events)
def test_event_kind_is_a_known_stable_name(event: Event) -> None:
    assert event_kind(event) in EventKind.ALL
    assert event_kind(decode_trusted(encode_event(event), seq=1)) == event_kind(event)


# -- the validated path refuses what is not an event ---------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"not json", id="not-json"),
        pytest.param(b"[1, 2]", id="not-an-object"),
        pytest.param(b"{}", id="no-author"),
        pytest.param(b'{"author": "a", "timestamp": "noon"}', id="bad-timestamp"),
        pytest.param(b'{"author": "a", "content": {"role": "robot", "parts": []}}',
                     id="bad-role"),
        pytest.param(b'{"author": "a", "content": {"role": "user", "parts": [{}]}}',
                     id="empty-part"),
    ],
)
def test_decode_event_rejects_malformed_payloads(payload: bytes) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the documented contract is "a ValueError"
        decode_event(payload, schema_version=SCHEMA_VERSION)


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"\xff\xfe", id="not-utf8"),
        pytest.param(b'{"author": "a"}', id="missing-fields"),
        pytest.param(b"null", id="null"),
    ],
)
def test_store_decode_turns_garbage_into_corrupt_event_error(payload: bytes) -> None:
    stored = StoredEvent(
        session_id="s", seq=4, position=9, event_id="e", kind="message", invocation_id="",
        author="a", timestamp=0.0, shared_state=False, schema_version=SCHEMA_VERSION,
        payload=payload,
    )
    with pytest.raises(CorruptEventError) as info:
        EventStore.decode(stored)
    assert (info.value.session_id, info.value.seq) == ("s", 4)
    assert "'s'" in str(info.value)
    assert "4" in str(info.value)


# -- upcasting ------------------------------------------------------------------------------------


@pytest.fixture
def clean_upcasters() -> Iterator[dict[int, Any]]:
    """Registers nothing itself; restores the module's upcaster table after the test."""
    saved = dict(_codec._UPCASTERS)
    try:
        yield _codec._UPCASTERS
    finally:
        _codec._UPCASTERS.clear()
        _codec._UPCASTERS.update(saved)


def _version_0(event: Event) -> bytes:
    """The payload as a hypothetical schema version 0 wrote it: ``writer``, flat ``text``."""
    mapping = orjson.loads(encode_event(event))
    mapping["writer"] = mapping.pop("author")
    mapping["text"] = event.text()
    del mapping["content"]
    return orjson.dumps(mapping)


def _upcast_0_to_1(mapping: dict[str, Any]) -> dict[str, Any]:
    mapping = dict(mapping)
    mapping["author"] = mapping.pop("writer")
    text = mapping.pop("text")
    mapping["content"] = {"role": "user", "parts": [{"text": text}]} if text else None
    return mapping


def test_upcaster_turns_old_payload_into_current_event(clean_upcasters: dict[int, Any]) -> None:
    event = Event(author="user", id="old", timestamp=5.0,
                  content=Content(role="user", parts=(Part(text="from v0"),)))
    old = _version_0(event)
    with pytest.raises(ValueError, match="no upcaster"):
        decode_event(old, schema_version=0)
    register_upcaster(0, _upcast_0_to_1)
    assert 0 in clean_upcasters
    assert decode_event(old, schema_version=0, seq=3) == dataclasses.replace(event, seq=3)
    stored = StoredEvent(
        session_id="s", seq=3, position=3, event_id="old", kind="message", invocation_id="",
        author="user", timestamp=5.0, shared_state=False, schema_version=0, payload=old,
    )
    assert EventStore.decode(stored) == dataclasses.replace(event, seq=3)


def test_upcaster_registered_twice_is_refused(clean_upcasters: dict[int, Any]) -> None:
    register_upcaster(0, _upcast_0_to_1)
    with pytest.raises(ValueError, match="already registered"):
        register_upcaster(0, _upcast_0_to_1)
    assert clean_upcasters[0] is _upcast_0_to_1


def test_upcasters_chain_in_version_order(
    clean_upcasters: dict[int, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_codec, "SCHEMA_VERSION", 3)
    calls: list[int] = []

    def step(version: int, rename: tuple[str, str]) -> Any:
        def upcast(mapping: dict[str, Any]) -> dict[str, Any]:
            calls.append(version)
            mapping = dict(mapping)
            mapping[rename[1]] = mapping.pop(rename[0])
            return mapping
        return upcast

    register_upcaster(1, step(1, ("w1", "w2")))
    register_upcaster(2, step(2, ("w2", "author")))
    event = decode_event(b'{"w1": "agent", "id": "e"}', schema_version=1, seq=1)
    assert (event.author, event.id, event.seq) == ("agent", "e", 1)
    assert calls == [1, 2]


def test_decode_refuses_a_newer_schema_version() -> None:
    with pytest.raises(ValueError, match="newer"):
        decode_event(b'{"author": "a"}', schema_version=SCHEMA_VERSION + 1)


# -- what cannot be encoded ----------------------------------------------------------------------


@CODEC_SETTINGS
@given(json_values)
def test_codec_keeps_any_json_value_in_free_fields(value: Any) -> None:
    event = Event(
        author="a",
        id="e",
        custom_metadata={"v": value},
        content=Content(role="model", parts=(
            Part(function_call=FunctionCall(id="c", name="f", args={"v": value})),)),
        actions=EventActions(state_delta={"k": value} if value is not None else {},
                             requested_tool_confirmations={"c": ToolConfirmation(payload=value)}),
    )
    _round_trips(event)


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(Event(author="a", id="p", partial=True), id="partial"),
        pytest.param(Event(author="", id="e"), id="empty-author"),
        pytest.param(Event(author="a", id=""), id="empty-id"),
        pytest.param(Event(author="a", id="e", timestamp=float("inf")), id="infinite-timestamp"),
        pytest.param(Event(author="a", id="e", custom_metadata={"x": float("nan")}),
                     id="nan-in-metadata"),
        pytest.param(Event(author="a", id="e", content=Content(role="model", parts=(
            Part(function_call=FunctionCall(id="c", name="f", args={"x": float("inf")})),))),
            id="inf-in-args"),
        pytest.param(Event(author="a", id="e", content=Content(role="user", parts=(
            Part(function_response=FunctionResponse(id="c", name="f",
                                                     response={"x": float("-inf")})),))),
            id="inf-in-response"),
        pytest.param(Event(author="a", id="e", actions=EventActions(
            requested_tool_confirmations={"c": ToolConfirmation(payload=float("nan"))})),
            id="nan-in-confirmation-payload"),
        pytest.param(Event(author="a", id="e", custom_metadata={"x": {1, 2}}), id="set"),
        pytest.param(Event(author="a", id="e", custom_metadata={1: "x"}),  # type: ignore[dict-item]
                     id="int-key"),
        pytest.param(Event(author="a", id="e", custom_metadata={"x": object()}), id="object"),
        pytest.param(Event(author="a", id="e", custom_metadata={"x": 1 << 70}), id="huge-int"),
    ],
)
def test_encode_refuses_what_would_not_come_back_equal(event: Event) -> None:
    with pytest.raises(InvalidEventError) as info:
        encode_event(event)
    assert info.value.event_id in (event.id or None, None)


def test_encode_refuses_non_events() -> None:
    with pytest.raises(InvalidEventError, match="Expected an Event"):
        encode_event({"author": "a"})  # type: ignore[arg-type]


@given(st.text(min_size=1))
@settings(max_examples=50, deadline=None)
def test_codec_round_trips_any_unicode_text(text: str) -> None:
    _round_trips(Event(author="a", id="e", content=Content(role="user", parts=(Part(text=text),))))


def test_pydantic_validation_error_is_a_value_error() -> None:
    # The store relies on it to map validation failures to CorruptEventError.
    assert issubclass(pydantic.ValidationError, ValueError)


@pytest.mark.parametrize(
    ("build", "path"),
    [
        pytest.param(lambda v: Event(author="a", actions=EventActions(state_delta={"k": v})),
                     "state_delta['k']", id="state-delta"),
        pytest.param(lambda v: Event(author="a", actions=EventActions(state_delta={"k": [1, v]})),
                     "state_delta['k'][1]", id="nested-in-list"),
        pytest.param(lambda v: Event(author="a", content=Content(role="model", parts=(
            Part(function_call=FunctionCall(id="c", name="f", args={"xs": v})),))),
                     "['xs']", id="function-call-args"),
        pytest.param(lambda v: Event(author="a", content=Content(role="user", parts=(
            Part(function_response=FunctionResponse(id="c", name="f",
                                                    response={"r": {"deep": v}})),))),
                     "['r']['deep']", id="function-response"),
    ],
)
@pytest.mark.parametrize("value", [pytest.param((1, 2), id="tuple"),
                                   pytest.param(frozenset({1}), id="frozenset"),
                                   pytest.param(range(2), id="range")])
def test_encode_event_refuses_non_list_sequences_naming_the_path(
    build: Any, path: str, value: object
) -> None:
    with pytest.raises(InvalidEventError, match="use a list") as info:
        encode_event(build(value))
    assert path in str(info.value)
    assert type(value).__name__ in str(info.value)
