"""Compaction in the loop: a resumed run sends the model the summary and the tail, nothing else;
open items refuse a compaction; ``Agent(compaction=...)`` compacts by itself."""

from __future__ import annotations

from typing import Any

import pytest

from eventstore import Content, Event, EventStore, FunctionCall, Part, StoreUsageError
from runtime import (
    DEFAULT_SUMMARY_INSTRUCTION,
    Agent,
    CompactionConfig,
    CompactionRefusedError,
    ModelResponse,
    Runner,
    RuntimeUsageError,
    ScriptedModel,
    SummaryRequest,
    compact,
    function_tool,
)
from runtime.replay import session_pending

AGENT = "weather_agent"


@function_tool
def get_weather(city: str) -> dict[str, Any]:
    """Return the weather of a city.

    Args:
        city: The city name.
    """
    return {"city": city, "condition": "sunny"}


@function_tool(is_long_running=True)
def book_flight(city: str) -> None:
    """Book a flight; the booking system answers later.

    Args:
        city: Where to.
    """


def user(text: str) -> Content:
    return Content(role="user", parts=(Part(text=text),))


def said(text: str) -> Content:
    return Content(role="model", parts=(Part(text=text),))


def runner(store: EventStore, steps: list[Any], **agent: Any) -> tuple[Runner, ScriptedModel]:
    model = ScriptedModel(steps)
    built = Agent(name=AGENT, model=model, tools=[get_weather, book_flight], **agent)
    return Runner(agent=built, store=store, app_name="weather"), model


async def test_resumed_run_after_compaction_sends_exactly_summary_and_tail(
    store: EventStore,
) -> None:
    first, _ = runner(store, [
        ModelResponse(function_calls=(FunctionCall(id="w1", name="get_weather",
                                                   args={"city": "Paris"}),)),
        "Paris is sunny.",
        "Tomorrow too.",
    ])
    session = await first.create_session(user_id="u")
    one = await first.run(session_id=session.id, user_id="u", new_message="Weather in Paris?")
    await first.run(session_id=session.id, user_id="u", new_message="And tomorrow?")
    summary = "The user asked about Paris: sunny today."
    event = await compact(store, session.id, upto=one.version, summary=summary)
    assert event.actions.compaction is not None
    assert (event.actions.compaction.start_seq, event.actions.compaction.end_seq) == (
        1, one.version)
    assert len(await store.read(session.id)) == event.seq  # nothing was deleted

    # A fresh runner (as in a new process) resumes from the database alone.
    second, model = runner(store, [
        ModelResponse(function_calls=(FunctionCall(id="w1", name="get_weather",
                                                   args={"city": "Rome"}),)),
        "Rome is sunny.",
    ])
    await second.run(session_id=session.id, user_id="u", new_message="Rome?")
    assert model.requests[0].contents == [
        user(summary), user("And tomorrow?"), said("Tomorrow too."), user("Rome?")]
    # The model reused id w1 (it never saw the first one); the log keeps ids unique, and the
    # model is sent back the id it gave.
    stored = [c.id for e in await store.read(session.id) for c in e.function_calls()]
    assert len(stored) == len(set(stored)) == 2
    followed = model.requests[1].contents
    assert followed[-2].parts[0].function_call is not None
    assert followed[-2].parts[0].function_call.id == "w1"
    assert followed[-1].parts[0].function_response is not None
    assert followed[-1].parts[0].function_response.id == "w1"


async def test_compaction_refuses_an_open_long_running_call_and_names_the_limit(
    store: EventStore,
) -> None:
    run, _ = runner(store, [
        ModelResponse(function_calls=(FunctionCall(id="b1", name="book_flight",
                                                   args={"city": "Oslo"}),)),
    ])
    session = await run.create_session(user_id="u")
    result = await run.run(session_id=session.id, user_id="u", new_message="Book Oslo")
    assert result.status == "paused_long_running"
    with pytest.raises(CompactionRefusedError, match="'b1' at seq 2 is still open") as refused:
        await compact(store, session.id, upto=result.version, summary="s")
    assert (refused.value.function_call_id, refused.value.seq, refused.value.max_upto) == (
        "b1", 2, 1)
    assert await store.version(session.id) == result.version  # nothing written
    before = await session_pending(store, session.id)
    event = await compact(store, session.id, summary="The user wants to fly to Oslo.")
    assert event.actions.compaction is not None
    assert event.actions.compaction.end_seq == 1  # the default stops before the open call
    assert await session_pending(store, session.id) == before


