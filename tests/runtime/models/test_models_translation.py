"""The adapters' pure translation: request bodies (golden files), replies, streams, round trips.

No SDK is needed here: the translation layer is plain functions over plain JSON.
"""

from __future__ import annotations

import itertools
import string
from typing import Any

import orjson
import pytest
from _wire import assert_golden
from hypothesis import given, settings
from hypothesis import strategies as st

from eventstore import ArtifactRef, Content, FunctionCall, FunctionResponse, Part
from runtime import ModelRequest, ModelResponse, ToolDefinitionError
from runtime.declarations import declaration_from_json_schema
from runtime.models import (
    RAW_ARGUMENTS_KEY,
    THOUGHT_SIGNATURE_SENTINEL,
    AnthropicStreamState,
    GeminiStreamState,
    ModelResponseError,
    OpenAIStreamState,
    anthropic_messages,
    anthropic_request_body,
    anthropic_response,
    gemini_contents,
    gemini_request_body,
    gemini_response,
    needs_thought_signatures,
    openai_messages,
    openai_request_body,
    openai_response,
)

WEATHER = declaration_from_json_schema(
    "get_weather",
    description="Return the weather of a city.",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city name."},
            "units": {"enum": ["metric", "imperial"], "type": "string"},
            "days": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        },
        "required": ["city"],
    },
)


def _request(**extra: Any) -> ModelRequest:
    """Every kind of content the log can give a model, in one request."""
    return ModelRequest(
        instructions=["You are a weather assistant.", "", "Answer briefly."],
        contents=[
            Content(role="user", parts=(Part(text="Weather in Paris and Atlantis?"),)),
            Content(
                role="model",
                parts=(
                    Part(text="Checking both."),
                    Part(
                        function_call=FunctionCall(
                            id="c1", name="get_weather", args={"city": "Paris"}
                        )
                    ),
                    Part(
                        function_call=FunctionCall(
                            id="c2", name="get_weather", args={RAW_ARGUMENTS_KEY: '{"city": Atl'}
                        )
                    ),
                ),
            ),
            Content(
                role="user",
                parts=(
                    Part(
                        function_response=FunctionResponse(
                            id="c1", name="get_weather", response={"temperature_c": 22}
                        )
                    ),
                    Part(
                        function_response=FunctionResponse(
                            id="c2",
                            name="get_weather",
                            response={
                                "error": {
                                    "kind": "invalid_arguments",
                                    "tool": "get_weather",
                                    "message": "bad JSON",
                                }
                            },
                        )
                    ),
                ),
            ),
            Content(
                role="user",
                parts=(
                    Part(text="Artifact map.png (version 2, image/png, 3 bytes) is attached."),
                    Part(
                        artifact=ArtifactRef(filename="map.png", version=2, mime_type="image/png")
                    ),
                ),
            ),
            Content(role="model", parts=(Part(text="Paris: 22°C."),)),
        ],
        declarations=[WEATHER],
        **extra,
    )


def test_openai_request_body_golden() -> None:
    body = openai_request_body(
        _request(native_tools=[{"web_search_options": {"search_context_size": "low"}}]),
        model="gpt-4o-mini",
        settings={"temperature": 0},
    )
    assert_golden("translation_openai", body)
    assert body["messages"][2]["tool_calls"][1]["function"]["arguments"] == '{"city": Atl'


def test_anthropic_request_body_golden() -> None:
    web_search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    body = anthropic_request_body(
        _request(native_tools=[web_search]), model="claude-sonnet-4-6", settings={"max_tokens": 512}
    )
    assert_golden("translation_anthropic", body)
    assert body["tools"][-1] == web_search
    # The tool results and the artifact note share one user message, results first.
    assert [b["type"] for b in body["messages"][2]["content"]] == [
        "tool_result",
        "tool_result",
        "text",
        "text",
    ]


def test_gemini_request_body_golden() -> None:
    body = gemini_request_body(
        _request(native_tools=[{"googleSearch": {}}]), settings={"temperature": 0}
    )
    assert_golden("translation_gemini", body)
    assert body["tools"] == [
        {"functionDeclarations": [body["tools"][0]["functionDeclarations"][0]]},
        {"googleSearch": {}},
    ]


