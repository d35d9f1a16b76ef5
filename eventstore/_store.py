"""The store façade: the public async API over one backend.

It checks arguments, encodes events for the backend (decoding and state folding with snapshots
live in ``_statefold``) and knows no SQL. Every method is a coroutine; the store is used with
``async with`` or closed with ``aclose()``.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from ._args import (
    check_bool,
    check_int,
    check_number,
    check_seq_bound,
    check_str,
)
from ._backend import Backend, NewEvent, SessionRecord, StoredEvent
from ._codec import check_event, event_kind, with_seq
from ._events import Event, EventActions
from ._exceptions import (
    ArtifactNotFoundError,
    InvalidEventError,
    SessionNotFoundError,
    StoreClosedError,
    StoreUsageError,
)
from ._state import TEMP_PREFIX, USER_PREFIX, fold_state, has_shared_keys, session_part
from ._statefold import DEFAULT_SNAPSHOT_INTERVAL, StateFolder, decode_all, decode_stored
from ._stored import STORED_SCHEMA_VERSION, encode_compact

__all__ = ["Artifact", "EventStore", "Session", "SessionInfo", "SessionPage"]

@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """A session's identity and summary, as listed."""

    id: str
    """Session id (unique in the store)."""
    app_name: str
    """Application the session belongs to."""
    user_id: str
    """User the session belongs to."""
    created_at: float
    """Creation time (seconds since the epoch)."""
    updated_at: float
    """Timestamp of the newest event (``created_at`` when there is none)."""
    version: int
    """Number of events: the ``seq`` of the newest one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """A session as read: identity, state at the read version, and the events asked for."""

    id: str
    """Session id."""
    app_name: str
    """Application the session belongs to."""
    user_id: str
    """User the session belongs to."""
    created_at: float
    """Creation time."""
    updated_at: float
    """Timestamp of the newest event."""
    version: int
    """``seq`` of the newest event when the session was read."""
    state: dict[str, Any]
    """Merged state (session, ``user:`` and ``app:`` keys) at ``version``."""
    events: list[Event]
    """The events asked for (all by default), oldest first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionPage:
    """One page of a session listing."""

    sessions: list[SessionInfo]
    """Sessions ordered by id."""
    next_cursor: str | None
    """Pass as ``after`` to get the next page; None on the last page."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Artifact:
    """One version of an artifact."""

    filename: str
    """Filename (``user:`` prefix for user-scoped artifacts)."""
    version: int
    """Version number (0 for the first save)."""
    mime_type: str
    """MIME type given when it was saved."""
    data: bytes
    """The bytes."""
    created_at: float
    """Save time."""


def _info(record: SessionRecord) -> SessionInfo:
    return SessionInfo(
        id=record.session_id,
        app_name=record.app_name,
        user_id=record.user_id,
        created_at=record.created_at,
        updated_at=record.updated_at,
        version=record.version,
    )


def _check_id(value: object, what: str) -> str:
    return str(check_str(value, what))


def _check_lookup(session_id: object) -> str:
    # Any string may be looked up (an unknown one is SessionNotFoundError); others are misuse.
    if not isinstance(session_id, str):
        raise StoreUsageError(f"session_id must be a string, not {session_id!r}.")
    return session_id


class EventStore:
    """An append-only, per-session event log with derived state and versioned artifacts.

    Guarantees, on every backend: appends are atomic and checked against ``expected_version``;
    each session's events get ``seq`` 1, 2, 3 … with no gap; an event row is never changed; state
    is the fold of the stored state deltas (see ``eventstore._state``); a row that cannot be
    decoded raises CorruptEventError, never a silent skip.
    """

    def __init__(
        self, backend: Backend, *, snapshot_interval: int = DEFAULT_SNAPSHOT_INTERVAL
    ) -> None:
        check_int(snapshot_interval, "snapshot_interval", minimum=1)
        self._backend = backend
        self._folder = StateFolder(backend, snapshot_interval=snapshot_interval)
        self._closed = False

    @property
    def url(self) -> str:
        """Where the data lives (without secrets)."""
        return self._backend.url

    @property
    def backend(self) -> Backend:
        """The storage backend (for maintenance tools; applications use the store's methods)."""
        return self._backend

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the store; later calls raise StoreClosedError. Closing twice is harmless."""
        if not self._closed:
            self._closed = True
            await self._backend.aclose()

    def _open_backend(self) -> Backend:
        if self._closed:
            raise StoreClosedError()
        return self._backend

    # -- encoding ------------------------------------------------------------------------------

    @staticmethod
    def _prepare(event: Event) -> tuple[Event, NewEvent]:
        if not isinstance(event, Event):
            raise InvalidEventError(f"Expected an Event, got a {type(event).__name__}.")
        delta = event.actions.state_delta
        # Non-string keys are left for encode_event to refuse with a message naming them.
        if any(isinstance(k, str) and k.startswith(TEMP_PREFIX) for k in delta):
            kept = {
                k: v for k, v in delta.items()
                if not (isinstance(k, str) and k.startswith(TEMP_PREFIX))
            }
            event = dataclasses.replace(
                event, actions=dataclasses.replace(event.actions, state_delta=kept)
            )
        check_event(event)
        try:
            payload = encode_compact(event)
        except TypeError as exc:
            raise InvalidEventError(
                f"Event {event.id!r} cannot be encoded as JSON: {exc}", event_id=event.id
            ) from exc
        return event, NewEvent(
            event_id=event.id,
            kind=event_kind(event),
            invocation_id=event.invocation_id,
            author=event.author,
            timestamp=event.timestamp,
            shared_state=has_shared_keys(event.actions.state_delta),
            schema_version=STORED_SCHEMA_VERSION,
            payload=payload,
        )

    @staticmethod
    def decode(stored: StoredEvent) -> Event:
        """Decode one stored envelope; raises CorruptEventError naming session and seq."""
        return decode_stored(stored)

    # -- sessions ------------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str | None = None,
        state: Mapping[str, Any] | None = None,
        created_at: float | None = None,
    ) -> Session:
        """Create a session (with a generated id unless given) and return it.

        Initial ``state`` is stored as the session's first event (a state delta authored by
        ``user``), so that state stays a fold of the log. ``created_at`` (seconds since the
        epoch; now by default) lets an importer keep a session's original creation time; the
        initial state event gets the same timestamp. Raises SessionExistsError when the id is
        taken, InvalidEventError when the state is not JSON, StoreUsageError for a negative or
        non-finite ``created_at``.
        """
        backend = self._open_backend()
        _check_id(app_name, "app_name")
        _check_id(user_id, "user_id")
        sid = _check_id(session_id, "session_id") if session_id is not None else uuid.uuid4().hex
        if state is not None and not isinstance(state, Mapping):
            raise StoreUsageError(f"state must be a mapping or None, not {state!r}.")
        now = time.time() if created_at is None else check_number(
            created_at, "created_at", positive=False
        )
        if now < 0:
            raise StoreUsageError(f"created_at must be >= 0, not {created_at!r}.")
        initial: list[NewEvent] = []
        events: list[Event] = []
        if state:
            event, new = self._prepare(
                Event(author="user", timestamp=now, actions=EventActions(state_delta=dict(state)))
            )
            if event.actions.state_delta:
                initial.append(new)
                events.append(with_seq(event, 1))
        await backend.create_session(
            SessionRecord(session_id=sid, app_name=app_name, user_id=user_id, created_at=now),
            initial,
        )
        return Session(
            id=sid,
            app_name=app_name,
            user_id=user_id,
            created_at=now,
            updated_at=now,
            version=len(events),
            state=await self.state(sid),
            events=events,
        )

    async def _record(
        self, session_id: str, *, app_name: str | None = None, user_id: str | None = None
    ) -> SessionRecord:
        record = await self._open_backend().get_session(_check_lookup(session_id))
        if record is None:
            raise SessionNotFoundError(session_id)
        if app_name is not None and record.app_name != app_name:
            raise SessionNotFoundError(session_id, detail=f"in app {app_name!r}.")
        if user_id is not None and record.user_id != user_id:
            raise SessionNotFoundError(session_id, detail=f"for user {user_id!r}.")
        return record

    async def get_session(
        self,
        session_id: str,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
        last: int | None = None,
        after: int | None = None,
    ) -> Session:
        """Return the session with its state at head and its events.

        ``last=N`` keeps only the newest N events, ``after=SEQ`` only those after SEQ (both may
        be combined). Given ``app_name``/``user_id`` must match, else SessionNotFoundError.
        """
        check_str(app_name, "app_name", optional=True)
        check_str(user_id, "user_id", optional=True)
        last = check_seq_bound(last, "last", minimum=0)
        after = check_seq_bound(after, "after")
        record = await self._record(session_id, app_name=app_name, user_id=user_id)
        if last is not None:
            rows = await self._backend.read(
                session_id, after=after, upto=record.version, backwards=True, limit=last
            )
            rows.reverse()
        else:
            rows = await self._backend.read(
                session_id, after=after, upto=record.version, backwards=False, limit=None
            )
        return Session(
            id=record.session_id,
            app_name=record.app_name,
            user_id=record.user_id,
            created_at=record.created_at,
            updated_at=record.updated_at,
            version=record.version,
            state=await self._folder.state(record, at=record.version),
            events=decode_all(rows),
        )

    async def session_info(self, session_id: str) -> SessionInfo:
        """Return the session's identity and summary without reading events."""
        return _info(await self._record(session_id))

    async def list_sessions(
        self,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> SessionPage:
        """List sessions ordered by id, one page at a time (keyset pagination: ``after`` is
        the previous page's ``next_cursor``)."""
        check_str(app_name, "app_name", optional=True)
        check_str(user_id, "user_id", optional=True)
        if after is not None and not isinstance(after, str):
            raise StoreUsageError(f"after must be a next_cursor string or None, not {after!r}.")
        check_int(limit, "limit", minimum=1, maximum=10_000)
        records = await self._open_backend().list_sessions(
            app_name=app_name, user_id=user_id, after=after, limit=limit + 1
        )
        more = len(records) > limit
        page = [_info(r) for r in records[:limit]]
        return SessionPage(sessions=page, next_cursor=page[-1].id if more else None)

    async def delete_session(self, session_id: str) -> None:
        """Delete the session with its events, snapshots and session-scoped artifacts.

        The only delete the store does. Raises SessionNotFoundError when there is no such session.
        """
        if not await self._open_backend().delete_session(_check_lookup(session_id)):
            raise SessionNotFoundError(session_id)

    # -- the log -------------------------------------------------------------------------------

    async def append(
        self, session_id: str, events: Event | Iterable[Event], *, expected_version: int | None
    ) -> list[Event]:
        """Append events atomically after ``expected_version`` and return them with ``seq`` set.

        ``expected_version`` is the ``seq`` of the newest event the caller saw (0 for an empty
        session); ``None`` appends at head without a check. ``temp:`` state keys are dropped.
        Re-appending events that are all stored with identical payloads returns them and writes
        nothing. Raises ConcurrencyError, DuplicateEventError, InvalidEventError or
        SessionNotFoundError; after any error nothing was written.
        """
        backend = self._open_backend()
        _check_lookup(session_id)
        if isinstance(events, Event):
            batch = [events]
        elif isinstance(events, Iterable) and not isinstance(events, (str, bytes, Mapping)):
            batch = list(events)
        else:
            raise InvalidEventError(
                f"append() takes an Event or an iterable of Events, not {type(events).__name__}."
            )
        if not batch:
            raise InvalidEventError("append() needs at least one event.")
        if expected_version is not None and (
            not isinstance(expected_version, int)
            or isinstance(expected_version, bool)
            or expected_version < 0
        ):
            raise StoreUsageError(
                f"expected_version must be a non-negative int or None, not {expected_version!r}."
            )
        prepared = [self._prepare(e) for e in batch]
        stored = await backend.append(
            session_id, [new for _, new in prepared], expected_version=expected_version
        )
        return [
            with_seq(event, row.seq)
            for (event, _), row in zip(prepared, stored, strict=True)
        ]

    async def read(
        self,
        session_id: str,
        *,
        after: int | None = None,
        upto: int | None = None,
        backwards: bool = False,
        limit: int | None = None,
    ) -> list[Event]:
        """Return events with ``after < seq <= upto``, oldest first, or newest first when
        ``backwards`` — at most ``limit`` of them, read in one page."""
        backend = self._open_backend()
        rows = await backend.read(
            _check_lookup(session_id),
            after=check_seq_bound(after, "after"),
            upto=check_seq_bound(upto, "upto"),
            backwards=check_bool(backwards, "backwards"),
            limit=check_seq_bound(limit, "limit", minimum=0),
        )
        return decode_all(rows)

    async def iter_backwards(
        self,
        session_id: str,
        *,
        upto: int | None = None,
        page_size: int = 8,
        max_page_size: int = 512,
    ) -> AsyncIterator[Event]:
        """Yield events newest first, reading pages lazily, so a scan can stop early.

        Pages start at ``page_size`` events and double up to ``max_page_size``: a scan that stops
        after a few events reads (and decodes) only a few, a long one needs few round trips.
        """
        check_int(page_size, "page_size", minimum=1)
        check_int(max_page_size, "max_page_size", minimum=page_size)
        cursor = check_seq_bound(upto, "upto")
        size = page_size
        while True:
            page = await self.read(session_id, upto=cursor, backwards=True, limit=size)
            for event in page:
                yield event
            if len(page) < size:
                return
            cursor = page[-1].seq - 1 if page[-1].seq is not None else 0
            if cursor <= 0:
                return
            size = min(size * 2, max_page_size)

    async def version(self, session_id: str) -> int:
        """Return the session's version: the ``seq`` of its newest event (0 when empty)."""
        return (await self._record(session_id)).version

    async def subscribe(
        self, session_id: str, *, after: int = 0, poll_interval: float = 1.0
    ) -> AsyncIterator[Event]:
        """Yield the session's events after ``after`` and then new ones as they are appended.

        Never skips or repeats an event: it re-reads from its cursor after every wake-up (a
        notification or ``poll_interval`` seconds). Ends when the session is deleted.
        """
        cursor = check_seq_bound(after, "after") or 0
        check_number(poll_interval, "poll_interval")
        while True:
            try:
                page = await self.read(session_id, after=cursor, limit=500)
            except SessionNotFoundError:
                return
            for event in page:
                yield event
                cursor = event.seq if event.seq is not None else cursor
            if len(page) < 500:
                try:
                    await self._open_backend().wait_for_events(
                        session_id, after=cursor, max_wait=poll_interval
                    )
                except SessionNotFoundError:
                    return  # deleted between the read and the wait

    # -- state ---------------------------------------------------------------------------------

    async def state(self, session_id: str, *, at: int | None = None) -> dict[str, Any]:
        """Return the merged state (session, ``user:``, ``app:`` keys) at head or at ``seq=at``.

        ``user:``/``app:`` keys are folded from every session of the user/app up to the global
        position of the event at ``at``, so state at a seq is what the session saw then.
        """
        check_int(at, "at", optional=True, minimum=-(1 << 63), maximum=1 << 63)
        record = await self._record(session_id)
        if at is None:
            at = record.version
        elif not 0 <= at <= record.version:
            raise StoreUsageError(
                f"Session {session_id!r} has events 1..{record.version}; there is no seq {at}."
            )
        return await self._folder.state(record, at=at)

    async def session_state_fold(self, session_id: str, *, at: int | None = None) -> dict[str, Any]:
        """Return the session-scoped state at ``at`` by a full replay, ignoring snapshots.

        The reference the snapshots are checked against (``evs verify`` and the tests).
        """
        rows = await self.read(session_id, upto=check_seq_bound(at, "at", minimum=0))
        return fold_state(session_part(e.actions.state_delta) for e in rows)

    async def rebuild_snapshots(self) -> int:
        """Drop every snapshot — of session state and of ``user:``/``app:`` state (they are a
        cache; the next state reads rebuild them). Returns how many were dropped."""
        return await self._open_backend().drop_snapshots()

    # -- artifacts -----------------------------------------------------------------------------

    async def _artifact_scope(self, session_id: str, filename: str) -> tuple[SessionRecord,
                                                                           str | None]:
        if not isinstance(filename, str) or not filename or len(filename) > 512:
            raise StoreUsageError(
                f"Artifact filenames must be non-empty strings, not {filename!r}."
            )
        record = await self._record(session_id)
        return record, None if filename.startswith(USER_PREFIX) else session_id

    async def save_artifact(
        self, session_id: str, filename: str, data: bytes, *, mime_type: str
    ) -> int:
        """Store a new version of an artifact and return its version (0, 1, 2 …).

        ``user:``-prefixed filenames are shared by every session of the same app and user.
        Record the version in an event's ``artifact_delta`` to tie it to the log.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise StoreUsageError(f"Artifact data must be bytes, not {type(data).__name__}.")
        check_str(mime_type, "mime_type")
        record, scope = await self._artifact_scope(session_id, filename)
        return await self._backend.save_artifact(
            app_name=record.app_name,
            user_id=record.user_id,
            session_id=scope,
            filename=filename,
            mime_type=mime_type,
            data=bytes(data),
            created_at=time.time(),
        )

    async def load_artifact(
        self, session_id: str, filename: str, *, version: int | None = None
    ) -> Artifact:
        """Return the latest (or the given) version; raises ArtifactNotFoundError."""
        check_int(version, "version", optional=True)
        record, scope = await self._artifact_scope(session_id, filename)
        found = await self._backend.load_artifact(
            app_name=record.app_name,
            user_id=record.user_id,
            session_id=scope,
            filename=filename,
            version=version,
        )
        if found is None:
            raise ArtifactNotFoundError(session_id, filename, version)
        return Artifact(
            filename=found.filename,
            version=found.version,
            mime_type=found.mime_type,
            data=found.data,
            created_at=found.created_at,
        )

    async def list_artifacts(self, session_id: str) -> dict[str, list[int]]:
        """Return filename -> versions for the session's and its user's artifacts."""
        record = await self._record(session_id)
        found = await self._backend.list_artifacts(
            app_name=record.app_name, user_id=record.user_id, session_id=session_id
        )
        found.update(
            await self._backend.list_artifacts(
                app_name=record.app_name, user_id=record.user_id, session_id=None
            )
        )
        return dict(sorted(found.items()))

