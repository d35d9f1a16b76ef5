"""Streaming tools in the live loop (seed 000): pending response stored at once, chunks to the
caller (and a live-input model) as they arrive, stop_streaming, and every end logged."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from eventstore import (
    Content,
    Event,
    EventStore,
    FunctionCall,
    FunctionResponse,
    Part,
    StoreClosedError,
    open_store,
)
from runtime import (
    Agent,
    AgentCallbacks,
    ModelRequest,
    ModelResponse,
    Runner,
    ScriptedModel,
    ToolContext,
    streaming_tool,
)
from runtime._live import LIVE_CHUNK_KEY, LIVE_STREAM_ENDED_KEY


class LiveScripted(ScriptedModel):
    """A scripted model that also takes live input (like a realtime session)."""

    def __init__(self, steps: list[Any]) -> None:
        super().__init__(steps)
        self.live_inputs: list[Content] = []

    async def send_live_input(self, content: Content) -> None:
        self.live_inputs.append(content)


finished = asyncio.Event()
seen_chunks: list[str] = []
three_chunks = asyncio.Event()


@streaming_tool
async def watch(city: str) -> AsyncIterator[str]:
    """Stream three weather updates."""
    try:
        for text in (f"{city} 22°C", "sunny", "light wind"):
            await asyncio.sleep(0.01)
            yield text
    finally:
        finished.set()


@streaming_tool
async def ticker(symbol: str, tool_context: ToolContext) -> AsyncIterator[str]:
    """Stream prices until stopped."""
    n = 0
    while not tool_context.cancelled:
        seen_chunks.append(f"{symbol}:{n}")
        if len(seen_chunks) == 3:
            three_chunks.set()
        yield f"{symbol}:{n}"
        n += 1
        await asyncio.sleep(0.005)


def _ended(events: list[Event]) -> list[dict[str, Any]]:
    return [
        e.custom_metadata[LIVE_STREAM_ENDED_KEY]
        for e in events
        if LIVE_STREAM_ENDED_KEY in e.custom_metadata
    ]


async def test_live_stream_answers_at_once_and_streams_chunks_as_they_arrive(
    store: EventStore,
) -> None:
    global finished
    finished = asyncio.Event()  # one per test: an Event belongs to one event loop
    tool_callbacks: list[str] = []

    async def when_done(request: ModelRequest) -> ModelResponse:
        await finished.wait()  # the chunks arrive while the model "thinks"
        return ModelResponse(text="Oslo: sunny, light wind.")

    model = LiveScripted(
        [
            ModelResponse.calling(FunctionCall(id="w1", name="watch", args={"city": "Oslo"})),
            when_done,
        ]
    )
    agent = Agent(
        name="a",
        model=model,
        tools=[watch],
        callbacks=AgentCallbacks(
            before_tool=(lambda tool, args, ctx: tool_callbacks.append(tool.name),),
        ),
    )
    runner = Runner(agent=agent, store=store, app_name="app", live=True)
    await runner.create_session(user_id="u", session_id="s")

    seen = [e async for e in runner.run_events(session_id="s", user_id="u", new_message="go")]

    chunks = [e for e in seen if e.partial]
    assert [c.custom_metadata[LIVE_CHUNK_KEY]["text"] for c in chunks] == [
        "Oslo 22°C",
        "sunny",
        "light wind",
    ]
    assert all(c.seq is None for c in chunks)
    assert chunks[0].text() == "Function watch returned: Oslo 22°C"
    final_at = next(i for i, e in enumerate(seen) if e.text() == "Oslo: sunny, light wind.")
    assert max(seen.index(c) for c in chunks) < final_at  # yielded during the model call
    assert [c.parts[0].text for c in model.live_inputs] == [
        "Function watch returned: Oslo 22°C",
        "Function watch returned: sunny",
        "Function watch returned: light wind",
    ]

    stored = await store.read("s")
    assert [e.seq for e in seen if not e.partial] == [e.seq for e in stored]
    assert not any(e.partial for e in stored)
    (pending,) = stored[3].function_responses()
    assert pending.id == "w1"
    assert pending.response["status"] == "pending"
    assert pending.response["streaming"] is True
    assert stored[4].text() == "Oslo: sunny, light wind."
    assert _ended(stored) == [
        {"call_id": "w1", "tool": "watch", "reason": "completed", "chunks": 3, "error": None}
    ]
    assert tool_callbacks == []  # the live branch bypasses the tool callbacks (seed rule)
    assert "stop_streaming" in [d.name for d in model.requests[1].declarations]
    assert "stop_streaming" not in [d.name for d in model.requests[0].declarations]
    # a run with nothing new: complete, without a model call (the end event is bookkeeping)
    again = await runner.run(session_id="s", user_id="u")
    assert (again.status, again.final_text, again.events) == (
        "completed",
        "Oslo: sunny, light wind.",
        (),
    )


async def test_live_stop_streaming_by_the_model_is_logged(store: EventStore) -> None:
    global three_chunks
    seen_chunks.clear()
    three_chunks = asyncio.Event()

    async def stop_after_some(request: ModelRequest) -> ModelResponse:
        await three_chunks.wait()
        return ModelResponse.calling(
            FunctionCall(id="x1", name="stop_streaming", args={"function_name": "ticker"})
        )

    model = ScriptedModel(
        [
            ModelResponse.calling(FunctionCall(id="t1", name="ticker", args={"symbol": "ACME"})),
            stop_after_some,
            "Stopped the ticker.",
        ]
    )
    runner = Runner(
        agent=Agent(name="a", model=model, tools=[ticker]), store=store, app_name="app", live=True
    )
    await runner.create_session(user_id="u", session_id="s")

    result = await runner.run(session_id="s", user_id="u", new_message="watch ACME")

    assert (result.status, result.final_text) == ("completed", "Stopped the ticker.")
    stored = await store.read("s")
    answers = {r.id: r.response for e in stored for r in e.function_responses()}
    assert answers["x1"] == {"stopped_call_ids": ["t1"]}
    [end] = _ended(stored)
    assert (end["call_id"], end["reason"]) == ("t1", "stopped")
    assert end["chunks"] >= 3
    stop_at = next(
        i for i, e in enumerate(stored) if any(r.id == "x1" for r in e.function_responses())
    )
    assert stop_at < next(
        i for i, e in enumerate(stored) if LIVE_STREAM_ENDED_KEY in e.custom_metadata
    )
    # stop_streaming is declared only while a stream runs
    assert "stop_streaming" not in [d.name for d in model.requests[2].declarations]


async def test_live_caller_stopping_cancels_the_stream_and_logs_it(store: EventStore) -> None:
    async def never(request: ModelRequest) -> ModelResponse:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    model = ScriptedModel(
        [ModelResponse.calling(FunctionCall(id="t1", name="ticker", args={"symbol": "Z"})), never]
    )
    runner = Runner(
        agent=Agent(name="a", model=model, tools=[ticker]), store=store, app_name="app", live=True
    )
    await runner.create_session(user_id="u", session_id="s")
    chunks = 0
    async with contextlib.aclosing(
        runner.run_events(session_id="s", user_id="u", new_message="go")
    ) as events:
        async for event in events:
            chunks += event.partial
            if chunks == 2:
                break
    stored = await store.read("s")
    [end] = _ended(stored)
    assert (end["call_id"], end["reason"]) == ("t1", "cancelled")
    assert len(stored) == 5  # user, turn, claim, pending response, the end


async def test_live_caller_stopping_after_the_first_chunk_logs_the_end_at_the_head(
    store: EventStore,
) -> None:
    # The first chunk arrives while the step's response event is being appended: the stop
    # cancels that append's caller after the store took it, so the invocation's version is old.
    model = ScriptedModel(
        [ModelResponse.calling(FunctionCall(id="t1", name="ticker", args={"symbol": "Z"})),
         "Watching."]
    )
    runner = Runner(
        agent=Agent(name="a", model=model, tools=[ticker]), store=store, app_name="app", live=True
    )
    await runner.create_session(user_id="u", session_id="s")
    async with contextlib.aclosing(
        runner.run_events(session_id="s", user_id="u", new_message="go")
    ) as events:
        async for event in events:
            if event.partial:
                break
    stored = await store.read("s")
    [end] = _ended(stored)
    assert (end["call_id"], end["reason"]) == ("t1", "cancelled")
    assert LIVE_STREAM_ENDED_KEY in stored[-1].custom_metadata
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))


async def test_live_caller_stopping_reports_an_end_that_cannot_be_appended(
    tmp_path: Path,
) -> None:
    async def never(request: ModelRequest) -> ModelResponse:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    model = ScriptedModel(
        [ModelResponse.calling(FunctionCall(id="t1", name="ticker", args={"symbol": "Y"})), never]
    )
    path = tmp_path / "gone.db"
    store = await open_store(path, auto_upgrade=True)
    runner = Runner(
        agent=Agent(name="a", model=model, tools=[ticker]), store=store, app_name="app", live=True
    )
    await runner.create_session(user_id="u", session_id="s")

    async def consume() -> None:
        answered = False
        async with contextlib.aclosing(
            runner.run_events(session_id="s", user_id="u", new_message="go")
        ) as events:
            async for event in events:
                answered = answered or bool(event.function_responses())
                if answered and event.partial:  # the loop waits for the model now
                    await store.aclose()  # the store goes away before the caller stops
                    break

    with pytest.raises(StoreClosedError):
        await consume()
    async with await open_store(path) as reopened:
        assert _ended(await reopened.read("s")) == []
        again = Runner(agent=Agent(name="a", model=ScriptedModel(["ok"]), tools=[ticker]),
                       store=reopened, app_name="app", live=True)
        await again.run(session_id="s", user_id="u", new_message="still there?")
        [end] = _ended(await reopened.read("s"))
        assert end["reason"] == "interrupted"


async def test_live_restart_reports_a_stream_of_a_dead_process_as_ended(
    store: EventStore,
) -> None:
    await store.create_session(app_name="app", user_id="u", session_id="s")
    call = FunctionCall(id="t1", name="ticker", args={"symbol": "Q"})
    pending = {"status": "pending", "streaming": True, "message": "..."}
    await store.append(
        "s",
        [
            Event(author="user", content=Content(role="user", parts=(Part(text="go"),))),
            Event(author="a", content=Content(role="model", parts=(Part(function_call=call),))),
            Event(author="a", started_call_ids=("t1",)),
            Event(
                author="a",
                content=Content(
                    role="user",
                    parts=(
                        Part(
                            function_response=FunctionResponse(
                                id="t1", name="ticker", response=pending
                            )
                        ),
                    ),
                ),
            ),
        ],
        expected_version=0,
    )  # ... and then the process died with the stream running

    model = ScriptedModel(["The ticker stopped when the process restarted."])
    runner = Runner(
        agent=Agent(name="a", model=model, tools=[ticker]), store=store, app_name="app", live=True
    )
    seen = [
        e async for e in runner.run_events(session_id="s", user_id="u", new_message="still there?")
    ]

    assert LIVE_STREAM_ENDED_KEY in seen[0].custom_metadata  # reported first, never resumed
    stored = await store.read("s")
    assert _ended(stored) == [
        {"call_id": "t1", "tool": "ticker", "reason": "interrupted", "chunks": 0, "error": None}
    ]
    assert stored[4].seq == 5
    assert LIVE_STREAM_ENDED_KEY in stored[4].custom_metadata
    assert not any(e.partial for e in seen)
    # a second live run finds nothing open any more
    again = Runner(
        agent=Agent(name="a", model=ScriptedModel(["ok"]), tools=[ticker]),
        store=store,
        app_name="app",
        live=True,
    )
    await again.run(session_id="s", user_id="u", new_message="and now?")
    assert len(_ended(await store.read("s"))) == 1


async def test_live_wait_stops_streams_still_running_when_the_invocation_ends(
    store: EventStore,
) -> None:
    model = ScriptedModel(
        [
            ModelResponse.calling(FunctionCall(id="t1", name="ticker", args={"symbol": "W"})),
            "Watching.",
        ]
    )
    runner = Runner(
        agent=Agent(name="a", model=model, tools=[ticker]),
        store=store,
        app_name="app",
        live=True,
        live_wait=0.05,
    )
    await runner.create_session(user_id="u", session_id="s")
    result = await runner.run(session_id="s", user_id="u", new_message="go")
    assert result.final_text == "Watching."
    [end] = _ended(await store.read("s"))
    assert end["reason"] == "invocation_ended"
    assert end["chunks"] >= 1
