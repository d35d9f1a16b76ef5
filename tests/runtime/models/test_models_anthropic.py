"""AnthropicModel on the wire: the real ``anthropic`` SDK against a local Messages API server."""

from __future__ import annotations

from _extras import require_extra

sdk = require_extra("anthropic", "anthropic")

import itertools  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

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
from runtime import ModelRequest  # noqa: E402
from runtime.models import (  # noqa: E402
    AnthropicModel,
    ModelAuthenticationError,
    ModelContextLengthError,
    ModelOverloadedError,
    ModelRateLimitError,
)

PATH = "/v1/messages"


def model(wire: Wire, *, max_retries: int = 0) -> AnthropicModel:
    return AnthropicModel(
        "claude-sonnet-4-6",
        api_key="sk-ant-test",
        base_url=wire.url("/").rstrip("/"),
        max_retries=max_retries,
    )


def _request() -> ModelRequest:
    return ModelRequest(contents=[Content(role="user", parts=(Part(text="Weather?"),))])


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


async def test_anthropic_weather_session_end_to_end(tmp_path: Path, wire: Wire) -> None:
    history, _ = await weather_session(
        tmp_path / "s.db", wire, PATH, fixture("anthropic_weather.json"), lambda: model(wire)
    )
    assert shape(history) == WEATHER_SHAPE
    assert [c.id for c in history[1].function_calls()] == ["toolu_paris", "toolu_atlantis"]
    assert history[1].custom_metadata == {
        "provider": "anthropic",
        "model": "claude-sonnet-4-6",
        "response_id": "msg_01",
        "finish_reason": "tool_use",
        "usage": {"input_tokens": 880, "output_tokens": 96},
    }
    assert history[-1].text().startswith("Paris: 22°C")

    bodies = wire.bodies
    assert bodies[0]["max_tokens"] == 4096
    assert bodies[0]["system"].startswith("You are a weather assistant.")
    # Both parallel results in one user message, by tool_use_id; the error flagged.
    results = bodies[1]["messages"][-1]
    assert results["role"] == "user"
    blocks = results["content"]
    assert [(b["type"], b["tool_use_id"], b.get("is_error", False)) for b in blocks] == [
        ("tool_result", "toolu_paris", False),
        ("tool_result", "toolu_atlantis", True),
    ]
    # After the approval: the forecast's result, and no confirmation plumbing.
    assert bodies[2]["messages"][-1]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_forecast",
            "content": '{"city":"Paris","days":7,"report":"paris-forecast.md","report_version":0}',
        }
    ]
    assert "adk_request_confirmation" not in str(bodies[2])
    # After the long-running result.
    assert bodies[3]["messages"][-1]["content"][0]["tool_use_id"] == "toolu_outlook"
    # After load_artifacts: the result and the report merged into one user message, results first.
    last = bodies[4]["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "text"]
    assert "Dry all week; highs of 24°C." in last[1]["text"]
    roles = [m["role"] for m in bodies[4]["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles))
    assert_golden("anthropic_weather_requests", bodies)
    assert all(p == PATH for p in wire.paths)
    # This SDK version sends the key as a bearer token.
    assert {h["authorization"] for h in wire.headers} == {"Bearer sk-ant-test"}


async def test_anthropic_401_is_an_authentication_error(tmp_path: Path, wire: Wire) -> None:
    wire.reply(PATH, _error("authentication_error", "invalid x-api-key"), status=401)
    error, log = await failed_turn(tmp_path / "s.db", model(wire, max_retries=2))
    assert isinstance(error, ModelAuthenticationError)
    assert "invalid x-api-key" in str(error)
    assert isinstance(error.__cause__, sdk.AuthenticationError)
    assert len(wire.bodies) == 1
    assert shape(log) == [("user", "message")]


async def test_anthropic_429_carries_retry_after(tmp_path: Path, wire: Wire) -> None:
    limited = _error("rate_limit_error", "Number of request tokens has exceeded your rate limit.")
    wire.reply(PATH, limited, status=429, headers={"retry-after": "12"})
    error, log = await failed_turn(tmp_path / "s.db", model(wire))
    assert isinstance(error, ModelRateLimitError)
    assert error.retry_after == 12.0
    assert shape(log) == [("user", "message")]


async def test_anthropic_429_then_success_waits_as_told(wire: Wire) -> None:
    limited = _error("rate_limit_error", "Number of request tokens has exceeded your rate limit.")
    wire.reply(PATH, limited, status=429, headers={"retry-after": "0.05"})
    wire.reply(PATH, fixture("anthropic_weather.json")[4])
    response = await model(wire, max_retries=1).generate(_request())
    assert response.text.startswith("Paris: 22°C")
    assert len(wire.bodies) == 2


async def test_anthropic_529_then_success_is_retried_by_the_sdk(wire: Wire) -> None:
    wire.reply(PATH, _error("overloaded_error", "Overloaded"), status=529)
    wire.reply(PATH, fixture("anthropic_weather.json")[4])
    response = await model(wire, max_retries=2).generate(_request())
    assert response.custom_metadata["finish_reason"] == "end_turn"
    assert len(wire.bodies) == 2


async def test_anthropic_529_without_retries_is_overloaded(wire: Wire) -> None:
    wire.reply(PATH, _error("overloaded_error", "Overloaded"), status=529)
    with pytest.raises(ModelOverloadedError, match="HTTP 529: Overloaded") as caught:
        await model(wire).generate(_request())
    assert caught.value.status_code == 529


async def test_anthropic_context_length_400(tmp_path: Path, wire: Wire) -> None:
    too_long = _error("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum")
    wire.reply(PATH, too_long, status=400)
    error, log = await failed_turn(tmp_path / "s.db", model(wire, max_retries=2))
    assert isinstance(error, ModelContextLengthError)
    assert len(wire.bodies) == 1
    assert shape(log) == [("user", "message")]


def _text_delta(text: str) -> tuple[str, dict[str, Any]]:
    return (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
    )


STREAM = sse(
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_s",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-6",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 12, "output_tokens": 1},
            },
        },
    ),
    (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
    _text_delta("Paris is "),
    _text_delta("sunny, "),
    _text_delta("22°C."),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 6},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
)


async def test_anthropic_streams_text_as_it_arrives(tmp_path: Path, wire: Wire) -> None:
    partials, stored, released = await streamed_turn(
        tmp_path / "s.db", wire, PATH, STREAM, model(wire), gate_after=2
    )
    assert released == [True]
    assert partials == ["Paris is ", "sunny, ", "22°C."]
    assert stored[-1].text() == "Paris is sunny, 22°C."
    assert stored[-1].custom_metadata["finish_reason"] == "end_turn"
    assert stored[-1].custom_metadata["usage"]["output_tokens"] == 6
    assert wire.bodies[0]["stream"] is True


async def test_anthropic_cancelled_stream_stores_nothing(tmp_path: Path, wire: Wire) -> None:
    log = await cancelled_stream(tmp_path / "s.db", wire, PATH, STREAM, model(wire), gate_after=2)
    assert shape(log) == [("user", "message")]


async def test_anthropic_sees_a_rejected_confirmation_as_the_calls_error(
    tmp_path: Path, wire: Wire
) -> None:
    await rejected_session(
        tmp_path / "s.db", wire, PATH, fixture("anthropic_weather.json"), lambda: model(wire)
    )
    [block] = wire.bodies[2]["messages"][-1]["content"]
    assert block["tool_use_id"] == "toolu_forecast"
    assert block["is_error"] is True
    assert '"kind":"confirmation_rejected"' in block["content"]
