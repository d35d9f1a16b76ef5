"""Answering a session from outside: long-running results, confirmations, in-doubt decisions.

Any process that can open the store may call these: a web handler, a webhook, the CLI, another
worker. Each one checks the log (the call exists, it is still pending), then appends one event with
``expected_version``; when another writer moved the session in between, it re-reads and checks
again, so two answers to the same call never both land. The agent acts on the answer on its next
``Runner.run(...)``. An id the session does not have is looked up in the child sessions of its
open ``AgentTool`` calls (a paused child's items are answered where they live, each on its own);
the parent's next run then continues the child.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, assert_never

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    ConcurrencyError,
    Content,
    Deferrals,
    Event,
    EventStore,
    FunctionCall,
    FunctionResponse,
    Part,
)
from eventstore._call_status import (
    CallFacts,
    CallStatus,
    RequestFacts,
    UserTurns,
    call_status,
    confirmation_answer,
    deciding_request,
)
from runtime._exceptions import (
    CallAlreadyAnsweredError,
    CallNotInDoubtError,
    ClaimTooRecentError,
    ConfirmationSupersededError,
    ResultNotAwaitedError,
    RuntimeUsageError,
    UnknownCallError,
)

from ._children import MAX_CHILD_DEPTH, open_children
from ._log import (
    CLAIMED_BY_KEY,
    USER_AUTHOR,
    feed_store,
    is_placeholder_response,
    is_user_message,
    parse_confirmation_answer,
    parse_confirmation_request,
    settled_response_ids,
)
from ._resume import RERUN_DECISION_KEY, superseded_answer

__all__ = ["answer_confirmation", "open_child_sessions", "rerun_call", "submit_response"]

DEFAULT_ATTEMPTS = 5
"""How many times an answer re-checks and retries when other writers keep moving the session."""


@dataclass(slots=True)
class _Lookup:
    """Newest-first scan for one call: its model event, its newest response and claim, and the
    user message closest after it."""

    call_id: str
    position: int = 0
    call: FunctionCall | None = None
    response_at: tuple[int, int | None] | None = None
    response_event: Event | None = None
    placeholder: bool = False
    settled_at: int | None = None
    claim_at: int | None = None
    claim: Event | None = None
    message: Event | None = None
    author: str | None = None
    long_running: bool = False
    requests: list[tuple[int, str, str, FunctionCall]] = field(default_factory=list)
    answers: dict[str, list[tuple[int, bool | None]]] = field(default_factory=dict)
    messages: list[int] = field(default_factory=list)
    turns: UserTurns = field(default_factory=lambda: UserTurns(newest_first=True))
    deferrals: Deferrals = field(default_factory=lambda: Deferrals(newest_first=True))
    invocation_id: str = ""
    """The invocation of the model event that made the call (an answer joins it)."""

    def feed(self, event: Event) -> bool:
        self.position += 1
        self._note_confirmations(event)
        self.turns.feed(event)
        self.deferrals.feed(event)
        for response in event.function_responses():
            if response.id != self.call_id:
                continue
            if self.response_at is None and (
                response.name != REQUEST_CONFIRMATION_FUNCTION
                or not isinstance(parse_confirmation_answer(response.response), str)
            ):
                self.response_at = (self.position, event.seq)
                self.response_event = event
                self.placeholder = is_placeholder_response(response.response)
        if self.settled_at is None and self.call_id in settled_response_ids(event):
            self.settled_at = event.seq
        if self.claim_at is None and self.call_id in event.started_call_ids:
            self.claim_at = self.position
            self.claim = event
        model = event.content is not None and event.content.role == "model"
        if model and event.author != USER_AUTHOR:
            for call in event.function_calls():
                if call.id == self.call_id:
                    self.call, self.author = call, event.author
                    self.long_running = (call.id in event.long_running_tool_ids
                                         or call.id in self.deferrals)
                    self.invocation_id = event.invocation_id
                    return False
        if is_user_message(event):
            self.message = event  # read newest first: ends as the closest message after the call
            if event.seq is not None:
                self.messages.append(event.seq)
        return True

    def _note_confirmations(self, event: Event) -> None:
        """The confirmation requests about the call and their answers (``call_status``)."""
        seq = event.seq or 0
        for response in event.function_responses():
            if response.name == REQUEST_CONFIRMATION_FUNCTION:
                self.answers.setdefault(response.id, []).insert(
                    0, (seq, confirmation_answer(response.response)))  # read newest first
        if event.author == USER_AUTHOR or event.content is None:
            return
        for call in event.function_calls():
            if call.name != REQUEST_CONFIRMATION_FUNCTION:
                continue
            parsed = parse_confirmation_request(call)
            if not isinstance(parsed, str) and parsed[0].id == self.call_id:
                self.requests.append((seq, call.id, event.author, parsed[0]))

    def facts(self) -> CallFacts:
        """What the scan found about the call, as ``call_status`` (the one rule every command
        and view uses) takes it. Only meaningful once the call was found."""
        call = self.call
        return CallFacts(
            settled=self.settled_at is not None,
            long_running=self.long_running,
            claim_seq=self.claim.seq if self.claim is not None else None,
            deferred=self.call_id in self.deferrals,
            requests=[RequestFacts(
                seq=seq, confirmation_id=cid, answers=self.answers.get(cid, ()),
                trusted=(call is not None and author == self.author
                         and embedded.name == call.name and embedded.args == call.args),
            ) for seq, cid, author, embedded in reversed(self.requests)],
            message_seqs=self.messages,
            turns=self.turns,
        )

    def status(self) -> CallStatus:
        """Where the call stands (``call_status``)."""
        return call_status(self.facts())

    def confirmation_id(self) -> str | None:
        """The id of the request the status is read from, if any (``deciding_request``)."""
        request = deciding_request(self.facts())
        return request.confirmation_id if request else None

    @property
    def pending(self) -> bool:
        """No response, or the newest claim is newer than the newest response (a re-run)."""
        if self.response_at is None:
            return True
        return self.claim_at is not None and self.claim_at < self.response_at[0]


_Where = tuple[str, str]
"""The (app, user) a session belongs to: with its id, its full address in the store."""


async def _lookup(
    store: EventStore, session_id: str, call_id: str, version: int, where: _Where
) -> _Lookup:
    lookup = _Lookup(call_id)
    await feed_store(lookup, store, session_id, upto=version, app_name=where[0],
                     user_id=where[1])
    return lookup


async def _unsigned_answer(
    store: EventStore, session_id: str, lookup: _Lookup, where: _Where
) -> bool:
    """Whether the answer ``lookup`` found is one a keyed store cannot vouch for, given by a
    user (only answers, nothing else): the owner may then answer again with the key, and the
    runner skips the unsigned answer the signed one supersedes (``superseded_answer``)."""
    event = lookup.response_event
    if not store.keyed or event is None or event.seq is None:
        return False
    if not superseded_answer(event, {r.id for r in event.function_responses()}):
        return False
    return bool(await store.untrusted(session_id, after=event.seq - 1, upto=event.seq,
                                      app_name=where[0], user_id=where[1]))


async def _check_confirmation(
    store: EventStore, session_id: str, lookup: _Lookup, version: int, where: _Where
) -> None:
    """Refuse answering a superseded request or one whose original call is already settled."""
    cid = lookup.call_id
    message = lookup.message
    if message is not None:
        raise ConfirmationSupersededError(
            f"Confirmation {cid!r} of session {session_id!r} was superseded by the user's "
            f"message {message.id!r} (seq {message.seq}), sent after the request; it can no "
            "longer be answered. The agent acts on the newer message.",
            session_id=session_id,
            function_call_id=cid,
            message_id=message.id,
            message_seq=message.seq,
        )
    assert lookup.call is not None
    parsed = parse_confirmation_request(lookup.call)
    if isinstance(parsed, str):
        return
    original = await _lookup(store, session_id, parsed[0].id, version, where)
    if original.settled_at is not None:
        raise CallAlreadyAnsweredError(
            f"Call {parsed[0].id!r} of session {session_id!r}, which confirmation {cid!r} asks "
            f"about, was already answered at seq {original.settled_at}; a call with a response "
            "never runs again.",
            session_id=session_id,
            function_call_id=cid,
            answered_at=original.settled_at,
        )


def _not_awaited(session_id: str, lookup: _Lookup, *, want: str) -> str | None:
    """Why a call of status other than started-and-unanswered takes no ``want`` (a result, a
    re-run decision), or ``None`` when it is such a call or already answered (said apart)."""
    status = lookup.status()
    where = f"Call {lookup.call_id!r} of session {session_id!r}"
    asked = lookup.confirmation_id()
    if status == "long_running" or status == "in_doubt" or status == "answered":
        return None
    if status == "awaiting_confirmation":
        return (f"{where} did not run: it waits for a confirmation ({asked!r}), not for a "
                f"{want}: answer it with answer_confirmation(session_id={session_id!r}, "
                f"confirmation_id={asked!r}, confirmed=…).")
    if status == "confirmed_not_run":
        return (f"{where} was confirmed (confirmation {asked!r}) and has not run yet: the "
                f"agent's next run executes it, so it takes no {want}.")
    if status == "rejected_not_run":
        return (f"{where} was rejected (confirmation {asked!r}): the agent's next run answers it "
                f"with the rejection and does not run the tool, so it takes no {want}.")
    if status == "superseded":
        return (f"{where} does not run: a newer user message superseded its confirmation "
                f"{asked!r}, so it takes no {want}.")
    if status == "refused":
        return (f"{where} does not run: the answer to confirmation {asked!r} is refused (the "
                "request is not its agent's, or embeds other arguments than the call as "
                f"stored), so it takes no {want}.")
    if status == "not_started":
        return (f"{where} was never started, so it takes no {want}: the next run executes it "
                "(after a confirmation when its tool needs one). A result is accepted only for a "
                "started, unanswered call (long-running or in doubt).")
    assert_never(status)


def _check_result_awaited(session_id: str, lookup: _Lookup) -> None:
    why = _not_awaited(session_id, lookup, want="result")
    if why is not None:
        raise ResultNotAwaitedError(why, session_id=session_id,
                                    function_call_id=lookup.call_id)


def _check_claim_age(session_id: str, lookup: _Lookup, min_claim_age: float | None) -> None:
    if not min_claim_age or lookup.claim is None:
        return
    by = lookup.claim.custom_metadata.get(CLAIMED_BY_KEY)
    at = by.get("at") if isinstance(by, Mapping) else None
    # A claim written before claims recorded ``claimed_by`` still has its event timestamp.
    when_claimed = float(at) if isinstance(at, int | float) else lookup.claim.timestamp
    age = max(0.0, time.time() - when_claimed)
    if age >= min_claim_age:
        return
    who = ""
    if isinstance(by, Mapping):
        who = (
            f" by invocation {by.get('invocation_id')!r} on host {by.get('host')!r} "
            f"(pid {by.get('pid')})"
        )
    raise ClaimTooRecentError(
        f"Call {lookup.call_id!r} of session {session_id!r} was claimed {age:.0f} s ago{who}; "
        f"it may still be running (threshold {min_claim_age:.0f} s). Wait, or decide anyway "
        "(evs rerun --force).",
        session_id=session_id,
        function_call_id=lookup.call_id,
        age=age,
    )


async def _append_checked(
    store: EventStore,
    session_id: str,
    call_id: str,
    *,
    where: _Where,
    expect: Literal["call", "confirmation"],
    build: Callable[[FunctionCall], Event],
    attempts: int,
    in_doubt_only: bool = False,
    result: bool = False,
    min_claim_age: float | None = None,
) -> Event:
    for attempt in range(attempts):
        version = await store.version(session_id, app_name=where[0], user_id=where[1])
        lookup = await _lookup(store, session_id, call_id, version, where)
        call = lookup.call
        is_confirmation = call is not None and call.name == REQUEST_CONFIRMATION_FUNCTION
        if call is None or (expect == "confirmation") != is_confirmation:
            what = "confirmation request" if expect == "confirmation" else "function call"
            hint = ""
            if call is not None:
                hint = (
                    " It is a confirmation request: use answer_confirmation()."
                    if is_confirmation
                    else " It is a function call, not a confirmation request: use "
                    "submit_response()."
                )
            raise UnknownCallError(
                f"Session {session_id!r} has no {what} with id {call_id!r} from an agent.{hint}",
                session_id=session_id,
                function_call_id=call_id,
            )
        if result:
            _check_result_awaited(session_id, lookup)
        if in_doubt_only and not is_confirmation:
            why = _not_awaited(session_id, lookup, want="re-run decision")
            if why is None and lookup.status() == "long_running":
                # Resume never re-runs a long-running or deferred call (its result comes from
                # outside), so a decision to re-run it would be stored and change nothing.
                why = (f"Call {call_id!r} of session {session_id!r} is long-running (or "
                       "deferred): it waits for its result, not for a re-run decision; supply "
                       f"it with submit_response(session_id={session_id!r}, "
                       f"call_id={call_id!r}, response=…).")
            if why is not None:
                raise CallNotInDoubtError(why, session_id=session_id, function_call_id=call_id)
        if not lookup.pending and not await _unsigned_answer(store, session_id, lookup, where):
            at = lookup.response_at[1] if lookup.response_at else None
            raise CallAlreadyAnsweredError(
                f"{'Confirmation' if is_confirmation else 'Call'} {call_id!r} of session "
                f"{session_id!r} was already answered at seq {at}; it is answered once.",
                session_id=session_id,
                function_call_id=call_id,
                answered_at=at,
            )
        if is_confirmation:
            await _check_confirmation(store, session_id, lookup, version, where)
        if in_doubt_only and lookup.claim_at is None:
            raise CallNotInDoubtError(
                f"Call {call_id!r} of session {session_id!r} was never started, so it is not in "
                f"doubt; the next run executes it without a decision.",
                session_id=session_id,
                function_call_id=call_id,
            )
        if in_doubt_only:
            _check_claim_age(session_id, lookup, min_claim_age)
        answer = build(call)
        if not answer.invocation_id and lookup.invocation_id:
            # An answer belongs to the invocation that made the call, as frameworks that
            # resume an invocation by id (google-adk's Resume) write it themselves.
            answer = dataclasses.replace(answer, invocation_id=lookup.invocation_id)
        try:
            (stored,) = await store.append(session_id, answer, expected_version=version,
                                           app_name=where[0], user_id=where[1])
        except ConcurrencyError:
            if attempt == attempts - 1:
                raise
            continue
        return stored
    raise AssertionError("unreachable")  # pragma: no cover


async def open_child_sessions(
    store: EventStore, session_id: str, *, app_name: str | None = None,
    user_id: str | None = None,
) -> list[str]:
    """Ids of the ``AgentTool`` child sessions of the session's open calls (started, no settled
    response), in call order: where a paused child's pending items live. A child belongs to its
    parent's app and user; ``app_name``/``user_id`` pick the parent when several hold its id."""
    return [child for _, child in await open_children(store, session_id, app_name=app_name,
                                                      user_id=user_id)]


