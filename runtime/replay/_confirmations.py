"""Confirmation recovery: which confirmed or rejected original calls the log says to run now.

A pure, sans-IO processor fed the session's events newest first (docs/protocol.md §5, §6). It
stops as soon as every answered confirmation is resolved to the original call its agent emitted,
so the cost does not grow with the history.

The rules:

- Only the newest user turn counts: the newest user-authored events that carry function
  responses (consecutive ones form one batch, so two confirmations answered by two submissions
  both count). An event may carry text beside its answers ("Yes, go ahead" + the answer, as chat
  clients send it): the answers are acted on and the text is the user's message of that turn. A
  newest user message with text and no answer means nothing is being answered. User events without
  content (state edits, resume decisions) are skipped, and so is a compaction event (a summary of
  older events, by whichever author): it neither ends a turn nor counts as one.
- A user message with text between a confirmation request and its answer *supersedes* the
  request: the answer is refused (``superseded``, naming the message) and nothing runs.
- Answers are ``{"confirmed": bool, "payload": …}`` or ``{"response": "<that as JSON>"}``.
- Only confirmation requests authored by this agent are trusted, and the original call must be a
  call this agent's model emitted; the call is returned with its *stored* arguments, and an
  embedded call that differs from the stored one is refused.
- A confirmation id whose requests embed different original calls is refused (ambiguous); so are
  conflicting answers for one original call. Requests are compared between the answer and the
  original call, where the scan stops: ids the runtime mints are unique, so an older duplicate can
  only come from a tampered log, and reading the whole history on every request is not worth it.
- A confirmation answered before (after its request, before this turn) is refused, and a call that
  already has a response other than its ``confirmation_required`` placeholder anywhere after the
  call is dropped, whatever requests or answers follow: the tool runs once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, assert_never

from eventstore import REQUEST_CONFIRMATION_FUNCTION, Event, FunctionCall, ToolConfirmation

from ._log import (
    USER_AUTHOR,
    confirmation_calls,
    feed_all,
    is_model_turn,
    is_user_message,
    parse_confirmation_answer,
    parse_confirmation_request,
    settled_response_ids,
)

__all__ = [
    "ConfirmationRecovery",
    "ConfirmationScan",
    "ConfirmedCall",
    "Refusal",
    "RefusalKind",
    "recover_confirmations",
]

RefusalKind = Literal[
    "malformed",
    "never_issued",
    "forged",
    "ambiguous",
    "mismatch",
    "already_answered",
    "superseded",
]
"""Why an answer was refused (stable strings, safe to match on)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfirmedCall:
    """An original call a human answered: run it (confirmed) or answer it with a rejection."""

    call: FunctionCall
    """The original call exactly as the agent's model emitted it (stored id, name and args)."""
    confirmation: ToolConfirmation
    """The human's answer (``confirmed``, ``payload``) with the hint that was shown."""
    confirmation_id: str
    """Id of the confirmation-request function call that was answered."""
    started_after_answer: bool = False
    """A claim for this call was appended after the answer (a run may have crashed mid-way)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """An answer that is not acted on, and why. No tool runs because of it."""

    kind: RefusalKind
    """Stable reason code."""
    confirmation_id: str
    """The confirmation id the answer named."""
    reason: str
    """A full sentence for humans (and the model) naming the ids involved."""
    function_call_id: str | None = None
    """The original call id, when it is known."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfirmationRecovery:
    """The decision: answered original calls to act on, and refused answers."""

    calls: tuple[ConfirmedCall, ...] = ()
    """Calls to act on, deduplicated by original call id, in the order they were requested."""
    refusals: tuple[Refusal, ...] = ()
    """Answers not acted on, in answer order."""
    already_handled: tuple[str, ...] = ()
    """Original call ids whose answer was valid but which already have a response."""


@dataclass(slots=True)
class _Request:
    original: FunctionCall
    requested: ToolConfirmation
    order: tuple[int, int]


@dataclass(slots=True)
class _State:
    answers: dict[str, ToolConfirmation] = field(default_factory=dict)
    answer_order: list[str] = field(default_factory=list)
    refused: dict[str, Refusal] = field(default_factory=dict)
    responded: set[str] = field(default_factory=set)
    started: set[str] = field(default_factory=set)
    requests: dict[str, _Request] = field(default_factory=dict)
    forged_by: dict[str, str] = field(default_factory=dict)
    handled: set[str] = field(default_factory=set)
    originals: dict[str, FunctionCall] = field(default_factory=dict)
    settled: set[str] = field(default_factory=set)
    newer_message: Event | None = None


