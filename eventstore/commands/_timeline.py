"""A pure reading of a session's log: every call paired with its answers, every confirmation with
the call it is about, and what is still open.

``analyze(events)`` is a function of the events alone (no I/O), shared by ``evs show``,
``evs tail``, ``evs verify`` and the live timeline of ``evs demo``. Where a call stands
(``Timeline.status``) is ``eventstore._call_status.call_status``'s one classification, the one
the answer commands and ``evs pending`` use too. What the *runtime* will do next (``evs
pending``) is ``runtime.replay.pending``'s to say, not this module's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._call_status import (
    CallFacts,
    CallStatus,
    RequestFacts,
    UserTurns,
    call_status,
    confirmation_answer,
    deciding_request,
)
from .._calls import deferred_call_ids, is_placeholder_response
from .._events import REQUEST_CONFIRMATION_FUNCTION, Event, FunctionCall, FunctionResponse

__all__ = [
    "Answer",
    "CallRecord",
    "CallStatus",
    "ConfirmationRecord",
    "Timeline",
    "analyze",
    "is_error_response",
]



@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """One function response found in the log."""

    seq: int
    """Seq of the event that carries it."""
    response: FunctionResponse
    """The response itself."""
    requests_confirmation: bool
    """The same event asked for a confirmation of this call (a placeholder, not the result)."""


@dataclass(slots=True, kw_only=True)
class CallRecord:
    """A function call of the log with everything that refers to it."""

    seq: int
    """Seq of the event that carries the call."""
    call: FunctionCall
    """The call."""
    author: str
    """Author of the calling event."""
    long_running: bool
    """The calling event marked the call long-running."""
    started_seq: int | None = None
    """Seq of the execution-started claim, if any."""
    last_started_seq: int | None = None
    """Seq of the newest execution-started claim, if any."""
    deferred: bool = False
    """A deferral newer than its newest claim: its tool said its result comes from outside
    (docs/protocol.md §7), so it is long-running, not in doubt."""
    answers: list[Answer] = field(default_factory=list)
    """Responses with this call's id, oldest first."""
    confirmation_ids: list[str] = field(default_factory=list)
    """Ids of the confirmation requests about this call."""

    @property
    def is_confirmation(self) -> bool:
        """Whether this is a confirmation request the runtime emitted."""
        return self.call.name == REQUEST_CONFIRMATION_FUNCTION

    @property
    def final_answer(self) -> Answer | None:
        """The newest answer that is not a confirmation placeholder."""
        for answer in reversed(self.answers):
            if not answer.requests_confirmation:
                return answer
        return None


@dataclass(slots=True, kw_only=True)
class ConfirmationRecord:
    """A confirmation request: the runtime's call asking a human about an original call."""

    confirmation_id: str
    """Id of the confirmation request call (what ``evs confirm`` takes)."""
    seq: int
    """Seq of the event that asked."""
    original: dict[str, Any]
    """The ``originalFunctionCall`` as recorded in the request (id, name, args)."""
    hint: str
    """What the tool asked the human."""
    payload: Any
    """Payload of the request."""
    author: str = ""
    """Author of the event that asked."""
    answer_seq: int | None = None
    """Seq of the answer, if answered (a well-formed answer after a malformed one replaces
    it: a malformed answer answers nothing)."""
    confirmed: bool | None = None
    """The answer, if answered and readable."""
    answers: list[tuple[int, bool | None]] = field(default_factory=list)
    """Every answer, oldest first: (seq, approved / rejected / ``None`` when malformed)."""


