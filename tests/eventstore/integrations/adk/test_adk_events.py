"""ADK events round-trip exactly through the store's event model and codec (hypothesis), and the
fields our model has are stored natively."""

from __future__ import annotations

from _extras import require_extra

adk = require_extra("google.adk", "adk")

from typing import Any  # noqa: E402

import orjson  # noqa: E402
from google.adk.events import Event as AdkEvent  # noqa: E402
from google.adk.events import EventActions as AdkActions  # noqa: E402
from google.adk.tools.tool_confirmation import ToolConfirmation as AdkConfirmation  # noqa: E402
from google.genai import types  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from eventstore import EventKind, event_kind  # noqa: E402
from eventstore._codec import decode_event, decode_trusted, encode_event  # noqa: E402
from eventstore._stored import compact_fields, encode_compact  # noqa: E402
from eventstore.integrations.adk import (  # noqa: E402
    EXTENSION_KEY,
    from_adk_event,
    to_adk_events,
)
from eventstore.integrations.adk.build import _fast  # noqa: E402
from eventstore.integrations.adk.events import (  # noqa: E402
    apply_patch,
    diff,
    event_to_adk_json,
)
from eventstore.integrations.adk.sessions import _DEFAULTS, adk_event_or_none  # noqa: E402

_keys = st.text(min_size=1, max_size=6)
_json: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=8,
)
_objects = st.dictionaries(_keys, _json, max_size=3)
_ids = st.text(alphabet="abc123-", min_size=1, max_size=6)

_parts = st.one_of(
    st.builds(lambda t: types.Part(text=t), st.text(max_size=10)),
    st.builds(lambda t: types.Part(text=t, thought=True), st.text(max_size=10)),
    st.builds(lambda i, n, a, sig: types.Part(
        function_call=types.FunctionCall(id=i, name=n, args=a), thought_signature=sig),
        _ids, _ids, st.none() | _objects, st.none() | st.binary(max_size=4)),
    st.builds(lambda n, a: types.Part(function_call=types.FunctionCall(name=n, args=a)),
              _ids, _objects),
    st.builds(lambda i, n, r: types.Part(
        function_response=types.FunctionResponse(id=i, name=n, response=r)),
        _ids, _ids, st.none() | _objects),
    st.builds(lambda m, d: types.Part(inline_data=types.Blob(mime_type=m, data=d)),
              st.sampled_from(["image/png", "audio/wav"]), st.binary(max_size=8)),
    st.builds(lambda u: types.Part(file_data=types.FileData(file_uri=u, mime_type="a/b")),
              st.text(max_size=8)),
    st.builds(lambda c: types.Part(executable_code=types.ExecutableCode(
        code=c, language=types.Language.PYTHON)), st.text(max_size=8)),
    st.builds(lambda o: types.Part(code_execution_result=types.CodeExecutionResult(
        outcome=types.Outcome.OUTCOME_OK, output=o)), st.text(max_size=8)),
)

_contents = st.none() | st.builds(
    lambda role, parts: types.Content(role=role, parts=parts),
    st.sampled_from([None, "user", "model", "tool"]),
    st.none() | st.lists(_parts, max_size=4),
)

_actions = st.builds(
    lambda delta, arts, skip, esc, transfer, confirm: AdkActions(
        state_delta=delta, artifact_delta=arts, skip_summarization=skip, escalate=esc,
        transfer_to_agent=transfer, requested_tool_confirmations=confirm),
    st.dictionaries(st.sampled_from(["a", "user:b", "app:c", "d"]), _json, max_size=3),
    st.dictionaries(_ids, st.integers(0, 5), max_size=2),
    st.none() | st.booleans(), st.none() | st.booleans(), st.none() | _ids,
    st.dictionaries(_ids, st.builds(
        lambda h, c, p: AdkConfirmation(hint=h, confirmed=c, payload=p),
        st.text(max_size=5), st.booleans(), _json), max_size=2),
)

_events = st.builds(
    lambda eid, inv, author, branch, ts, content, actions, lr, turn, code, msg, meta, usage,
    finish: AdkEvent(
        id=eid, invocation_id=inv, author=author, branch=branch, timestamp=ts, content=content,
        actions=actions, long_running_tool_ids=lr, turn_complete=turn, error_code=code,
        error_message=msg, custom_metadata=meta, finish_reason=finish,
        usage_metadata=None if usage is None else
        types.GenerateContentResponseUsageMetadata(prompt_token_count=usage),
    ),
    _ids, st.text(max_size=5), st.sampled_from(["", "user", "agent", "root.child"]),
    st.none() | _ids, st.floats(0, 2e9, allow_nan=False), _contents, _actions,
    st.none() | st.sets(_ids, max_size=3), st.none() | st.booleans(),
    st.none() | st.text(max_size=4), st.none() | st.text(max_size=4),
    st.none() | st.dictionaries(st.sampled_from(["x", EXTENSION_KEY, "y"]), _json, max_size=2),
    st.none() | st.integers(0, 1000),
    st.none() | st.sampled_from([types.FinishReason.STOP, types.FinishReason.MAX_TOKENS]),
)


