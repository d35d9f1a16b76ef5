"""How a tool call's execution is recorded in the log, and what a resumer owes it.

The store owns these rules (docs/protocol.md §3, §4, §9) so that every loop that writes the log —
the runtime's and the durable wrappers of the framework integrations — claims, answers and
resumes calls alike, and ``evs pending`` reads them all the same way:

- a *claim* (execution-started event: no content, ``started_call_ids``, each call's idempotency
  key, who claimed it when) is appended with ``expected_version`` before a tool runs;
- a function response settles the call, unless it is the ``confirmation_required`` placeholder
  of a call that waits for a human (that call did not run);
- a *re-run decision* (``custom_metadata["rerun_call_ids"]``) newer than a call's newest claim
  allows exactly one more execution of a call in doubt;
- a *deferral* (``custom_metadata["deferred_call_ids"]``) newer than a call's newest claim says
  its tool handed the result to the outside while it ran (pydantic-ai's ``CallDeferred``): the
  call is long-running, as if its model turn had marked it, not in doubt (§7).

``CallLedger`` is sans-IO: fed the session's events oldest first, it says for each call whether
it is settled (and with what), waits to be run, may run again, or is *in doubt*.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._events import REQUEST_CONFIRMATION_FUNCTION, Event, FunctionCall

__all__ = [
    "CLAIMED_BY_KEY",
    "CONFIRMATION_REQUIRED_KIND",
    "DEFERRAL_KEYS",
    "DEFERRED_CALLS_KEY",
    "IDEMPOTENCY_KEYS_KEY",
    "RERUN_DECISION_KEY",
    "CallDecision",
    "CallLedger",
    "CallRecord",
    "Deferrals",
    "claim_event",
    "claimant",
    "deferred_call_ids",
    "idempotency_key",
    "is_placeholder_response",
    "rerun_call_ids",
]

CLAIMED_BY_KEY = "claimed_by"
"""``custom_metadata`` key of a claim event (docs/protocol.md §3): who claimed the calls and when
(``invocation_id``, ``host``, ``pid``, wall-clock ``at`` in seconds since the epoch)."""

IDEMPOTENCY_KEYS_KEY = "idempotency_keys"
"""``custom_metadata`` key of a claim event: ``{call id: idempotency key}``."""

RERUN_DECISION_KEY = "rerun_call_ids"
"""``custom_metadata`` key of a resume-decision event (docs/protocol.md §9): the in-doubt call ids
a human allowed to run again. Such an event has no content; it counts only if it is newer than
the call's last claim, so every decision allows one more execution."""

DEFERRED_CALLS_KEY = "deferred_call_ids"
"""``custom_metadata`` key of a deferral event (docs/protocol.md §7): no content; the claimed
calls it names wait for a result from outside (their tool said so while it ran). It counts for a
call only when it is newer than the call's newest claim."""

DEFERRAL_KEYS = (DEFERRED_CALLS_KEY, "pydantic_ai_deferred_call_ids")
"""Every key a deferral is read under: the Pydantic AI door wrote the second before deferrals
were the protocol's."""

CONFIRMATION_REQUIRED_KIND = "confirmation_required"
"""The error kind of the placeholder response a call gets while it waits for a confirmation."""

_IDEMPOTENCY_KEY_LENGTH = 32


def idempotency_key(session_id: str, call_id: str) -> str:
    """Return the stable idempotency key of one function call in one session.

    The key is the first 32 hex digits of SHA-256 over both ids (length-prefixed, so no two
    different id pairs share an input). It is the same in every process and after every resume,
    so external systems can deduplicate side effects of a re-run call.
    """
    material = f"{len(session_id)}:{session_id}|{len(call_id)}:{call_id}".encode()
    return hashlib.sha256(material).hexdigest()[:_IDEMPOTENCY_KEY_LENGTH]


def claimant(invocation_id: str) -> dict[str, Any]:
    """Return the ``claimed_by`` record of a claim made now by this process."""
    return {
        "invocation_id": invocation_id,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "at": time.time(),
    }


def claim_event(
    *,
    session_id: str,
    call_ids: Sequence[str],
    author: str,
    invocation_id: str,
    branch: str | None = None,
) -> Event:
    """Return the execution-started event (docs/protocol.md §3) claiming ``call_ids``: append it
    with ``expected_version`` before the tools run; a concurrency error then means another
    process moved the session, and none of the calls may run."""
    keys = {call_id: idempotency_key(session_id, call_id) for call_id in call_ids}
    return Event(
        author=author,
        invocation_id=invocation_id,
        branch=branch,
        started_call_ids=tuple(keys),
        custom_metadata={IDEMPOTENCY_KEYS_KEY: keys, CLAIMED_BY_KEY: claimant(invocation_id)},
    )


def is_placeholder_response(response: Mapping[str, Any]) -> bool:
    """True for the ``confirmation_required`` error a call gets while it waits for a human
    (docs/protocol.md §5): the call did not run, so it is not settled."""
    error = response.get("error")
    return isinstance(error, Mapping) and error.get("kind") == CONFIRMATION_REQUIRED_KIND


def rerun_call_ids(event: Event) -> tuple[str, ...]:
    """Return the call ids a resume-decision event allows to re-run (empty for other events)."""
    ids = event.custom_metadata.get(RERUN_DECISION_KEY)
    if not isinstance(ids, list):
        return ()
    return tuple(i for i in ids if isinstance(i, str))


