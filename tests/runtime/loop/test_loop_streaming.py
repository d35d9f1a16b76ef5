"""Streaming tools: joined into one response in the loop; chunk by chunk (and cancellable) live."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from eventstore import EventStore, FunctionCall
from runtime import (
    Agent,
    LiveChunk,
    LiveToolStream,
    ModelResponse,
    Runner,
    RuntimeUsageError,
    ScriptedModel,
    ToolContext,
    streaming_tool,
)


@streaming_tool
async def watch_weather(city: str) -> AsyncIterator[str]:
    """Stream weather updates for a city.

    Args:
        city: The city name.
    """
    for update in (f"{city} 22°C", " sunny", " light wind"):
        yield update


stopped: list[str] = []


@streaming_tool
async def ticker(symbol: str, tool_context: ToolContext) -> AsyncIterator[str]:
    """Stream prices forever until cancelled."""
    n = 0
    try:
        while not tool_context.cancelled:
            yield f"{symbol}:{n}"
            n += 1
            await asyncio.sleep(0.001)
    finally:
        stopped.append(tool_context.function_call_id)


async def test_loop_joins_stream_chunks_into_one_response(store: EventStore) -> None:
    model = ScriptedModel(
        [
            ModelResponse.calling(
                FunctionCall(id="c1", name="watch_weather", args={"city": "Oslo"})
            ),
            "Done.",
        ]
    )
    runner = Runner(
        agent=Agent(name="a", model=model, tools=[watch_weather]), store=store, app_name="app"
    )
    await runner.create_session(user_id="u", session_id="s")
    result = await runner.run(session_id="s", user_id="u", new_message="watch")
    (response,) = result.events[3].function_responses()
    assert response.response == {"result": "Oslo 22°C sunny light wind"}
    assert [d.name for d in model.requests[0].declarations] == ["watch_weather"]


async def test_live_stream_yields_chunks_in_order_and_stores_nothing(store: EventStore) -> None:
    runner = Runner(
        agent=Agent(name="a", model=ScriptedModel([]), tools=[watch_weather]),
        store=store,
        app_name="app",
    )
    await runner.create_session(user_id="u", session_id="s")
    async with await runner.live_tools(session_id="s", user_id="u") as live:
        live.start(FunctionCall(id="c1", name="watch_weather", args={"city": "Oslo"}))
        chunks = [chunk async for chunk in live]
    assert chunks == [
        LiveChunk(call_id="c1", tool_name="watch_weather", text=text)
        for text in ("Oslo 22°C", " sunny", " light wind")
    ]
    assert await store.version("s") == 0


async def test_live_cancel_by_call_id_stops_a_handler_that_honours_cancellation() -> None:
    stopped.clear()
    live = LiveToolStream(tools=[ticker, watch_weather], session_id="s")
    ctx_a = live.start(FunctionCall(id="a", name="ticker", args={"symbol": "A"}))
    live.start(FunctionCall(id="b", name="ticker", args={"symbol": "B"}))
    seen: list[LiveChunk] = []
    async for chunk in live:
        if seen and chunk.call_id == "a" and "a" in live.active_call_ids and len(seen) >= 5:
            assert live.cancel("a")
            assert ctx_a.cancelled
        elif chunk.call_id == "a" and ctx_a.cancelled:
            pytest.fail("a chunk of a cancelled call was yielded after cancel()")
        seen.append(chunk)
        if sum(c.call_id == "b" for c in seen) >= 20:
            assert live.stop("ticker") == ["b"]
    assert sorted(stopped) == ["a", "b"]
    assert live.active_call_ids == []
    assert live.errors == {}


async def test_live_stop_by_tool_name_cancels_every_call_of_that_tool() -> None:
    stopped.clear()
    async with LiveToolStream(tools=[ticker, watch_weather], session_id="s") as live:
        for cid in ("t1", "t2"):
            live.start(FunctionCall(id=cid, name="ticker", args={"symbol": cid}))
        live.start(FunctionCall(id="w", name="watch_weather", args={"city": "Rome"}))
        weather: list[str] = []
        async for chunk in live:
            if chunk.tool_name == "watch_weather":
                weather.append(chunk.text)
            if len(weather) == 3 and live.active_call_ids != ["w"]:
                assert sorted(live.stop("ticker")) == ["t1", "t2"]
    assert "".join(weather) == "Rome 22°C sunny light wind"
    assert sorted(stopped) == ["t1", "t2"]


async def test_live_rejects_unknown_or_non_streaming_tools() -> None:
    live = LiveToolStream(tools=[watch_weather], session_id="s")
    with pytest.raises(RuntimeUsageError, match="not a streaming tool"):
        live.start(FunctionCall(id="x", name="nope", args={}))


async def test_live_handler_error_ends_only_its_call() -> None:
    @streaming_tool
    async def broken(city: str) -> AsyncIterator[str]:
        """Fails after one chunk."""
        yield "first"
        raise RuntimeError("feed lost")

    async with LiveToolStream(tools=[broken, watch_weather], session_id="s") as live:
        live.start(FunctionCall(id="x", name="broken", args={"city": "Oslo"}))
        live.start(FunctionCall(id="w", name="watch_weather", args={"city": "Oslo"}))
        texts = [(c.call_id, c.text) async for c in live]
    assert ("x", "first") in texts
    assert [t for cid, t in texts if cid == "w"] == ["Oslo 22°C", " sunny", " light wind"]
    assert str(live.errors["x"]) == "feed lost"
