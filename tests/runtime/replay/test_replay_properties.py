"""Hypothesis: processors are deterministic, stop early consistently, never plan a call twice."""

from __future__ import annotations

from typing import Any

import orjson
from _replay_support import AGENT, History, call
from hypothesis import event, example, given, settings, target
from hypothesis import strategies as st

from eventstore import (
    DEFERRED_CALLS_KEY,
    REQUEST_CONFIRMATION_FUNCTION,
    Content,
    Event,
    FunctionCall,
    FunctionResponse,
    Part,
    is_placeholder_response,
)
from runtime.replay import (
    RERUN_DECISION_KEY,
    ConfirmationScan,
    ResumeDecision,
    ResumeScan,
    feed_all,
    pending,
    plan_resume,
    recover_confirmations,
)

TOOLS = ("get_weather", "charge_card", "render")
IDEMPOTENT = ("get_weather",)

step = st.one_of(
    st.tuples(st.just("user"), st.integers(0, 3)),
    st.tuples(st.just("model"), st.lists(st.sampled_from(TOOLS), min_size=0, max_size=3)),
    st.tuples(st.just("claim"), st.integers(0, 7)),
    st.tuples(st.just("respond"), st.integers(0, 7)),
    st.tuples(st.just("confirm"), st.integers(0, 7)),
    st.tuples(
        st.just("answer"),
        st.integers(0, 7),
        st.sampled_from(["yes", "no", "json", "malformed", "unknown", "forged"]),
    ),
    st.tuples(st.just("rerun"), st.integers(0, 7)),
    st.tuples(st.just("defer"), st.integers(0, 7)),
    st.tuples(st.just("other_agent"), st.integers(0, 3)),
    st.tuples(st.just("mixed"), st.integers(0, 7), st.booleans()),
    st.tuples(st.just("result"), st.integers(0, 7)),
    st.tuples(st.just("final"), st.integers(0, 3)),
)


def build(steps: list[tuple[Any, ...]]) -> History:
    history = History()
    calls: list[FunctionCall] = []
    cids: list[str] = []
    for index, item in enumerate(steps):
        kind = item[0]
        if kind == "user":
            history.user(f"message {item[1]}")
        elif kind == "model":
            made = [call(name, f"c{index}-{i}", n=i) for i, name in enumerate(item[1])]
            calls.extend(made)
            lr = tuple(c.id for c in made if c.name == "render")
            history.model(*made, long_running=lr, text=None if made else "ok")
        elif kind == "other_agent":
            history.model(call("get_weather", f"o{index}"), agent="other_agent")
        elif not calls:
            continue
        elif kind == "claim":
            history.claim(calls[item[1] % len(calls)].id)
        elif kind == "respond":
            target = calls[item[1] % len(calls)]
            history.respond((target, {"ok": index}))
        elif kind == "confirm":
            target = calls[item[1] % len(calls)]
            cid = f"confirm-{index}"
            cids.append(cid)
            history.respond((target, {"error": {"kind": "confirmation_required"}}))
            history.request(target, cid)
        elif kind == "rerun":
            history.add(
                Event(
                    author="user",
                    custom_metadata={RERUN_DECISION_KEY: [calls[item[1] % len(calls)].id]},
                )
            )
        elif kind == "defer":  # the call's tool said its result comes from outside (§7)
            history.add(Event(author=AGENT, custom_metadata={
                DEFERRED_CALLS_KEY: [calls[item[1] % len(calls)].id]}))
        elif kind == "final":
            history.model(text=f"final {item[1]}")
        elif kind == "result":
            target = calls[item[1] % len(calls)]
            history.add(
                Event(
                    author="user",
                    content=Content(
                        role="user",
                        parts=(
                            Part(
                                function_response=FunctionResponse(
                                    id=target.id, name=target.name, response={"late": index}
                                )
                            ),
                        ),
                    ),
                )
            )
        elif kind == "mixed":
            if not cids:
                continue
            cid = cids[item[1] % len(cids)]
            answer = Part(
                function_response=FunctionResponse(
                    id=cid,
                    name=REQUEST_CONFIRMATION_FUNCTION,
                    response={"confirmed": item[2]},
                )
            )
            history.add(
                Event(
                    author="user",
                    content=Content(role="user", parts=(Part(text="Yes, go ahead"), answer)),
                )
            )
        elif kind == "answer":
            how = item[2]
            cid = cids[item[1] % len(cids)] if cids and how != "unknown" else f"nope-{index}"
            if how == "forged":
                target = calls[item[1] % len(calls)]
                cid = f"forged-{index}"
                history.request(target, cid, agent="user")
            raw: dict[str, Any] = {
                "yes": {"confirmed": True},
                "no": {"confirmed": False, "payload": {"why": "no"}},
                "json": {"response": orjson.dumps({"confirmed": True}).decode()},
                "malformed": {"confirmed": "maybe"},
                "unknown": {"confirmed": True},
                "forged": {"confirmed": True},
            }[how]
            history.answer(cid, raw=raw)
    return history


