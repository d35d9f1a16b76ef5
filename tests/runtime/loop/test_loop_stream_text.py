"""Streaming model text: run_events(stream_text=True) yields partial events; turns are stored."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from eventstore import Event, EventStore, FunctionCall
from runtime import (
    Agent,
    ModelRequest,
    ModelResponse,
    Runner,
    RuntimeUsageError,
    ScriptedModel,
    StreamingModel,
    function_tool,
)


@function_tool
def get_weather(city: str) -> dict[str, object]:
    """Return the weather of a city.

    Args:
        city: The city name.
    """
    return {"city": city, "temperature_c": 22}


class StreamedTurns:
    """A fake streaming model: each turn is (deltas, response); records how it was called."""

    def __init__(self, turns: Sequence[tuple[list[str], ModelResponse | None]]) -> None:
        self.turns = list(turns)
        self.calls: list[str] = []
        self.closed = 0
        self.gate: asyncio.Event | None = None

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.calls.append("generate")
        response = self.turns.pop(0)[1]
        assert response is not None
        return response

    async def generate_stream(self, request: ModelRequest) -> AsyncIterator[str | ModelResponse]:
        self.calls.append("stream")
        deltas, response = self.turns.pop(0)
        try:
            for number, delta in enumerate(deltas):
                if number == 1 and self.gate is not None:
                    await self.gate.wait()
                yield delta
            if response is not None:
                yield response
        finally:
            self.closed += 1


def _turns() -> list[tuple[list[str], ModelResponse | None]]:
    call = FunctionCall(id="c1", name="get_weather", args={"city": "Paris"})
    return [
        (["Let me ", "check."], ModelResponse(text="Let me check.", function_calls=(call,))),
        (["Paris: ", "22°C", "."], ModelResponse(text="Paris: 22°C.")),
    ]


async def _run(runner: Runner, **kwargs: bool) -> list[Event]:
    return [
        event
        async for event in runner.run_events(
            session_id="s", user_id="u", new_message="Weather in Paris?", **kwargs
        )
    ]


async def test_stream_text_yields_partials_and_stores_only_the_turns(store: EventStore) -> None:
    model = StreamedTurns(_turns())
    assert isinstance(model, StreamingModel)
    runner = Runner(
        agent=Agent(name="a", model=model, tools=[get_weather]), store=store, app_name="w"
    )
    await runner.create_session(user_id="u", session_id="s")
    seen = await _run(runner, stream_text=True)
    turns = [e for e in seen if e.partial or (e.content and e.content.role == "model")]
    assert [(e.partial, e.text()) for e in turns] == [
        (True, "Let me "),
        (True, "check."),
        (False, "Let me check."),
        (True, "Paris: "),
        (True, "22°C"),
        (True, "."),
        (False, "Paris: 22°C."),
    ]
    partials = [e for e in seen if e.partial]
    assert all(e.seq is None and e.author == "a" for e in partials)
    assert {e.invocation_id for e in seen} == {seen[0].invocation_id}
    stored = await store.read("s")
    assert stored == [e for e in seen if not e.partial]
    assert not any(e.partial for e in stored)
    assert model.calls == ["stream", "stream"]
    assert model.closed == 2


async def test_without_stream_text_the_model_generates(store: EventStore) -> None:
    model = StreamedTurns(_turns())
    runner = Runner(
        agent=Agent(name="a", model=model, tools=[get_weather]), store=store, app_name="w"
    )
    await runner.create_session(user_id="u", session_id="s")
    seen = await _run(runner)
    assert not any(e.partial for e in seen)
    assert model.calls == ["generate", "generate"]


async def test_a_model_that_cannot_stream_still_runs(store: EventStore) -> None:
    runner = Runner(agent=Agent(name="a", model=ScriptedModel(["Hi."])), store=store, app_name="w")
    await runner.create_session(user_id="u", session_id="s")
    seen = await _run(runner, stream_text=True)
    assert [e.text() for e in seen] == ["Weather in Paris?", "Hi."]


async def test_a_stream_without_its_response_stores_no_turn(store: EventStore) -> None:
    model = StreamedTurns([(["half a "], None)])
    runner = Runner(agent=Agent(name="a", model=model), store=store, app_name="w")
    await runner.create_session(user_id="u", session_id="s")
    with pytest.raises(RuntimeUsageError, match="must end with exactly one"):
        await _run(runner, stream_text=True)
    assert [e.author for e in await store.read("s")] == ["user"]


async def test_cancelling_the_consumer_mid_stream_stores_nothing_of_the_turn(
    store: EventStore,
) -> None:
    model = StreamedTurns(_turns())
    model.gate = asyncio.Event()  # the second delta never comes
    runner = Runner(
        agent=Agent(name="a", model=model, tools=[get_weather]), store=store, app_name="w"
    )
    await runner.create_session(user_id="u", session_id="s")
    first_partial = asyncio.Event()

    async def consume() -> None:
        async for event in runner.run_events(
            session_id="s", user_id="u", new_message="Weather in Paris?", stream_text=True
        ):
            if event.partial:
                first_partial.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_partial.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [e.author for e in await store.read("s")] == ["user"]
    assert model.closed == 1
