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

from _replay_support import AGENT
from hypothesis import given, settings
from hypothesis import strategies as st
from test_replay_properties import IDEMPOTENT, build, step

from eventstore import Compaction, Content, Event, EventActions, Part
from runtime._compaction import open_item_seq
from runtime.replay import HeadScan, feed_all, pending, plan_resume, recover_confirmations
from runtime.replay._compacted import decision_suffix


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
    start = decision_suffix(with_compaction)
    assert start <= upto  # the bounded part starts no later than the compacted range ends
    assert _decisions(with_compaction[start:]) == expected


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
