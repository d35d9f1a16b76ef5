"""pydantic-ai messages ↔ our events: what the store gives back is, by
``ModelMessagesTypeAdapter``, what pydantic-ai produced (a property over message shapes, every
part kind), and the protocol's reading pairs every call with its response."""

from __future__ import annotations

from _extras import require_extra

require_extra("pydantic_ai", "pydantic-ai")

import asyncio  # noqa: E402
from typing import Any  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    BinaryContent,
    FilePart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from eventstore import CallLedger, EventStore, MemoryBackend  # noqa: E402
from eventstore.integrations._handle import StoreHandle  # noqa: E402
from eventstore.integrations.pydantic_ai import RunJournal, messages_of  # noqa: E402
from eventstore.integrations.pydantic_ai.messages import MESSAGE_KEY, artifact_refs  # noqa: E402

texts = st.text(max_size=20)
names = st.sampled_from(["lookup", "charge", "ship"])
ids = st.sampled_from(["c1", "c2", "c3", "call_0"])  # reused ids: stored under fresh ones
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)
binary = st.builds(BinaryContent, data=st.binary(max_size=16),
                   media_type=st.sampled_from(["image/png", "application/pdf"]))
request_parts = st.one_of(
    st.builds(UserPromptPart, content=texts),
    st.builds(UserPromptPart, content=st.lists(texts | binary, min_size=1, max_size=3)),
    st.builds(SystemPromptPart, content=texts),
    st.builds(ToolReturnPart, tool_name=names, content=json_values, tool_call_id=ids),
    st.builds(ToolReturnPart, tool_name=names, content=texts, tool_call_id=ids,
              outcome=st.sampled_from(["retried", "failed", "denied"])),
)
response_parts = st.one_of(
    st.builds(TextPart, content=texts),
    st.builds(ThinkingPart, content=texts),
    st.builds(ToolCallPart, tool_name=names, args=st.dictionaries(texts, json_values,
                                                                   max_size=2), tool_call_id=ids),
    st.builds(NativeToolCallPart, tool_name=st.just("web_search"),
              args=st.dictionaries(texts, json_values, max_size=2), tool_call_id=ids),
    st.builds(NativeToolReturnPart, tool_name=st.just("web_search"), content=json_values,
              tool_call_id=ids),
    st.builds(FilePart, content=binary),
)
messages = st.lists(
    st.builds(ModelRequest, parts=st.lists(request_parts, min_size=1, max_size=3))
    | st.builds(ModelResponse, parts=st.lists(response_parts, min_size=1, max_size=3),
                model_name=st.none() | st.just("m")),
    min_size=1, max_size=6,
)


def _dump(listed: list[ModelMessage]) -> list[Any]:
    return ModelMessagesTypeAdapter.dump_python(listed, mode="json")


async def _round_trip(conversation: list[ModelMessage]) -> tuple[list[ModelMessage], CallLedger]:
    store = EventStore(MemoryBackend())
    await store.create_session(app_name="a", user_id="u", session_id="s")
    journal = RunJournal(handle=StoreHandle(store), session_id="s", app_name="a", user_id="u",
                         author="agent", invocation_id="i", idempotent=frozenset())
    for end in range(1, len(conversation) + 1):  # one message at a time, as a run records
        await journal.record_messages(conversation[:end])
    events = (await store.get_session("s")).events
    contents = {ref: (await store.load_artifact("s", ref[0], version=ref[1])).data
                for ref in artifact_refs(events)}
    return messages_of(events, contents), CallLedger.of(events)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages)
def test_pydantic_ai_messages_round_trip_through_the_store(conversation: list[ModelMessage]
                                                           ) -> None:
    loaded, ledger = asyncio.run(_round_trip(conversation))
    assert _dump(loaded) == _dump(conversation)
    # every stored call id is unique, and names the call it was stored for
    calls = [r.call for r in ledger.records.values() if r.call is not None]
    stored = sum(1 for m in conversation if isinstance(m, ModelResponse)
                 for p in m.parts if isinstance(p, ToolCallPart))
    assert len(calls) == stored


