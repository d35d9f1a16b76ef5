"""Answering a session from outside: long-running results, confirmations, in-doubt decisions.

Any process that can open the store may call these: a web handler, a webhook, the CLI, another
worker. Each one checks the log (the call exists, it is still pending), then appends one event with
``expected_version``; when another writer moved the session in between, it re-reads and checks
again, so two answers to the same call never both land. The agent acts on the answer on its next
``Runner.run(...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    ConcurrencyError,
    Content,
    Event,
    EventStore,
    FunctionCall,
    FunctionResponse,
    Part,
)
from runtime._exceptions import (
    CallAlreadyAnsweredError,
    CallNotInDoubtError,
    RuntimeUsageError,
    UnknownCallError,
)

from ._log import USER_AUTHOR, feed_store, parse_confirmation_answer
from ._resume import RERUN_DECISION_KEY

__all__ = ["answer_confirmation", "rerun_call", "submit_response"]

DEFAULT_ATTEMPTS = 5
"""How many times an answer re-checks and retries when other writers keep moving the session."""


@dataclass(slots=True)
class _Lookup:
    """Newest-first scan for one call: its model event, its newest response and claim."""

    call_id: str
    position: int = 0
    call: FunctionCall | None = None
    response_at: tuple[int, int | None] | None = None
    claim_at: int | None = None

    def feed(self, event: Event) -> bool:
        self.position += 1
        if self.response_at is None:
            for response in event.function_responses():
                if response.id == self.call_id and (
                    response.name != REQUEST_CONFIRMATION_FUNCTION
                    or not isinstance(parse_confirmation_answer(response.response), str)
                ):
                    self.response_at = (self.position, event.seq)
        if self.claim_at is None and self.call_id in event.started_call_ids:
            self.claim_at = self.position
        model = event.content is not None and event.content.role == "model"
        if model and event.author != USER_AUTHOR:
            for call in event.function_calls():
                if call.id == self.call_id:
                    self.call = call
                    return False
        return True

    @property
    def pending(self) -> bool:
        """No response, or the newest claim is newer than the newest response (a re-run)."""
        if self.response_at is None:
            return True
        return self.claim_at is not None and self.claim_at < self.response_at[0]


async def _append_checked(
    store: EventStore,
    session_id: str,
    call_id: str,
    *,
    expect: Literal["call", "confirmation"],
    build: Callable[[FunctionCall], Event],
    attempts: int,
    in_doubt_only: bool = False,
) -> Event:
    for attempt in range(attempts):
        version = await store.version(session_id)
        lookup = _Lookup(call_id)
        await feed_store(lookup, store, session_id, upto=version)
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
        if not lookup.pending:
            at = lookup.response_at[1] if lookup.response_at else None
            raise CallAlreadyAnsweredError(
                f"{'Confirmation' if is_confirmation else 'Call'} {call_id!r} of session "
                f"{session_id!r} was already answered at seq {at}; it is answered once.",
                session_id=session_id,
                function_call_id=call_id,
                answered_at=at,
            )
        if in_doubt_only and lookup.claim_at is None:
            raise CallNotInDoubtError(
                f"Call {call_id!r} of session {session_id!r} was never started, so it is not in "
                f"doubt; the next run executes it without a decision.",
                session_id=session_id,
                function_call_id=call_id,
            )
        try:
            (stored,) = await store.append(session_id, build(call), expected_version=version)
        except ConcurrencyError:
            if attempt == attempts - 1:
                raise
            continue
        return stored
    raise AssertionError("unreachable")  # pragma: no cover


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
) -> Event:
    """Append the result of a pending call (long-running, deferred or in doubt) and return it.

    The event is docs/protocol.md §7: author ``author``, role ``user``, one function response with
    the call's id and tool name. Raises ``UnknownCallError`` when no agent of the session made
    that call, ``CallAlreadyAnsweredError`` when it already has its response, ConcurrencyError
    when other writers kept moving the session for ``attempts`` tries, SessionNotFoundError.
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

    return await _append_checked(
        store, session_id, call_id, expect="call", build=build, attempts=attempts
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
) -> Event:
    """Append the answer to an open confirmation request and return it (docs/protocol.md §6).

    Raises ``UnknownCallError`` for an id no agent requested, ``CallAlreadyAnsweredError`` when
    the confirmation was answered before, ConcurrencyError and SessionNotFoundError as
    ``submit_response``. The original call runs (or is rejected) on the agent's next run.
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

    return await _append_checked(
        store, session_id, confirmation_id, expect="confirmation", build=build, attempts=attempts
    )


async def rerun_call(
    store: EventStore,
    *,
    session_id: str,
    call_id: str,
    author: str = USER_AUTHOR,
    attempts: int = DEFAULT_ATTEMPTS,
) -> Event:
    """Decide that an in-doubt call may run again; append the decision and return it.

    The event is docs/protocol.md §9: author ``author``, no content,
    ``custom_metadata={"rerun_call_ids": [call_id]}``.

    The decision allows one more execution on the agent's next run (the resume planner honors a
    decision newer than the call's last claim). To keep the call from running again, supply its
    result with ``submit_response`` instead. Raises ``UnknownCallError``,
    ``CallAlreadyAnsweredError``, ``CallNotInDoubtError`` (never started), ConcurrencyError.
    """
    _check_attempts(attempts)

    def build(call: FunctionCall) -> Event:
        return Event(author=author, custom_metadata={RERUN_DECISION_KEY: [call.id]})

    return await _append_checked(
        store,
        session_id,
        call_id,
        expect="call",
        build=build,
        attempts=attempts,
        in_doubt_only=True,
    )
