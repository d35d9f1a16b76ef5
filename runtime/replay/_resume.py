"""The resume planner: which calls to execute now, from the log alone (dedup + crash policy).

A pure, sans-IO processor fed events newest first. It looks at the agent's newest model turn
and at the confirmation answers of the newest user turn (``ConfirmationScan``) and decides, per
call:

- a call with a response anywhere after it is never planned (dedup);
- never started (crash after the model event, or a confirmed call not yet claimed) → execute;
- started (docs/protocol.md §3) but unanswered → a long-running call is *waiting* for its result; an
  idempotent tool is executed again (same idempotency key: session + call id); a call a human
  decided to re-run (``RERUN_DECISION_KEY`` event newer than its last claim) is executed again;
  anything else is *in doubt* and the invocation pauses until someone decides.

A keyed store (``open_store(signing_key=…)``) names the events whose signature is missing or
wrong (``EventStore.untrusted``); fed those, the scan acts on nothing when any event it read is
one of them — a forged model turn, claim, response, confirmation request or answer — and the
decision pauses naming them (``ResumeDecision.untrusted``). One exception: a user's answer
that a later trusted event answers again (``superseded_answer``: an unsigned answer, then the
signed one given with the key) is skipped as if absent, so it cannot block the session.

The decision is only advice on one version of the log: the executor claims the calls with
``expected_version`` and re-plans on a ConcurrencyError, which is what makes two resuming
processes run each call at most once.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    RERUN_DECISION_KEY,
    Deferrals,
    Event,
    EventActions,
    FunctionCall,
    ToolConfirmation,
    deferred_call_ids,
    is_framework_record,
    rerun_call_ids,
)

from ._confirmations import ConfirmationScan, Refusal
from ._escalation import escalation_reason_from_event
from ._log import (
    LIVE_STREAM_ENDED_KEY,
    USER_AUTHOR,
    feed_all,
    is_model_turn,
    parse_confirmation_answer,
    settled_response_ids,
    tool_calls,
)

__all__ = [
    "RERUN_DECISION_KEY",
    "HeadScan",
    "HeadStatus",
    "InDoubtCall",
    "ResumeCall",
    "ResumeDecision",
    "ResumeReason",
    "ResumeScan",
    "UntrustedEvent",
    "plan_resume",
    "rerun_call_ids",
    "waiting_since",
]

ResumeReason = Literal["not_started", "confirmed", "rejected", "idempotent_rerun", "rerun_decided"]
"""Why a call is executed on resume (stable strings)."""

@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeCall:
    """A call to execute now."""

    call: FunctionCall
    """The call as the model emitted it (stored id, name and args)."""
    confirmation: ToolConfirmation | None = None
    """The human's answer when this is a confirmed (or rejected) call, else ``None``."""
    confirmation_id: str | None = None
    """The confirmation request that was answered, when ``confirmation`` is set."""
    rerun: bool = False
    """The call was started before and is executed again (same idempotency key)."""
    reason: ResumeReason
    """Why it runs now."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InDoubtCall:
    """A call that was started but has no response, and may not be run again automatically."""

    call: FunctionCall
    """The call as the model emitted it."""
    reason: str
    """A full sentence saying why and how to decide."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UntrustedEvent:
    """An event a keyed store cannot vouch for: nothing is executed from it."""

    seq: int
    """Its position in the log."""
    problem: Literal["unsigned", "bad_signature"]
    """``unsigned``: it carries no signature (written behind the store's back, or before the
    store was keyed); ``bad_signature``: its signature does not match (forged or changed)."""

    @property
    def reason(self) -> str:
        """A full sentence for humans."""
        what = ("carries no signature by the store's key" if self.problem == "unsigned"
                else "has a signature that does not match it")
        return (f"The event at seq {self.seq} {what}: it was written behind the store's back "
                "(or before the store was keyed), so nothing is executed from it. Check it with "
                "`evs verify`.")


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeDecision:
    """What the log says to do before the next model request."""

    execute: tuple[ResumeCall, ...] = ()
    """Calls to claim and run now, confirmed calls first, then in the model's part order."""
    in_doubt: tuple[InDoubtCall, ...] = ()
    """Started, unanswered, not idempotent calls: the invocation must pause for a decision."""
    waiting: tuple[FunctionCall, ...] = ()
    """Long-running calls started and waiting for their result (``submit_response``)."""
    refusals: tuple[Refusal, ...] = ()
    """Confirmation answers not acted on, with reasons."""
    untrusted: tuple[UntrustedEvent, ...] = ()
    """Events the decision read that a keyed store cannot vouch for; when any, nothing is
    executed and the invocation pauses."""

    @property
    def pause_reason(self) -> str | None:
        """Why the invocation must not call the model now, or ``None`` when it may go on.

        In-doubt calls pause; refused answers pause when nothing else is to be executed (the
        human's message was not acted on, so the model must not answer as if it were).
        """
        if self.untrusted:
            return " ".join(u.reason for u in self.untrusted)
        if self.in_doubt:
            return " ".join(c.reason for c in self.in_doubt)
        if self.refusals and not self.execute:
            return " ".join(r.reason for r in self.refusals)
        return None