def test_pydantic_ai_tool_return_pairs_with_its_call() -> None:
    conversation: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[ToolCallPart("lookup", {"k": 1}, "c1")]),
        ModelRequest(parts=[ToolReturnPart("lookup", {"v": 2}, "c1")]),
        ModelResponse(parts=[ToolCallPart("lookup", {"k": 3}, "c1")]),  # the id again
        ModelRequest(parts=[ToolReturnPart("lookup", "bad", "c1", outcome="retried")]),
    ]
    loaded, ledger = asyncio.run(_round_trip(conversation))
    assert _dump(loaded) == _dump(conversation)
    records = list(ledger.records.values())
    assert len(records) == 2
    assert records[0].call is not None
    assert records[0].call.id == "c1"
    assert records[0].response == {"v": 2}
    assert records[1].call is not None
    assert records[1].call.id.startswith("call-")
    assert records[1].response is not None
    assert records[1].response["error"]["kind"] == "retry"


def test_pydantic_ai_binary_content_is_an_artifact() -> None:
    png = b"\x89PNG-bytes-of-a-picture"
    conversation: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(["Look:", BinaryContent(png, media_type="image/png")])]),
        ModelResponse(parts=[FilePart(BinaryContent(png, media_type="image/png"))]),
    ]

    async def stored() -> list[Any]:
        store = EventStore(MemoryBackend())
        await store.create_session(app_name="a", user_id="u", session_id="s")
        journal = RunJournal(handle=StoreHandle(store), session_id="s", app_name="a",
                             user_id="u", author="agent", invocation_id="i",
                             idempotent=frozenset())
        await journal.record_messages(conversation)
        return (await store.get_session("s")).events

    events = asyncio.run(stored())
    import base64

    encoded = base64.urlsafe_b64encode(png).decode()
    assert all(encoded not in str(e.custom_metadata[MESSAGE_KEY]) for e in events)
    refs = [p.artifact for e in events if e.content for p in e.content.parts if p.artifact]
    assert [(r.mime_type, r.version) for r in refs] == [("image/png", 0), ("image/png", 1)]
    assert events[0].actions.artifact_delta == {refs[0].filename: 0}
    loaded, _ = asyncio.run(_round_trip(conversation))
    assert _dump(loaded) == _dump(conversation)


def test_pydantic_ai_approval_placeholder_is_the_protocols() -> None:
    from eventstore import FunctionCall, is_placeholder_response
    from eventstore.integrations.pydantic_ai.deferred import Confirmations, confirmation_events

    call = FunctionCall(id="c1", name="ship", args={"item": "book"})
    placeholder, request = confirmation_events([(call, "Ship it?")], author="a", invocation_id="i")
    [response] = placeholder.function_responses()
    assert is_placeholder_response(response.response)
    assert CallLedger.of([placeholder]).get("c1").decision() == "waits_for_confirmation"
    [asked] = request.function_calls()
    assert Confirmations.of([placeholder, request]).requested == {"c1": asked.id}


def test_pydantic_ai_claim_after_another_writer_does_not_run() -> None:
    import pytest

    from eventstore import Content, Event, Part
    from eventstore.integrations.pydantic_ai import SessionMovedError

    async def race() -> CallLedger:
        store = EventStore(MemoryBackend())
        await store.create_session(app_name="a", user_id="u", session_id="s")
        journal = RunJournal(handle=StoreHandle(store), session_id="s", app_name="a",
                             user_id="u", author="agent", invocation_id="i",
                             idempotent=frozenset())
        journal.load([], 0)
        await store.append("s", Event(author="user", content=Content(
            role="user", parts=(Part(text="another process"),))), expected_version=None)
        with pytest.raises(SessionMovedError, match="did not run"):
            await journal.claim("c1")
        return CallLedger.of((await store.get_session("s")).events)

    assert asyncio.run(race()).get("c1").claims == 0


def test_pydantic_ai_result_after_another_answer_is_left_out() -> None:
    from eventstore import Content, Event, FunctionResponse, Part

    def answer(text: str) -> Event:
        return Event(author="user", content=Content(role="user", parts=(Part(
            function_response=FunctionResponse(id="c1", name="t", response={"r": text})),)))

    async def race() -> list[Any]:
        store = EventStore(MemoryBackend())
        await store.create_session(app_name="a", user_id="u", session_id="s")
        journal = RunJournal(handle=StoreHandle(store), session_id="s", app_name="a",
                             user_id="u", author="agent", invocation_id="i",
                             idempotent=frozenset())
        journal.load([], 0)
        await store.append("s", answer("first"), expected_version=None)
        await journal.record_result(answer("second"))
        return [r.response for e in (await store.get_session("s")).events
                for r in e.function_responses()]

    assert asyncio.run(race()) == [{"r": "first"}]
