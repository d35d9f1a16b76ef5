"""The resume planner (dedup + crash policy) and the pending report, on hand-written logs."""

from __future__ import annotations

from _replay_support import AGENT, PLACEHOLDER, History, call

from eventstore import Event
from runtime.replay import RERUN_DECISION_KEY, HeadScan, feed_all, pending, plan_resume


def test_resume_call_never_started_is_executed() -> None:
    history = History()
    history.user("weather?")
    lookup = call("get_weather", city="Tokyo")
    history.model(lookup)
    decision = plan_resume(history.newest_first(), agent_name=AGENT)
    assert [(p.call, p.reason, p.rerun) for p in decision.execute] == [
        (lookup, "not_started", False)
    ]
    assert decision.pause_reason is None


def test_resume_answered_call_is_never_planned() -> None:
    history = History()
    lookup = call("get_weather", city="Tokyo")
    history.model(lookup)
    history.claim(lookup.id)
    history.respond((lookup, {"temperature_c": 22}))
    decision = plan_resume(
        history.newest_first(), agent_name=AGENT, idempotent_tools=("get_weather",)
    )
    assert decision.execute == ()
    assert decision.in_doubt == ()


def test_resume_started_idempotent_call_is_rerun_and_other_is_in_doubt() -> None:
    history = History()
    lookup = call("get_weather", city="Tokyo")
    charge = call("charge_card", amount=3)
    history.model(lookup, charge)
    history.claim(lookup.id, charge.id)
    decision = plan_resume(
        history.newest_first(), agent_name=AGENT, idempotent_tools=("get_weather",)
    )
    assert [(p.call.id, p.reason, p.rerun) for p in decision.execute] == [
        (lookup.id, "idempotent_rerun", True)
    ]
    assert [d.call.id for d in decision.in_doubt] == [charge.id]
    assert decision.pause_reason is not None
    assert charge.id in decision.pause_reason


def test_resume_rerun_decision_allows_exactly_one_more_execution() -> None:
    history = History()
    charge = call("charge_card", amount=3)
    history.model(charge)
    history.claim(charge.id)
    history.add(Event(author="user", custom_metadata={RERUN_DECISION_KEY: [charge.id]}))
    decision = plan_resume(history.newest_first(), agent_name=AGENT)
    assert [(p.call.id, p.reason) for p in decision.execute] == [(charge.id, "rerun_decided")]
    history.claim(charge.id)  # the re-run crashed as well
    decision = plan_resume(history.newest_first(), agent_name=AGENT)
    assert decision.execute == ()
    assert [d.call.id for d in decision.in_doubt] == [charge.id]


def test_resume_long_running_started_call_waits() -> None:
    history = History()
    job = call("render_video")
    history.model(job, long_running=(job.id,))
    assert [p.call.id for p in plan_resume(history.newest_first(), agent_name=AGENT).execute] == [
        job.id
    ]
    history.claim(job.id)
    decision = plan_resume(history.newest_first(), agent_name=AGENT)
    assert decision.execute == ()
    assert decision.waiting == (job,)
    assert decision.pause_reason is None


def test_resume_confirmed_call_is_executed_with_its_confirmation() -> None:
    history = History()
    lookup = call("get_weather", city="Tokyo")
    history.needs_confirmation(lookup, "confirm-1")
    history.answer("confirm-1", True)
    (planned,) = plan_resume(history.newest_first(), agent_name=AGENT).execute
    assert planned.call == lookup
    assert planned.reason == "confirmed"
    assert planned.confirmation is not None
    assert planned.confirmation.confirmed


def test_resume_confirmed_call_claimed_then_crashed_is_in_doubt_unless_idempotent() -> None:
    history = History()
    lookup = call("get_weather", city="Tokyo")
    history.needs_confirmation(lookup, "confirm-1")
    history.answer("confirm-1", True)
    history.claim(lookup.id)
    assert [d.call.id for d in plan_resume(history.newest_first(), agent_name=AGENT).in_doubt] == [
        lookup.id
    ]
    decision = plan_resume(
        history.newest_first(), agent_name=AGENT, idempotent_tools=("get_weather",)
    )
    assert [(p.call.id, p.reason) for p in decision.execute] == [(lookup.id, "idempotent_rerun")]


def test_resume_refused_answer_pauses_with_reason() -> None:
    history = History()
    lookup = call("get_weather", city="Tokyo")
    history.needs_confirmation(lookup, "confirm-1")
    history.answer("confirm-nope", True)
    decision = plan_resume(history.newest_first(), agent_name=AGENT)
    assert decision.execute == ()
    assert decision.pause_reason is not None
    assert "confirm-nope" in decision.pause_reason


def test_resume_scan_stops_at_the_newest_model_turn() -> None:
    history = History()
    for i in range(100):
        history.user(f"message {i}")
        history.model(text=f"answer {i}")
    lookup = call("get_weather", city="Tokyo")
    history.user("weather?")
    history.model(lookup)
    history.claim(lookup.id)
    events, seen = history.counted()
    plan_resume(events, agent_name=AGENT)
    assert seen[0] == 3


