"""One truth: where ``evs show`` / ``evs web`` say a call stands (``Timeline.status``, the
``call_status`` rule) is what ``pending()`` reports for it, on generated logs."""

from __future__ import annotations

from typing import Any

from _replay_support import AGENT, History, call
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_replay_properties import build, step

from eventstore import DEFERRED_CALLS_KEY, Event
from eventstore.commands import analyze
from runtime.replay import feed_all, pending
from runtime.replay._respond import _Lookup

# pending()'s kind of a call -> the statuses the log-only reading may give it. pending() knows
# more in two places: an older turn's call no run executes (abandoned) and an in-doubt call a
# decision allows to re-run (will_rerun) are, from the log alone, still started or not started.
AGREES = {
    "not_started": {"not_started"},
    "will_rerun": {"in_doubt"},
    "confirmed_not_run": {"confirmed_not_run"},
    "rejected_not_run": {"rejected_not_run"},
    "confirmation": {"awaiting_confirmation"},
    "long_running": {"long_running"},
    "in_doubt": {"in_doubt"},
    "idempotency_unknown": {"in_doubt"},
    # pending() reports a request superseded; the call itself may have an answer since, or a
    # claim after the answer (some run started it anyway): then it reads as started.
    "superseded": {"superseded", "answered", "in_doubt", "long_running"},
    # A refused answer is about an answer, not the call: the call stands as the rest of the
    # log says, but never as one a run acts on (a malformed answer answers nothing: its
    # request still awaits one).
    "refused": {"refused", "superseded", "answered", "not_started", "in_doubt", "long_running",
                "awaiting_confirmation"},
    "abandoned": {"in_doubt", "not_started", "long_running"},
}


@settings(max_examples=500, deadline=None)
@given(st.lists(step, max_size=30))
# Logs the generator found where the readers disagreed (2026-12-08): an approval claimed after
# it beside another open request; a long-running call started on its approval; deferrals
# after an answer and with no claim before them.
@example([("model", ["get_weather"]), ("confirm", 0), ("confirm", 0), ("answer", 0, "yes"),
          ("claim", 0)])
@example([("model", ["get_weather"]), ("confirm", 0), ("confirm", 0), ("answer", 1, "yes"),
          ("claim", 0)])
@example([("model", ["render"]), ("confirm", 0), ("answer", 0, "yes"), ("claim", 0)])
@example([("model", ["get_weather"]), ("claim", 0), ("confirm", 0), ("answer", 0, "yes"),
          ("defer", 0)])
@example([("model", ["get_weather"]), ("defer", 0)])
def test_call_status_is_what_pending_reports(steps: list[tuple[Any, ...]]) -> None:
    history = build(steps)
    timeline = analyze(history.events)
    report = pending(history.events, agent_name=AGENT)
    items: dict[str, list[str]] = {}
    for item in report:
        if item.call.id in timeline.calls and not timeline.calls[item.call.id].is_confirmation:
            items.setdefault(item.call.id, []).append(item.kind)
    for call_id, kinds in items.items():
        status = timeline.status(call_id)
        # A call pending() lists under several requests: the one the status reads is among them.
        assert any(status in AGREES[k] for k in kinds), (call_id, kinds, status)
    for call_id, record in timeline.calls.items():
        if record.is_confirmation or record.author != "weather_agent" or call_id in items:
            continue
        # Not reported by pending(): answered, or nothing waits on it.
        assert timeline.status(call_id) in ("answered", "not_started", "in_doubt"), (
            call_id, timeline.status(call_id))


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=30))
def test_call_status_reads_the_same_forwards_and_backwards(steps: list[tuple[Any, ...]]) -> None:
    # evs show / evs web read the log forwards (a timeline); the answer APIs newest first,
    # stopping at the call: both gather the facts of the one rule, and agree.
    history = build(steps)
    timeline = analyze(history.events)
    for call_id, record in timeline.calls.items():
        if record.is_confirmation or record.author == "user":
            continue
        lookup = _Lookup(call_id)
        feed_all(lookup, history.newest_first())
        assert lookup.status() == timeline.status(call_id), call_id
        found = timeline.confirmation_of(call_id)
        assert lookup.confirmation_id() == (found.confirmation_id if found else None)


def test_call_status_deferred_call_is_long_running_until_claimed_again() -> None:
    # A tool that deferred its result while it ran (pydantic-ai's CallDeferred) cannot mark
    # its model turn: the deferral after its claim makes the call long-running for every reader.
    history = History()
    history.user("render it")
    history.model(call("charge_card", "c1"))
    history.claim("c1")
    history.add(Event(author=AGENT, custom_metadata={DEFERRED_CALLS_KEY: ["c1"]}))

    def readings() -> tuple[list[str], str, str, str]:
        report = pending(history.events, agent_name=AGENT, idempotent_tools=["charge_card"])
        lookup = _Lookup("c1")
        feed_all(lookup, history.newest_first())
        return ([p.kind for p in report], report.next_run.step,
                analyze(history.events).status("c1"), lookup.status())

    assert readings() == (["long_running"], "waits", "long_running", "long_running")
    history.claim("c1")  # claimed again after the deferral: this execution may have crashed
    assert readings() == (["will_rerun"], "calls_model", "in_doubt", "in_doubt")