@pytest.mark.parametrize(
    ("translate", "native"),
    [
        pytest.param(
            lambda r: openai_request_body(r, model="m"), {"googleSearch": {}}, id="openai"
        ),
        pytest.param(
            lambda r: anthropic_request_body(r, model="m"), {"googleSearch": {}}, id="anthropic"
        ),
        pytest.param(gemini_request_body, {"type": "web_search_20250305"}, id="gemini"),
    ],
)
def test_a_native_tool_of_another_provider_is_refused(translate: Any, native: Any) -> None:
    with pytest.raises(ToolDefinitionError, match="cannot send the native tool"):
        translate(_request(native_tools=[native]))


def test_translation_does_not_change_the_request() -> None:
    request = _request()
    before = repr(request)
    openai_request_body(request, model="m")
    anthropic_request_body(request, model="m")
    gemini_request_body(request)
    assert repr(request) == before


def test_replies_without_a_candidate_are_response_errors() -> None:
    with pytest.raises(ModelResponseError, match="no choices"):
        openai_response({"model": "m", "choices": []})
    with pytest.raises(ModelResponseError, match="SAFETY"):
        gemini_response({"promptFeedback": {"blockReason": "SAFETY"}})


def test_arguments_that_are_not_json_reach_the_tool_as_text() -> None:
    reply = {
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "tool_calls": [
                        {"id": "c9", "function": {"name": "get_weather", "arguments": "{oops"}}
                    ]
                },
            }
        ]
    }
    [call] = openai_response(reply).function_calls
    assert call.args == {RAW_ARGUMENTS_KEY: "{oops"}
    content = ModelResponse(function_calls=(call,)).content()
    [message] = openai_messages(ModelRequest(contents=[content]))
    assert message["tool_calls"][0]["function"]["arguments"] == "{oops"


# --- round trips: a stored turn sent to the provider reads back as the same turn -----------------

json_leaves = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8)
json_values = (
    json_leaves
    | st.lists(json_leaves, max_size=3)
    | st.dictionaries(
        st.text(max_size=5), json_leaves | st.lists(json_leaves, max_size=2), max_size=3
    )
)
names = st.text(string.ascii_letters + "_", min_size=1, max_size=12)
calls = st.lists(
    st.builds(
        FunctionCall,
        id=st.text(string.ascii_letters + string.digits + "-_", min_size=1, max_size=16),
        name=names,
        args=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    ),
    max_size=4,
    unique_by=lambda c: c.id,
)
turns = st.builds(
    lambda text, found: ModelResponse(text=text, function_calls=tuple(found)),
    st.text(max_size=40),
    calls,
)


def _same(a: ModelResponse, b: ModelResponse) -> None:
    assert b.text == a.text
    assert b.function_calls == a.function_calls


@settings(max_examples=60, deadline=None)
@given(turns)
def test_openai_round_trip(turn: ModelResponse) -> None:
    messages = openai_messages(ModelRequest(contents=[turn.content()]))
    message = messages[0] if messages else {"content": None}
    _same(turn, openai_response({"choices": [{"message": message, "finish_reason": "stop"}]}))


@settings(max_examples=60, deadline=None)
@given(turns)
def test_anthropic_round_trip(turn: ModelResponse) -> None:
    messages = anthropic_messages(ModelRequest(contents=[turn.content()]))
    blocks = messages[0]["content"] if messages else []
    _same(turn, anthropic_response({"content": blocks, "stop_reason": "end_turn"}))


@settings(max_examples=60, deadline=None)
@given(turns)
def test_gemini_round_trip(turn: ModelResponse) -> None:
    contents = gemini_contents(ModelRequest(contents=[turn.content()]))
    content = contents[0] if contents else {"parts": []}
    _same(turn, gemini_response({"candidates": [{"content": content, "finishReason": "STOP"}]}))


# --- streams: however a reply is cut into chunks, the folded turn is the whole reply's ----------


def _cuts(text: str, points: list[int]) -> list[str]:
    marks = sorted({min(p, len(text)) for p in points} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(marks) if text[a:b]]


