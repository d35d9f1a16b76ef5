"""Forking a session at a seq: where a fork may start, what it copies, and the recorded link.

Pure (no I/O): the store façade reads the origin's events and hands the result to its backend,
which copies the rows in one transaction.

**Where a fork may start: step boundaries.** A step of the runtime (docs/protocol.md §2 to §7)
starts with a model turn carrying tool calls and ends when every call of it is answered or
hands control to someone outside. Forking inside one would copy a half-done step: a call claimed
in the origin (its side effect may have happened there) with no response, which the fork's
resume would find *in doubt* or run again under the fork's own idempotency key. ``StepScan``
reads the log oldest first and says, after each event, whether the log is at rest there. It is
at rest when every function call with no settled response is one of:

- a confirmation request (``REQUEST_CONFIRMATION_FUNCTION``) with no answer: waiting for a human;
- a call whose response is the ``confirmation_required`` placeholder while a confirmation
  request for it is unanswered: waiting for that answer;
- a long-running call that was claimed (``started_call_ids``): waiting for its result.

Anything else (a call not yet claimed, claimed but unanswered, or confirmed but not yet run)
is inside a step. A newer model turn of the same author ends the older turn's calls as far as
the runtime is concerned (its resume planner reads only the newest turn), so they stop counting.
At every such boundary the runtime's own resume planner (``runtime.replay.plan_resume``) has
nothing to execute and nothing in doubt (a test checks it at every seq of the recorded corpus);
the converse does not hold where the planner reads a placeholder response as an answer (before
its confirmation request is written), which is why the store keeps its own scan.

**What a fork copies** (``artifact_versions``): the events 1..seq as stored, and of each
session-scoped artifact the versions up to the newest one the copied events refer to (an
``artifact_delta`` entry or an artifact part) — the versions that existed at that point of the
log. ``user:`` artifacts belong to the user, not the session, and are not copied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ._calls import CONFIRMATION_REQUIRED_KIND, deferred_call_ids, is_placeholder_response
from ._events import REQUEST_CONFIRMATION_FUNCTION, Event
from ._state import USER_PREFIX

__all__ = [
    "CONFIRMATION_REQUIRED_KIND",
    "ForkLink",
    "ForkPlan",
    "SessionForks",
    "StepScan",
    "artifact_versions",
]

@dataclass(frozen=True, slots=True, kw_only=True)
class ForkLink:
    """A recorded fork: session ``session_id`` was made from ``origin_session_id``'s events
    1..``origin_seq``."""

    session_id: str
    """The fork (from ``EventStore.fork_links``: the id its app gave it; from a backend: its
    key)."""
    origin_session_id: str
    """The session it was forked from, named as ``session_id`` (it may have been deleted
    since: then its key, which is the id it was given unless another user held that id)."""
    origin_seq: int
    """The origin's seq the fork was made at: the fork's first ``origin_seq`` events are the
    origin's."""
    forked_at: float
    """When the fork was made (seconds since the epoch)."""
    app_name: str = ""
    """The app of the fork and of its origin (a fork is made in its origin's app and user;
    ``EventStore.fork_links`` fills it in, a backend leaves it empty)."""
    user_id: str = ""
    """The user of the fork and of its origin (filled in as ``app_name``)."""
    link_hash: bytes | None = None
    """The row's stored ``eventstore._chain.fork_link_digest`` (None: not read, or a link
    recorded before revision 0020), for ``evs verify``."""
    signature: bytes | None = None
    """The stored signature of ``link_hash`` when a keyed store made the fork."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionForks:
    """Both sides of a session's fork links."""

    origin: ForkLink | None = None
    """Where this session was forked from, or None when it is not a fork."""
    origin_exists: bool = False
    """Whether the origin session still exists (a deleted origin leaves the link in place)."""
    forks: list[ForkLink] = field(default_factory=list)
    """The forks made of this session, oldest first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ForkPlan:
    """What a backend copies for one fork (checked by the façade; the backend re-checks that
    the origin still exists with at least ``seq`` events inside its transaction)."""

    origin_session_id: str
    """The session forked."""
    seq: int
    """Copy the origin's events 1..seq."""
    artifacts: Mapping[str, int]
    """Session-scoped artifact filename -> copy its versions ``<=`` this."""
    forked_at: float
    """Recorded with the link."""


