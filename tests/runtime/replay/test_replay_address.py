"""Two users of one app each hold a session called ``s``: every entry point that answers,
resumes, reports or compacts a session takes ``app_name``/``user_id``, acts on that user's
session only, and refuses the bare id naming both (app, user) choices."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from test_replay_respond import Counter, _paid_call, paid_runner

from eventstore import (
    AmbiguousSessionError,
    Content,
    Event,
    EventStore,
    FunctionCall,
    Part,
)
from runtime import Runner, compact
from runtime.replay import (
    answer_confirmation,
    open_child_sessions,
    rerun_call,
    session_pending,
    submit_response,
)

USERS = ("u", "v")
CHOICES = [("weather", "u"), ("weather", "v")]


async def _both_paused(store: EventStore) -> dict[str, tuple[Runner, Counter, str]]:
    paused: dict[str, tuple[Runner, Counter, str]] = {}
    for user in USERS:
        counter = Counter()
        runner = paid_runner(store, counter, _paid_call(), f"Tokyo is 22°C for {user}.")
        await runner.create_session(user_id=user, session_id="s")
        result = await runner.run(session_id="s", user_id=user, new_message="Tokyo, paid")
        assert result.status == "paused_for_confirmation"
        (cid,) = result.pending_call_ids
        paused[user] = (runner, counter, cid)
    return paused


async def _logs(store: EventStore) -> dict[str, list[Event]]:
    return {user: (await store.get_session("s", app_name="weather", user_id=user)).events
            for user in USERS}


async def _refused(work: Callable[[], Awaitable[Any]]) -> None:
    with pytest.raises(AmbiguousSessionError) as raised:
        await work()
    assert raised.value.session_id == "s"
    assert sorted(raised.value.choices) == CHOICES


async def test_address_confirmation_and_resume_act_on_one_user(store: EventStore) -> None:
    paused = await _both_paused(store)
    cid = paused["u"][2]
    before = await _logs(store)
    await _refused(lambda: answer_confirmation(store, session_id="s", confirmation_id=cid,
                                               confirmed=True))
    await _refused(lambda: session_pending(store, "s", idempotent_tools=()))
    assert await _logs(store) == before

    await answer_confirmation(store, session_id="s", confirmation_id=cid, confirmed=True,
                              app_name="weather", user_id="u")
    after = await _logs(store)
    assert len(after["u"]) == len(before["u"]) + 1
    assert after["v"] == before["v"]
    report_v = await session_pending(store, "s", user_id="v", idempotent_tools=())
    assert [item.kind for item in report_v] == ["confirmation"]
    report_u = await session_pending(store, "s", app_name="weather", user_id="u",
                                     idempotent_tools=())
    assert not report_u.confirmations

    runner, counter, _ = paused["u"]
    result = await runner.run(session_id="s", user_id="u")
    assert result.status == "completed"
    assert result.final_text == "Tokyo is 22°C for u."
    assert counter.calls == [{"city": "Tokyo"}]
    assert paused["v"][1].calls == []
    assert (await _logs(store))["v"] == before["v"]
    assert await open_child_sessions(store, "s", app_name="weather", user_id="v") == []


def _call_event(name: str, call_id: str, *, long_running: bool = False) -> list[Event]:
    call = FunctionCall(id=call_id, name=name, args={"city": "Tokyo"})
    return [
        Event(author="user", content=Content(role="user", parts=(Part(text="go"),))),
        Event(author="weather_agent", turn_complete=True,
              long_running_tool_ids=(call_id,) if long_running else (),
              content=Content(role="model", parts=(Part(function_call=call),))),
        Event(author="weather_agent", started_call_ids=(call_id,)),
    ]


async def _both_holding(store: EventStore, events: list[Event]) -> dict[str, list[Event]]:
    for user in USERS:
        session = await store.create_session(app_name="weather", user_id=user, session_id="s")
        await store.append("s", events, expected_version=session.version, app_name="weather",
                           user_id=user)
    return await _logs(store)


async def test_address_respond_acts_on_one_user(store: EventStore) -> None:
    before = await _both_holding(store, _call_event("order_report", "c1", long_running=True))
    await _refused(lambda: submit_response(store, session_id="s", call_id="c1",
                                           response={"ok": True}))
    event = await submit_response(store, session_id="s", call_id="c1", response={"ok": True},
                                  user_id="v")
    after = await _logs(store)
    assert after["u"] == before["u"]
    assert after["v"] == [*before["v"], event]


async def test_address_rerun_acts_on_one_user(store: EventStore) -> None:
    before = await _both_holding(store, _call_event("charge", "c1"))
    await _refused(lambda: rerun_call(store, session_id="s", call_id="c1"))
    event = await rerun_call(store, session_id="s", call_id="c1", app_name="weather",
                             user_id="u")
    after = await _logs(store)
    assert after["v"] == before["v"]
    assert after["u"] == [*before["u"], event]


async def test_address_compact_acts_on_one_user(store: EventStore) -> None:
    finished = [Event(author="user", content=Content(role="user", parts=(Part(text="hi"),))),
                Event(author="weather_agent", turn_complete=True,
                      content=Content(role="model", parts=(Part(text="hello"),)))]
    before = await _both_holding(store, finished)
    await _refused(lambda: compact(store, "s", summary="said hello"))
    event = await compact(store, "s", summary="said hello", user_id="u")
    after = await _logs(store)
    assert after["v"] == before["v"]
    assert after["u"] == [*before["u"], event]
    assert event.actions.compaction is not None
    assert event.actions.compaction.end_seq == len(before["u"])