async def _routed(
    store: EventStore,
    session_id: str,
    answer: Callable[[str, _Where], Awaitable[Event]],
    *,
    app_name: str | None,
    user_id: str | None,
) -> Event:
    """Find the session (AmbiguousSessionError when several apps or users hold its id and the
    caller did not pick one), then answer there or in its children (``_answered``)."""
    info = await store.session_info(session_id, app_name=app_name, user_id=user_id)
    return await _answered(store, session_id, answer, (info.app_name, info.user_id))


async def _answered(
    store: EventStore, session_id: str, answer: Callable[[str, _Where], Awaitable[Event]],
    where: _Where, depth: int = 0,
) -> Event:
    """Append in ``session_id``, or, when it has no such call, in the child session of an open
    ``AgentTool`` call that has it (each child item is answered where it lives; children share
    the parent's app and user)."""
    try:
        return await answer(session_id, where)
    except UnknownCallError:
        if depth >= MAX_CHILD_DEPTH:
            raise
        for child in await open_child_sessions(store, session_id, app_name=where[0],
                                               user_id=where[1]):
            try:
                return await _answered(store, child, answer, where, depth + 1)
            except UnknownCallError:
                continue
        raise


def _check_attempts(attempts: int) -> None:
    if attempts < 1:
        raise RuntimeUsageError(f"attempts must be at least 1, not {attempts}.")