cut_points = st.lists(st.integers(0, 200), max_size=5)


@settings(max_examples=60, deadline=None)
@given(turns, cut_points)
def test_openai_stream_folds_to_the_whole_turn(turn: ModelResponse, points: list[int]) -> None:
    state = OpenAIStreamState()
    deltas = [
        state.feed({"choices": [{"index": 0, "delta": {"content": t}}]})
        for t in _cuts(turn.text, points)
    ]
    for index, call in enumerate(turn.function_calls):
        arguments = orjson.dumps(call.args).decode()
        pieces = _cuts(arguments, points) or [""]
        for number, piece in enumerate(pieces):
            head = (
                {"id": call.id, "function": {"name": call.name}}
                if number == 0
                else {"function": {}}
            )
            head["function"]["arguments"] = piece
            state.feed(
                {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": index, **head}]}}]}
            )
    state.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    assert "".join(deltas) == turn.text
    _same(turn, state.response())


@settings(max_examples=60, deadline=None)
@given(turns, cut_points)
def test_anthropic_stream_folds_to_the_whole_turn(turn: ModelResponse, points: list[int]) -> None:
    state = AnthropicStreamState()
    state.feed(
        {
            "type": "message_start",
            "message": {"id": "m", "model": "x", "usage": {"input_tokens": 1}},
        }
    )
    deltas: list[str] = []
    index = 0
    if turn.text:
        state.feed(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
        )
        for piece in _cuts(turn.text, points):
            deltas.append(
                state.feed(
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": piece},
                    }
                )
            )
        state.feed({"type": "content_block_stop", "index": 0})
        index = 1
    for offset, call in enumerate(turn.function_calls):
        at = index + offset
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        state.feed({"type": "content_block_start", "index": at, "content_block": block})
        for piece in _cuts(orjson.dumps(call.args).decode(), points):
            state.feed(
                {
                    "type": "content_block_delta",
                    "index": at,
                    "delta": {"type": "input_json_delta", "partial_json": piece},
                }
            )
        state.feed({"type": "content_block_stop", "index": at})
    state.feed(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 3},
        }
    )
    state.feed({"type": "message_stop"})
    assert "".join(deltas) == turn.text
    folded = state.response()
    _same(turn, folded)
    assert folded.custom_metadata["usage"] == {"input_tokens": 1, "output_tokens": 3}


@settings(max_examples=60, deadline=None)
@given(turns, cut_points)
def test_gemini_stream_folds_to_the_whole_turn(turn: ModelResponse, points: list[int]) -> None:
    state = GeminiStreamState()
    deltas = [
        state.feed({"candidates": [{"content": {"role": "model", "parts": [{"text": t}]}}]})
        for t in _cuts(turn.text, points)
    ]
    calls = [
        {"functionCall": {"id": c.id, "name": c.name, "args": c.args}} for c in turn.function_calls
    ]
    state.feed(
        {"candidates": [{"content": {"role": "model", "parts": calls}, "finishReason": "STOP"}]}
    )
    assert "".join(deltas) == turn.text
    _same(turn, state.response())


def test_streams_that_end_early_are_response_errors() -> None:
    with pytest.raises(ModelResponseError, match="finish_reason"):
        OpenAIStreamState().response()
    with pytest.raises(ModelResponseError, match="message_stop"):
        AnthropicStreamState().response()
    with pytest.raises(ModelResponseError, match="no candidate"):
        GeminiStreamState().response()


def test_gemini_3_replays_calls_with_the_signature_sentinel() -> None:
    assert not needs_thought_signatures("gemini-2.5-flash")
    assert needs_thought_signatures("gemini-3-pro-preview")
    assert needs_thought_signatures("models/gemini-3.1-flash")
    body = gemini_request_body(_request(), thought_signature_sentinel=True)
    calls = [p for c in body["contents"] for p in c["parts"] if "functionCall" in p]
    assert len(calls) == 2
    assert {p["thoughtSignature"] for p in calls} == {THOUGHT_SIGNATURE_SENTINEL}
    assert all(
        "thoughtSignature" not in p for p in gemini_request_body(_request())["contents"][1]["parts"]
    )
