"""GeminiModel on the wire: the real ``google-genai`` SDK against a local Gemini API server."""

from __future__ import annotations

from _extras import require_extra

genai = require_extra("google.genai", "gemini")

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

from eventstore import Content, FunctionCall, FunctionResponse, Part, open_store  # noqa: E402
from runtime import Agent, ModelRequest, Runner  # noqa: E402
from runtime.cli._demo_agent import get_weather  # noqa: E402
from runtime.models import (  # noqa: E402
    GeminiModel,
    ModelAuthenticationError,
    ModelContextLengthError,
    ModelOverloadedError,
    ModelRateLimitError,
    NativeTool,
)

PATH = "/v1beta/models/gemini-2.5-flash:generateContent"
STREAM_PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"


def model(wire: Wire, *, max_retries: int = 0) -> GeminiModel:
    return GeminiModel(
        "gemini-2.5-flash",
        api_key="gm-test",
        base_url=wire.url("/"),
        max_retries=max_retries,
        retry_options={"initial_delay": 0.01, "jitter": 0},
    )


def _request() -> ModelRequest:
    return ModelRequest(contents=[Content(role="user", parts=(Part(text="Weather?"),))])


def _error(code: int, status: str, message: str, *details: dict[str, Any]) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = list(details)
    return {"error": error}


def _generated_ids(bodies: list[dict[str, Any]], ids: dict[str, str]) -> list[dict[str, Any]]:
    """The bodies with generated call ids replaced by stable names (for the golden file)."""
    text = orjson.dumps(bodies).decode()
    for generated, name in ids.items():
        text = text.replace(generated, name)
    return list(orjson.loads(text))


async def test_gemini_weather_session_end_to_end(tmp_path: Path, wire: Wire) -> None:
    history, _ = await weather_session(
        tmp_path / "s.db", wire, PATH, fixture("gemini_weather.json"), lambda: model(wire)
    )
    assert shape(history) == WEATHER_SHAPE
    # Gemini gave no ids for the parallel calls: generated once, stored, and sent back exactly.
    paris, atlantis = history[1].function_calls()
    assert paris.id.startswith("call-")
    assert atlantis.id.startswith("call-")
    assert paris.id != atlantis.id
    assert history[4].function_calls()[0].id == "fc-forecast"
    assert history[1].custom_metadata == {
        "provider": "gemini",
        "model": "gemini-2.5-flash",
        "response_id": "resp-1",
        "finish_reason": "STOP",
        "usage": {"promptTokenCount": 512, "candidatesTokenCount": 30, "totalTokenCount": 542},
    }
    assert history[-1].text().startswith("Paris: 22°C")

    bodies = wire.bodies
    assert bodies[1]["contents"][1]["parts"][1:] == [
        {"functionCall": {"id": paris.id, "name": "get_weather", "args": {"city": "Paris"}}},
        {"functionCall": {"id": atlantis.id, "name": "get_weather", "args": {"city": "Atlantis"}}},
    ]
    responses = bodies[1]["contents"][2]
    assert responses["role"] == "user"
    assert [p["functionResponse"]["id"] for p in responses["parts"]] == [paris.id, atlantis.id]
    assert responses["parts"][1]["functionResponse"]["response"]["error"]["kind"] == (
        "execution_failed"
    )
    # After the approval: the forecast's result; after the long-running result: the outlook.
    assert bodies[2]["contents"][-1]["parts"][0]["functionResponse"] == {
        "id": "fc-forecast",
        "name": "paid_forecast",
        "response": {
            "city": "Paris",
            "days": 7,
            "report": "paris-forecast.md",
            "report_version": 0,
        },
    }
    assert "adk_request_confirmation" not in str(bodies[2])
    assert bodies[3]["contents"][-1]["parts"][0]["functionResponse"]["id"] == "fc-outlook"
    assert "Dry all week; highs of 24°C." in bodies[4]["contents"][-1]["parts"][0]["text"]
    named = _generated_ids(bodies, {paris.id: "<generated paris id>", atlantis.id: "<atlantis>"})
    assert_golden("gemini_weather_requests", named)
    assert all(p == PATH for p in wire.paths)
    assert {h["x-goog-api-key"] for h in wire.headers} == {"gm-test"}


async def test_gemini_401_is_an_authentication_error(tmp_path: Path, wire: Wire) -> None:
    wire.reply(PATH, _error(401, "UNAUTHENTICATED", "Request had invalid credentials."), status=401)
    error, log = await failed_turn(tmp_path / "s.db", model(wire, max_retries=2))
    assert isinstance(error, ModelAuthenticationError)
    assert error.status_code == 401
    assert isinstance(error.__cause__, genai.errors.ClientError)
    assert len(wire.bodies) == 1
    assert shape(log) == [("user", "message")]


async def test_gemini_invalid_key_400_is_an_authentication_error(wire: Wire) -> None:
    invalid = _error(
        400,
        "INVALID_ARGUMENT",
        "API key not valid. Please pass a valid API key.",
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"},
    )
    wire.reply(PATH, invalid, status=400)
    with pytest.raises(ModelAuthenticationError, match="API key not valid"):
        await model(wire).generate(_request())


async def test_gemini_429_carries_the_retry_delay(tmp_path: Path, wire: Wire) -> None:
    exhausted = _error(
        429,
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota.",
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"},
    )
    wire.reply(PATH, exhausted, status=429)
    error, log = await failed_turn(tmp_path / "s.db", model(wire))
    assert isinstance(error, ModelRateLimitError)
    assert error.retry_after == 7.0
    assert shape(log) == [("user", "message")]


