"""The store façade: the public async API over one backend.

It checks arguments, encodes events for the backend (decoding and state folding with snapshots
live in ``_statefold``) and knows no SQL. Every method is a coroutine; the store is used with
``async with`` or closed with ``aclose()``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

from eventstore._args import (
    MAX_INT,
    check_bool,
    check_filename,
    check_int,
    check_lookup,
    check_number,
    check_seq_bound,
    check_str,
    is_utf8,
    shown,
)
from eventstore._chain import CACHE_MAC_SIZE, sign_session_cache
from eventstore._chain_check import SignatureProblem, signature_problems
from eventstore._codec import check_event, event_kind, with_seq
from eventstore._compacted import CompactedHistory, compact_session, read_compacted
from eventstore._encode_fast import encode_plain
from eventstore._events import Content, Event, EventActions
from eventstore._exceptions import (
    AmbiguousSessionError,
    InvalidEventError,
    SessionNotFoundError,
    StoreClosedError,
    StoreUsageError,
)
from eventstore._fork import ForkLink
from eventstore._scopes import scope_deltas
from eventstore._session import Session, SessionInfo, SessionPage
from eventstore._state import TEMP_PREFIX, USER_PREFIX, apply_actions, touches_shared_keys
from eventstore._statefold import (
    DEFAULT_SNAPSHOT_INTERVAL,
    StateFolder,
    decode_all,
    decode_stored,
    in_seq_order,
)
from eventstore._stored import STORED_SCHEMA_VERSION, encode_compact
from eventstore.backends.protocol import (
    Backend,
    ImportedLink,
    ImportPage,
    NewArtifact,
    NewEvent,
    SessionRecord,
    StoredEvent,
    fresh_key,
    new_event,
)

from .artifacts import Artifact, ArtifactMethods, ArtifactVersion
from .fork import ForkMethods
from .reads import MappingReads
from .retention import RetentionMethods

__all__ = [
    "Artifact", "ArtifactVersion", "EventStore", "ImportBatch", "Session", "SessionInfo",
    "SessionPage",
]

_KEYS_KEPT = 8_192
"""How many (app, user, id) -> key resolutions a store keeps (it starts over when full)."""


T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ImportBatch:
    """One page of ``EventStore.import_session``."""

    events: Sequence[NewEvent] = ()
    """The next events, encoded by ``EventStore._prepare`` (their seqs follow the previous
    page's)."""
    imported_chain: Sequence[ImportedLink] = ()
    """The exporting store's chain links of events of this page or earlier ones (see
    ``create_session``)."""
    artifacts: Sequence[Artifact] = ()
    """Artifact versions stored with the session (see ``create_session``)."""


def _info(record: SessionRecord) -> SessionInfo:
    return SessionInfo(
        id=record.id,
        app_name=record.app_name,
        user_id=record.user_id,
        created_at=record.created_at,
        updated_at=record.updated_at,
        version=record.version,
    )


def _check_id(value: object, what: str) -> str:
    return str(check_str(value, what))


def _event_batch(events: object, method: str, *, empty_ok: bool = False) -> list[Event]:
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


def _artifact_batch(artifacts: object) -> list[Artifact]:
    if not isinstance(artifacts, Iterable) or isinstance(artifacts, (str, bytes, Mapping)):
        raise StoreUsageError(f"artifacts must be an iterable of Artifacts, not {artifacts!r}.")
    batch = list(artifacts)
    for artifact in batch:
        if not isinstance(artifact, Artifact):
            raise StoreUsageError(f"artifacts must hold Artifacts, not {artifact!r}.")
    return batch


def _new_artifact(artifact: Artifact) -> NewArtifact:
    check_filename(artifact.filename)
    check_str(artifact.mime_type, "mime_type")
    check_int(artifact.version, "version")
    if not isinstance(artifact.data, (bytes, bytearray, memoryview)):
        raise StoreUsageError(f"Artifact data must be bytes, not {type(artifact.data).__name__}.")
    created_at = check_number(artifact.created_at, "created_at", positive=False)
    return NewArtifact(
        session_scoped=not artifact.filename.startswith(USER_PREFIX),
        filename=artifact.filename,
        version=artifact.version,
        mime_type=artifact.mime_type,
        data=bytes(artifact.data),
        created_at=created_at,
    )


def _check_cache_name(name: object) -> str:
    if not isinstance(name, str) or not name or len(name) > 255 or "\0" in name:
        raise StoreUsageError(
            f"A cache name must be a string of 1 to 255 characters without NUL, not {name!r}."
        )
    return name


class EventStore(ArtifactMethods, ForkMethods, MappingReads, RetentionMethods):
    """An append-only, per-session event log with derived state and versioned artifacts.

    Guarantees, on every backend: appends are atomic and checked against ``expected_version``;
    each session's events get ``seq`` 1, 2, 3 … with no gap; an event row is never changed; state
    is the fold of the stored state deltas (see ``eventstore._state``); a row that cannot be
    decoded raises CorruptEventError, never a silent skip.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        snapshot_interval: int = DEFAULT_SNAPSHOT_INTERVAL,
        write_refusal: str | None = None,
    ) -> None:
        check_int(snapshot_interval, "snapshot_interval", minimum=1)
        self._backend = backend
        self._folder = StateFolder(backend, snapshot_interval=snapshot_interval)
        self._closed = False
        self._write_refusal = write_refusal
        self._keys: dict[tuple[str, str, str], str] = {}
        """(app, user, id the app gave) -> the session's key, for sessions this store made or
        found: a fully addressed call costs no lookup (see ``_key``)."""
        self._owners: dict[str, set[tuple[str, str]]] = {}
        """Given id -> the (app, user) pairs ``_keys`` holds it for (bare ids' fast path)."""
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None  # built outside a loop: it belongs to the first loop using it

    @property
    def url(self) -> str:
        """Where the data lives (without secrets)."""
        return self._backend.url

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop this store belongs to: the one it was opened on (or, when it was
        built outside a running loop, the first one that used it; None until then). Its
        methods are awaited on that loop only: awaited on another one they raise
        StoreUsageError at once (``aclose`` excepted), since the backends' connections, locks
        and wake-ups belong to their loop. From another thread, hand the call to that loop
        (``asyncio.run_coroutine_threadsafe``) or open one store per loop."""
        return self._loop

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
        if asyncio.get_running_loop() is not self._loop:
            self._bind_loop()
        return self._backend

    def _writable_backend(self) -> Backend:
        """The backend, for a call that writes: StoreUsageError when this store may only read
        (``write_refusal``: e.g. it was opened without the key on a keyed database)."""
        backend = self._open_backend()
        if self._write_refusal is not None:
            raise StoreUsageError(self._write_refusal)
        return backend

    def _bind_loop(self) -> None:
        """Bind a store built outside a loop to the running one; refuse any other loop."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            return
        raise StoreUsageError(
            f"The store {self.url} was opened on another event loop and is used from this "
            "one; it belongs to the loop it was opened on (its connections, locks and "
            "wake-ups do). Await it on that loop (from another thread: "
            "asyncio.run_coroutine_threadsafe), or open one store per event loop (e.g. per "
            "thread or per asyncio.run())."
        )

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
        deletions = event.actions.state_deletions
        if type(deletions) is tuple and any(
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
        shared = touches_shared_keys(event.actions)
        app_delta, user_delta = scope_deltas(event.actions) if shared else (None, None)
        return event, new_event(event.id, event_kind(event), event.invocation_id, event.author,
                                event.timestamp, shared, STORED_SCHEMA_VERSION, payload,
                                app_delta, user_delta)

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
        events: Event | Iterable[Event] = (),
        artifacts: Iterable[Artifact] = (),
        imported_chain: Sequence[ImportedLink] = (),
    ) -> Session:
        """Create a session (with a generated id unless given) and return it.

        Initial ``state`` is stored as the session's first event (a state delta authored by
        ``user``), so that state stays a fold of the log. ``events`` follow it as the session's
        first events (e.g. the user's first message) and ``artifacts`` are saved with them:
        session, events and artifacts are written in one transaction on every backend — a
        crash leaves all of them or none, never a session without its first message.
        ``created_at`` (seconds since the epoch; now by default) lets an importer keep a
        session's original creation time; the initial state event gets the same timestamp.

        Each artifact (``user:`` prefix: user-scoped) is stored as its file's next version and
        must come out as its ``version`` (an importer reproduces version numbers; its
        ``created_at`` is kept), else ArtifactConflictError. Raises SessionExistsError when the
        id is taken, InvalidEventError when the state or an event cannot be stored,
        DuplicateEventError when ``events`` repeat an id, StoreUsageError for a negative or
        non-finite ``created_at`` or a bad artifact. Nothing is written when anything is raised.

        ``imported_chain`` (``evs import --force``): what the exporting store's chain said of
        ``events`` (one link per event, seq 1, 2, …), kept with them in the same transaction
        as evidence beside this store's own chain (``Backend.read_imported``); StoreUsageError
        when it does not name each event's seq once.
        """
        backend = self._writable_backend()
        links = list(imported_chain)
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
        stored: list[Event] = []
        if state:
            event, new = self._prepare(
                Event(author="user", timestamp=now, actions=EventActions(state_delta=dict(state)))
            )
            if event.actions.state_delta:
                initial.append(new)
                stored.append(with_seq(event, 1))
        for event in _event_batch(events, "create_session", empty_ok=True):
            event, new = self._prepare(event)
            initial.append(new)
            stored.append(with_seq(event, len(stored) + 1))
        new_artifacts = [_new_artifact(a) for a in _artifact_batch(artifacts)]
        if links and (state or sorted(link.seq for link in links)
                      != list(range(1, len(initial) + 1))):
            raise StoreUsageError("imported_chain must hold one link per event, seq 1.."
                                  f"{len(initial)}, and no initial state.")
        key = await backend.create_session(
            SessionRecord(session_id=sid, given_id=sid, app_name=app_name, user_id=user_id,
                          created_at=now),
            initial,
            new_artifacts,
            links,
        )
        self._remember(app_name, user_id, sid, key)
        return Session(
            id=sid,
            app_name=app_name,
            user_id=user_id,
            created_at=now,
            updated_at=stored[-1].timestamp if stored else now,
            version=len(stored),
            state=await self.state(sid, app_name=app_name, user_id=user_id),
            events=stored,
        )

    async def import_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        created_at: float | None,
        pages: Callable[[], ImportBatch | None],
        copy_of: str | None = None,
    ) -> int:
        """Create a session from pages of events, chain links and artifacts, however long,
        and return how many events it holds: ``create_session(events=…, artifacts=…,
        imported_chain=…)`` with the log read a page at a time from ``pages`` (a blocking
        callable, run off the event loop, returning None when there is no more).

        Everything is written in one transaction: when ``pages`` raises, or anything is
        refused, nothing is stored and the exception is raised. Memory holds one page.
        Raises as ``create_session`` does (StoreUsageError as well when the imported chain
        does not name each event's seq once, in order).

        ``copy_of`` (a session key; the session may no longer exist) says that the events
        are that session's, whose ``user:``/``app:`` state changes its users' and app's
        streams already hold: they are stored as a fork's copies are (they change no shared
        state again; their deltas stay in their payloads) and the session is recorded as a
        copy of that session's events 1..N (``fork_links``)."""
        backend = self._writable_backend()
        _check_id(app_name, "app_name")
        _check_id(user_id, "user_id")
        sid = _check_id(session_id, "session_id")
        now = time.time() if created_at is None else check_number(
            created_at, "created_at", positive=False)
        if now < 0:
            raise StoreUsageError(f"created_at must be >= 0, not {created_at!r}.")
        count = 0
        linked = 0
        ended = False

        def source() -> ImportPage | None:
            nonlocal count, linked, ended
            if ended:
                return None
            batch = pages()
            if batch is None:
                if linked not in (0, count):  # raised before the commit: nothing is stored
                    raise StoreUsageError(f"imported_chain must hold one link per event, seq "
                                          f"1..{count}, not {linked}.")
                ended = True
                return None if copy_of is None else ImportPage(copy_of=ForkLink(
                    session_id=sid, origin_session_id=copy_of, origin_seq=count,
                    forked_at=time.time()))
            count += len(batch.events)
            for link in batch.imported_chain:
                linked += 1
                if link.seq != linked or link.seq > count:
                    raise StoreUsageError("imported_chain must hold one link per event, seq "
                                          f"1..{count}, in order (link {link.seq} came "
                                          f"{linked}th).")
            events = batch.events if copy_of is None else [
                dataclasses.replace(e, shared_state=False, app_delta=None, user_delta=None)
                if e.shared_state else e for e in batch.events]
            return ImportPage(events=events, imported=batch.imported_chain,
                              artifacts=[_new_artifact(a)
                                         for a in _artifact_batch(batch.artifacts)])

        # A copy of a session that is gone, under its old id (an archive imported back): a
        # key of its own, so the stream entries its first life wrote keep naming that life.
        wanted = fresh_key() if copy_of == sid else sid
        key = await backend.import_session(
            SessionRecord(session_id=wanted, given_id=sid, app_name=app_name, user_id=user_id,
                          created_at=now),
            source)
        self._remember(app_name, user_id, sid, key)
        return count

    # -- finding sessions ----------------------------------------------------------------------

    def _remember(self, app_name: str, user_id: str, session_id: str, key: str) -> None:
        if len(self._keys) >= _KEYS_KEPT:
            self._keys.clear()
            self._owners.clear()
        self._keys[(app_name, user_id, session_id)] = key
        self._owners.setdefault(session_id, set()).add((app_name, user_id))

    def _forget(self, key: str) -> None:
        for address in [a for a, k in self._keys.items() if k == key]:
            del self._keys[address]
            owners = self._owners.get(address[2])
            if owners is not None:
                owners.discard(address[:2])
                if not owners:
                    del self._owners[address[2]]

    async def _record(
        self, session_id: str, *, app_name: str | None = None, user_id: str | None = None
    ) -> SessionRecord:
        """The record of the session the app gave ``session_id`` (of ``app_name``'s
        ``user_id`` when given): SessionNotFoundError when there is none,
        AmbiguousSessionError when several (app, user) hold the id and the call did not say
        which."""
        sid = check_lookup(session_id)
        check_str(app_name, "app_name", optional=True)
        check_str(user_id, "user_id", optional=True)
        found = await self._open_backend().find_sessions(sid, app_name=app_name, user_id=user_id)
        if len(found) == 1:
            record = found[0]
            self._remember(record.app_name, record.user_id, sid, record.session_id)
            return record
        if found:
            raise AmbiguousSessionError(sid, [(r.app_name, r.user_id) for r in found])
        detail = " ".join(part for part in (
            f"in app {app_name!r}" if app_name is not None else "",
            f"for user {user_id!r}" if user_id is not None else "") if part)
        raise SessionNotFoundError(sid, detail=f"{detail}." if detail else "")

    async def session_key(
        self, session_id: str, *, app_name: str | None = None, user_id: str | None = None
    ) -> str:
        """Return the key the session is stored under in the backend
        (``SessionRecord.session_id``: the id the app gave unless another app or user held
        that key when the session was made), for maintenance tools that read the backend
        itself. Always asks the backend (never a cached key). Raises as ``get_session``
        does."""
        return (await self._record(check_lookup(session_id), app_name=app_name,
                                   user_id=user_id)).session_id

    def _cached(
        self, session_id: str, app_name: str | None, user_id: str | None
    ) -> tuple[str, tuple[str, str]] | None:
        """The key and (app, user) this store keeps for the session the call names, or None
        (then ``_record`` finds it)."""
        if app_name is not None and user_id is not None:
            key = self._keys.get((app_name, user_id, session_id))
            if key is not None:
                return key, (app_name, user_id)
        elif app_name is None and user_id is None:
            # A bare id this store made or found for one (app, user) only: no lookup, so one
            # caller's appends keep their order.
            owners = self._owners.get(session_id)
            if owners is not None and len(owners) == 1:
                [(app, user)] = owners
                return self._keys[(app, user, session_id)], (app, user)
        return None

    async def _keyed(
        self, session_id: str, app_name: str | None, user_id: str | None,
        work: Callable[[str, tuple[str, str]], Awaitable[T]],
    ) -> T:
        """``work(key, (app, user))`` on the session the call names: with the key this store
        keeps for it when it has one (no lookup), else the one ``_record`` finds. Another
        process may have deleted that session and made it again under another key: when the
        backend has no session of that (app, user) under a kept key, the key is dropped and
        looked up once more, so a stale key never fails a call (nor, where the backend checks
        ``owner``, writes into the session another (app, user) was given that key for)."""
        cached = self._cached(session_id, app_name, user_id)
        if cached is not None:
            try:
                return await work(*cached)
            except SessionNotFoundError:
                self._forget(cached[0])
        record = await self._record(session_id, app_name=app_name, user_id=user_id)
        try:
            return await work(record.session_id, (record.app_name, record.user_id))
        except SessionNotFoundError:
            self._forget(record.session_id)  # deleted meanwhile (by another process, perhaps)
            raise

    async def get_session(
        self,
        session_id: str,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
        last: int | None = None,
        after: int | None = None,
        since: float | None = None,
    ) -> Session:
        """Return the session with its state at head and its events.

        ``last=N`` keeps only the newest N events, ``after=SEQ`` only those after SEQ,
        ``since=T`` only those whose timestamp is ``>= T`` (read from the backend bounded by
        it); they may be combined. Given ``app_name``/``user_id`` must match, else
        SessionNotFoundError.
        """
        last = check_seq_bound(last, "last", minimum=0)
        after = check_seq_bound(after, "after")
        if since is not None:
            since = check_number(since, "since", positive=False)
        record = await self._record(session_id, app_name=app_name, user_id=user_id)
        key = record.session_id
        # Judged again by the read: the session may be made again under another key between.
        owner = (record.app_name, record.user_id)
        if since is not None:
            rows = await self._backend.read_since(
                key, timestamp=since, upto=record.version, newest=last, owner=owner
            )
            if after is not None:
                rows = [r for r in rows if r.seq > after]
        elif last is not None:
            rows = await self._backend.read(
                key, after=after, upto=record.version, backwards=True, limit=last, owner=owner
            )
            rows.reverse()
        else:
            rows = await self._backend.read(
                key, after=after, upto=record.version, backwards=False, limit=None, owner=owner
            )
        return Session(
            id=record.id,
            app_name=record.app_name,
            user_id=record.user_id,
            created_at=record.created_at,
            updated_at=record.updated_at,
            version=record.version,
            state=await self._folder.state(record, at=record.version),
            events=decode_all(in_seq_order(key, rows, after=after,
                                           upto=record.version)),
        )

    async def session_info(
        self, session_id: str, *, app_name: str | None = None, user_id: str | None = None
    ) -> SessionInfo:
        """Return the session's identity and summary without reading events."""
        return _info(await self._record(session_id, app_name=app_name, user_id=user_id))

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
        # The cursor is the last session's key: pages are in key order (the given id's, but
        # for a session whose id another user held when it was made).
        return SessionPage(sessions=page,
                           next_cursor=records[limit - 1].session_id if more else None)

    async def list_sessions_newest(
        self,
        *,
        app_name: str | None = None,
        user_id: str | None = None,
        id_contains: str | None = None,
        updated_since: float | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> SessionPage:
        """List sessions newest update first (ties: the greater id first), one page at a time:
        only the app's, the user's, those whose id contains ``id_contains`` (ignoring the case
        of ASCII letters) and those updated at or after ``updated_since`` when given. ``after``
        is the previous page's ``next_cursor``. Each call reads one page from the backend,
        however many sessions there are. Raises StoreUsageError for a cursor this listing did
        not make."""
        check_str(app_name, "app_name", optional=True)
        check_str(user_id, "user_id", optional=True)
        check_str(id_contains, "id_contains", optional=True)
        if updated_since is not None and (
            isinstance(updated_since, bool) or not isinstance(updated_since, int | float)
            or updated_since != updated_since
        ):
            raise StoreUsageError(f"updated_since must be a number or None, not "
                                  f"{updated_since!r}.")
        check_int(limit, "limit", minimum=1, maximum=10_000)
        before: tuple[float, str] | None = None
        if after is not None:
            stamp, sep, last_id = after.partition(":") if isinstance(after, str) else ("", "", "")
            try:
                before = (float(stamp), last_id)
            except ValueError:
                sep = ""
            if not sep:
                raise StoreUsageError(f"after must be a next_cursor of list_sessions_newest "
                                      f"or None, not {after!r}.")
        records = await self._open_backend().list_sessions_newest(
            app_name=app_name, user_id=user_id, id_contains=id_contains,
            updated_since=None if updated_since is None else float(updated_since),
            before=before, limit=limit + 1,
        )
        more = len(records) > limit
        page = [_info(r) for r in records[:limit]]
        cursor = f"{page[-1].updated_at!r}:{page[-1].id}" if more else None
        return SessionPage(sessions=page, next_cursor=cursor)

    async def list_sessions_by_update(
        self, *, app_name: str, user_id: str | None = None
    ) -> list[Session]:
        """Return every session of the app (of the user when ``user_id`` is set), oldest
        update first (ties by user id, then id), each with its merged state at head and no
        events.

        The state is folded in batches: a fixed number of reads for all the sessions' own
        state plus one fold per ``user:``/``app:`` scope, never one read per session.
        """
        check_str(app_name, "app_name")
        check_str(user_id, "user_id", optional=True)
        records = await self._open_backend().list_sessions_by_update(
            app_name=app_name, user_id=user_id
        )
        states = await self._folder.states_at_head(records)
        return [
            Session(
                id=r.id,
                app_name=r.app_name,
                user_id=r.user_id,
                created_at=r.created_at,
                updated_at=r.updated_at,
                version=r.version,
                state=state,
                events=[],
            )
            for r, state in zip(records, states, strict=True)
        ]

    async def shared_state(self, *, app_name: str, user_id: str | None = None) -> dict[str, Any]:
        """Return the app's ``app:`` state at head, plus the user's ``user:`` state when
        ``user_id`` is given (keys keep their prefixes), without naming a session.

        The fold of the app's ``app:`` stream (and the user's ``user:`` stream): every delta
        appended to the scope, whether or not the session that made it still exists.
        """
        check_str(app_name, "app_name")
        check_str(user_id, "user_id", optional=True)
        self._open_backend()
        state = await self._folder.shared_state(app_name, None)
        if user_id is not None:
            state.update(await self._folder.shared_state(app_name, user_id))
        return state

    async def delete_session(
        self, session_id: str, *, app_name: str | None = None, user_id: str | None = None
    ) -> None:
        """Delete the session with its events, snapshots and session-scoped artifacts.

        The only delete the store does. Raises SessionNotFoundError when there is no such
        session (of the app's user, when given), AmbiguousSessionError when the id is held by
        several (app, user) and they were not given.
        """
        backend = self._writable_backend()
        # Always looked up: a key kept from before may name another user's session by now.
        key = (await self._record(check_lookup(session_id), app_name=app_name,
                                  user_id=user_id)).session_id
        self._forget(key)
        if not await backend.delete_session(key):
            raise SessionNotFoundError(session_id)

    # -- the log -------------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        events: Event | Iterable[Event],
        *,
        expected_version: int | None,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> list[Event]:
        """Append events atomically after ``expected_version`` and return them with ``seq`` set.

        ``expected_version`` is the ``seq`` of the newest event the caller saw (0 for an empty
        session); ``None`` appends at head without a check. ``temp:`` state keys are dropped.
        Re-appending events that are all stored with identical payloads returns them and writes
        nothing. Raises ConcurrencyError, DuplicateEventError, InvalidEventError or
        SessionNotFoundError (AmbiguousSessionError: see ``get_session``); after any error
        nothing was written.
        """
        backend = self._writable_backend()
        sid = check_lookup(session_id)
        batch = _event_batch(events, "append")
        if expected_version is not None and (
            not isinstance(expected_version, int)
            or isinstance(expected_version, bool)
            or not 0 <= expected_version <= MAX_INT
        ):
            raise StoreUsageError(
                f"expected_version must be an int between 0 and {MAX_INT} (the largest seq) or "
                f"None, not {shown(expected_version)}."
            )
        prepared = [self._prepare(e) for e in batch]
        new = [n for _, n in prepared]

        async def write(key: str, owner: tuple[str, str]) -> list[StoredEvent]:
            return await backend.append(key, new, expected_version=expected_version,
                                        owner=owner)

        stored = await self._keyed(sid, app_name, user_id, write)
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
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> list[Event]:
        """Return events with ``after < seq <= upto``, oldest first, or newest first when
        ``backwards`` — at most ``limit`` of them, read in one page."""
        self._open_backend()

        async def page(key: str, owner: tuple[str, str]) -> list[Event]:
            return await self._read_key(key, after=after, upto=upto, backwards=backwards,
                                        limit=limit, owner=owner)

        return await self._keyed(check_lookup(session_id), app_name, user_id, page)

    async def _read_key(
        self,
        key: str,
        *,
        after: int | None = None,
        upto: int | None = None,
        backwards: bool = False,
        limit: int | None = None,
        owner: tuple[str, str] | None = None,
    ) -> list[Event]:
        """``read`` of the session stored under ``key`` (``owner``'s: see ``Backend.read``)."""
        backend = self._open_backend()
        after = check_seq_bound(after, "after")
        upto = check_seq_bound(upto, "upto")
        backwards = check_bool(backwards, "backwards")
        rows = await backend.read(key, after=after, upto=upto, backwards=backwards,
                                  limit=check_seq_bound(limit, "limit", minimum=0), owner=owner)
        return decode_all(in_seq_order(key, rows, after=after, upto=upto, backwards=backwards))

    async def iter_backwards(
        self,
        session_id: str,
        *,
        upto: int | None = None,
        page_size: int = 8,
        max_page_size: int = 512,
        app_name: str | None = None,
        user_id: str | None = None,
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
            page = await self.read(session_id, upto=cursor, backwards=True, limit=size,
                                   app_name=app_name, user_id=user_id)
            for event in page:
                yield event
            if len(page) < size:
                return
            cursor = page[-1].seq - 1 if page[-1].seq is not None else 0
            if cursor <= 0:
                return
            size = min(size * 2, max_page_size)

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

    @property
    def keyed(self) -> bool:
        """Whether the store signs the events it appends (``open_store(signing_key=…)``)."""
        return self._backend.signing_key is not None

    async def untrusted(
        self,
        session_id: str,
        *,
        after: int | None = None,
        upto: int | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[int, SignatureProblem]:
        """Return ``seq -> problem`` for the events with ``after < seq <= upto`` whose
        signature under the store's key is missing (``unsigned``) or wrong
        (``bad_signature``): events someone wrote behind the store's back, or before it was
        keyed. The runner executes nothing from them. An unkeyed store returns ``{}`` without
        reading. Raises SessionNotFoundError."""
        backend = self._open_backend()
        key = backend.signing_key
        if key is None:
            return {}
        low, high = check_seq_bound(after, "after"), check_seq_bound(upto, "upto")

        async def check(sid: str, owner: tuple[str, str]) -> dict[int, SignatureProblem]:
            rows = await backend.read(sid, after=low, upto=high, backwards=False, limit=None,
                                      owner=owner)
            return signature_problems(sid, rows, key)

        return await self._keyed(check_lookup(session_id), app_name, user_id, check)

    async def version(
        self, session_id: str, *, app_name: str | None = None, user_id: str | None = None
    ) -> int:
        """Return the session's version: the ``seq`` of its newest event (0 when empty)."""
        return (await self._record(session_id, app_name=app_name, user_id=user_id)).version

    async def subscribe(
        self,
        session_id: str,
        *,
        after: int = 0,
        poll_interval: float = 1.0,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> AsyncIterator[Event]:
        """Yield the session's events after ``after`` and then new ones as they are appended.

        Never skips or repeats an event: it re-reads from its cursor after every wake-up (a
        notification or ``poll_interval`` seconds). Ends when the session is deleted (even
        when another session of another user is given its key then). Raises
        SessionNotFoundError when there is no such session to start with.
        """
        cursor = check_seq_bound(after, "after") or 0
        check_number(poll_interval, "poll_interval")

        async def first(key: str, owner: tuple[str, str]
                        ) -> tuple[str, tuple[str, str], list[Event]]:
            return key, owner, await self._read_key(key, after=cursor, limit=500, owner=owner)

        key, owner, page = await self._keyed(check_lookup(session_id), app_name, user_id, first)
        while True:
            for event in page:
                yield event
                cursor = event.seq if event.seq is not None else cursor
            if len(page) < 500:
                try:
                    await self._open_backend().wait_for_events(
                        key, after=cursor, max_wait=poll_interval
                    )
                except SessionNotFoundError:
                    return  # deleted between the read and the wait
            try:
                page = await self._read_key(key, after=cursor, limit=500, owner=owner)
            except SessionNotFoundError:
                return

    # -- state ---------------------------------------------------------------------------------

    async def state(
        self,
        session_id: str,
        *,
        at: int | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Return the merged state (session, ``user:``, ``app:`` keys) at head or at ``seq=at``.

        ``user:``/``app:`` keys are folded from every session of the user/app up to the global
        position of the event at ``at``, so state at a seq is what the session saw then.
        """
        check_int(at, "at", optional=True, minimum=-(1 << 63), maximum=1 << 63)
        record = await self._record(session_id, app_name=app_name, user_id=user_id)
        if at is None:
            at = record.version
        elif not 0 <= at <= record.version:
            raise StoreUsageError(
                f"Session {session_id!r} has events 1..{record.version}; there is no seq {at}."
            )
        return await self._folder.state(record, at=at)

    async def session_state_fold(
        self,
        session_id: str,
        *,
        at: int | None = None,
        app_name: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Return the session-scoped state at ``at`` by a full replay, ignoring snapshots.

        The reference the snapshots are checked against (``evs verify`` and the tests).
        """
        rows = await self.read(session_id, upto=check_seq_bound(at, "at", minimum=0),
                               app_name=app_name, user_id=user_id)
        state: dict[str, Any] = {}
        for event in rows:
            apply_actions(state, event.actions, scope="session")
        return state

    async def rebuild_snapshots(self) -> int:
        """Drop every snapshot — of session state and of ``user:``/``app:`` state — and every
        session cache (``save_cache``): they are caches; the next reads rebuild them. Returns
        how many were dropped."""
        return await self._open_backend().drop_snapshots()

    async def load_cache(
        self, session_id: str, name: str, *, app_name: str | None = None,
        user_id: str | None = None,
    ) -> tuple[int, bytes] | None:
        """Return ``(seq, data)`` of the session's cache ``name`` (see ``save_cache``), or None
        when there is none (or no such session).

        A cache is never a source of truth: the caller must check it still describes the log
        (e.g. the id of the event at ``seq``) and ignore it otherwise. A keyed store serves
        only a cache it saved itself (its MAC, ``eventstore._chain.sign_session_cache``,
        checks out): one written behind its back reads as None."""
        backend = self._open_backend()
        name = _check_cache_name(name)

        async def load(key: str, owner: tuple[str, str]) -> tuple[int, bytes] | None:
            found = await backend.load_cache(key, name, owner=owner)
            signing_key = backend.signing_key
            if found is None or signing_key is None:
                return found
            seq, stored = found
            data, mac = stored[:-CACHE_MAC_SIZE], stored[-CACHE_MAC_SIZE:]
            if len(stored) < CACHE_MAC_SIZE or not hmac.compare_digest(
                    mac, sign_session_cache(signing_key, key, name, seq, data)):
                return None  # not the key's: the caller rebuilds it from the log
            return seq, data

        try:
            return await self._keyed(check_lookup(session_id), app_name, user_id, load)
        except SessionNotFoundError:
            return None

    async def save_cache(
        self, session_id: str, name: str, seq: int, data: bytes, *,
        app_name: str | None = None, user_id: str | None = None,
    ) -> None:
        """Keep ``data``, state its caller derived from the session's events ``1..seq``, as the
        session's cache ``name`` (replacing the previous one), for ``load_cache``.

        A cache, like the state snapshots: deleted with the session, dropped by
        ``rebuild_snapshots`` (``evs db rebuild-snapshots``), not copied by ``fork``, not kept
        by a read-only store or for a session that does not exist. The log stays the only
        source of truth: the reader checks the cache against it."""
        backend = self._open_backend()
        check_lookup(session_id)
        name = _check_cache_name(name)
        seq = check_int(seq, "seq", minimum=0, maximum=(1 << 31) - 1)
        if not isinstance(data, bytes):
            raise StoreUsageError(f"data must be bytes, not {type(data).__name__}.")

        async def save(key: str, owner: tuple[str, str]) -> None:
            signing_key = backend.signing_key
            stored = data if signing_key is None else (
                data + sign_session_cache(signing_key, key, name, seq, data))
            await backend.save_cache(key, name, seq, stored, owner=owner)

        try:
            await self._keyed(session_id, app_name, user_id, save)
        except SessionNotFoundError:
            return
