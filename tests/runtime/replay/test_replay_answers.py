"""Answers at the edges: text beside an answer, superseded requests, a response is final, and
results only where one is awaited."""

from __future__ import annotations

import dataclasses

import pytest
from _replay_support import PLACEHOLDER, History, call
from test_replay_respond import AGENT, Counter, _paid_call, _paused, paid_runner

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    Content,
    Event,
    EventStore,
    FunctionCall,
    FunctionResponse,
    Part,
    ToolConfirmation,
)
from runtime import (
    CallAlreadyAnsweredError,
    ConfirmationSupersededError,
    ModelRequest,
    ModelResponse,
    ResultNotAwaitedError,
)
from runtime.replay import answer_confirmation, pending, submit_response


def _answer(cid: str, confirmed: bool, *, text: str | None = None) -> Content:
    parts: list[Part] = [] if text is None else [Part(text=text)]
    parts.append(
        Part(
            function_response=FunctionResponse(
                id=cid, name=REQUEST_CONFIRMATION_FUNCTION, response={"confirmed": confirmed}
            )
        )
    )
    return Content(role="user", parts=tuple(parts))


async def _events(store: EventStore) -> list[Event]:
    return (await store.get_session("s")).events


async def test_answers_text_and_answer_in_one_user_event_acts_on_both(store: EventStore) -> None:
    seen: list[str] = []

    def final(request: ModelRequest) -> ModelResponse:
        seen.extend(p.text for c in request.contents for p in c.parts if p.text)
        return ModelResponse(text="Paid lookup done: 22°C.")

    counter = Counter()
    runner, cid = await _paused(store, counter, final)
    result = await runner.run(
        session_id="s", user_id="u", new_message=_answer(cid, True, text="Yes, go ahead")
    )
    assert counter.calls == [{"city": "Tokyo"}]
    assert result.status == "completed"
    assert "Yes, go ahead" in seen  # the text is the user's message of that turn
    assert not pending(await _events(store), idempotent_tools=())
    with pytest.raises(CallAlreadyAnsweredError):
        await answer_confirmation(store, session_id="s", confirmation_id=cid, confirmed=True)


async def test_answers_superseded_confirmation_is_refused_and_runs_nothing(
    store: EventStore,
) -> None:
    counter = Counter()
    runner, cid = await _paused(store, counter, "OK, I will not pay.")
    moved_on = await runner.run(session_id="s", user_id="u", new_message="never mind, don't pay")
    assert moved_on.final_text == "OK, I will not pay."
    message = moved_on.events[0]

    with pytest.raises(ConfirmationSupersededError) as raised:
        await answer_confirmation(store, session_id="s", confirmation_id=cid, confirmed=True)
    assert raised.value.message_id == message.id
    assert raised.value.message_seq == message.seq
    assert message.id in str(raised.value)
    [entry] = [p for p in pending(await _events(store), idempotent_tools=()) if p.kind]
    assert (entry.kind, entry.confirmation_id) == ("superseded", cid)

    # An answer appended directly (bypassing the API) executes nothing either.
    await store.append("s", Event(author="user", content=_answer(cid, True)), expected_version=None)
    again = await runner.run(session_id="s", user_id="u")
    assert counter.calls == []
    assert again.status == "paused_by_planner"
    assert again.pause_reason is not None
    assert "superseded" in again.pause_reason


async def test_answers_a_call_with_a_response_never_runs_again(store: EventStore) -> None:
    counter = Counter()
    runner, cid = await _paused(store, counter, "Tokyo is 22°C.", "It already ran.")
    await answer_confirmation(store, session_id="s", confirmation_id=cid, confirmed=True)
    assert (await runner.run(session_id="s", user_id="u")).status == "completed"
    assert counter.calls == [{"city": "Tokyo"}]

    # An imported or edited log: the agent asks again for the call that already ran.
    request = FunctionCall(
        id="confirm-again",
        name=REQUEST_CONFIRMATION_FUNCTION,
        args={
            "originalFunctionCall": {
                "id": "call-w",
                "name": "paid_weather",
                "args": {"city": "Tokyo"},
            },
            "toolConfirmation": {"hint": "again?", "confirmed": False, "payload": None},
        },
    )
    await store.append(
        "s",
        Event(
            author=AGENT,
            content=Content(role="model", parts=(Part(function_call=request),)),
            long_running_tool_ids=("confirm-again",),
        ),
        expected_version=None,
    )
    with pytest.raises(CallAlreadyAnsweredError, match="never runs again"):
        await answer_confirmation(
            store, session_id="s", confirmation_id="confirm-again", confirmed=True
        )
    # The request holds the next run: the report says why nothing can answer it.
    report = pending(await _events(store), idempotent_tools=())
    assert report.next_run.step == "waits"
    [held] = report.not_acted_on
    assert (held.kind, held.confirmation_id, held.call.id) == ("refused", "confirm-again", "call-w")
    assert "cannot be answered" in held.reason
    await store.append(
        "s", Event(author="user", content=_answer("confirm-again", True)), expected_version=None
    )
    assert not pending(await _events(store), idempotent_tools=())
    last = await runner.run(session_id="s", user_id="u")
    assert counter.calls == [{"city": "Tokyo"}]
    assert not any(e.started_call_ids for e in last.events)


async def test_answers_result_for_a_never_started_paid_call_is_refused(store: EventStore) -> None:
    counter = Counter()
    runner = paid_runner(store, counter)
    await runner.create_session(user_id="u", session_id="s")
    ctx = await runner.new_context(session_id="s", user_id="u")
    await ctx.append(ctx.new_event(content=_paid_call().content(), turn_complete=True))
    before = await _events(store)
    with pytest.raises(ResultNotAwaitedError, match="never started"):
        await submit_response(store, session_id="s", call_id="call-w", response={"ok": True})
    assert await _events(store) == before


async def test_answers_confirmation_embedding_other_args_is_one_decision(
    store: EventStore,
) -> None:
    # An edited or imported log: the request embeds other arguments than the stored call.
    history = History()
    history.user("Tokyo, paid lookup")
    stored = call("paid_weather", "call-w", city="Tokyo")
    history.model(stored)
    history.claim(stored.id)
    history.respond((stored, PLACEHOLDER), confirmations={stored.id: ToolConfirmation(hint="pay?")})
    history.request(call("paid_weather", "call-w", city="Paris"), "confirm-w")
    counter = Counter()
    runner = paid_runner(store, counter)
    await runner.create_session(user_id="u", session_id="s")
    await store.append("s", [dataclasses.replace(e, seq=None) for e in history.events],
                       expected_version=0)

    [asked] = pending(await _events(store), idempotent_tools=()).confirmations
    # said before anyone answers:
    assert "embeds paid_weather({'city': 'Paris'})" in asked.reason
    assert "an answer to it is refused and the next run pauses" in asked.reason
    await answer_confirmation(store, session_id="s", confirmation_id="confirm-w", confirmed=True)

    report = pending(await _events(store), idempotent_tools=())
    assert report  # something waits: the next run pauses on the refusal
    [refused] = report.not_acted_on
    assert (refused.kind, refused.confirmation_id) == ("refused", "confirm-w")
    assert refused.reason.endswith("and pauses.")
    assert report.next_run.step == "pauses"
    result = await runner.run(session_id="s", user_id="u")
    assert (result.status, result.pause_reason) == ("paused_by_planner", report.next_run.reason)
    assert counter.calls == []