def superseded_answer(event: Event, answered_later: Collection[str]) -> bool:
    """Whether ``event`` is only a user's answers (function responses, nothing else) to calls
    that a later event the store vouches for answers again: an unsigned or forged answer a
    signed one replaced. Skipping it changes nothing the runner acts on, so it does not block
    the session (any other untrusted event does)."""
    if event.author != "user" or event.content is None or not event.content.parts:
        return False
    if event.started_call_ids or event.long_running_tool_ids or event.actions != EventActions():
        return False
    ids = [part.function_response.id for part in event.content.parts
           if part.function_response is not None]
    return len(ids) == len(event.content.parts) and all(i in answered_later for i in ids)


class ResumeScan:
    """The sans-IO resume planner for one agent; feed events newest first, then ``result()``.

    ``idempotent_tools`` names the tools that may run again after a crash (FunctionTool
    ``idempotent=True``). The same events and configuration always give the same decision.
    """

    def __init__(
        self, *, agent_name: str, idempotent_tools: Collection[str] = (),
        untrusted: Mapping[int, Literal["unsigned", "bad_signature"]] | None = None,
    ) -> None:
        self._agent = agent_name
        self._untrusted_seqs = untrusted or {}
        self._untrusted: list[UntrustedEvent] = []
        self._trusted_responded: set[str] = set()
        self._idempotent = frozenset(idempotent_tools)
        self._confirmations = ConfirmationScan(agent_name=agent_name)
        self._confirmations_open = True
        self._responded: set[str] = set()
        self._started: set[str] = set()
        self._decided: set[str] = set()
        self._deferrals = Deferrals(newest_first=True)
        self._long_running: set[str] = set()  # calls a model turn marked long-running
        self._turn: Event | None = None
        self._turn_status: dict[str, tuple[bool, bool, bool]] = {}

    def feed(self, event: Event) -> bool:
        """Take the next older event; return True while more are needed."""
        if event.seq is not None and event.seq in self._untrusted_seqs:
            if superseded_answer(event, self._trusted_responded):
                return True  # as if it were not there: a signed answer came after it
            self._untrusted.append(
                UntrustedEvent(seq=event.seq, problem=self._untrusted_seqs[event.seq]))
        else:
            self._trusted_responded.update(r.id for r in event.function_responses())
        if self._confirmations_open:
            self._confirmations_open = self._confirmations.feed(event)
        if self._turn is None and is_model_turn(event, self._agent):
            self._turn = event
            self._turn_status = {
                c.id: (c.id in self._responded, c.id in self._started, c.id in self._decided)
                for c in tool_calls(event)
            }
        for call_id in rerun_call_ids(event):
            if call_id not in self._started:
                self._decided.add(call_id)
        self._deferrals.feed(event)
        self._long_running.update(event.long_running_tool_ids)
        self._started.update(event.started_call_ids)
        self._responded.update(r.id for r in event.function_responses())
        return self._confirmations_open or self._turn is None

    def result(self) -> ResumeDecision:
        """Return the decision from the events fed so far."""
        if self._untrusted:
            return ResumeDecision(untrusted=tuple(sorted(self._untrusted, key=lambda u: u.seq)))
        recovery = self._confirmations.result()
        execute: list[ResumeCall] = []
        in_doubt: list[InDoubtCall] = []
        waiting: list[FunctionCall] = []
        planned: set[str] = set()
        for confirmed in recovery.calls:
            call, answer = confirmed.call, confirmed.confirmation
            planned.add(call.id)
            rerun = confirmed.started_after_answer
            if call.id in self._deferrals or (rerun and answer.confirmed
                                              and call.id in self._long_running):
                # It ran: its tool deferred its result after its claim (§7; whatever was
                # answered), or it is long-running and was started on the approval. Its result
                # comes from outside, never from running it again.
                waiting.append(call)
                continue
            why: ResumeReason | None = "confirmed" if answer.confirmed else "rejected"
            if rerun and answer.confirmed:
                # a rejection runs no tool, so only a confirmed call can be in doubt
                if call.name in self._idempotent:
                    why = "idempotent_rerun"
                elif call.id in self._decided:
                    why = "rerun_decided"
                else:
                    why = None
            if why is not None:
                execute.append(
                    ResumeCall(
                        call=call,
                        confirmation=answer,
                        confirmation_id=confirmed.confirmation_id,
                        rerun=rerun,
                        reason=why,
                    )
                )
            else:
                in_doubt.append(InDoubtCall(call=call, reason=_in_doubt_reason(call)))
        turn = self._turn
        if turn is not None:
            long_running = {*turn.long_running_tool_ids, *(
                c.id for c in tool_calls(turn) if c.id in self._deferrals)}
            for call in tool_calls(turn):
                responded, started, decided = self._turn_status[call.id]
                if responded or call.id in planned:
                    continue
                planned.add(call.id)
                if not started:
                    execute.append(ResumeCall(call=call, reason="not_started"))
                elif call.id in long_running:
                    waiting.append(call)
                elif call.name in self._idempotent:
                    execute.append(ResumeCall(call=call, rerun=True, reason="idempotent_rerun"))
                elif decided:
                    execute.append(ResumeCall(call=call, rerun=True, reason="rerun_decided"))
                else:
                    in_doubt.append(InDoubtCall(call=call, reason=_in_doubt_reason(call)))
        return ResumeDecision(
            execute=tuple(execute),
            in_doubt=tuple(in_doubt),
            waiting=tuple(waiting),
            refusals=recovery.refusals,
        )