@dataclass(slots=True)
class _OpenCall:
    name: str
    seq: int | None
    author: str
    long_running: bool
    started: bool = False
    waiting_confirmation: bool = False
    deferred: bool = False  # a deferral newer than its claim: long-running (§7)


class StepScan:
    """Sans-IO: fed a session's events oldest first, says whether the log is at rest after the
    newest one fed (a seq a fork may start at; see the module docstring)."""

    def __init__(self) -> None:
        self._calls: dict[str, _OpenCall] = {}
        self._requests: dict[str, str] = {}
        """Unanswered confirmation request id -> the original call id it asks about."""
        self._open: list[tuple[str, str, int | None]] | None = []
        """``open_calls()`` as of the newest event fed (None: to be computed again)."""

    def feed(self, event: Event) -> None:
        """Take the next (newer) event."""
        content = event.content
        deferred = deferred_call_ids(event)
        if content is None and not event.started_call_ids and not deferred:
            return  # a state delta, a decision, bookkeeping: no call opens or closes
        self._open = None
        if content is not None and content.role == "model" and event.author != "user":
            calls = event.function_calls()
            if calls and not any(c.name == REQUEST_CONFIRMATION_FUNCTION for c in calls):
                # A new model turn: the runtime plans only the newest turn of an author.
                for call_id in [i for i, c in self._calls.items()
                                if c.author == event.author and not c.waiting_confirmation]:
                    del self._calls[call_id]
            for call in calls:
                if call.name == REQUEST_CONFIRMATION_FUNCTION:
                    original = call.args.get("originalFunctionCall")
                    oid = original.get("id") if isinstance(original, Mapping) else None
                    self._requests[call.id] = oid if isinstance(oid, str) else ""
                else:
                    self._calls[call.id] = _OpenCall(
                        name=call.name, seq=event.seq, author=event.author,
                        long_running=call.id in event.long_running_tool_ids,
                    )
        for call_id in event.started_call_ids:
            found = self._calls.get(call_id)
            if found is not None:
                found.started = True
                found.deferred = False
        for call_id in deferred:
            found = self._calls.get(call_id)
            if found is not None and found.started:
                found.deferred = True
        for response in event.function_responses():
            if response.name == REQUEST_CONFIRMATION_FUNCTION:
                self._requests.pop(response.id, None)
            elif is_placeholder_response(response.response):
                found = self._calls.get(response.id)
                if found is not None:
                    found.waiting_confirmation = True
            else:
                self._calls.pop(response.id, None)

    def open_calls(self) -> list[tuple[str, str, int | None]]:
        """``(call id, tool name, seq of its model turn)`` of each call that keeps the log
        inside a step (empty: at rest)."""
        if self._open is None:
            awaited = set(self._requests.values())
            self._open = [
                (call_id, call.name, call.seq) for call_id, call in self._calls.items()
                if not (
                    (call.waiting_confirmation and call_id in awaited)
                    or ((call.long_running or call.deferred) and call.started
                        and not call.waiting_confirmation)
                )
            ]
        return list(self._open)

    def at_rest(self) -> bool:
        """Whether a fork may start after the newest event fed."""
        if self._open is None:
            self.open_calls()
        return not self._open


def artifact_versions(events: Iterable[Event]) -> dict[str, int]:
    """Session-scoped filename -> the newest version the events refer to (through
    ``artifact_delta`` or an artifact part); ``user:`` files are left out."""
    newest: dict[str, int] = {}

    def refer(filename: str, version: int) -> None:
        if not filename.startswith(USER_PREFIX):
            newest[filename] = max(version, newest.get(filename, version))

    for event in events:
        for filename, version in event.actions.artifact_delta.items():
            refer(filename, version)
        if event.content is not None:
            for part in event.content.parts:
                if part.artifact is not None:
                    refer(part.artifact.filename, part.artifact.version)
    return newest