async def submit_response(
    store: EventStore,
    *,
    session_id: str,
    call_id: str,
    response: Mapping[str, Any],
    author: str = USER_AUTHOR,
    attempts: int = DEFAULT_ATTEMPTS,
    app_name: str | None = None,
    user_id: str | None = None,
) -> Event:
    """Append the result of a call that awaits one and return it.

    A result is awaited only for a started, unanswered call: a long-running or deferred call, or
    a call in doubt. The event is docs/protocol.md §7: author ``author``, role ``user``, one
    function response with the call's id and tool name. Raises ``UnknownCallError`` when no
    agent of the session made that call, ``CallAlreadyAnsweredError`` when it already has its
    response, ``ResultNotAwaitedError`` when it was never started or waits for a confirmation,
    ConcurrencyError when other writers kept moving the session for ``attempts`` tries,
    SessionNotFoundError. ``app_name``/``user_id`` pick the session when several apps or users
    hold its id (without them: AmbiguousSessionError listing who does).
    """
    _check_attempts(attempts)
    if not isinstance(response, Mapping):
        raise RuntimeUsageError(
            f"A response must be a mapping (e.g. {{'result': ...}}), not {type(response).__name__}."
        )

    def build(call: FunctionCall) -> Event:
        part = Part(
            function_response=FunctionResponse(id=call.id, name=call.name, response=dict(response))
        )
        return Event(author=author, content=Content(role="user", parts=(part,)))

    return await _routed(
        store,
        session_id,
        lambda sid, where: _append_checked(
            store, sid, call_id, where=where, expect="call", build=build, attempts=attempts,
            result=True,
        ),
        app_name=app_name,
        user_id=user_id,
    )