async def test_compaction_checks_its_range_and_its_inputs(store: EventStore) -> None:
    await store.create_session(app_name="weather", user_id="u", session_id="s")
    await store.append("s", [Event(author="user", content=user(f"m{i}")) for i in range(3)],
                       expected_version=0)
    with pytest.raises(RuntimeUsageError, match="needs a summary"):
        await compact(store, "s", upto=2)
    with pytest.raises(CompactionRefusedError, match=r"has events 1\.\.3"):
        await compact(store, "s", upto=4, summary="s")
    await compact(store, "s", upto=2, summary="first two")
    with pytest.raises(StoreUsageError, match="compacted up to seq 2 already"):
        await compact(store, "s", upto=2, summary="again")
    with pytest.raises(StoreUsageError, match="non-empty text"):
        await store.compact("s", upto=3, summary="  ")
    history = await store.read_compacted("s")
    assert history.summary is not None
    assert history.summary.summary == user("first two")
    assert [e.seq for e in history.events] == [3]


async def test_read_compacted_reads_the_tail_not_the_history(store: EventStore) -> None:
    await store.create_session(app_name="weather", user_id="u", session_id="long")
    batch = [Event(author="user", content=user(f"m{i}")) for i in range(600)]
    await store.append("long", batch, expected_version=0)
    await store.compact("long", upto=590, summary="590 messages")
    await store.append("long", [Event(author="user", content=user("late"))],
                       expected_version=601)
    history = await store.read_compacted("long")
    assert [e.seq for e in history.events] == [*range(591, 601), 602]
    assert history.rows_read == 16  # one page: the compaction, the ten before it, the one after
    whole = await store.read_compacted("long", upto=590)
    assert whole.compaction is None
    assert len(whole.events) == whole.rows_read == 590


class FixedSummarizer:
    def __init__(self) -> None:
        self.asked: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> str:
        self.asked.append(request)
        return f"summary {len(self.asked)} of {len(request.events)} events"


async def test_agent_compacts_every_n_invocations(store: EventStore) -> None:
    summarizer = FixedSummarizer()
    run, model = runner(store, ["one", "two", "three"],
                        compaction=CompactionConfig(every_invocations=2, summarizer=summarizer))
    session = await run.create_session(user_id="u")
    first = await run.run(session_id=session.id, user_id="u", new_message="1")
    assert [e.actions.compaction for e in first.events] == [None, None]
    second = await run.run(session_id=session.id, user_id="u", new_message="2")
    assert second.status == "completed"
    made = second.events[-1].actions.compaction
    assert made is not None
    assert (made.start_seq, made.end_seq) == (1, 4)
    assert summarizer.asked[0].previous is None
    assert [e.seq for e in summarizer.asked[0].events] == [1, 2, 3, 4]
    third = await run.run(session_id=session.id, user_id="u", new_message="3")
    assert model.requests[2].contents == [user("summary 1 of 4 events"), user("3")]
    assert third.final_text == "three"
    # With no new message, a compacted session that ended on a final answer stays completed.
    again = await run.run(session_id=session.id, user_id="u")
    assert (again.status, again.events) == ("completed", ())


async def test_agent_compacts_past_a_token_budget_with_its_own_model(store: EventStore) -> None:
    run, model = runner(store, ["x" * 400, "The user said hello; I answered at length.", "ok"],
                        compaction=CompactionConfig(token_budget=50))
    session = await run.create_session(user_id="u")
    result = await run.run(session_id=session.id, user_id="u", new_message="hello")
    assert result.final_text == "x" * 400
    made = result.events[-1].actions.compaction
    assert made is not None
    assert made.summary == user("The user said hello; I answered at length.")
    summary_request = model.requests[1]
    assert summary_request.instructions == [DEFAULT_SUMMARY_INSTRUCTION]
    assert summary_request.contents[:2] == [user("hello"), said("x" * 400)]
    await run.run(session_id=session.id, user_id="u", new_message="bye")
    assert model.requests[2].contents == [made.summary, user("bye")]
