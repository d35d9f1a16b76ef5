"""AgentTool(emit_internal_events=True): the child's events reach the parent's event stream,
marked as the child's, and are never stored in the parent's log (seed 004)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from eventstore import Event, EventStore, FunctionCall
from runtime import (
    FORWARDED_FROM_KEY,
    Agent,
    AgentTool,
    ModelResponse,
    Runner,
    ScriptedModel,
    function_tool,
)
from runtime.replay import child_session_id


@function_tool
def forecast(city: str) -> dict[str, Any]:
    """Return a forecast."""
    return {"city": city, "summary": "dry"}


def _runner(store: EventStore, *, emit: bool, live: bool = False) -> Runner:
    child = Agent(
        name="weather_helper",
        model=ScriptedModel(
            [ModelResponse.calling(FunctionCall(id="c1", name="forecast", args={"city": "Rome"})),
             "Rome stays dry."]
        ),
        tools=[forecast],
    )
    parent = Agent(
        name="planner",
        model=ScriptedModel(
            [ModelResponse.calling(FunctionCall(id="p1", name="weather_helper",
                                                args={"request": "Rome?"})),
             "Pack light."]
        ),
        tools=[AgentTool(child, store=store, emit_internal_events=emit)],
    )
    return Runner(agent=parent, store=store, app_name="trip", live=live)


def _forwarded(events: list[Event]) -> list[Event]:
    return [e for e in events if FORWARDED_FROM_KEY in e.custom_metadata]


@pytest.mark.parametrize("live", [pytest.param(False, id="loop"), pytest.param(True, id="live")])
async def test_child_events_are_forwarded_marked_and_never_stored_in_the_parent(
    store: EventStore, live: bool
) -> None:
    runner = _runner(store, emit=True, live=live)
    await runner.create_session(user_id="u", session_id="trip")

    seen = [e async for e in runner.run_events(session_id="trip", user_id="u",
                                                new_message="Plan Rome")]

    child_id = child_session_id("trip", "p1")
    child_log = await store.read(child_id)
    forwarded = _forwarded(seen)
    # every event of the child's run, in its order, marked as the child's
    assert [e.id for e in forwarded] == [e.id for e in child_log[1:]]  # not the link event
    assert {e.author for e in forwarded} == {"user", "weather_helper"}
    assert all(e.custom_metadata[FORWARDED_FROM_KEY] == {
        "agent": "weather_helper", "session_id": child_id, "function_call_id": "p1"}
        for e in forwarded)
    assert forwarded[-1].text() == "Rome stays dry."
    # they come before the parent's answer to the call, in the parent's stream
    answer_at = next(i for i, e in enumerate(seen)
                     if e.function_responses() and FORWARDED_FROM_KEY not in e.custom_metadata)
    assert max(seen.index(e) for e in forwarded) < answer_at
    # never in the parent's log, nor in its result
    parent_log = await store.read("trip")
    assert not _forwarded(parent_log)
    assert {e.id for e in parent_log}.isdisjoint(e.id for e in forwarded)
    assert [e.id for e in seen if FORWARDED_FROM_KEY not in e.custom_metadata] == [
        e.id for e in parent_log]
    (answer,) = parent_log[3].function_responses()
    assert answer.response == {"result": "Rome stays dry."}


async def test_child_events_are_not_forwarded_unless_asked(store: EventStore) -> None:
    runner = _runner(store, emit=False)
    await runner.create_session(user_id="u", session_id="trip")
    seen = [e async for e in runner.run_events(session_id="trip", user_id="u",
                                                new_message="Plan Rome")]
    assert _forwarded(seen) == []
    assert [e.id for e in seen] == [e.id for e in await store.read("trip")]


async def test_run_on_event_sees_the_forwarded_events(store: EventStore) -> None:
    runner = _runner(store, emit=True)
    await runner.create_session(user_id="u", session_id="trip")
    seen: list[Event] = []
    result = await runner.run(session_id="trip", user_id="u", new_message="Plan Rome",
                              on_event=seen.append)
    assert result.final_text == "Pack light."
    child_log = await store.read(child_session_id("trip", "p1"))
    assert [e.id for e in _forwarded(seen)] == [e.id for e in child_log[1:]]
    assert [e.id for e in result.events] == [e.id for e in await store.read("trip")]


@pytest.mark.parametrize("live", [pytest.param(False, id="loop"), pytest.param(True, id="live")])
async def test_child_events_reach_the_parent_stream_while_the_child_still_runs(
    store: EventStore, live: bool
) -> None:
    seen_claim = asyncio.Event()

    @function_tool
    async def survey(city: str) -> dict[str, Any]:
        """Survey a city; it waits until the parent's caller has seen the child's claim."""
        try:
            await asyncio.wait_for(seen_claim.wait(), timeout=5)
        except TimeoutError:
            return {"caller_saw_the_claim": False}
        return {"caller_saw_the_claim": True}

    child = Agent(
        name="surveyor",
        model=ScriptedModel(
            [ModelResponse.calling(FunctionCall(id="c1", name="survey", args={"city": "Rome"})),
             "Surveyed."]
        ),
        tools=[survey],
    )
    parent = Agent(
        name="planner",
        model=ScriptedModel(
            [ModelResponse.calling(FunctionCall(id="p1", name="surveyor",
                                                args={"request": "Rome?"})),
             "Done."]
        ),
        tools=[AgentTool(child, store=store, emit_internal_events=True)],
    )
    runner = Runner(agent=parent, store=store, app_name="trip", live=live)
    await runner.create_session(user_id="u", session_id="trip")
    async for event in runner.run_events(session_id="trip", user_id="u", new_message="go"):
        if FORWARDED_FROM_KEY in event.custom_metadata and event.started_call_ids == ("c1",):
            seen_claim.set()  # the child's tool is running now, waiting for this
    child_log = await store.read(child_session_id("trip", "p1"))
    [answer] = [r.response for e in child_log for r in e.function_responses()]
    assert answer == {"caller_saw_the_claim": True}


async def test_grandchild_events_reach_the_root_stream_while_the_grandchild_still_runs(
    store: EventStore,
) -> None:
    seen_claim = asyncio.Event()

    @function_tool
    async def survey(city: str) -> dict[str, Any]:
        """Survey a city; it waits until the root's caller has seen this call's claim."""
        try:
            await asyncio.wait_for(seen_claim.wait(), timeout=5)
        except TimeoutError:
            return {"caller_saw_the_claim": False}
        return {"caller_saw_the_claim": True}

    def calling(call_id: str, name: str, **args: Any) -> ModelResponse:
        return ModelResponse.calling(FunctionCall(id=call_id, name=name, args=args))

    grandchild = Agent(name="surveyor", tools=[survey],
                       model=ScriptedModel([calling("g1", "survey", city="Rome"), "Surveyed."]))
    child = Agent(name="organizer",
                  tools=[AgentTool(grandchild, store=store, emit_internal_events=True)],
                  model=ScriptedModel([calling("c1", "surveyor", request="Rome"), "Organized."]))
    root = Agent(name="planner",
                 tools=[AgentTool(child, store=store, emit_internal_events=True)],
                 model=ScriptedModel([calling("p1", "organizer", request="Trip"), "Done."]))
    runner = Runner(agent=root, store=store, app_name="trip")
    await runner.create_session(user_id="u", session_id="trip")
    grandchild_id = child_session_id(child_session_id("trip", "p1"), "c1")
    async for event in runner.run_events(session_id="trip", user_id="u", new_message="go"):
        mark = event.custom_metadata.get(FORWARDED_FROM_KEY)
        if mark is not None and event.started_call_ids == ("g1",):
            assert mark["session_id"] == grandchild_id  # the grandchild's own mark is kept
            seen_claim.set()
    [answer] = [r.response for e in await store.read(grandchild_id)
                for r in e.function_responses()]
    assert answer == {"caller_saw_the_claim": True}