def _in_doubt_reason(call: FunctionCall) -> str:
    return (
        f"Call {call.id!r} of tool {call.name!r} was started but has no response, and the tool "
        f"is not idempotent: it may or may not have taken effect. Decide with "
        f"rerun_call(call_id={call.id!r}) or supply its result with submit_response()."
    )


def plan_resume(
    events: Iterable[Event], *, agent_name: str, idempotent_tools: Collection[str] = (),
    untrusted: Mapping[int, Literal["unsigned", "bad_signature"]] | None = None,
) -> ResumeDecision:
    """Return the resume decision for ``agent_name`` from newest-first ``events``.

    Pure and deterministic; reads the iterable only as far as needed. A call with a response
    after it is never in ``execute``; nothing is when an event read is ``untrusted`` (seq ->
    problem, from a keyed store's ``EventStore.untrusted``).
    """
    scan = ResumeScan(agent_name=agent_name, idempotent_tools=idempotent_tools,
                      untrusted=untrusted)
    feed_all(scan, events)
    return scan.result()


@dataclass(frozen=True, slots=True, kw_only=True)
class HeadStatus:
    """Whether a run has nothing to ask the model (the log's head).

    ``status`` is ``"completed"`` when the agent's newest event is its final text answer,
    ``"paused_for_confirmation"`` / ``"paused_long_running"`` when its newest turn handed back
    confirmation requests or long-running calls that are not all answered yet; ``None`` when
    anything newer (a message, a result of another turn's call) gives the model something to
    see. A turn waits for every one of its long-running calls: answers to some of its
    confirmation requests (and the agent's responses to the calls they answered) and results of
    some of its long-running calls do not give the model a turn while others are open; the head
    still waits, with the ids not answered yet.
    """

    status: (
        Literal["completed", "paused_for_confirmation", "paused_long_running", "escalated"]
        | None
    ) = None
    """How a run with nothing to execute ends without calling the model, or ``None``."""
    final_text: str = ""
    """The final answer, when completed."""
    waiting: tuple[str, ...] = ()
    """The unanswered ids the head waits for, when paused."""
    answered: tuple[str, ...] = ()
    """When paused: the ids of the same turn's confirmation requests or long-running calls
    answered since (their answers acted on, their results in the log), in the turn's order."""
    reason: str = ""
    """Who escalated and why, when escalated."""


