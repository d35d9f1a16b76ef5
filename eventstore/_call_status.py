"""Where a function call stands, from the log alone: the one classification every view uses.

``evs show``, ``evs web``, ``evs respond`` / ``evs rerun`` (and the answer APIs under them,
``runtime.replay.submit_response`` / ``rerun_call``) all call ``call_status``, so no command
reads a call one way while another reads it differently; ``runtime.replay.pending()`` (``evs
pending``) reports the same kinds under the same names (a property test holds them together).
It is a pure function of a few facts read from the log (``CallFacts``); the readers gather those
facts the way their scan goes (a forward timeline, a newest-first lookup).

The rules (docs/protocol.md §3 to §7):

- a response other than the ``confirmation_required`` placeholder settles the call: ``answered``;
- else, with a confirmation request about the call (with several, the one a human acts on:
  an acted-on answer first, then an open request, then the newest): unanswered, it is
  ``awaiting_confirmation`` — or ``superseded`` once a user message came after the request;
  answered when the request is not the call's agent's or embeds other arguments than the call
  as stored (or answered both ways), it is ``refused`` (the next run refuses the answer; the
  call does not run);
  answered, it is ``confirmed_not_run`` / ``rejected_not_run`` (the next run executes it, or
  answers it with the rejection) unless a user message came after the request (but for one of
  the answer's own user turn) or the answer is not of the newest user turn (``superseded``: no
  run acts on it), or the approved call was claimed after the answer (then it ran, or is
  running: ``long_running`` / ``in_doubt`` as below, whatever another request about it still
  asks; a rejection runs no tool);
- else a call whose tool deferred its result after its newest claim is ``long_running``,
  whatever its confirmation requests say (its tool ran; §7);
- else a started call is ``long_running`` (its result is submitted later) or ``in_doubt``
  (started, no response: the process may have crashed), and a call never started is
  ``not_started``.

Nothing here knows the agent's tools: whether an in-doubt call is re-run by itself (an
idempotent tool) is ``pending()``'s to say, with that knowledge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from ._events import Event

__all__ = [
    "CallFacts",
    "CallStatus",
    "RequestFacts",
    "UserTurns",
    "call_status",
    "confirmation_answer",
    "deciding_request",
]

_ANSWER_KEYS = frozenset({"confirmed", "payload", "hint"})
_USER = "user"

CallStatus = Literal[
    "answered",
    "awaiting_confirmation",
    "confirmed_not_run",
    "rejected_not_run",
    "superseded",
    "refused",
    "long_running",
    "in_doubt",
    "not_started",
]
"""Where a call stands (stable strings; ``pending()``'s kinds where both speak)."""

@dataclass(frozen=True, slots=True, kw_only=True)
class RequestFacts:
    """One confirmation request about a call, with its answers."""

    seq: int
    """Seq of the event that asked."""
    confirmation_id: str
    """Its id (what ``evs confirm`` takes)."""
    trusted: bool
    """It is the call's own agent's, embedding the call as stored: an answer is acted on."""
    answers: Sequence[tuple[int, bool | None]] = ()
    """Its answers, oldest first: (seq, approved / rejected / ``None`` for a malformed answer,
    which answers nothing)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallFacts:
    """What the log says about one call, as ``call_status`` needs it (seqs are positions)."""

    settled: bool
    """A response other than the confirmation placeholder answers it."""
    long_running: bool
    """The model turn marked it long-running."""
    claim_seq: int | None = None
    """Seq of its newest execution-started claim."""
    deferred: bool = False
    """A deferral newer than its newest claim says its tool ran and its result comes from
    outside (§7): it waits for that result, whatever its confirmation requests say."""
    requests: Sequence[RequestFacts] = ()
    """The confirmation requests agents made about it, oldest first."""
    message_seqs: Sequence[int] = ()
    """Seqs of the user messages (events with text) after the call."""
    turns: UserTurns | None = None
    """The log's user turns, to tell a message of an answer's own turn from a newer one and
    an answer of the newest turn (the one a run acts on) from an older one."""


# When several requests ask about one call (a hand-edited or imported log), the one a human
# acts on decides: an answer the next run acts on, else an open request, else the newest.
_PRIORITY: tuple[CallStatus, ...] = (
    "confirmed_not_run", "rejected_not_run", "awaiting_confirmation", "refused", "superseded")


def call_status(facts: CallFacts) -> CallStatus:
    """Return where the call described by ``facts`` stands (see the module docstring)."""
    return _decided(facts)[0]


def deciding_request(facts: CallFacts) -> RequestFacts | None:
    """The confirmation request ``call_status`` read the call's status from, if any (the one
    to name: answer it, or it was answered)."""
    return _decided(facts)[1]


def _decided(facts: CallFacts) -> tuple[CallStatus, RequestFacts | None]:
    if facts.settled:
        return "answered", None
    trusted = [r for r in facts.requests if r.trusted] or list(facts.requests[-1:])
    if facts.deferred:
        return "long_running", (trusted[-1] if trusted else None)
    judged = [(_by_request(facts, r), r) for r in reversed(trusted)]
    found = [(s, r) for s, r in judged if s is not None]
    acted = {s for s, _ in found if s in ("confirmed_not_run", "rejected_not_run")}
    if len(acted) > 1:  # approved through one request, rejected through another
        return "refused", found[0][1]
    ran = next((r for s, r in judged if s is None), None)
    if ran is not None and not acted:
        # Approved, then claimed: it ran or is running, whatever another request still asks.
        return ("long_running" if facts.long_running else "in_doubt"), ran
    for wanted in _PRIORITY:
        for status, request in found:
            if status == wanted:
                return status, request
    newest = trusted[-1] if trusted else None
    if facts.claim_seq is not None:
        return ("long_running" if facts.long_running else "in_doubt"), newest
    return "not_started", newest


def _by_request(facts: CallFacts, request: RequestFacts) -> CallStatus | None:
    """The status ``request`` gives the call, or ``None`` when the claims decide (the approved
    call was claimed after the answer: it ran, or is running)."""
    turns = facts.turns if facts.turns is not None else UserTurns()
    messages = facts.message_seqs
    first = next(((seq, d) for seq, d in request.answers if d is not None), None)
    if first is None:
        return "superseded" if any(m > request.seq for m in messages) else (
            "awaiting_confirmation")
    answer, confirmed = first
    if any(request.seq < m < answer and not turns.same(m, answer) for m in messages):
        return "superseded"  # superseded before it was answered
    claim = facts.claim_seq
    if confirmed and claim is not None and claim > answer:
        return None
    # Not acted on yet: a message after the answer (but for one of the answer's own turn) or a
    # newer user turn supersedes it; another answer of its turn that is malformed or says
    # otherwise makes it refused, as an untrusted request does.
    if any(m > answer and not turns.same(m, answer) for m in messages) or not turns.newest(
            answer):
        return "superseded"
    if not request.trusted or any(turns.same(seq, answer) and d != confirmed
                                  for seq, d in request.answers):
        return "refused"
    return "confirmed_not_run" if confirmed else "rejected_not_run"


class UserTurns:
    """The user turns of a log (docs/protocol.md §6): runs of consecutive user events that
    carry function responses (answers, results); any other event ends a run, but a user event
    without content (a state edit, a decision) and a compaction event (a summary of older
    events, by any author). Feed every event in one direction, oldest or newest first; turns
    are compared, never counted."""

    def __init__(self, *, newest_first: bool = False) -> None:
        self._newest_first = newest_first
        self._turn_of: dict[int, int] = {}
        self._count = 0
        self._open = False

    def feed(self, event: Event) -> None:
        """Take the next event."""
        if event.actions.compaction is not None:
            return
        if event.author == _USER:
            if event.content is None:
                return
            if event.function_responses():
                if not self._open:
                    self._count += 1
                    self._open = True
                if event.seq is not None:
                    self._turn_of[event.seq] = self._count
                return
        self._open = False

    def same(self, seq: int, other: int) -> bool:
        """Whether the events at ``seq`` and ``other`` are of one user turn."""
        turn = self._turn_of.get(seq)
        return turn is not None and turn == self._turn_of.get(other)

    def newest(self, seq: int) -> bool:
        """Whether the event at ``seq`` is of the newest user turn fed (or no turn was fed)."""
        turn = self._turn_of.get(seq)
        if turn is None:
            return not self._turn_of
        return turn == (1 if self._newest_first else self._count)


def confirmation_answer(response: Mapping[str, Any]) -> bool | None:
    """The decision a confirmation answer carries (approved or rejected), or ``None`` when the
    answer is malformed (docs/protocol.md §6: ``{"confirmed": bool, "payload": …}``, ``hint``
    allowed, or that mapping as a JSON string under ``"response"``), which answers nothing."""
    if set(response) == {"response"} and isinstance(response["response"], str):
        try:
            decoded = orjson.loads(response["response"])
        except orjson.JSONDecodeError:
            return None
        if not isinstance(decoded, dict):
            return None
        response = decoded
    if set(response) - _ANSWER_KEYS:
        return None
    confirmed = response.get("confirmed")
    return confirmed if isinstance(confirmed, bool) else None
