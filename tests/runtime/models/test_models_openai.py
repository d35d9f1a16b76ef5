"""OpenAIChatModel on the wire: the real ``openai`` SDK against a local Chat Completions server."""

from __future__ import annotations

from _extras import require_extra

sdk = require_extra("openai", "openai")

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import orjson  # noqa: E402
import pytest  # noqa: E402
from _wire import (  # noqa: E402
    WEATHER_SHAPE,
    Wire,
    assert_golden,
    cancelled_stream,
    failed_turn,
    fixture,
    rejected_session,
    shape,
    sse,
    streamed_turn,
    weather_session,
)

from eventstore import Content, Part  # noqa: E402
from runtime import ModelRequest, ToolDefinitionError  # noqa: E402
from runtime.models import (  # noqa: E402
    ModelAuthenticationError,
    ModelContextLengthError,
    ModelOverloadedError,
    ModelRateLimitError,
    NativeTool,
    OpenAIChatModel,
)

PATH = "/v1/chat/completions"


def model(wire: Wire, *, max_retries: int = 0) -> OpenAIChatModel:
    return OpenAIChatModel(
        "gpt-4o-mini", api_key="sk-test", base_url=wire.url("/v1"), max_retries=max_retries
    )


async def test_openai_weather_session_end_to_end(tmp_path: Path, wire: Wire) -> None:
    history, _ = await weather_session(
        tmp_path / "s.db", wire, PATH, fixture("openai_weather.json"), lambda: model(wire)
    )
    assert shape(history) == WEATHER_SHAPE
    assert [c.id for c in history[1].function_calls()] == ["call_paris", "call_atlantis"]
    assert history[1].custom_metadata == {
        "provider": "openai",
        "model": "gpt-4o-mini-2024-07-18",
        "response_id": "chatcmpl-1",
        "finish_reason": "tool_calls",
        "usage": {"prompt_tokens": 412, "completion_tokens": 51, "total_tokens": 463},
    }
    atlantis = history[3].function_responses()[1].response
    assert atlantis["error"]["kind"] == "execution_failed"
    assert history[-1].text().startswith("Paris: 22°C")

    # The wire: tool results by call id (the error too), then what the model sees after resumes.
    bodies = wire.bodies
    assert bodies[1]["messages"][-2] == {
        "role": "tool",
        "tool_call_id": "call_paris",
        "content": '{"city":"Paris","temperature_c":22,"condition":"sunny"}',
    }
    assert bodies[1]["messages"][-1]["tool_call_id"] == "call_atlantis"
    assert orjson.loads(bodies[1]["messages"][-1]["content"]) == {"error": atlantis["error"]}
    # After the approval: the model sees the forecast's result, not the confirmation plumbing.
    assert bodies[2]["messages"][-1]["tool_call_id"] == "call_forecast"
    assert '"report":"paris-forecast.md"' in bodies[2]["messages"][-1]["content"]
    assert "adk_request_confirmation" not in str(bodies[2])
    # After the long-running result: the outlook answers its call id.
    assert bodies[3]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_outlook",
        "content": '{"city":"Paris","outlook":"warmer than usual for the next 30 days"}',
    }
    # After load_artifacts: the report's contents, in that request only.
    assert bodies[4]["messages"][-1]["role"] == "user"
    assert "Dry all week; highs of 24°C." in bodies[4]["messages"][-1]["content"]
    assert_golden("openai_weather_requests", bodies)
    assert all(p == PATH for p in wire.paths)
    assert {h["authorization"] for h in wire.headers} == {"Bearer sk-test"}


