"""Where a function call stands, from the log alone: the one classification every view uses.

``evs show``, ``evs web``, ``evs respond`` / ``evs rerun`` (and the answer APIs under them,
``runtime.replay.submit_response`` / ``rerun_call``) all call ``call_status``, so no command
reads a call one way while another reads it differently; ``runtime.replay.pending()`` (``evs
pending``) reports the same kinds under the same names (a property test holds them together).
It is a pure function of a few facts read from the log (``CallFacts``); the readers gather those
facts the way their scan goes (a forward timeline, a newest-first lookup).

The rules (docs/protocol.md §3 to §7):

- a response other than the ``confirmation_required`` placeholder settles the call: ``answered``;
- else, with a confirmation request about the call (the newest one): unanswered, it is
  ``awaiting_confirmation`` — or ``superseded`` once a user message came after the request;
  answered when the request is not the call's agent's or embeds other arguments than the call
  as stored, it is ``refused`` (the next run refuses the answer; the call does not run);
  answered, it is ``confirmed_not_run`` / ``rejected_not_run`` (the next run executes it, or
  answers it with the rejection) unless a user message came between the request and the answer
  or after the answer (``superseded``: no run acts on it; a message in the answer's own event is
  that turn's), or the approved call was claimed after the answer (then it ran, or is running:
  ``long_running`` / ``in_doubt`` as below; a rejection runs no tool);
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

__all__ = [
    "CONFIRMATION_REQUIRED_KIND",
    "CallFacts",
    "CallStatus",
    "call_status",
    "confirmation_answer",
    "is_confirmation_placeholder",
]

CONFIRMATION_REQUIRED_KIND = "confirmation_required"
"""The error kind of the placeholder response a call gets while it waits for a human
(docs/protocol.md §5; ``runtime.ToolErrorKind.CONFIRMATION_REQUIRED`` as stored)."""

_ANSWER_KEYS = frozenset({"confirmed", "payload", "hint"})

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
class CallFacts:
    """What the log says about one call, as ``call_status`` needs it (seqs are positions)."""

    settled: bool
    """A response other than the confirmation placeholder answers it."""
    long_running: bool
    """The model turn marked it long-running."""
    claim_seq: int | None = None
    """Seq of its newest execution-started claim."""
    request_seq: int | None = None
    """Seq of the confirmation request about it: the newest its own agent made with the call
    as stored, else the newest another agent made (or one embedding other arguments)."""
    request_trusted: bool = True
    """That request is its agent's, with the call as stored: an answer to it is acted on."""
    confirmation_id: str | None = None
    """Id of that request."""
    answer_seq: int | None = None
    """Seq of that request's (first well-formed) answer."""
    confirmed: bool | None = None
    """That answer: approved or rejected."""
    message_seqs: Sequence[int] = ()
    """Seqs of the user messages (events with text) after the request, if any."""


def call_status(facts: CallFacts) -> CallStatus:
    """Return where the call described by ``facts`` stands (see the module docstring)."""
    if facts.settled:
        return "answered"
    claim = facts.claim_seq
    if facts.request_seq is not None:
        request = facts.request_seq
        answer = facts.answer_seq
        if answer is None or facts.confirmed is None:
            if any(m > request for m in facts.message_seqs):
                return "superseded"
            return "awaiting_confirmation"
        if any(m > request and m != answer for m in facts.message_seqs):
            return "superseded"  # (a message beside the answers is that turn's own)
        if not facts.request_trusted:
            return "refused"
        if not facts.confirmed:
            return "rejected_not_run"  # a rejection runs no tool, so it is never in doubt
        if claim is None or claim < answer:
            return "confirmed_not_run"
    if claim is not None:
        return "long_running" if facts.long_running else "in_doubt"
    return "not_started"


def is_confirmation_placeholder(response: Mapping[str, Any]) -> bool:
    """True for the ``confirmation_required`` error a call gets while it waits for a human
    (docs/protocol.md §5): the call did not run, so the response does not settle it."""
    error = response.get("error")
    return isinstance(error, Mapping) and error.get("kind") == CONFIRMATION_REQUIRED_KIND


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