async def answer_confirmation(
    store: EventStore,
    *,
    session_id: str,
    confirmation_id: str,
    confirmed: bool,
    payload: Any = None,
    author: str = USER_AUTHOR,
    attempts: int = DEFAULT_ATTEMPTS,
    app_name: str | None = None,
    user_id: str | None = None,
) -> Event:
    """Append the answer to an open confirmation request and return it (docs/protocol.md §6).

    Raises ``UnknownCallError`` for an id no agent requested, ``CallAlreadyAnsweredError`` when
    the confirmation was answered before or its original call already has a response,
    ``ConfirmationSupersededError`` when the user sent a message after the request (naming it),
    ConcurrencyError, SessionNotFoundError and ``app_name``/``user_id`` as ``submit_response``.
    The original call runs (or is rejected) on the agent's next run.
    """
    _check_attempts(attempts)
    if not isinstance(confirmed, bool):
        raise RuntimeUsageError(f"confirmed must be True or False, not {confirmed!r}.")

    def build(call: FunctionCall) -> Event:
        part = Part(
            function_response=FunctionResponse(
                id=call.id,
                name=REQUEST_CONFIRMATION_FUNCTION,
                response={"confirmed": confirmed, "payload": payload},
            )
        )
        return Event(author=author, content=Content(role="user", parts=(part,)))

    return await _routed(
        store,
        session_id,
        lambda sid, where: _append_checked(
            store, sid, confirmation_id, where=where, expect="confirmation", build=build,
            attempts=attempts,
        ),
        app_name=app_name,
        user_id=user_id,
    )