class HeadScan:
    """Sans-IO: reads the log's head (newest first) and decides ``HeadStatus`` for one agent.

    The runner and ``pending()`` both use it, so "does the next run call the model" has one
    answer. The agent's own claim and deferral events are skipped: the calls they name are in the
    turn before; so are events holding only a framework door's records (``is_framework_record``:
    a durable run's item copies and its end), which are nothing new for the model.
    Events holding only answers to the turn's calls are walked past: confirmation answers, the
    agent's responses (to calls run on an answer, or answered in the turn's step) and submitted
    results of its calls. ``runs_first`` names calls the next run executes before it reads the
    head (``pending()`` reads the head before they run; the runner after): counted as answered
    unless long-running.
    """

    def __init__(self, *, agent_name: str, runs_first: Collection[str] = ()) -> None:
        self._agent = agent_name
        self._runs_first = frozenset(runs_first)
        self._status: HeadStatus | None = None
        self._past = False  # walking back past answers to the turn's calls
        self._responded: set[str] = set()
        self._results: set[str] = set()  # ids submitted results answer: the turn's, or news
        self._deferrals = Deferrals(newest_first=True)

    def feed(self, event: Event) -> bool:
        """Take the next older event; return True while more are needed."""
        if self._status is not None:
            return False
        if event.actions.compaction is not None:
            return True  # a compaction: a summary of older events, nothing new for the model
        self._deferrals.feed(event)
        if event.content is None and event.author == self._agent and (
                event.started_call_ids or deferred_call_ids(event)):
            return True  # its claims and deferrals: the calls are in the turn before
        if event.content is None and LIVE_STREAM_ENDED_KEY in event.custom_metadata:
            return True  # a live stream's end: bookkeeping, nothing for the model
        if is_framework_record(event):
            return True  # a framework door's bookkeeping (its run's end, item copies)
        answers = _confirmation_answers(event)
        results = None if answers is not None else self._submitted_results(event)
        if answers is not None or results is not None:
            self._responded.update(answers or results or ())
            self._results.update(results or ())
            self._past = True
            return True
        if self._responses_only(event) and (
            self._past or escalation_reason_from_event(event) is None
        ):
            # The agent's responses to calls run (or rejected) on an answer, or run in the
            # turn's own step: what matters is whether the turn still has open calls.
            self._responded.update(settled_response_ids(event))
            self._past = True
            return True
        status = self._decide(event)
        if status is None:
            self._past = True  # every confirmation answered: the turn that asked them decides
            return True
        self._status = status
        return False

    def _responses_only(self, event: Event) -> bool:
        content = event.content
        return (event.author == self._agent and content is not None and content.role != "model"
                and bool(content.parts)
                and all(p.function_response is not None for p in content.parts))

    def _submitted_results(self, event: Event) -> list[str] | None:
        """The call ids an event from outside answers when it holds only results (§7: no text,
        no confirmation answer), else ``None``."""
        content = event.content
        if event.author == self._agent or content is None or not content.parts:
            return None
        responses = [p.function_response for p in content.parts]
        if any(r is None or r.name == REQUEST_CONFIRMATION_FUNCTION for r in responses):
            return None
        return list(settled_response_ids(event)) or None

    def _decide(self, event: Event) -> HeadStatus | None:
        """The status ``event`` gives the head, or ``None`` to read on: ``event`` is a turn of
        confirmation requests all answered, and the model turn that led to them (older: its
        responses and claim come between) may still have long-running calls open."""
        if event.author != self._agent or event.content is None:
            return HeadStatus()
        calls = event.function_calls()
        if not self._past:
            escalated = escalation_reason_from_event(event)
            if escalated is not None:
                return HeadStatus(status="escalated", reason=escalated)
            if not calls:
                if event.content.role != "model" or not event.text():
                    return HeadStatus()
                return HeadStatus(status="completed", final_text=event.text())
        open_calls = [c for c in calls if c.id not in self._responded]
        if calls and not open_calls and all(
            c.name == REQUEST_CONFIRMATION_FUNCTION for c in calls
        ):
            return None
        if not self._results <= {c.id for c in calls}:
            return HeadStatus()  # a result of another turn's call: news for the model
        long_running = {*event.long_running_tool_ids,
                        *(c.id for c in calls if c.id in self._deferrals)}
        waiting = tuple(c.id for c in open_calls if c.id in long_running)
        if not waiting or any(c.id not in long_running and c.id not in self._runs_first
                              for c in open_calls):
            return HeadStatus()
        confirming = any(c.name == REQUEST_CONFIRMATION_FUNCTION for c in open_calls
                         if c.id in long_running)
        return HeadStatus(
            status="paused_for_confirmation" if confirming else "paused_long_running",
            waiting=waiting,
            answered=tuple(c.id for c in calls if c.id in long_running
                           and c.id in self._responded),
        )

    def result(self) -> HeadStatus:
        """Return the status from the events fed so far (an empty log gives the model a turn)."""
        return self._status if self._status is not None else HeadStatus()


def waiting_since(head: HeadStatus) -> str:
    """The end of the sentence saying why a paused head still waits (runner and ``pending()``
    say the same): what of its turn was answered since, or that nothing new arrived."""
    if not head.answered:
        return "nothing new arrived since."
    if head.status == "paused_for_confirmation":
        return (f"confirmation(s) {', '.join(head.answered)} of the same request were answered "
                "and acted on, and the agent continues once every one is answered.")
    return (f"the result(s) of {', '.join(head.answered)} of the same turn arrived, and the "
            "agent continues once every long-running call of the turn has its result.")


def _confirmation_answers(event: Event) -> list[str] | None:
    """The confirmation ids a user event answers when it holds only well-formed confirmation
    answers (``answer_confirmation``'s shape), else ``None`` (a message, a result, anything
    else gives the model something new)."""
    content = event.content
    if event.author != USER_AUTHOR or content is None or not content.parts:
        return None
    ids: list[str] = []
    for part in content.parts:
        response = part.function_response
        if (response is None or response.name != REQUEST_CONFIRMATION_FUNCTION
                or isinstance(parse_confirmation_answer(response.response), str)):
            return None
        ids.append(response.id)
    return ids
