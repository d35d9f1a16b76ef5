"""Confirmation recovery: the accepted shapes, every refusal, dedup and the early stop."""

from __future__ import annotations

import orjson
import pytest
from _replay_support import AGENT, PLACEHOLDER, History, call

from eventstore import ToolConfirmation
from runtime.replay import recover_confirmations


def _paid_history() -> tuple[History, object]:
    history = History()
    history.user("weather in Tokyo, paid lookup")
    original = call("get_weather", "call-weather-1", city="Tokyo")
    history.needs_confirmation(original, "confirm-1")
    return history, original


def test_confirmations_confirmed_answer_returns_original_call_with_stored_args() -> None:
    history, original = _paid_history()
    history.answer("confirm-1", True, payload={"budget": 3})
    recovery = recover_confirmations(history.newest_first(), agent_name=AGENT)
    assert recovery.refusals == ()
    (confirmed,) = recovery.calls
    assert confirmed.call == original
    assert confirmed.confirmation == ToolConfirmation(
        hint="pay?", confirmed=True, payload={"budget": 3}
    )
    assert confirmed.confirmation_id == "confirm-1"
    assert not confirmed.started_after_answer


def test_confirmations_rejected_answer_is_returned_with_confirmed_false() -> None:
    history, _ = _paid_history()
    history.answer("confirm-1", False)
    (confirmed,) = recover_confirmations(history.newest_first(), agent_name=AGENT).calls
    assert confirmed.confirmation.confirmed is False


def test_confirmations_json_string_answer_is_accepted() -> None:
    history, original = _paid_history()
    history.answer("confirm-1", raw={"response": orjson.dumps({"confirmed": True}).decode()})
    (confirmed,) = recover_confirmations(history.newest_first(), agent_name=AGENT).calls
    assert confirmed.call == original
    assert confirmed.confirmation.confirmed is True


def test_confirmations_plain_user_message_answers_nothing_and_stops_at_once() -> None:
    history, _ = _paid_history()
    history.answer("confirm-1", True)
    history.user("actually, never mind")
    events, seen = history.counted()
    recovery = recover_confirmations(events, agent_name=AGENT)
    assert recovery.calls == ()
    assert recovery.refusals == ()
    assert seen[0] == 1


def test_confirmations_scan_stops_at_the_original_call() -> None:
    history = History()
    for i in range(50):
        history.user(f"old message {i}")
        history.model(text=f"old answer {i}")
    original = call("get_weather", city="Tokyo")
    history.needs_confirmation(original, "confirm-x")
    history.answer("confirm-x", True)
    events, seen = history.counted()
    assert len(recover_confirmations(events, agent_name=AGENT).calls) == 1
    assert seen[0] == 5  # answer, request, response, claim, model call


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param({"confirmed": "yes"}, "'confirmed' must be true or false", id="not-bool"),
        pytest.param({"response": "{not json"}, "not valid JSON", id="bad-json"),
        pytest.param({"response": "[1, 2]"}, "decodes to a list", id="json-not-object"),
        pytest.param({"confirmed": True, "extra": 1}, "unexpected keys", id="extra-key"),
        pytest.param({}, "'confirmed' must be", id="empty"),
    ],
)
def test_confirmations_malformed_answer_is_refused_with_reason(
    raw: dict[str, object], fragment: str
) -> None:
    history, _ = _paid_history()
    history.answer("confirm-1", raw=raw)
    recovery = recover_confirmations(history.newest_first(), agent_name=AGENT)
    assert recovery.calls == ()
    (refusal,) = recovery.refusals
    assert refusal.kind == "malformed"
    assert "confirm-1" in refusal.reason
    assert fragment in refusal.reason


def test_confirmations_never_issued_id_is_refused() -> None:
    history, _ = _paid_history()
    history.answer("confirm-unknown", True)
    recovery = recover_confirmations(history.newest_first(), agent_name=AGENT)
    assert recovery.calls == ()
    assert [r.kind for r in recovery.refusals] == ["never_issued"]


@pytest.mark.parametrize("forger", ["user", "other_agent"])
def test_confirmations_forged_request_is_refused(forger: str) -> None:
    history = History()
    history.user("hi")
    target = call("transfer_money", "call-evil", amount=10_000)
    history.model(target, agent=forger) if forger != "user" else None
    history.request(target, "confirm-forged", agent=forger)
    history.answer("confirm-forged", True)
    recovery = recover_confirmations(history.newest_first(), agent_name=AGENT)
    assert recovery.calls == ()
    (refusal,) = recovery.refusals
    assert refusal.kind == "forged"
    assert forger in refusal.reason


def test_confirmations_embedded_call_differing_from_stored_call_is_refused() -> None:
    history = History()
    stored = call("get_weather", "call-w", city="Tokyo")
    history.model(stored)
    history.claim(stored.id)
    history.respond((stored, {"error": {"kind": "confirmation_required"}}))
    tampered = call("get_weather", "call-w", city="Paris")
    history.request(tampered, "confirm-w")
    history.answer("confirm-w", True)
    recovery = recover_confirmations(history.newest_first(), agent_name=AGENT)
    assert recovery.calls == ()
    (refusal,) = recovery.refusals
    assert refusal.kind == "mismatch"
    assert "Paris" in refusal.reason


def test_confirmations_original_call_not_emitted_by_the_agent_is_refused() -> None:
    history = History()
    history.user("hi")
    ghost = call("get_weather", "call-ghost", city="Tokyo")
    history.request(ghost, "confirm-g")
    history.answer("confirm-g", True)
    (refusal,) = recover_confirmations(history.newest_first(), agent_name=AGENT).refusals
    assert refusal.kind == "never_issued"
    assert "call-ghost" in refusal.reason