@settings(max_examples=300, deadline=None)
@given(event=_events)
def test_adk_event_round_trips_through_the_store_exactly(event: AdkEvent) -> None:
    ours = from_adk_event(event)
    payload = encode_event(ours)
    # The stored mapping read back (fast path where it applies) ...
    [fast] = to_adk_events([{**orjson.loads(payload), "seq": 1}])
    # ... straight from the stored encoding (read_mappings(compact=True)) ...
    compact = adk_event_or_none(compact_fields(
        encode_compact(ours), event_id=ours.id, author=ours.author,
        invocation_id=ours.invocation_id, timestamp=ours.timestamp, seq=1,
    ))
    # ... and the validated path from the decoded event (what every event could take).
    decoded = decode_event(payload, schema_version=1)
    assert decode_trusted(payload, seq=None) == decoded
    slow = AdkEvent.model_validate_json(orjson.dumps(event_to_adk_json(decoded,
                                                                       defaults=_DEFAULTS)))
    for back in (fast, compact, slow):
        assert back == event
        # Equal as JSON values (the codec sorts object keys; JSON objects have no order).
        assert orjson.loads(back.model_dump_json()) == orjson.loads(event.model_dump_json())


@settings(max_examples=200, deadline=None)
@given(orig=_objects, back=_objects)
def test_patch_of_a_diff_restores_the_original(orig: dict[str, Any], back: dict[str, Any]) -> None:
    assert apply_patch(back, diff(orig, back)) == orig
    assert diff(orig, orig) == {}


def test_native_fields_are_stored_natively() -> None:
    call = AdkEvent(
        id="e1", invocation_id="inv", author="agent", branch="root", timestamp=12.5,
        content=types.Content(role="model", parts=[
            types.Part(text="let me check"),
            types.Part(function_call=types.FunctionCall(id="c1", name="weather",
                                                        args={"city": "Paris"})),
        ]),
        long_running_tool_ids={"c1"}, turn_complete=True, error_code="E", error_message="m",
        custom_metadata={"trace": 1},
        actions=AdkActions(state_delta={"k": 1}, artifact_delta={"f": 0},
                           skip_summarization=True, escalate=True, transfer_to_agent="other",
                           requested_tool_confirmations={
                               "c1": AdkConfirmation(hint="ok?", payload={"x": 1})}),
    )
    ours = from_adk_event(call)
    assert EXTENSION_KEY not in ours.custom_metadata  # everything fits natively
    # ... so it reads back by trusted construction, equal to the validated event.
    built = _fast({**orjson.loads(encode_event(ours)), "seq": 1})
    assert built == call
    assert (ours.id, ours.invocation_id, ours.author, ours.branch, ours.timestamp) == (
        "e1", "inv", "agent", "root", 12.5
    )
    assert ours.text() == "let me check"
    [fc] = ours.function_calls()
    assert (fc.id, fc.name, fc.args) == ("c1", "weather", {"city": "Paris"})
    assert ours.long_running_tool_ids == ("c1",)
    assert (ours.turn_complete, ours.error_code, ours.error_message) == (True, "E", "m")
    assert ours.actions.state_delta == {"k": 1}
    assert ours.actions.artifact_delta == {"f": 0}
    assert ours.actions.requested_tool_confirmations["c1"].hint == "ok?"
    assert (ours.actions.skip_summarization, ours.actions.escalate,
            ours.actions.transfer_to_agent) == (True, True, "other")
    assert ours.custom_metadata == {"trace": 1}
    assert event_kind(ours) == EventKind.FUNCTION_CALL


def test_the_extension_holds_only_what_is_not_native() -> None:
    event = AdkEvent(
        id="e", author="agent", timestamp=1.0,
        content=types.Content(role="model", parts=[
            types.Part(text="t", thought=True),
            types.Part(function_call=types.FunctionCall(id="c", name="f", args={}),
                       thought_signature=b"s"),
        ]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=3),
    )
    ext = from_adk_event(event).custom_metadata[EXTENSION_KEY]
    assert ext["parts"] == [
        {"part": {"text": "t", "thought": True}},
        {"patch": {"set": {"thought_signature": "cw=="}}},
    ]
    assert ext["event"]["set"]["usage_metadata"] == {"prompt_token_count": 3}
    assert "content" not in ext
    assert orjson.loads(orjson.dumps(ext)) == ext


def test_parts_kept_in_the_extension_take_the_trusted_path_and_round_trip() -> None:
    # A thought and a signed call: the fast path validates only these parts (the part adapter),
    # the rest is built trusted; the generated events above rarely reach it.
    event = AdkEvent(
        id="e1", invocation_id="i", author="agent", timestamp=5.0,
        content=types.Content(role="model", parts=[
            types.Part(text="thinking", thought=True),
            types.Part(function_call=types.FunctionCall(id="c1", name="f", args={"a": 1}),
                       thought_signature=b"s"),
            types.Part(text="done"),
        ]),
    )
    ours = from_adk_event(event)
    mapping = {**orjson.loads(encode_event(ours)), "seq": 1}
    built = _fast(mapping)
    assert built is not None
    assert built == event
    compact = adk_event_or_none(compact_fields(
        encode_compact(ours), event_id=ours.id, author=ours.author,
        invocation_id=ours.invocation_id, timestamp=ours.timestamp, seq=1,
    ))
    assert compact == event
    assert orjson.loads(compact.model_dump_json()) == orjson.loads(event.model_dump_json())
