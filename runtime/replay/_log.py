"""Reading the log's event shapes (docs/protocol.md): the small pure helpers every processor shares.

Nothing here does I/O. Parsing functions never raise on bad data from the log: they return an
error string that names what is wrong, because a malformed answer is user input, not a bug.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

import orjson

from eventstore import (
    PARENT_LINK_KEY,
    REQUEST_CONFIRMATION_FUNCTION,
    Event,
    EventStore,
    FunctionCall,
    ToolConfirmation,
    child_session_id,
)
from eventstore._call_status import is_confirmation_placeholder

__all__ = [
    "CLAIMED_BY_KEY",
    "LIVE_STREAM_ENDED_KEY",
    "PARENT_LINK_KEY",
    "BackwardScan",
    "USER_AUTHOR",
    "child_session_id",
    "confirmation_calls",
    "feed_all",
    "feed_store",
    "is_model_turn",
    "is_placeholder_response",
    "is_user_message",
    "parse_confirmation_answer",
    "parse_confirmation_request",
    "settled_response_ids",
    "tool_calls",
]

LIVE_STREAM_ENDED_KEY = "live_stream_ended"
"""``custom_metadata`` key of the event recording that a live stream ended (bookkeeping the
model never sees, so the log's head is read past it)."""

CLAIMED_BY_KEY = "claimed_by"
"""``custom_metadata`` key of a claim event (docs/protocol.md §3): who claimed the calls and when
(``invocation_id``, ``host``, ``pid``, wall-clock ``at`` in seconds since the epoch)."""

USER_AUTHOR = "user"
"""Author of events a human (or an outside submitter acting for one) appended."""


_ANSWER_KEYS = frozenset({"confirmed", "payload", "hint"})


class BackwardScan(Protocol):
    """A sans-IO processor fed events newest first; it says when it has seen enough."""

    def feed(self, event: Event) -> bool:
        """Take the next (older) event; return True while more events are needed."""
        ...


def feed_all(scan: BackwardScan, events: Iterable[Event]) -> int:
    """Feed newest-first ``events`` until ``scan`` is done; return how many were consumed.

    The iterable is consumed lazily, so a generator is read no further than needed.
    """
    consumed = 0
    for event in events:
        consumed += 1
        if not scan.feed(event):
            break
    return consumed


async def feed_store(
    scan: BackwardScan,
    store: EventStore,
    session_id: str,
    *,
    upto: int | None = None,
    first_page: int = 16,
    max_page: int = 512,
    app_name: str | None = None,
    user_id: str | None = None,
) -> int:
    """Feed the session's events newest first from the store until ``scan`` is done.

    Pages start small and double (a scan that stops early reads one small page); returns the
    number of events consumed. ``app_name``/``user_id`` address the session as the store's
    reads do (needed when several apps or users hold its id).
    """
    consumed, cursor, size = 0, upto, first_page
    while cursor is None or cursor > 0:
        page = await store.read(session_id, upto=cursor, backwards=True, limit=size,
                                app_name=app_name, user_id=user_id)
        for event in page:
            consumed += 1
            if not scan.feed(event):
                return consumed
        if len(page) < size or page[-1].seq is None:
            return consumed
        cursor, size = page[-1].seq - 1, min(size * 2, max_page)
    return consumed


def tool_calls(event: Event) -> Iterator[FunctionCall]:
    """Yield the event's function calls that are not confirmation requests."""
    for call in event.function_calls():
        if call.name != REQUEST_CONFIRMATION_FUNCTION:
            yield call


def confirmation_calls(event: Event) -> Iterator[FunctionCall]:
    """Yield the event's confirmation-request function calls."""
    for call in event.function_calls():
        if call.name == REQUEST_CONFIRMATION_FUNCTION:
            yield call


def is_model_turn(event: Event, agent_name: str) -> bool:
    """True for a model turn of ``agent_name`` (docs/protocol.md §2, §8), not a confirmation
    request."""
    if event.author != agent_name or event.content is None or event.content.role != "model":
        return False
    return not any(True for _ in confirmation_calls(event))


def is_user_message(event: Event) -> bool:
    """True for a user-authored event with text (a message, maybe beside answers)."""
    if event.author != USER_AUTHOR or event.content is None:
        return False
    return any(p.text for p in event.content.parts)


def is_placeholder_response(response: Mapping[str, Any]) -> bool:
    """True for the ``confirmation_required`` error a call gets while it waits for a human
    (docs/protocol.md §5): the call did not run, so it is not settled (the log's one rule,
    ``eventstore._call_status.is_confirmation_placeholder``)."""
    return is_confirmation_placeholder(response)


def settled_response_ids(event: Event) -> Iterator[str]:
    """Yield the ids of the tool calls this event settles: every function response except
    confirmation answers and ``confirmation_required`` placeholders."""
    for response in event.function_responses():
        if response.name != REQUEST_CONFIRMATION_FUNCTION and not is_placeholder_response(
            response.response
        ):
            yield response.id


def parse_confirmation_answer(response: Mapping[str, Any]) -> ToolConfirmation | str:
    """Return the ToolConfirmation an answer carries, or a sentence saying why it is malformed.

    Accepted shapes (docs/protocol.md §6): ``{"confirmed": bool, "payload": …}`` (``hint`` allowed),
    or ``{"response": "<that mapping as a JSON string>"}`` as web clients send it.
    """
    if set(response) == {"response"} and isinstance(response["response"], str):
        try:
            decoded = orjson.loads(response["response"])
        except orjson.JSONDecodeError as exc:
            return f"the 'response' string is not valid JSON ({exc})"
        if not isinstance(decoded, dict):
            return f"the 'response' string decodes to a {type(decoded).__name__}, not an object"
        response = decoded
    unknown = sorted(set(response) - _ANSWER_KEYS)
    if unknown:
        return f"unexpected keys {unknown}; expected 'confirmed' and optionally 'payload'"
    confirmed = response.get("confirmed")
    if not isinstance(confirmed, bool):
        return f"'confirmed' must be true or false, not {confirmed!r}"
    hint = response.get("hint", "")
    return ToolConfirmation(
        hint=hint if isinstance(hint, str) else "",
        confirmed=confirmed,
        payload=response.get("payload"),
    )


def parse_confirmation_request(
    call: FunctionCall,
) -> tuple[FunctionCall, ToolConfirmation] | str:
    """Return (embedded original call, requested confirmation) of a confirmation request.

    Returns a sentence saying what is wrong when ``args`` do not have the docs/protocol.md §5 shape.
    """
    original = call.args.get("originalFunctionCall")
    if not isinstance(original, Mapping):
        return "its 'originalFunctionCall' is missing or not an object"
    oid, name, args = original.get("id"), original.get("name"), original.get("args", {})
    if not isinstance(oid, str) or not oid or not isinstance(name, str) or not name:
        return "its 'originalFunctionCall' has no string 'id' and 'name'"
    if not isinstance(args, Mapping):
        return "its 'originalFunctionCall.args' is not an object"
    requested = call.args.get("toolConfirmation")
    hint, payload = "", None
    if isinstance(requested, Mapping):
        raw_hint = requested.get("hint", "")
        hint = raw_hint if isinstance(raw_hint, str) else ""
        payload = requested.get("payload")
    return (
        FunctionCall(id=oid, name=name, args=dict(args)),
        ToolConfirmation(hint=hint, confirmed=False, payload=payload),
    )