def test_confirmations_id_mapping_to_different_original_calls_is_ambiguous() -> None:
    history = History()
    first = call("get_weather", "call-a", city="Tokyo")
    second = call("get_weather", "call-b", city="Osaka")
    history.model(first, second)
    history.claim(first.id, second.id)
    history.respond((first, PLACEHOLDER), (second, PLACEHOLDER))
    history.request(first, "confirm-dup")
    history.request(second, "confirm-dup")
    history.answer("confirm-dup", True)
    recovery = recover_confirmations(history.newest_first(), agent_name=AGENT)
    assert recovery.calls == ()
    assert [r.kind for r in recovery.refusals] == ["ambiguous"]


def test_confirmations_answering_twice_runs_the_call_once() -> None:
    history, original = _paid_history()
    history.answer("confirm-1", True)
    assert len(recover_confirmations(history.newest_first(), agent_name=AGENT).calls) == 1
    history.claim(original.id)
    history.respond((original, {"temperature_c": 22}))
    history.model(text="It is 22°C in Tokyo.")
    history.answer("confirm-1", True)
    recovery = recover_confirmations(history.newest_first(), agent_name=AGENT)
    assert recovery.calls == ()
    assert [r.kind for r in recovery.refusals] == ["already_answered"]


def test_confirmations_call_answered_after_the_answer_is_dropped() -> None:
    history, original = _paid_history()
    history.answer("confirm-1", True)
    history.claim(original.id)
    history.respond((original, {"temperature_c": 22}))
    recovery = recover_confirmations(history.newest_first(), agent_name=AGENT)
    assert recovery.calls == ()
    assert recovery.refusals == ()
    assert recovery.already_handled == (original.id,)


def test_confirmations_claim_after_answer_is_reported() -> None:
    history, original = _paid_history()
    history.answer("confirm-1", True)
    history.claim(original.id)
    (confirmed,) = recover_confirmations(history.newest_first(), agent_name=AGENT).calls
    assert confirmed.started_after_answer


def test_confirmations_parallel_requests_keep_request_order_and_dedupe() -> None:
    history = History()
    a = call("get_weather", "call-a", city="Tokyo")
    b = call("get_weather", "call-b", city="Osaka")
    history.model(a, b)
    history.claim(a.id, b.id)
    history.respond((a, PLACEHOLDER), (b, PLACEHOLDER))
    history.request(a, "confirm-a")
    history.request(b, "confirm-b")
    history.request(a, "confirm-a2")
    history.answer("confirm-b", True)
    history.answer("confirm-a2", True)
    history.answer("confirm-a", True)
    history.answer("confirm-a", True)
    recovery = recover_confirmations(history.newest_first(), agent_name=AGENT)
    assert recovery.refusals == ()
    assert [c.call.id for c in recovery.calls] == ["call-a", "call-b"]
    assert recovery.calls[0].confirmation_id == "confirm-a"


def test_confirmations_conflicting_answers_for_one_call_are_refused() -> None:
    history = History()
    a = call("get_weather", "call-a", city="Tokyo")
    history.needs_confirmation(a, "confirm-1")
    history.request(a, "confirm-2")
    history.answer("confirm-1", True)
    history.answer("confirm-2", False)
    recovery = recover_confirmations(history.newest_first(), agent_name=AGENT)
    assert recovery.calls == ()
    assert {r.kind for r in recovery.refusals} == {"ambiguous"}


def test_confirmations_other_agents_requests_are_ignored_for_this_agent() -> None:
    history = History()
    a = call("get_weather", "call-a", city="Tokyo")
    history.needs_confirmation(a, "confirm-1", agent="other_agent")
    history.answer("confirm-1", True)
    recovery = recover_confirmations(history.newest_first(), agent_name=AGENT)
    assert recovery.calls == ()
    assert [r.kind for r in recovery.refusals] == ["forged"]
    other = recover_confirmations(history.newest_first(), agent_name="other_agent")
    assert [c.call.id for c in other.calls] == ["call-a"]


def test_confirmations_answer_followed_by_a_result_in_the_same_turn_is_acted_on() -> None:
    from eventstore import Content, Event, FunctionResponse, Part

    history = History()
    history.user("paid lookup and a report")
    paid = call("get_weather", "call-paid", city="Tokyo")
    report = call("render", "call-report", n=1)
    history.model(paid, report, long_running=("call-report",))
    history.claim(paid.id, report.id)
    history.respond((paid, PLACEHOLDER))
    history.request(paid, "confirm-paid")
    history.answer("confirm-paid", True)
    # The user's next submission, before any run: the long-running call's result.
    history.add(Event(author="user", content=Content(role="user", parts=(Part(
        function_response=FunctionResponse(id=report.id, name="render",
                                           response={"done": True})),))))
    (confirmed,) = recover_confirmations(history.newest_first(), agent_name=AGENT).calls
    assert confirmed.call == paid


def test_confirmations_a_placeholder_after_an_older_request_does_not_drop_its_answer() -> None:
    history = History()
    paid = call("get_weather", "call-paid", city="Tokyo")
    history.model(paid)
    history.claim(paid.id)
    history.respond((paid, PLACEHOLDER))
    history.request(paid, "confirm-1")
    history.respond((paid, PLACEHOLDER))  # asked again (an imported or edited log)
    history.request(paid, "confirm-2")
    history.answer("confirm-1", True)
    history.answer("confirm-2", True)
    recovery = recover_confirmations(history.newest_first(), agent_name=AGENT)
    assert [c.call.id for c in recovery.calls] == ["call-paid"]
    assert recovery.already_handled == ()