def deferred_call_ids(event: Event) -> tuple[str, ...]:
    """Return the call ids a deferral event names (empty for other events)."""
    for key in DEFERRAL_KEYS:
        ids = event.custom_metadata.get(key)
        if isinstance(ids, list):
            return tuple(i for i in ids if isinstance(i, str))
    return ()


class Deferrals:
    """Which calls wait for a result from outside because a deferral newer than their newest
    claim says so (sans-IO); a deferral of a call never claimed before it is no deferral (a
    door writes it after the claim, §7), as ``CallLedger`` and ``evs show`` read it. Feed every
    claim and deferral in one direction: oldest first, or newest first with
    ``newest_first=True``; then ask ``call_id in deferrals``."""

    def __init__(self, *, newest_first: bool = False) -> None:
        self._newest_first = newest_first
        self._deferred: set[str] = set()
        self._claimed: set[str] = set()  # calls claimed (newest first: whose newest claim was seen)
        self._unclaimed: set[str] = set()  # newest first: deferred, no claim seen yet to count it

    def feed(self, event: Event) -> None:
        """Take the next event (a claim and a deferral in one event: the claim first)."""
        if self._newest_first:
            self._unclaimed.update(i for i in deferred_call_ids(event)
                                   if i not in self._claimed)
            for call_id in event.started_call_ids:
                if call_id in self._unclaimed and call_id not in self._claimed:
                    self._deferred.add(call_id)  # its newest claim, older than the deferral
                self._claimed.add(call_id)
        else:
            self._deferred.difference_update(event.started_call_ids)
            self._claimed.update(event.started_call_ids)
            self._deferred.update(i for i in deferred_call_ids(event) if i in self._claimed)

    def __contains__(self, call_id: object) -> bool:
        return call_id in self._deferred


CallDecision = Literal["settled", "run", "rerun", "in_doubt", "waits_for_confirmation"]
"""What a resumer owes a call (stable strings):

- ``settled``: a response is recorded; return it, never run the tool again;
- ``run``: never claimed; claim it, then run it;
- ``rerun``: claimed without a response, and it may run once more (its tool is idempotent, or a
  re-run decision newer than its newest claim allows it); claim it again, then run it;
- ``in_doubt``: claimed without a response (its process may have crashed mid-run) and nothing
  allows another run: wait for ``evs respond`` (its result) or ``evs rerun``;
- ``waits_for_confirmation``: its only response is the ``confirmation_required`` placeholder.
"""


@dataclass(kw_only=True)
class CallRecord:
    """What the log says of one call (by id)."""

    call: FunctionCall | None = None
    """The call as the model turn recorded it (None when only a claim or response names it)."""
    response: Mapping[str, Any] | None = None
    """The response that settles it (the first one; None while unsettled)."""
    placeholder: bool = False
    """It got the ``confirmation_required`` placeholder (and nothing settled it since)."""
    placeholder_seq: int | None = None
    """``seq`` of its newest placeholder: a claim older than it is an execution that ended
    asking for a confirmation (the tool asked for it itself), not one that may have crashed."""
    claims: int = 0
    """How many claims name it."""
    last_claim_seq: int | None = None
    """``seq`` of its newest claim."""
    rerun_allowed: bool = False
    """A re-run decision newer than its newest claim allows one more execution."""
    deferred: bool = False
    """A deferral newer than its newest claim: the call waits for its result from outside (§7),
    as a long-running call does; a resumer does not run it again."""

    def decision(self, *, idempotent: bool = False) -> CallDecision:
        """What a resumer owes this call; ``idempotent``: its tool may safely run again."""
        if self.response is not None:
            return "settled"
        if self.claims == 0:
            return "waits_for_confirmation" if self.placeholder else "run"
        if idempotent or self.rerun_allowed:
            return "rerun"
        return "in_doubt"


@dataclass
class CallLedger:
    """Every call of a session's log, fed oldest first (sans-IO; replaying the same events
    gives the same ledger)."""

    records: dict[str, CallRecord] = field(default_factory=dict)
    """Call id → what the log says of it."""

    @classmethod
    def of(cls, events: Iterable[Event]) -> CallLedger:
        """The ledger of ``events`` (oldest first)."""
        ledger = cls()
        for event in events:
            ledger.feed(event)
        return ledger

    def _record(self, call_id: str) -> CallRecord:
        record = self.records.get(call_id)
        if record is None:
            record = self.records[call_id] = CallRecord()
        return record

    def feed(self, event: Event) -> None:
        """Take the next (newer) event."""
        for call in event.function_calls():
            if call.name != REQUEST_CONFIRMATION_FUNCTION:
                self._record(call.id).call = call
        for call_id in event.started_call_ids:
            record = self._record(call_id)
            record.claims += 1
            record.last_claim_seq = event.seq
            record.rerun_allowed = False
            record.deferred = False
        for call_id in deferred_call_ids(event):
            if call_id in self.records and self.records[call_id].claims:
                self.records[call_id].deferred = True
        for call_id in rerun_call_ids(event):
            if call_id in self.records and self.records[call_id].claims:
                self.records[call_id].rerun_allowed = True
        for response in event.function_responses():
            if response.name == REQUEST_CONFIRMATION_FUNCTION:
                continue
            record = self._record(response.id)
            if record.response is not None:
                continue
            if is_placeholder_response(response.response):
                record.placeholder = True
                record.placeholder_seq = event.seq
            else:
                record.response = response.response
                record.placeholder = False

    def get(self, call_id: str) -> CallRecord:
        """The record of ``call_id`` (an empty one when the log never named it)."""
        return self.records.get(call_id) or CallRecord()
