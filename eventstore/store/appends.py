"""The store's appends: encoding events for the backend (``prepare``), ``append`` and
compaction (``compact``, and ``read_compacted``, what a run loads after one). Knows no SQL.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping

from eventstore._args import MAX_INT, check_lookup, check_str, is_utf8, shown
from eventstore._codec import check_event, event_kind, with_seq
from eventstore._compacted import CompactedHistory, compact_session, read_compacted
from eventstore._encode_fast import encode_plain
from eventstore._events import Content, Event
from eventstore._exceptions import (
    InvalidEventError,
    SessionExistsError,
    SessionNotFoundError,
    StoreUsageError,
)
from eventstore._scopes import scope_deltas
from eventstore._state import TEMP_PREFIX, touches_shared_keys
from eventstore._statefold import decode_stored
from eventstore._stored import STORED_SCHEMA_VERSION, encode_compact
from eventstore.backends.protocol import (
    Backend,
    NewEvent,
    SessionRecord,
    StoredEvent,
    new_event,
    written,
)

from .reads import EventReads

__all__ = ["MAX_COLUMN_CHARS", "AppendMethods", "event_batch", "prepare"]


def event_batch(events: object, method: str, *, empty_ok: bool = False) -> list[Event]:
    """``events`` (an Event or an iterable of Events) as a list; InvalidEventError when it is
    neither, or empty and not ``empty_ok``. A non-empty list is returned as it is."""
    if type(events) is list and events:  # what nearly every caller passes
        return events
    if isinstance(events, Event):
        return [events]
    if isinstance(events, Iterable) and not isinstance(events, (str, bytes, Mapping)):
        batch = list(events)
        if not batch and not empty_ok:
            raise InvalidEventError(f"{method}() needs at least one event.")
        return batch
    raise InvalidEventError(
        f"{method}() takes an Event or an iterable of Events, not {type(events).__name__}."
    )


_CREATE_TURNS = 3
"""How many times ``append(create=True)`` tries to make or append to a session that other
processes keep making and deleting."""

MAX_COLUMN_CHARS = 255
"""The most characters an event id, invocation id or author may have (their columns' size)."""


def _refuse_nul(event: Event) -> None:
    """Raise InvalidEventError when a text column of ``event`` cannot be stored the same way on
    every backend: NUL (no backend stores one), a lone surrogate (not UTF-8), or an id,
    invocation id or author longer than ``MAX_COLUMN_CHARS``. Values that are not strings are
    left for the encoder to refuse."""
    values = (event.id, event.invocation_id, event.author, event.branch or "")
    try:
        joined = "".join(values)  # one search where all four are strings
    except TypeError:
        joined = None
    if (
        joined is not None
        and "\0" not in joined
        and (joined.isascii() or is_utf8(joined))
        and max(len(values[0]), len(values[1]), len(values[2])) <= MAX_COLUMN_CHARS
    ):
        return
    for what, value in zip(("id", "invocation_id", "author", "branch"), values, strict=True):
        if not isinstance(value, str):
            continue
        if "\0" in value:
            raise InvalidEventError(
                f"Event {event.id!r}: its {what} {value!r} contains NUL, which no backend "
                "stores.", event_id=event.id)
        if not is_utf8(value):
            raise InvalidEventError(
                f"Event {event.id!r}: its {what} {value!r} holds a lone surrogate, which is not "
                "UTF-8 text and no backend stores.", event_id=event.id)
        if what != "branch" and len(value) > MAX_COLUMN_CHARS:
            raise InvalidEventError(
                f"Event {_clip(event.id)!r}: its {what} has {len(value)} characters; at most "
                f"{MAX_COLUMN_CHARS} are stored.", event_id=_clip(event.id))


def _clip(text: str) -> str:
    return text if len(text) <= 80 else f"{text[:60]}…({len(text)} characters)"


def prepare(event: Event) -> tuple[Event, NewEvent]:
    """``event`` without its ``temp:`` state, and its envelope for the backend; raises
    InvalidEventError when it cannot be stored."""
    if not isinstance(event, Event):
        raise InvalidEventError(f"Expected an Event, got a {type(event).__name__}.")
    delta = event.actions.state_delta
    # Non-string keys are left for encode_event to refuse with a message naming them.
    if delta and any(isinstance(k, str) and k.startswith(TEMP_PREFIX) for k in delta):
        kept = {
            k: v for k, v in delta.items()
            if not (isinstance(k, str) and k.startswith(TEMP_PREFIX))
        }
        event = dataclasses.replace(
            event, actions=dataclasses.replace(event.actions, state_delta=kept)
        )
    deletions = event.actions.state_deletions
    if deletions and type(deletions) is tuple and any(
        isinstance(k, str) and k.startswith(TEMP_PREFIX) for k in deletions
    ):
        event = dataclasses.replace(event, actions=dataclasses.replace(
            event.actions,
            state_deletions=tuple(
                k for k in deletions if not (isinstance(k, str) and k.startswith(TEMP_PREFIX))
            ),
        ))
    _refuse_nul(event)
    payload = encode_plain(event)
    if payload is None:  # not plain, or refused: the walk names what is wrong
        check_event(event)
        try:
            payload = encode_compact(event)
        except TypeError as exc:
            raise InvalidEventError(
                f"Event {event.id!r} cannot be encoded as JSON: {exc}", event_id=event.id
            ) from exc
    actions = event.actions
    # Most events set no state: the two scans of touches_shared_keys are skipped for them.
    shared = bool(actions.state_delta or actions.state_deletions) and touches_shared_keys(actions)
    app_delta, user_delta = scope_deltas(actions) if shared else (None, None)
    return event, new_event(event.id, event_kind(event), event.invocation_id, event.author,
                            event.timestamp, shared, STORED_SCHEMA_VERSION, payload,
                            app_delta, user_delta)


class AppendMethods(EventReads):
    """Mixed into EventStore: ``append``, ``compact``, ``read_compacted`` and the encoding."""

    _prepare = staticmethod(prepare)

    @staticmethod
    def decode(stored: StoredEvent) -> Event:
        """Decode one stored envelope; raises CorruptEventError naming session and seq."""
        return decode_stored(stored)

    async def append(
        self,
        session_id: str,
        events: Event | Iterable[Event],
        *,
        expected_version: int | None,
        app_name: str | None = None,
        user_id: str | None = None,
        create: bool = False,
    ) -> list[Event]:
        """Append events atomically after ``expected_version`` and return them with ``seq`` set.

        ``expected_version`` is the ``seq`` of the newest event the caller saw (0 for an empty
        session); ``None`` appends at head without a check. ``temp:`` state keys are dropped.
        Re-appending events that are all stored with identical payloads returns them and writes
        nothing. Raises ConcurrencyError, DuplicateEventError, InvalidEventError or
        SessionNotFoundError (AmbiguousSessionError: see ``get_session``); after any error
        nothing was written.

        ``create=True`` (``app_name`` and ``user_id`` given, ``expected_version`` None or 0):
        when the app's user has no session ``session_id``, it is created with ``events`` as its
        first, in one transaction as ``create_session(events=…)`` writes them, but without
        folding the new session's state (for writers that need only the seqs, such as a
        checkpointer's first checkpoint of a thread: on PostgreSQL one round trip). A session
        made or deleted meanwhile by another process is appended to or made again.
        """
        backend = self._writable_backend()
        sid = check_lookup(session_id)
        batch = event_batch(events, "append")
        if expected_version is not None and (
            not isinstance(expected_version, int)
            or isinstance(expected_version, bool)
            or not 0 <= expected_version <= MAX_INT
        ):
            raise StoreUsageError(
                f"expected_version must be an int between 0 and {MAX_INT} (the largest seq) or "
                f"None, not {shown(expected_version)}."
            )
        if create is not False and create is not True:
            raise StoreUsageError(f"create must be True or False, not {shown(create)}.")
        if create:
            if app_name is None or user_id is None:
                raise StoreUsageError("append(create=True) needs app_name and user_id: they "
                                      "say whose session it makes.")
            check_str(app_name, "app_name")
            check_str(user_id, "user_id")
            if expected_version not in (None, 0):
                raise StoreUsageError(
                    f"append(create=True) makes a session with no events before these: "
                    f"expected_version must be None or 0, not {shown(expected_version)}."
                )
        # One pass, before the first await: the caller's list may change after that.
        prepare_one = self._prepare
        kept: list[Event] = []
        new: list[NewEvent] = []
        for given in batch:
            event, envelope = prepare_one(given)
            kept.append(event)
            new.append(envelope)

        async def write(key: str, owner: tuple[str, str]) -> list[StoredEvent]:
            return await backend.append(key, new, expected_version=expected_version,
                                        owner=owner)

        if create:
            assert app_name is not None
            assert user_id is not None
            stored = await self._append_creating(backend, sid, app_name, user_id, new, write)
        else:
            stored = await self._keyed(sid, app_name, user_id, write)
        return [with_seq(event, row.seq) for event, row in zip(kept, stored, strict=True)]

    async def _append_creating(
        self, backend: Backend, sid: str, app_name: str, user_id: str, new: list[NewEvent],
        write: Callable[[str, tuple[str, str]], Awaitable[list[StoredEvent]]],
    ) -> list[StoredEvent]:
        """``append(create=True)``'s writes: the session is made first unless this store
        knows its key already (then appended to first); one that another process made (or
        deleted) in between is appended to (or made) on the next turn."""
        make = self._cached(sid, app_name, user_id) is None
        for turn in range(_CREATE_TURNS):
            last = turn == _CREATE_TURNS - 1
            if make:
                try:
                    key = await backend.create_session(
                        SessionRecord(session_id=sid, given_id=sid, app_name=app_name,
                                      user_id=user_id, created_at=time.time()), new)
                except SessionExistsError:
                    if last:
                        raise
                else:
                    self._remember(app_name, user_id, sid, key)
                    return [written(key, e, seq=seq, position=0)
                            for seq, e in enumerate(new, 1)]
            try:
                return await self._keyed(sid, app_name, user_id, write)
            except SessionNotFoundError:
                if last:
                    raise
            make = True
        raise AssertionError("unreachable")  # pragma: no cover

    async def read_compacted(
        self, session_id: str, *, upto: int | None = None, app_name: str | None = None,
        user_id: str | None = None,
    ) -> CompactedHistory:
        """Return the newest compaction at or below ``upto`` and the events after its range
        (docs/compaction.md), reading backwards no further than that compaction: what a run
        loads to build the model's request. Without a compaction, the whole log up to
        ``upto``. ``app_name``/``user_id`` pick the session as ``get_session`` does. Raises
        SessionNotFoundError."""
        return await read_compacted(self, session_id, upto=upto, app_name=app_name,
                                    user_id=user_id)

    async def compact(
        self,
        session_id: str,
        *,
        upto: int,
        summary: str | Content,
        author: str = "user",
        invocation_id: str = "",
        expected_version: int | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> Event:
        """Append a compaction event: ``summary`` stands for the events up to ``upto`` in the
        model's requests from now on. Nothing is deleted. This is the log-level primitive; it
        does not look for open calls in the range — ``runtime.compact`` does, and refuses to
        cover one (docs/compaction.md). Raises StoreUsageError (``upto`` not in ``1..version``
        or not past the previous compaction) or ConcurrencyError; nothing is written then."""
        return await compact_session(self, session_id, upto=upto, summary=summary,
                                     author=author, invocation_id=invocation_id,
                                     expected_version=expected_version,
                                     app_name=app_name, user_id=user_id)