def test_pending_reports_every_kind_with_reasons() -> None:
    history = History()
    history.user("go")
    fresh = call("get_weather", city="Tokyo")
    doubt = call("charge_card", amount=3)
    rerun = call("get_time")
    job = call("render_video")
    paid = call("paid_lookup", city="Osaka")
    history.model(fresh, doubt, rerun, job, paid, long_running=(job.id,))
    history.claim(doubt.id, rerun.id, job.id, paid.id)
    history.respond((paid, PLACEHOLDER))
    history.request(paid, "confirm-paid")
    report = pending(history.events, idempotent_tools=("get_time",))
    assert [(p.kind, p.call.id) for p in report.unanswered] == [
        ("not_started", fresh.id),
        ("will_rerun", rerun.id),
    ]
    assert [(p.call.id, p.confirmation_id) for p in report.confirmations] == [
        (paid.id, "confirm-paid")
    ]
    assert [p.call.id for p in report.long_running] == [job.id]
    assert [p.call.id for p in report.in_doubt] == [doubt.id]
    assert all(p.reason.endswith(".") for p in report)
    assert pending(history.newest_first(), idempotent_tools=("get_time",)) == report
    assert report.next_run.step == "pauses"
    assert report.next_run.executes == (fresh.id, rerun.id)


def test_pending_older_turns_calls_are_abandoned_not_run_by_the_next_run() -> None:
    history = History()
    fresh = call("get_weather", city="Tokyo")
    doubt = call("charge_card", amount=3)
    job = call("render_video")
    history.model(fresh, doubt, job, long_running=(job.id,))
    history.claim(doubt.id, job.id)
    history.model(text="moving on")
    report = pending(history.events, idempotent_tools=())
    assert [(p.kind, p.call.id) for p in report.not_acted_on] == [
        ("abandoned", fresh.id),
        ("abandoned", doubt.id),
    ]
    assert [p.call.id for p in report.long_running] == [job.id]
    assert report.next_run.step == "completed"
    assert report.next_run.executes == ()


def test_pending_answered_confirmation_waits_for_the_next_run_then_clears() -> None:
    history = History()
    paid = call("paid_lookup", city="Osaka")
    history.needs_confirmation(paid, "confirm-paid")
    history.answer("confirm-paid", True)
    (entry,) = pending(history.events)
    assert entry.kind == "confirmed_not_run"
    assert "confirmed" in entry.reason
    history.claim(paid.id)
    history.respond((paid, {"ok": True}))
    assert not pending(history.events)


def test_pending_rejected_confirmation_is_answered_with_the_rejection_not_run() -> None:
    history = History()
    paid = call("paid_lookup", city="Osaka")
    history.needs_confirmation(paid, "confirm-paid")
    history.answer("confirm-paid", False)
    (entry,) = pending(history.events, idempotent_tools=())
    assert entry.kind == "rejected_not_run"
    assert "does not run the tool" in entry.reason
    assert "confirmed" not in entry.reason


def test_pending_confirmation_embedding_other_args_is_refused_as_the_runner_refuses_it() -> None:
    history = History()
    paid = call("paid_lookup", "call-paid", city="Osaka")
    history.model(paid)
    history.claim(paid.id)
    history.respond((paid, PLACEHOLDER))
    history.request(call("paid_lookup", "call-paid", city="Tokyo"), "confirm-paid")
    history.answer("confirm-paid", True)
    report = pending(history.events, idempotent_tools=())
    assert [(p.kind, p.confirmation_id) for p in report] == [("refused", "confirm-paid")]
    assert "embeds" in next(iter(report)).reason
    assert report.next_run.step == "pauses"
    assert report.next_run.executes == ()
    decision = plan_resume(history.newest_first(), agent_name=AGENT)
    assert decision.execute == ()
    assert decision.pause_reason is not None


def _head(history: History) -> tuple[str | None, tuple[str, ...], tuple[str, ...]]:
    scan = HeadScan(agent_name=AGENT)
    feed_all(scan, history.newest_first())
    head = scan.result()
    return head.status, head.waiting, head.answered


def test_head_turn_waits_for_every_long_running_result_news_gives_the_model_a_turn() -> None:
    history = History()
    a, b = call("render_video", n=1), call("render_video", n=2)
    history.model(a, b, long_running=(a.id, b.id))
    history.claim(a.id, b.id)
    assert _head(history) == ("paused_long_running", (a.id, b.id), ())
    history.result(a, {"url": "a"}, author="webhook")
    assert _head(history) == ("paused_long_running", (b.id,), (a.id,))
    history.result(b, {"url": "b"})
    assert _head(history) == (None, (), ())  # every result is in: the model sees them


def test_head_result_of_an_older_turns_call_or_a_message_gives_the_model_a_turn() -> None:
    history = History()
    old, new = call("render_video", n=1), call("render_video", n=2)
    history.model(old, long_running=(old.id,))
    history.claim(old.id)
    history.user("And another one")
    history.model(new, long_running=(new.id,))
    history.claim(new.id)
    assert _head(history) == ("paused_long_running", (new.id,), ())
    history.result(old, {"url": "old"})
    assert _head(history)[0] is None  # news about another turn's call
    third = call("render_video", n=3)
    history.model(third, long_running=(third.id,))
    history.claim(third.id)
    assert _head(history) == ("paused_long_running", (third.id,), ())
    history.user("Any news?")
    assert _head(history)[0] is None