async def rerun_call(
    store: EventStore,
    *,
    session_id: str,
    call_id: str,
    author: str = USER_AUTHOR,
    attempts: int = DEFAULT_ATTEMPTS,
    min_claim_age: float | None = None,
    app_name: str | None = None,
    user_id: str | None = None,
) -> Event:
    """Decide that an in-doubt call may run again; append the decision and return it.

    The event is docs/protocol.md §9: author ``author``, no content,
    ``custom_metadata={"rerun_call_ids": [call_id]}``.

    The decision allows one more execution on the agent's next run (the resume planner honors a
    decision newer than the call's last claim). To keep the call from running again, supply its
    result with ``submit_response`` instead. With ``min_claim_age`` (seconds), a call whose newest
    claim is younger (or records no time) is refused with ``ClaimTooRecentError``: its claimant
    may still be running it. Raises ``UnknownCallError``, ``CallAlreadyAnsweredError``,
    ``CallNotInDoubtError`` (never started), ``ClaimTooRecentError``, ConcurrencyError;
    ``app_name``/``user_id`` as ``submit_response``.
    """
    _check_attempts(attempts)

    def build(call: FunctionCall) -> Event:
        return Event(author=author, custom_metadata={RERUN_DECISION_KEY: [call.id]})

    return await _routed(
        store,
        session_id,
        lambda sid, where: _append_checked(
            store,
            sid,
            call_id,
            where=where,
            expect="call",
            build=build,
            attempts=attempts,
            in_doubt_only=True,
            min_claim_age=min_claim_age,
        ),
        app_name=app_name,
        user_id=user_id,
    )
