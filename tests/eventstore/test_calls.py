"""The call ledger: what the log says of each call, and what a resumer owes it."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventstore import (
    CLAIMED_BY_KEY,
    DEFERRED_CALLS_KEY,
    RERUN_DECISION_KEY,
    CallLedger,
    Content,
    Deferrals,
    Event,
    FunctionCall,
    FunctionResponse,
    Part,
    claim_event,
    idempotency_key,
)


def _turn(*call_ids: str) -> Event:
    parts = tuple(
        Part(function_call=FunctionCall(id=c, name="charge", args={"n": i}))
        for i, c in enumerate(call_ids)
    )
    return Event(author="agent", content=Content(role="model", parts=parts))


def _answer(call_id: str, response: dict[str, object]) -> Event:
    part = Part(function_response=FunctionResponse(id=call_id, name="charge", response=response))
    return Event(author="agent", content=Content(role="user", parts=(part,)))


def _claim(*call_ids: str) -> Event:
    return claim_event(session_id="s", call_ids=call_ids, author="agent", invocation_id="i")


def _rerun(*call_ids: str) -> Event:
    return Event(author="user", custom_metadata={RERUN_DECISION_KEY: list(call_ids)})


PLACEHOLDER = {"error": {"kind": "confirmation_required", "tool": "charge", "message": "wait"}}


@pytest.mark.parametrize(
    ("events", "idempotent", "decision"),
    [
        pytest.param([_turn("c")], False, "run", id="never-claimed"),
        pytest.param([_turn("c"), _claim("c")], False, "in_doubt", id="claimed-no-response"),
        pytest.param([_turn("c"), _claim("c")], True, "rerun", id="idempotent-may-rerun"),
        pytest.param(
            [_turn("c"), _claim("c"), _answer("c", {"ok": 1})], False, "settled", id="answered"
        ),
        pytest.param(
            [_turn("c"), _claim("c"), _rerun("c")], False, "rerun", id="rerun-decided"
        ),
        pytest.param(
            [_turn("c"), _claim("c"), _rerun("c"), _claim("c")],
            False,
            "in_doubt",
            id="decision-used-by-a-newer-claim",
        ),
        pytest.param(
            [_turn("c"), _rerun("c"), _claim("c")], False, "in_doubt", id="decision-before-claim"
        ),
        pytest.param(
            [_turn("c"), _answer("c", PLACEHOLDER)], False, "waits_for_confirmation",
            id="placeholder",
        ),
        pytest.param(
            [_turn("c"), _answer("c", PLACEHOLDER), _claim("c"), _answer("c", {"ok": 1})],
            False,
            "settled",
            id="confirmed-then-run",
        ),
    ],
)
def test_calls_decision(events: list[Event], idempotent: bool, decision: str) -> None:
    assert CallLedger.of(events).get("c").decision(idempotent=idempotent) == decision


def test_calls_first_response_wins() -> None:
    events = [_turn("c"), _claim("c"), _answer("c", {"n": 1}), _answer("c", {"n": 2})]
    ledger = CallLedger.of(events)
    assert ledger.get("c").response == {"n": 1}


def test_calls_claim_event_carries_keys_and_claimant() -> None:
    claim = _claim("a", "b")
    assert claim.started_call_ids == ("a", "b")
    assert claim.custom_metadata["idempotency_keys"] == {
        "a": idempotency_key("s", "a"),
        "b": idempotency_key("s", "b"),
    }
    assert set(claim.custom_metadata[CLAIMED_BY_KEY]) == {"invocation_id", "host", "pid", "at"}


def test_calls_runtime_uses_the_same_objects() -> None:
    import eventstore
    import runtime
    import runtime.replay

    assert runtime.idempotency_key is eventstore.idempotency_key
    assert runtime.replay.CLAIMED_BY_KEY == eventstore.CLAIMED_BY_KEY


_steps = st.lists(
    st.sampled_from(["claim", "answer", "placeholder", "rerun"]), max_size=8
)


@given(_steps)
def test_calls_ledger_is_a_function_of_the_log(steps: list[str]) -> None:
    make = {
        "claim": lambda: _claim("c"),
        "answer": lambda: _answer("c", {"ok": True}),
        "placeholder": lambda: _answer("c", PLACEHOLDER),
        "rerun": lambda: _rerun("c"),
    }
    events = [_turn("c"), *(make[s]() for s in steps)]
    first, second = CallLedger.of(events).get("c"), CallLedger.of(list(events)).get("c")
    assert first == second
    if "answer" in steps:
        assert first.decision() == "settled"


def test_calls_placeholder_seq_says_whether_a_claim_ended_asking_for_confirmation() -> None:
    """A tool that asks for its own confirmation runs (is claimed) until it asks: its claim is
    older than the placeholder; the confirmed run's claim is newer."""
    asked = [_turn("c"), _claim("c"), _answer("c", PLACEHOLDER)]
    seqd = [dataclasses.replace(e, seq=i) for i, e in enumerate(asked, start=1)]
    record = CallLedger.of(seqd).get("c")
    assert (record.last_claim_seq, record.placeholder_seq) == (2, 3)
    again = CallLedger.of([*seqd, dataclasses.replace(_claim("c"), seq=4)]).get("c")
    assert (again.last_claim_seq, again.placeholder_seq) == (4, 3)


@pytest.mark.parametrize("key", [
    pytest.param(DEFERRED_CALLS_KEY, id="protocol"),
    pytest.param("pydantic_ai_deferred_call_ids", id="written-before-the-protocol"),
])
def test_calls_deferral_counts_until_a_newer_claim_both_ways(key: str) -> None:
    deferral = Event(author="agent", custom_metadata={key: ["c1"]})
    logs = {
        "deferred": [_turn("c1", "c2"), _claim("c1", "c2"), deferral],
        "claimed again": [_turn("c1", "c2"), _claim("c1", "c2"), deferral, _claim("c1")],
    }
    for name, events in logs.items():
        forwards, backwards = Deferrals(), Deferrals(newest_first=True)
        for event in events:
            forwards.feed(event)
        for event in reversed(events):
            backwards.feed(event)
        expected = name == "deferred"
        assert ("c1" in forwards, "c1" in backwards) == (expected, expected), name
        assert "c2" not in forwards
        assert "c2" not in backwards
        assert CallLedger.of(events).get("c1").deferred is expected


def test_calls_deferral_of_a_call_never_claimed_before_it_is_none_both_ways() -> None:
    # A door writes a deferral after the call's claim; one with no claim before it (a log
    # edited by hand) defers nothing, for the ledger and for either direction of the scan.
    deferral = Event(author="agent", custom_metadata={DEFERRED_CALLS_KEY: ["c1"]})
    logs = {
        "no claim": ([_turn("c1"), deferral], False),
        "claimed after it": ([_turn("c1"), deferral, _claim("c1")], False),
        "claimed before it": ([_turn("c1"), _claim("c1"), deferral], True),
    }
    for name, (events, expected) in logs.items():
        forwards, backwards = Deferrals(), Deferrals(newest_first=True)
        for event in events:
            forwards.feed(event)
        for event in reversed(events):
            backwards.feed(event)
        assert ("c1" in forwards, "c1" in backwards) == (expected, expected), name
        assert CallLedger.of(events).get("c1").deferred is expected, name