class ConfirmationScan:
    """The sans-IO confirmation-recovery processor for one agent.

    Feed events newest first with ``feed`` until it returns False (or the log ends), then read
    ``result()``. The same events always give the same result.
    """

    def __init__(self, *, agent_name: str) -> None:
        self._agent = agent_name
        self._s = _State()
        self._phase: Literal["newer", "turn", "older", "done"] = "newer"
        self._position = 0

    def feed(self, event: Event) -> bool:
        """Take the next older event; return True while more are needed."""
        if self._phase == "done":
            return False
        self._position += 1
        if self._phase in ("newer", "turn"):
            kind = self._classify(event)
            if kind == "answers":
                self._phase = "turn"
                self._take_answers(event)
            elif kind == "skip":
                pass
            elif kind == "plain" or kind == "other":
                if self._phase == "newer":
                    if kind == "plain":
                        self._phase = "done"  # a plain user message: nothing is being answered
                        return False
                    self._note_newer(event)
                    return True
                self._phase = "older"
            else:
                assert_never(kind)
        if self._phase == "older":
            self._note_older(event)
        if self._phase == "older" and self._resolved():  # a turn is read whole
            self._phase = "done"
        return self._phase != "done"

    # -- phases --------------------------------------------------------------------------------

    @staticmethod
    def _classify(event: Event) -> Literal["answers", "plain", "skip", "other"]:
        if event.actions.compaction is not None:
            return "skip"  # a summary of older events, whoever wrote it: it ends no user turn
        if event.author != USER_AUTHOR:
            return "other"
        if event.content is None:
            return "skip"  # state edits and resume decisions are not messages
        if any(p.function_response is not None for p in event.content.parts):
            return "answers"
        return "plain"

    def _note_newer(self, event: Event) -> None:
        self._s.started.update(event.started_call_ids)
        self._s.responded.update(r.id for r in event.function_responses())
        self._s.settled.update(settled_response_ids(event))

    def _take_answers(self, event: Event) -> None:
        s = self._s
        s.settled.update(settled_response_ids(event))
        for response in event.function_responses():
            if response.name != REQUEST_CONFIRMATION_FUNCTION:
                s.responded.add(response.id)
                continue
            cid = response.id
            if cid not in s.answer_order:
                s.answer_order.append(cid)
            parsed = parse_confirmation_answer(response.response)
            if isinstance(parsed, str):
                s.refused.setdefault(
                    cid,
                    Refusal(
                        kind="malformed",
                        confirmation_id=cid,
                        reason=f"The answer to confirmation {cid!r} is malformed: {parsed}.",
                    ),
                )
                continue
            earlier = s.answers.get(cid)
            if earlier is not None and earlier != parsed:
                s.refused[cid] = Refusal(
                    kind="ambiguous",
                    confirmation_id=cid,
                    reason=f"Confirmation {cid!r} was answered twice with different answers.",
                )
            s.answers.setdefault(cid, parsed)

    def _note_older(self, event: Event) -> None:
        s = self._s
        for response in event.function_responses():
            cid = response.id
            if (
                response.name == REQUEST_CONFIRMATION_FUNCTION
                and cid in s.answers
                and cid not in s.requests
                and not isinstance(parse_confirmation_answer(response.response), str)
            ):
                s.refused.setdefault(
                    cid,
                    Refusal(
                        kind="already_answered",
                        confirmation_id=cid,
                        reason=f"Confirmation {cid!r} was already answered (at seq "
                        f"{event.seq}); an answer is acted on once.",
                    ),
                )
        for index, call in enumerate(confirmation_calls(event)):
            if call.id in s.answers:
                self._take_request(event, call, index)
        if is_model_turn(event, self._agent):
            for call in event.function_calls():
                if call.id in self._awaited_originals():
                    s.originals.setdefault(call.id, call)
        s.responded.update(r.id for r in event.function_responses())
        s.settled.update(settled_response_ids(event))
        if is_user_message(event):
            # Read newest first, so this ends as the oldest message newer than each request.
            s.newer_message = event

    def _take_request(self, event: Event, call: FunctionCall, index: int) -> None:
        s, cid = self._s, call.id
        if event.author != self._agent:
            s.forged_by.setdefault(cid, event.author)
            return
        parsed = parse_confirmation_request(call)
        if isinstance(parsed, str):
            s.refused.setdefault(
                cid,
                Refusal(
                    kind="malformed",
                    confirmation_id=cid,
                    reason=f"The request of confirmation {cid!r} is malformed: {parsed}.",
                ),
            )
            return
        original, requested = parsed
        message = s.newer_message
        if message is not None and cid not in s.requests:
            s.refused.setdefault(
                cid,
                Refusal(
                    kind="superseded",
                    confirmation_id=cid,
                    function_call_id=original.id,
                    reason=f"Confirmation {cid!r} was superseded by the user's message "
                    f"{message.id!r} (seq {message.seq}), sent after the request and before the "
                    f"answer; call {original.id!r} is not run.",
                ),
            )
        known = s.requests.get(cid)
        if known is not None:
            if known.original != original:
                s.refused[cid] = Refusal(
                    kind="ambiguous",
                    confirmation_id=cid,
                    reason=f"Confirmation {cid!r} maps to different original calls "
                    f"({known.original.id!r} and {original.id!r}); it is not acted on.",
                    function_call_id=known.original.id,
                )
            return
        s.requests[cid] = _Request(
            original=original, requested=requested, order=(-self._position, index)
        )
        if original.id in s.settled:
            # Only a settling response handles it: a placeholder is no response (the call did
            # not run), and google-adk writes the call's placeholder after the request.
            s.handled.add(cid)

    def _awaited_originals(self) -> set[str]:
        s = self._s
        return {
            r.original.id
            for cid, r in s.requests.items()
            if cid not in s.refused and r.original.id not in s.originals
        }

    def _resolved(self) -> bool:
        s = self._s
        open_answers = [cid for cid in s.answers if cid not in s.refused]
        if any(cid not in s.requests for cid in open_answers):
            return False
        return not self._awaited_originals()

    # -- the decision --------------------------------------------------------------------------

    def result(self) -> ConfirmationRecovery:
        """Return the decision from the events fed so far (missing requests are refusals)."""
        s = self._s
        refused = dict(s.refused)
        for cid in s.answers:
            if cid in refused:
                continue
            request = s.requests.get(cid)
            if request is None:
                author = s.forged_by.get(cid)
                refused[cid] = (
                    Refusal(
                        kind="forged",
                        confirmation_id=cid,
                        reason=f"Confirmation {cid!r} was requested by {author!r}, not by agent "
                        f"{self._agent!r}; only the agent's own requests are trusted.",
                    )
                    if author is not None
                    else Refusal(
                        kind="never_issued",
                        confirmation_id=cid,
                        reason=f"Agent {self._agent!r} never requested confirmation {cid!r}.",
                    )
                )
                continue
            stored = s.originals.get(request.original.id)
            oid = request.original.id
            if stored is None:
                refused[cid] = Refusal(
                    kind="never_issued",
                    confirmation_id=cid,
                    function_call_id=oid,
                    reason=f"Confirmation {cid!r} names call {oid!r}, which agent "
                    f"{self._agent!r} never emitted.",
                )
            elif stored.name != request.original.name or stored.args != request.original.args:
                refused[cid] = Refusal(
                    kind="mismatch",
                    confirmation_id=cid,
                    function_call_id=oid,
                    reason=f"Confirmation {cid!r} embeds {request.original.name}"
                    f"({request.original.args!r}) but call {oid!r} is stored as "
                    f"{stored.name}({stored.args!r}); it is not acted on.",
                )
        return self._decide(refused)

    def _decide(self, refused: dict[str, Refusal]) -> ConfirmationRecovery:
        s = self._s
        valid = sorted(
            (cid for cid in s.answers if cid not in refused), key=lambda c: s.requests[c].order
        )
        by_original: dict[str, list[str]] = {}
        for cid in valid:
            by_original.setdefault(s.requests[cid].original.id, []).append(cid)
        calls: list[ConfirmedCall] = []
        handled: list[str] = []
        for oid, cids in by_original.items():
            answers = {(s.answers[c].confirmed, repr(s.answers[c].payload)) for c in cids}
            if len(answers) > 1:
                for cid in cids:
                    refused[cid] = Refusal(
                        kind="ambiguous",
                        confirmation_id=cid,
                        function_call_id=oid,
                        reason=f"Call {oid!r} has conflicting answers in confirmations "
                        f"{sorted(cids)}; none is acted on.",
                    )
                continue
            if oid in s.settled or any(c in s.handled for c in cids):
                handled.append(oid)
                continue
            first = cids[0]
            answer, requested = s.answers[first], s.requests[first].requested
            calls.append(
                ConfirmedCall(
                    call=s.originals[oid],
                    confirmation=ToolConfirmation(
                        hint=answer.hint or requested.hint,
                        confirmed=answer.confirmed,
                        payload=answer.payload,
                    ),
                    confirmation_id=first,
                    started_after_answer=oid in s.started,
                )
            )
        order = s.answer_order
        return ConfirmationRecovery(
            calls=tuple(calls),
            refusals=tuple(sorted(refused.values(), key=lambda r: order.index(r.confirmation_id))),
            already_handled=tuple(handled),
        )


def recover_confirmations(events: Iterable[Event], *, agent_name: str) -> ConfirmationRecovery:
    """Return the confirmation-recovery decision for ``agent_name`` from newest-first ``events``.

    Pure: the same events give the same decision; the iterable is read only as far as needed.
    """
    scan = ConfirmationScan(agent_name=agent_name)
    feed_all(scan, events)
    return scan.result()