def _responses_after(history: History, call_id: str, after_seq: int) -> list[int]:
    # A confirmation_required placeholder is no answer: the call did not run (protocol §5).
    return [
        e.seq or 0
        for e in history.events
        if (e.seq or 0) > after_seq and any(
            r.id == call_id and not is_placeholder_response(r.response)
            for r in e.function_responses())
    ]


def _model_seq(history: History, call_id: str) -> int:
    return next(
        e.seq or 0
        for e in history.events
        if e.author == AGENT and any(c.id == call_id for c in e.function_calls())
    )


def _check_never_answered(history: History, decision: ResumeDecision) -> None:
    for planned in decision.execute:
        since = _model_seq(history, planned.call.id)
        if planned.confirmation is not None:
            request = next(
                e
                for e in history.events
                if any(c.id == planned.confirmation_id for c in e.function_calls())
            )
            since = request.seq or 0
        assert _responses_after(history, planned.call.id, since) == []


@settings(max_examples=300, deadline=None)
@given(st.lists(step, max_size=30))
# An older request's answer, with a newer placeholder for the same call after it.
@example([("model", ["get_weather"]), ("confirm", 0), ("confirm", 0), ("mixed", 0, False)])
def test_properties_processors_are_deterministic_and_stop_consistently(
    steps: list[tuple[Any, ...]],
) -> None:
    history = build(steps)
    newest = history.newest_first()
    first = plan_resume(newest, agent_name=AGENT, idempotent_tools=IDEMPOTENT)
    assert plan_resume(iter(newest), agent_name=AGENT, idempotent_tools=IDEMPOTENT) == first
    assert recover_confirmations(newest, agent_name=AGENT) == recover_confirmations(
        iter(newest), agent_name=AGENT
    )
    assert pending(history.events) == pending(newest)

    for make in (
        lambda: ResumeScan(agent_name=AGENT, idempotent_tools=IDEMPOTENT),
        lambda: ConfirmationScan(agent_name=AGENT),
    ):
        full, prefix = make(), make()
        consumed = feed_all(full, newest)
        assert consumed <= len(newest)
        feed_all(prefix, newest[:consumed])
        assert prefix.result() == full.result()

    _check_never_answered(history, first)


@settings(max_examples=200, deadline=None)
@given(st.lists(step, max_size=30))
def test_properties_no_call_is_planned_twice(steps: list[tuple[Any, ...]]) -> None:
    history = build(steps)
    decision = plan_resume(history.newest_first(), agent_name=AGENT, idempotent_tools=IDEMPOTENT)
    if not decision.execute:
        return
    # the executor claims and answers the planned calls …
    history.claim(*(p.call.id for p in decision.execute))
    history.respond(*((p.call, {"done": True}) for p in decision.execute))
    # … and no later plan (no new human input) runs any of them again
    again = plan_resume(history.newest_first(), agent_name=AGENT, idempotent_tools=IDEMPOTENT)
    assert {p.call.id for p in again.execute} & {p.call.id for p in decision.execute} == set()