def _error(message: str, code: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


async def test_openai_401_is_an_authentication_error_and_nothing_is_stored(
    tmp_path: Path, wire: Wire
) -> None:
    wire.reply(PATH, _error("Incorrect API key provided: sk-test.", "invalid_api_key"), status=401)
    error, log = await failed_turn(tmp_path / "s.db", model(wire, max_retries=2))
    assert isinstance(error, ModelAuthenticationError)
    assert (error.provider, error.model, error.status_code) == ("openai", "gpt-4o-mini", 401)
    assert "Incorrect API key provided" in str(error)
    assert isinstance(error.__cause__, sdk.AuthenticationError)
    assert len(wire.bodies) == 1  # never retried
    assert shape(log) == [("user", "message")]


async def test_openai_429_after_the_retries_carries_retry_after(tmp_path: Path, wire: Wire) -> None:
    limited = _error("Rate limit reached for gpt-4o-mini.", "rate_limit_exceeded", "requests")
    wire.reply(PATH, limited, status=429, headers={"retry-after": "7"})
    error, log = await failed_turn(tmp_path / "s.db", model(wire, max_retries=0))
    assert isinstance(error, ModelRateLimitError)
    assert error.retry_after == 7.0
    assert shape(log) == [("user", "message")]


async def test_openai_429_then_success_waits_as_told(tmp_path: Path, wire: Wire) -> None:
    limited = _error("Rate limit reached for gpt-4o-mini.", "rate_limit_exceeded", "requests")
    wire.reply(PATH, limited, status=429, headers={"retry-after": "0.05"})
    wire.reply(PATH, fixture("openai_weather.json")[4])
    response = await model(wire, max_retries=1).generate(_request())
    assert response.text.startswith("Paris: 22°C")
    assert len(wire.bodies) == 2
    assert wire.bodies[0] == wire.bodies[1]


async def test_openai_500_then_success_is_retried_by_the_sdk(tmp_path: Path, wire: Wire) -> None:
    wire.reply(PATH, _error("The server had an error.", "server_error", "server_error"), status=500)
    wire.reply(PATH, fixture("openai_weather.json")[4])
    response = await model(wire, max_retries=2).generate(_request())
    assert response.custom_metadata["finish_reason"] == "stop"
    assert len(wire.bodies) == 2


async def test_openai_500_without_retries_is_overloaded(tmp_path: Path, wire: Wire) -> None:
    wire.reply(PATH, _error("The server had an error.", "server_error", "server_error"), status=500)
    with pytest.raises(ModelOverloadedError, match="HTTP 500: The server had an error"):
        await model(wire, max_retries=0).generate(_request())


async def test_openai_context_length_400(tmp_path: Path, wire: Wire) -> None:
    too_long = _error(
        "This model's maximum context length is 128000 tokens. However, your messages resulted "
        "in 130012 tokens. Please reduce the length of the messages.",
        "context_length_exceeded",
    )
    wire.reply(PATH, too_long, status=400)
    error, log = await failed_turn(tmp_path / "s.db", model(wire, max_retries=2))
    assert isinstance(error, ModelContextLengthError)
    assert error.status_code == 400
    assert len(wire.bodies) == 1
    assert shape(log) == [("user", "message")]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-s",
        "object": "chat.completion.chunk",
        "created": 1767000000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


STREAM = sse(
    (None, _chunk({"role": "assistant", "content": "Paris is "})),
    (None, _chunk({"content": "sunny, "})),
    (None, _chunk({"content": "22°C."})),
    (None, _chunk({}, "stop")),
    (
        None,
        {
            **_chunk({}),
            "choices": [],
            "usage": {"prompt_tokens": 9, "completion_tokens": 6, "total_tokens": 15},
        },
    ),
    (None, "[DONE]"),
)


async def test_openai_streams_text_as_it_arrives(tmp_path: Path, wire: Wire) -> None:
    partials, stored, released = await streamed_turn(
        tmp_path / "s.db", wire, PATH, STREAM, model(wire)
    )
    assert released == [True]
    assert partials == ["Paris is ", "sunny, ", "22°C."]
    assert shape(stored) == [("user", "message"), ("chat", "message")]
    assert stored[-1].text() == "".join(partials)
    assert stored[-1].custom_metadata["usage"] == {
        "prompt_tokens": 9,
        "completion_tokens": 6,
        "total_tokens": 15,
    }
    assert wire.bodies[0]["stream"] is True
    assert wire.bodies[0]["stream_options"] == {"include_usage": True}


async def test_openai_cancelled_stream_stores_nothing(tmp_path: Path, wire: Wire) -> None:
    log = await cancelled_stream(tmp_path / "s.db", wire, PATH, STREAM, model(wire))
    assert shape(log) == [("user", "message")]


def _request() -> ModelRequest:
    return ModelRequest(contents=[Content(role="user", parts=(Part(text="Weather?"),))])


async def test_openai_sees_a_rejected_confirmation_as_the_calls_error(
    tmp_path: Path, wire: Wire
) -> None:
    log = await rejected_session(
        tmp_path / "s.db", wire, PATH, fixture("openai_weather.json"), lambda: model(wire)
    )
    assert len(wire.bodies) == 3
    [rejection] = [
        m for m in wire.bodies[2]["messages"] if m.get("tool_call_id") == "call_forecast"
    ]
    error = orjson.loads(rejection["content"])["error"]
    assert error["kind"] == "confirmation_rejected"
    assert error["tool"] == "paid_forecast"
    assert wire.bodies[2]["messages"][-1] == rejection
    assert log[-1].text().startswith("Paris: 22°C")


async def test_openai_refuses_another_providers_native_tool_before_any_call(
    tmp_path: Path, wire: Wire
) -> None:
    search = NativeTool("google_search", {"googleSearch": {}})
    error, log = await failed_turn(tmp_path / "s.db", model(wire), tools=[search])
    assert isinstance(error, ToolDefinitionError)
    assert '{"googleSearch":{}}' in str(error)
    assert wire.bodies == []
    assert shape(log) == [("user", "message")]
