"""Hypothesis: a compaction changes no decision of the replay processors.

Over generated logs (the generator of ``test_replay_properties``), a compaction event is put at
any point, covering any range ``runtime.compact`` allows there (never an open item). The
decisions — pending confirmations, calls in doubt, long-running calls, dedup (what the next run
executes), the head rule — are the same with and without it, and the same again when they are
made from the bounded part of the log (``decision_suffix``) instead of the whole log.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from _replay_support import AGENT
from hypothesis import given, settings
from hypothesis import strategies as st
from test_replay_properties import IDEMPOTENT, build, step

from eventstore import Compaction, Content, Event, EventActions, EventStore, Part
from eventstore.cli import analyze
from runtime._compaction import open_item_seq
from runtime.replay import (
    HeadScan,
    feed_all,
    pending,
    plan_resume,
    recover_confirmations,
    session_pending,
)
from runtime.replay._compacted import decision_log, decision_suffix
from runtime.replay._respond import _Lookup


def _shifted(events: list[Event], at: int) -> list[Event]:
    """``events`` with every seq from ``at`` on moved one up (room for the compaction)."""
    return [e if (e.seq or 0) < at else dataclasses.replace(e, seq=(e.seq or 0) + 1)
            for e in events]


def _decisions(events: list[Event]) -> tuple[Any, ...]:
    newest = list(reversed(events))
    head = HeadScan(agent_name=AGENT)
    feed_all(head, newest)
    return (
        plan_resume(newest, agent_name=AGENT, idempotent_tools=IDEMPOTENT),
        recover_confirmations(newest, agent_name=AGENT),
        head.result(),
        pending(events, idempotent_tools=IDEMPOTENT),
        pending(events),
        pending(events, agent_name=AGENT, idempotent_tools=IDEMPOTENT),
    )


def _call_statuses(events: list[Event]) -> dict[str, tuple[str, str]]:
    """Where each call stands as ``evs show`` (forwards) and ``evs respond`` (newest first,
    stopping at the call) read it: the status the answer APIs act on."""
    timeline = analyze(events)
    statuses: dict[str, tuple[str, str]] = {}
    for call_id, record in timeline.calls.items():
        if record.is_confirmation:
            continue
        lookup = _Lookup(call_id)
        feed_all(lookup, reversed(events))
        statuses[call_id] = (timeline.status(call_id), lookup.status())
    return statuses


def _check_compaction_changes_nothing(
    steps: list[tuple[Any, ...]], *, at: int, upto: int, author: str
) -> None:
    """A compaction by ``author`` after the ``at``-th event covering ``1..upto`` of the log
    ``build([("user", 9), *steps])`` changes no decision, whole log or bounded part."""
    events = build([("user", 9), *steps]).events
    open_seq, _ = open_item_seq(events[:at])
    assert upto <= (open_seq - 1 if open_seq else at)  # a range runtime.compact allows
    compaction = Event(
        author=author, seq=at + 1, timestamp=1.0,
        actions=EventActions(compaction=Compaction(
            start_seq=1, end_seq=upto, summary=Content(role="user", parts=(Part(text="s"),)))),
    )
    shifted = _shifted(events, at + 1)
    without = shifted  # the same events at the same seqs, no compaction (a gap at at + 1)
    with_compaction = [*shifted[:at], compaction, *shifted[at:]]

    expected = _decisions(without)
    assert _decisions(with_compaction) == expected
    assert _call_statuses(with_compaction) == _call_statuses(without)
    start = decision_suffix(with_compaction)
    assert start <= upto  # the bounded part starts no later than the compacted range ends
    assert _decisions(with_compaction[start:]) == expected


@settings(max_examples=400, deadline=None)
@given(st.lists(step, max_size=40), st.data())
def test_compaction_changes_no_processor_decision(
    steps: list[tuple[Any, ...]], data: st.DataObject
) -> None:
    # A first user message: every log has a range a compaction may cover.
    events = build([("user", 9), *steps]).events
    at = data.draw(st.integers(1, len(events)), label="compaction after event")
    open_seq, _ = open_item_seq(events[:at])
    allowed = open_seq - 1 if open_seq else at
    upto = data.draw(st.integers(1, allowed), label="upto")
    author = data.draw(st.sampled_from(["user", AGENT]), label="author")
    _check_compaction_changes_nothing(steps, at=at, upto=upto, author=author)


# Cases the property found; ``st.data()`` cannot be given to ``@example``, so they are spelled
# out here and checked on every run.
@pytest.mark.parametrize(
    ("steps", "at", "upto", "author"),
    [
        pytest.param(
            # user, model call c1-0, a user answer to an unknown confirmation id, then the
            # call's result: one user turn of two events, with the agent's compaction between
            [("model", ["get_weather"]), ("answer", 0, "yes"), ("result", 0)], 3, 1, AGENT,
            id="agent-compaction-inside-a-user-turn",
        ),
        pytest.param(
            # call c1-0 answered, compacted; then a confirmation request for it (it can never
            # be answered): the bounded part must reach back to the call to see its response
            [("model", ["get_weather"]), ("respond", 0), ("user", 0), ("model", []),
             ("confirm", 0)], 3, 3, "user",
            id="request-after-compaction-for-a-call-before-it",
        ),
        pytest.param(
            # two confirmations answered apart, the agent's compaction between the answers:
            # one user turn still, so both calls stand confirmed_not_run (call_status too)
            [("model", ["charge_card", "charge_card"]), ("confirm", 0), ("confirm", 1),
             ("answer", 0, "yes"), ("answer", 1, "yes")], 7, 1, AGENT,
            id="agent-compaction-between-two-answers-of-a-turn",
        ),
    ],
)
def test_compaction_changes_no_processor_decision_found_cases(
    steps: list[tuple[Any, ...]], at: int, upto: int, author: str
) -> None:
    _check_compaction_changes_nothing(steps, at=at, upto=upto, author=author)


@settings(max_examples=200, deadline=None)
@given(st.lists(step, max_size=30))
def test_compaction_at_head_is_refused_across_every_open_item(
    steps: list[tuple[Any, ...]],
) -> None:
    events = build(steps).events
    open_seq, call_id = open_item_seq(events)
    report = pending(events)
    seqs = [item.seq for item in report if item.seq is not None]
    if seqs:
        assert 0 < open_seq <= min(seqs)  # every reported item is open
    if open_seq:  # the item's event holds a call: the call itself or its confirmation request
        assert call_id
        assert any(e.function_calls() for e in events if e.seq == open_seq)
    else:
        assert not seqs


async def test_compaction_pending_from_the_store_reads_back_to_the_call_a_request_names(
    store: EventStore,
) -> None:
    # Call c1-0 answered, then compacted; a request for it after the compaction (it can never be
    # answered) is reported as the whole log reports it, not as an open confirmation.
    history = build([("user", 9), ("model", ["get_weather"]), ("respond", 0), ("user", 0),
                     ("model", []), ("confirm", 0)])
    events = [dataclasses.replace(e, seq=None) for e in history.events]
    await store.create_session(app_name="weather", user_id="u", session_id="s")
    await store.append("s", events[:3], expected_version=0)
    await store.compact("s", upto=3, summary="the weather was asked and given")
    await store.append("s", events[3:], expected_version=4)
    whole = await store.read("s")

    log, _ = await decision_log(store, "s")
    assert log[0].seq == 2  # the model turn holding the call the request names
    report = await session_pending(store, "s")
    assert report == pending(whole)
    assert [(item.kind, item.call.id) for item in report] == [("refused", "c1-0")]
