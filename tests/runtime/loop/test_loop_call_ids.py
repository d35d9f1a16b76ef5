"""Models that reuse call ids: the log stores unique ids, the model is sent its own back."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from eventstore import Content, Event, EventStore, FunctionCall, FunctionResponse, Part
from eventstore.commands._render import PROVIDER_CALL_IDS_KEY as SHOWN_KEY
from eventstore.commands._render import event_entry
from eventstore.commands._timeline import analyze
from eventstore.commands._verify import check_events
from runtime import (
    PROVIDER_CALL_IDS_KEY,
    Agent,
    ModelRequest,
    ModelResponse,
    Runner,
    ScriptedModel,
    build_contents,
    function_tool,
    pending,
    submit_response,
)
from runtime._call_ids import session_call_ids, unique_call_ids, wire_call_ids
from runtime.testing import Recording, replay_recording


def reply(*calls: tuple[str, str], text: str = "") -> ModelResponse:
    """A model turn whose calls are ``(id, city)`` lookups."""
    return ModelResponse(
        text=text,
        function_calls=tuple(
            FunctionCall(id=cid, name="lookup", args={"city": city}) for cid, city in calls
        ),
    )


@function_tool
def lookup(city: str) -> dict[str, Any]:
    """Look a city up.

    Args:
        city: The city name.
    """
    return {"city": city}


@function_tool(is_long_running=True)
def survey(city: str) -> None:
    """Start a survey whose result arrives later.

    Args:
        city: The city name.
    """
    return None


def wire_ids(request: ModelRequest) -> list[tuple[str, str, str]]:
    """``(role, kind, id)`` of every call and response the request sends, in order."""
    found = []
    for content in request.contents:
        for part in content.parts:
            if part.function_call is not None:
                found.append((content.role, "call", part.function_call.id))
            elif part.function_response is not None:
                found.append((content.role, "response", part.function_response.id))
    return found


def all_call_ids(history: list[Event]) -> list[str]:
    return [c.id for e in history for c in e.function_calls()]


async def test_call_0_on_every_turn_and_twice_in_one_turn(store: EventStore) -> None:
    model = ScriptedModel(
        [
            reply(("call_0", "Paris"), ("call_0", "Oslo")),
            reply(("call_0", "Rome")),
            "done",
        ]
    )
    runner = Runner(agent=Agent(name="a", model=model, tools=[lookup]), store=store, app_name="x")
    await runner.create_session(user_id="u", session_id="s")
    result = await runner.run(session_id="s", user_id="u", new_message="go")
    assert result.status == "completed"
    history = await store.read("s")

    ids = all_call_ids(history)
    assert len(set(ids)) == len(ids) == 3
    assert ids[0] == "call_0"
    first, second = (e for e in history if e.function_calls())
    assert first.custom_metadata == {PROVIDER_CALL_IDS_KEY: {ids[1]: "call_0"}}
    assert second.custom_metadata == {PROVIDER_CALL_IDS_KEY: {ids[2]: "call_0"}}
    # Each response answers its own call (the tools ran with the right arguments).
    answers = {r.id: r.response["city"] for e in history for r in e.function_responses()}
    assert answers == {ids[0]: "Paris", ids[1]: "Oslo", ids[2]: "Rome"}
    assert check_events("s", history) == []
    # Each call has its own idempotency key (external side effects are not merged).
    keys = [k for e in history if e.started_call_ids
            for k in e.custom_metadata["idempotency_keys"].values()]
    assert len(set(keys)) == len(keys) == 3
    # evs show --json names the model's id next to the stored one (the first call kept it).
    assert SHOWN_KEY == PROVIDER_CALL_IDS_KEY
    shown = event_entry(first, analyze(history))["calls"]
    assert [c.get("provider_id") for c in shown] == [None, "call_0"]

    # The model is sent back exactly the ids it gave, each response after its own call.
    last = model.requests[2]
    assert wire_ids(last) == [
        ("model", "call", "call_0"),
        ("model", "call", "call_0"),
        ("user", "response", "call_0"),
        ("user", "response", "call_0"),
        ("model", "call", "call_0"),
        ("user", "response", "call_0"),
    ]
    sent = [p.function_response.response["city"] for c in last.contents for p in c.parts
            if p.function_response is not None]
    assert sent == ["Paris", "Oslo", "Rome"]


async def test_long_running_call_with_a_reused_id_is_answered_by_its_stored_id(
    store: EventStore,
) -> None:
    model = ScriptedModel([reply(("call_0", "Paris")),
                           ModelResponse(function_calls=(
                               FunctionCall(id="call_0", name="survey", args={"city": "Oslo"}),)),
                           "thanks"])
    agent = Agent(name="a", model=model, tools=[lookup, survey])
    runner = Runner(agent=agent, store=store, app_name="x")
    await runner.create_session(user_id="u", session_id="s")
    paused = await runner.run(session_id="s", user_id="u", new_message="go")
    assert paused.status == "paused_long_running"
    [waiting] = paused.pending_call_ids
    assert waiting != "call_0"
    report = pending(await store.read("s"), agent_name="a")
    assert [c.call.id for c in report.long_running] == [waiting]

    await submit_response(store, session_id="s", call_id=waiting, response={"score": 9})
    done = await runner.run(session_id="s", user_id="u")
    assert done.status == "completed"
    history = await store.read("s")
    assert check_events("s", history) == []
    assert wire_ids(model.requests[2])[-2:] == [
        ("model", "call", "call_0"),
        ("user", "response", "call_0"),
    ]
    assert model.requests[2].contents[-1].parts[0].function_response.response == {"score": 9}


async def test_a_recorded_session_with_reused_ids_replays_clean(store: EventStore) -> None:
    model = ScriptedModel([reply(("call_0", "Paris"), ("call_0", "Oslo")),
                           reply(("call_0", "Rome")), "done"])
    runner = Runner(agent=Agent(name="a", model=model, tools=[lookup]), store=store, app_name="x")
    await runner.create_session(user_id="u", session_id="s")
    await runner.run(session_id="s", user_id="u", new_message="go")
    recorded = await store.read("s")

    replayed = await replay_recording(
        Recording(app_name="x", user_id="u", session_id="s", events=tuple(recorded)),
        agent=Agent(name="a", model=ScriptedModel([]), tools=[lookup]),
    )
    assert [c.id for e in replayed.events for c in e.function_calls()] == all_call_ids(recorded)


def test_an_id_used_only_by_a_response_counts_as_used() -> None:
    orphan = Event(author="user", content=Content(role="user", parts=(
        Part(function_response=FunctionResponse(id="call_0", name="lookup", response={})),)))
    unique, replaced = unique_call_ids(reply(("call_0", "Paris")), session_call_ids([orphan]))
    [call] = unique.function_calls
    assert replaced == {call.id: "call_0"}


def test_stray_provider_ids_are_ignored() -> None:
    event = Event(
        author="a",
        content=reply(("mine", "Paris")).content(),
        custom_metadata={PROVIDER_CALL_IDS_KEY: {"mine": "call_0", "other": "call_1", "x": 3}},
    )
    assert wire_call_ids(event) == {"mine": "call_0"}
    event = Event(author="a", content=event.content,
                  custom_metadata={PROVIDER_CALL_IDS_KEY: ["not", "a", "mapping"]})
    assert wire_call_ids(event) == {}


MODEL_IDS = st.sampled_from(["call_0", "call_1", "toolu_1", ""])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(MODEL_IDS, min_size=1, max_size=4), min_size=1, max_size=6))
def test_stored_ids_are_unique_and_the_model_gets_its_own_back(turns: list[list[str]]) -> None:
    log: list[Event] = [Event(author="user", content=Content(role="user", parts=(
        Part(text="go"),)))]
    given_ids: list[list[str]] = []
    for number, ids in enumerate(turns):
        response = reply(*((cid, f"{number}.{i}") for i, cid in enumerate(ids)))
        # What the model gave (a call without an id got one when the response was built).
        given_ids.append([c.id for c in response.function_calls])
        response, replaced = unique_call_ids(response, session_call_ids(log))
        log.append(Event(author="a", content=response.content(),
                         custom_metadata={PROVIDER_CALL_IDS_KEY: replaced} if replaced else {}))
        log.append(Event(author="a", content=Content(role="user", parts=tuple(
            Part(function_response=FunctionResponse(id=c.id, name=c.name, response=c.args))
            for c in response.function_calls))))

    stored = all_call_ids(log)
    assert len(stored) == len(set(stored))
    assert check_events("s", [replace(e, seq=n + 1) for n, e in enumerate(log)]) == []
    contents = build_contents(log)
    model_turns = [c for c in contents if c.role == "model"]
    assert [[p.function_call.id for p in c.parts if p.function_call] for c in model_turns] \
        == given_ids
    # Every response follows its own call's turn, in call order, with that call's id and args.
    for number, ids in enumerate(given_ids):
        answers = contents[2 + 2 * number].parts
        assert [(p.function_response.id, p.function_response.response["city"])
                for p in answers if p.function_response] == [
            (cid, f"{number}.{i}") for i, cid in enumerate(ids)
        ]