@dataclass(slots=True, kw_only=True)
class Timeline:
    """The analysis of a whole log."""

    calls: dict[str, CallRecord] = field(default_factory=dict)
    """Call id -> record (first occurrence), in log order."""
    confirmations: dict[str, ConfirmationRecord] = field(default_factory=dict)
    """Confirmation id -> record, in log order."""
    orphan_responses: list[tuple[int, FunctionResponse]] = field(default_factory=list)
    """Responses whose call id appears in no earlier call: (seq, response)."""
    duplicate_calls: list[tuple[int, FunctionCall]] = field(default_factory=list)
    """Calls whose id was already used by an earlier call: (seq, call)."""
    messages: list[int] = field(default_factory=list)
    """Seqs of the user messages (user events with text), in log order."""
    turns: UserTurns = field(default_factory=UserTurns)
    """The log's user turns (which answers a run acts on)."""
    mirrors: dict[str, list[CallRecord]] = field(default_factory=dict)
    """A framework's call id -> the calls stored as ``ID@event id`` (an OpenAI Agents door's
    mirror of the SDK's call), oldest first: a session item names the SDK's id."""
    read_from: int = 1
    """The lowest seq the analysed events cover: 1 for a reading from the log's start; above
    1 when only a part was read (``evs show`` of a window), so a call made before it is not
    known here, which is not the same as not in the log."""
    read_to: int | None = None
    """The highest seq the analysed events cover when the reading stopped before the log's
    end (an answer after it is not known here), else None."""

    def unread_call(self) -> str:
        """How a missing call is named: ``no such call!`` when the reading began at seq 1,
        else that it lies before the part read."""
        if self.read_from <= 1:
            return "no such call!"
        return f"call before #{self.read_from}, not read"

    def status(self, call_id: str) -> CallStatus:
        """Return where the call stands: ``call_status`` of what the timeline knows of it."""
        return call_status(self.facts(call_id))

    def confirmation_of(self, call_id: str) -> ConfirmationRecord | None:
        """The confirmation request the call's status is read from (``deciding_request``):
        the one to answer, or that was answered; ``None`` when no agent asked."""
        request = deciding_request(self.facts(call_id))
        return self.confirmations[request.confirmation_id] if request else None

    def facts(self, call_id: str) -> CallFacts:
        """What the timeline knows of the call, as ``call_status`` takes it."""
        record = self.calls[call_id]
        requests = [self.confirmations[c] for c in record.confirmation_ids
                    if c in self.confirmations and self.confirmations[c].author != "user"]
        return CallFacts(
            settled=record.final_answer is not None,
            long_running=record.long_running or record.deferred,
            claim_seq=record.last_started_seq,
            deferred=record.deferred,
            requests=[RequestFacts(
                seq=r.seq, confirmation_id=r.confirmation_id, answers=r.answers,
                trusted=(r.author == record.author
                         and r.original.get("name") == record.call.name
                         and r.original.get("args", {}) == record.call.args),
            ) for r in requests],
            message_seqs=[m for m in self.messages if m > record.seq],
            turns=self.turns,
        )

    def open_calls(self) -> list[CallRecord]:
        """Return the calls without a final answer, oldest first (confirmation requests too)."""
        return [r for r in self.calls.values() if r.final_answer is None]


def is_error_response(response: Mapping[str, Any]) -> bool:
    """Whether a response mapping is the runtime's structured error (``{"error": …}``)."""
    return "error" in response and response.get("error") not in (None, "", {})




def analyze(events: Iterable[Event], *, into: Timeline | None = None) -> Timeline:
    """Pair every call with its answers and every confirmation with its original call
    (``into``: go on with that timeline, fed the events before these, and return it)."""
    timeline = Timeline() if into is None else into
    for event in events:
        seq = event.seq or 0
        for call in event.function_calls():
            if call.id in timeline.calls:
                timeline.duplicate_calls.append((seq, call))
                continue
            made = timeline.calls[call.id] = CallRecord(
                seq=seq,
                call=call,
                author=event.author,
                long_running=call.id in event.long_running_tool_ids,
            )
            given, mirrored, _ = call.id.partition("@")
            if mirrored:
                timeline.mirrors.setdefault(given, []).append(made)
            if call.name == REQUEST_CONFIRMATION_FUNCTION:
                original = call.args.get("originalFunctionCall")
                original = dict(original) if isinstance(original, Mapping) else {}
                request = call.args.get("toolConfirmation")
                request = request if isinstance(request, Mapping) else {}
                timeline.confirmations[call.id] = ConfirmationRecord(
                    confirmation_id=call.id,
                    seq=seq,
                    author=event.author,
                    original=original,
                    hint=str(request.get("hint") or ""),
                    payload=request.get("payload"),
                )
                target = timeline.calls.get(str(original.get("id")))
                if target is not None:
                    target.confirmation_ids.append(call.id)
        for call_id in event.started_call_ids:
            record = timeline.calls.get(call_id)
            if record is not None:
                if record.started_seq is None:
                    record.started_seq = seq
                record.last_started_seq = seq
                record.deferred = False
        for call_id in deferred_call_ids(event):
            record = timeline.calls.get(call_id)
            if record is not None and record.last_started_seq is not None:
                record.deferred = True
        asked = event.actions.requested_tool_confirmations
        for response in event.function_responses():
            record = timeline.calls.get(response.id)
            if record is None:
                timeline.orphan_responses.append((seq, response))
                continue
            placeholder = response.id in asked or (
                response.name != REQUEST_CONFIRMATION_FUNCTION
                and is_placeholder_response(response.response))
            record.answers.append(
                Answer(seq=seq, response=response, requests_confirmation=placeholder)
            )
            confirmation = timeline.confirmations.get(response.id)
            if confirmation is not None:
                decision = confirmation_answer(response.response)
                confirmation.answers.append((seq, decision))
                if confirmation.confirmed is None:
                    confirmation.answer_seq = seq
                    confirmation.confirmed = decision
        if event.author == "user" and event.content is not None and any(
                p.text for p in event.content.parts):
            timeline.messages.append(seq)
        timeline.turns.feed(event)
    return timeline