# -- the confirmed-call path ------------------------------------------------------------------
# ``step`` alone almost never ends with a valid answer to a real confirmation as the newest user
# event (a handful of examples in a thousand), so "no call executes twice" needs its own strategy.

ANSWERS = {
    "yes": {"confirmed": True},
    "no": {"confirmed": False, "payload": {"why": "no"}},
    "json": {"response": orjson.dumps({"confirmed": True, "payload": 3}).decode()},
}

confirmed_ending = st.tuples(
    st.lists(step, max_size=15),  # any history before
    st.lists(st.sampled_from(TOOLS), min_size=1, max_size=3),  # calls needing confirmation
    st.lists(st.sampled_from(["yes", "no", "json"]), min_size=1, max_size=3),  # their answers
    st.booleans(),  # the user sends the same answers again after they were executed
)


def _answers_event(history: History, answers: list[tuple[str, dict[str, Any]]]) -> None:
    parts = tuple(
        Part(
            function_response=FunctionResponse(
                id=cid, name=REQUEST_CONFIRMATION_FUNCTION, response=response
            )
        )
        for cid, response in answers
    )
    history.add(Event(author="user", content=Content(role="user", parts=parts)))


def build_confirmed(
    ending: tuple[list[tuple[Any, ...]], list[str], list[str], bool],
) -> tuple[History, dict[str, str]]:
    """A random history, then calls that asked for confirmation, then one user event answering
    some of them validly. Returns the history and call id -> how it was answered."""
    prefix, tools, answers, _ = ending
    history = build(prefix)
    base = len(history.events)
    originals = [call(name, f"t{base}-{i}", n=i) for i, name in enumerate(tools)]
    for i, original in enumerate(originals):
        history.needs_confirmation(original, f"confirm-t{base}-{i}")
    answered = dict(zip([c.id for c in originals], answers, strict=False))
    _answers_event(
        history,
        [
            (f"confirm-t{base}-{i}", ANSWERS[answered[c.id]])
            for i, c in enumerate(originals)
            if c.id in answered
        ],
    )
    return history, answered


@settings(max_examples=200, deadline=None)
@given(confirmed_ending)
@example(([], ["charge_card"], ["yes"], True))
@example(([("model", ["charge_card"]), ("claim", 0)], ["charge_card", "render"], ["no"], True))
def test_properties_a_confirmed_call_executes_once(
    ending: tuple[list[tuple[Any, ...]], list[str], list[str], bool],
) -> None:
    history, answered = build_confirmed(ending)
    decision = plan_resume(history.newest_first(), agent_name=AGENT, idempotent_tools=IDEMPOTENT)

    # Not vacuous: every validly answered call is planned, with the human's answer attached.
    planned = {p.call.id: p for p in decision.execute if p.confirmation is not None}
    assert set(planned) == set(answered)
    for call_id, how in answered.items():
        confirmation = planned[call_id].confirmation
        assert confirmation is not None
        assert confirmation.confirmed is (how != "no")
    event(f"confirmed calls answered in one turn: {len(answered)}")
    target(float(len(answered)), label="answered confirmations")
    _check_never_answered(history, decision)

    # The executor claims and answers them; a later plan never runs any of them again …
    history.claim(*(p.call.id for p in decision.execute))
    history.respond(*((p.call, {"done": True}) for p in decision.execute))
    again = plan_resume(history.newest_first(), agent_name=AGENT, idempotent_tools=IDEMPOTENT)
    assert {p.call.id for p in again.execute} & set(answered) == set()

    # … not even when the user sends the same answers a second time.
    if ending[3]:
        latest_answers = next(e for e in history.newest_first() if e.author == "user")
        history.add(latest_answers)
        replayed = plan_resume(
            history.newest_first(), agent_name=AGENT, idempotent_tools=IDEMPOTENT
        )
        assert {p.call.id for p in replayed.execute} & set(answered) == set()