async def test_gemini_429_then_success_is_retried_by_the_sdk(wire: Wire) -> None:
    wire.reply(PATH, _error(429, "RESOURCE_EXHAUSTED", "Quota."), status=429)
    wire.reply(PATH, fixture("gemini_weather.json")[4])
    response = await model(wire, max_retries=1).generate(_request())
    assert response.text.startswith("Paris: 22°C")
    assert len(wire.bodies) == 2


async def test_gemini_500_then_success_is_retried_by_the_sdk(wire: Wire) -> None:
    wire.reply(PATH, _error(500, "INTERNAL", "An internal error has occurred."), status=500)
    wire.reply(PATH, fixture("gemini_weather.json")[4])
    response = await model(wire, max_retries=2).generate(_request())
    assert response.custom_metadata["finish_reason"] == "STOP"
    assert len(wire.bodies) == 2


async def test_gemini_503_without_retries_is_overloaded(wire: Wire) -> None:
    wire.reply(PATH, _error(503, "UNAVAILABLE", "The model is overloaded."), status=503)
    with pytest.raises(ModelOverloadedError, match="HTTP 503: The model is overloaded"):
        await model(wire).generate(_request())


async def test_gemini_context_length_400(tmp_path: Path, wire: Wire) -> None:
    too_long = _error(
        400,
        "INVALID_ARGUMENT",
        "The input token count (1250000) exceeds the maximum number of tokens allowed (1048576).",
    )
    wire.reply(PATH, too_long, status=400)
    error, log = await failed_turn(tmp_path / "s.db", model(wire, max_retries=2))
    assert isinstance(error, ModelContextLengthError)
    assert len(wire.bodies) == 1
    assert shape(log) == [("user", "message")]


def _chunk(text: str, finish: str | None = None) -> dict[str, Any]:
    content = {"role": "model", "parts": [{"text": text}]}
    candidate: dict[str, Any] = {"index": 0, "content": content}
    if finish:
        candidate["finishReason"] = finish
    chunk: dict[str, Any] = {
        "candidates": [candidate],
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-s",
    }
    if finish:
        chunk["usageMetadata"] = {
            "promptTokenCount": 9,
            "candidatesTokenCount": 6,
            "totalTokenCount": 15,
        }
    return chunk


STREAM = sse(
    (None, _chunk("Paris is ")),
    (None, _chunk("sunny, ")),
    (None, _chunk("22°C.", "STOP")),
)


async def test_gemini_streams_text_as_it_arrives(tmp_path: Path, wire: Wire) -> None:
    partials, stored, released = await streamed_turn(
        tmp_path / "s.db", wire, STREAM_PATH, STREAM, model(wire)
    )
    assert released == [True]
    assert partials == ["Paris is ", "sunny, ", "22°C."]
    assert stored[-1].text() == "Paris is sunny, 22°C."
    assert stored[-1].custom_metadata["usage"]["totalTokenCount"] == 15
    assert wire.paths == [STREAM_PATH + "?alt=sse"]


async def test_gemini_cancelled_stream_stores_nothing(tmp_path: Path, wire: Wire) -> None:
    log = await cancelled_stream(tmp_path / "s.db", wire, STREAM_PATH, STREAM, model(wire))
    assert shape(log) == [("user", "message")]


async def test_gemini_sees_a_rejected_confirmation_as_the_calls_error(
    tmp_path: Path, wire: Wire
) -> None:
    await rejected_session(
        tmp_path / "s.db", wire, PATH, fixture("gemini_weather.json"), lambda: model(wire)
    )
    [part] = wire.bodies[2]["contents"][-1]["parts"]
    assert part["functionResponse"]["id"] == "fc-forecast"
    assert part["functionResponse"]["response"]["error"]["kind"] == "confirmation_rejected"


async def test_gemini_gets_a_native_tool_beside_the_declarations(
    tmp_path: Path, wire: Wire
) -> None:
    wire.reply(PATH, fixture("gemini_weather.json")[4])
    search = NativeTool("google_search", {"googleSearch": {}})
    agent = Agent(name="a", model=model(wire), tools=[get_weather, search])
    async with await open_store(tmp_path / "s.db", auto_upgrade=True) as store:
        runner = Runner(agent=agent, store=store, app_name="w")
        await runner.create_session(user_id="u", session_id="s")
        result = await runner.run(session_id="s", user_id="u", new_message="Weather?")
    assert result.final_text.startswith("Paris: 22°C")
    [body] = wire.bodies
    # (The SDK sends native tools before the function declarations.)
    assert len(body["tools"]) == 2
    assert {"googleSearch": {}} in body["tools"]
    [declared] = [t for t in body["tools"] if "functionDeclarations" in t]
    assert [d["name"] for d in declared["functionDeclarations"]] == ["get_weather"]


async def test_gemini_3_gets_replayed_calls_with_the_signature_sentinel(wire: Wire) -> None:
    path = "/v1beta/models/gemini-3-flash-preview:generateContent"
    wire.reply(path, fixture("gemini_weather.json")[4])
    gemini3 = GeminiModel(
        "gemini-3-flash-preview", api_key="gm-test", base_url=wire.url("/"), max_retries=0
    )
    call = FunctionCall(id="fc-1", name="get_weather", args={"city": "Paris"})
    answer = FunctionResponse(id="fc-1", name="get_weather", response={"temperature_c": 22})
    request = ModelRequest(
        contents=[
            Content(role="user", parts=(Part(text="Weather?"),)),
            Content(role="model", parts=(Part(function_call=call),)),
            Content(role="user", parts=(Part(function_response=answer),)),
        ]
    )
    await gemini3.generate(request)
    [body] = wire.bodies
    assert body["contents"][1]["parts"] == [
        {
            "functionCall": {"id": "fc-1", "name": "get_weather", "args": {"city": "Paris"}},
            "thoughtSignature": "skip_thought_signature_validator",
        }
    ]
