"""The store's sessions: making them (``create_session``, ``import_session``), finding them
(``get_session``, ``session_info``, the listings), the shared state of an app or user, and
deleting them. Which backend key a call's session is stored under is ``addressing``'s. Knows
no SQL.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from eventstore._args import (
    check_filename,
    check_int,
    check_lookup,
    check_number,
    check_seq_bound,
    check_str,
)
from eventstore._codec import with_seq
from eventstore._events import Event, EventActions
from eventstore._exceptions import SessionNotFoundError, StoreUsageError
from eventstore._fork import ForkLink
from eventstore._session import Session, SessionInfo, SessionPage
from eventstore._state import USER_PREFIX
from eventstore._statefold import decode_all, in_seq_order
from eventstore.backends.protocol import (
    ImportedLink,
    ImportPage,
    NewArtifact,
    NewEvent,
    SessionRecord,
    fresh_key,
)

from .appends import event_batch, prepare
from .artifacts import Artifact
from .state import StateMethods

__all__ = ["ImportBatch", "SessionMethods"]


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


class SessionMethods(StateMethods):
    """Mixed into EventStore: the sessions' half of its public API."""

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
            event, new = prepare(
                Event(author="user", timestamp=now, actions=EventActions(state_delta=dict(state)))
            )
            if event.actions.state_delta:
                initial.append(new)
                stored.append(with_seq(event, 1))
        for event in event_batch(events, "create_session", empty_ok=True):
            event, new = prepare(event)
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
