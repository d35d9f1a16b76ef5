"""google-adk's ``BaseSessionService`` on the event store (imported only with the ``[adk]`` extra).

How ADK's promises map onto the store:

- **Sessions** are store sessions with the same id, app and user, always addressed by all
  three: ids are unique per app and user, as in ADK (two users may each have a ``default``).
  ``get_session`` returns None for a session of another app or user, as for one that does not
  exist; ``delete_session`` of a missing session does nothing.
- **Staleness**: the session object remembers the store version it was read at (ADK's storage
  marker); ``append_event`` appends with ``expected_version`` = that version, so a stale object
  raises ADK's ``StaleSessionError`` (worded as ADK's database services word it) and nothing is
  written. A session object without the marker is stale, as in ADK, only when the store was
  updated after its ``last_update_time`` *and* its newest event is not the store's newest.
- **Event ids**: ADK does not deduplicate by id. Re-appending an identical event is a no-op
  (the store's idempotency); a *different* event under an id the session already holds is
  stored under a store id derived from ADK's id and the event's content (so retrying it is a
  no-op too), and reads back with ADK's id.
- **Order**: events come back in log order, except that events sharing a timestamp come back
  ordered by id, as ADK's database services order them (``num_recent_events`` counts in that
  order too).
- **State**: ``temp:`` keys apply to the in-memory session only and are never stored;
  ``user:``/``app:`` keys are shared by the user's / the app's sessions. ``None`` is a value,
  as in ADK: ``{"k": None}`` keeps ``"k"`` in a reloaded session's state (the store deletes a
  key only through an event's ``state_deletions``, which ADK never writes).
- **Events** round-trip exactly (``events``). ``GetSessionConfig``: ``num_recent_events``
  keeps exactly the newest N (0: none), ``after_timestamp`` events with ``timestamp >=`` it,
  both read bounded in the backend. Session ids are stripped of surrounding whitespace on
  create, and a padded id reaches the same session on get and delete.
- ``list_sessions`` orders by last update (oldest first) and folds every session's state in
  batches; ``get_user_state`` reads the user's ``user:`` keys without a session.
"""

from __future__ import annotations

import hashlib
import operator
import os
import time
import uuid
from collections.abc import Sequence
from itertools import islice
from typing import Any

import orjson
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError as AdkNotFound
from google.adk.events import Event as AdkEvent
from google.adk.sessions import BaseSessionService
from google.adk.sessions import Session as AdkSession
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from pydantic_core import to_jsonable_python
from typing_extensions import override

from eventstore import (
    RERUN_DECISION_KEY,
    CallLedger,
    CallRecord,
    ConcurrencyError,
    DuplicateEventError,
    Event,
    EventStore,
    Session,
    SessionExistsError,
    SessionNotFoundError,
    StoreUsageError,
    claim_event,
)

from .._handle import StoreHandle
from .build import build_adk_event_compact, build_adk_events
from .compaction import compacted_adk_events, with_native_compaction
from .events import EXTENSION_KEY, event_from_adk_json

__all__ = ["EventStoreSessionService", "from_adk_event", "to_adk_events"]

_USER = "user:"
_NATIVE_KEYS = {"id", "author", "invocation_id", "timestamp", "actions", "content"}
_DEFAULTS: dict[str, Any] = {
    k: v for k, v in orjson.loads(
        AdkEvent(id="x", author="a", timestamp=0.0).model_dump_json(exclude_none=True)
    ).items() if k not in _NATIVE_KEYS
}
"""What this ADK version writes for every event (e.g. ``node_info``): not repeated per event."""


def _marker(session: AdkSession) -> int | None:
    raw = getattr(session, "_storage_update_marker", None)
    if isinstance(raw, str) and raw.startswith("evs:"):
        return int(raw[4:])
    return None


def _set_marker(session: AdkSession, version: int) -> None:
    session._storage_update_marker = f"evs:{version}"


def to_adk_events(mappings: list[dict[str, Any]]) -> list[AdkEvent]:
    """ADK events of stored event mappings (``EventStore.read_mappings``); creation events,
    claims and re-run decisions are left out (see ``_is_hidden``)."""
    kept = []
    for m in mappings:
        ext = m["custom_metadata"].get(EXTENSION_KEY)
        if isinstance(ext, dict) and ext.get("create") is True:
            continue
        if m["content"] is None and (m["started_call_ids"]
                                     or RERUN_DECISION_KEY in m["custom_metadata"]):
            continue
        kept.append(m)
    return build_adk_events(kept, _DEFAULTS)


def _is_hidden(r: dict[str, Any]) -> bool:
    """Events of the stored encoding an ADK session does not show: the creation event (ADK's
    services show none for ``create_session``'s state), and the protocol's bookkeeping without
    content — claims (docs/protocol.md §3) and re-run decisions (§9), which the durability
    plugin reads from the log itself. ADK's resume logic reads a session's newest events to
    decide whether a call still has to run; a claim there would read as a pause."""
    metadata = r.get("m")
    if "c" not in r and (r.get("s") or (metadata and RERUN_DECISION_KEY in metadata)):
        return True
    ext = metadata.get(EXTENSION_KEY) if metadata else None
    return isinstance(ext, dict) and ext.get("create") is True


def adk_event_or_none(r: dict[str, Any]) -> AdkEvent | None:
    """The ADK event of one event in the stored encoding, or None for an event an ADK session
    does not show (``_is_hidden``; ``read_converted``'s conversion in ``get_session``)."""
    return None if _is_hidden(r) else build_adk_event_compact(r, _DEFAULTS)


def from_adk_event(event: AdkEvent) -> Event:
    """The store event of an ADK event (see ``_adk_events``)."""
    return event_from_adk_json(orjson.loads(event.model_dump_json(exclude_none=True)),
                               defaults=_DEFAULTS)


def _under_own_id(event: AdkEvent) -> Event:
    """The store event of an ADK event whose id the session already holds for another event:
    its store id is ADK's id plus a digest of the event's JSON (the same event always gets the
    same id, so retrying it stays idempotent); ADK's id is kept in the extension."""
    raw = orjson.loads(event.model_dump_json(exclude_none=True))
    digest = hashlib.blake2b(orjson.dumps(raw, option=orjson.OPT_SORT_KEYS),
                             digest_size=8).hexdigest()
    return event_from_adk_json(raw, defaults=_DEFAULTS, store_id=f"{event.id}~{digest}")


def order_ties(events: Sequence[AdkEvent]) -> list[AdkEvent]:
    """``events`` (log order) with each run of consecutive events sharing a timestamp ordered
    by id, as ADK's database services order events with equal timestamps; otherwise the log's
    order is kept."""
    stamps = [e.timestamp for e in events]
    if not any(map(operator.eq, stamps, islice(stamps, 1, None))):
        return list(events)  # no two neighbours tie (the usual case): nothing to reorder
    out: list[AdkEvent] = []
    i, n = 0, len(events)
    while i < n:
        j = i + 1
        stamp = events[i].timestamp
        while j < n and events[j].timestamp == stamp:
            j += 1
        if j - i == 1:
            out.append(events[i])
        else:
            out.extend(sorted(events[i:j], key=lambda e: e.id))
        i = j
    return out


class EventStoreSessionService(BaseSessionService):
    """ADK's session service on the event store: durable, checked appends; ``evs`` tooling on
    the histories ADK writes.

    ``url_or_store`` is a store URL (``memory://``, a SQLite path, ``postgresql://…``; opened on
    first use with ``auto_upgrade=True`` and closed by ``close()``) or an open EventStore (left
    open). Raises ADK's own errors: ``AlreadyExistsError`` on a taken id, ``StaleSessionError``
    when appending through an outdated session object, ``SessionNotFoundError`` when appending
    to a deleted session.
    """

    def __init__(self, url_or_store: str | os.PathLike[str] | EventStore = "memory://") -> None:
        self._handle = StoreHandle(url_or_store)

    async def store(self) -> EventStore:
        """The event store underneath (opened on first use)."""
        return await self._handle.get()

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> AdkSession:
        store = await self._handle.get()
        sid = session_id.strip() if session_id and session_id.strip() else uuid.uuid4().hex
        delta = {
            k: v for k, v in to_jsonable_python(state or {}).items()
            if not k.startswith("temp:")
        }
        # The initial state is the session's first event, written in the same transaction.
        initial = [event_from_adk_json(
            {"id": uuid.uuid4().hex, "author": "user", "invocation_id": "",
             "timestamp": time.time(), "actions": {"state_delta": delta}},
            create=True, defaults=_DEFAULTS,
        )] if delta else []
        try:
            created = await store.create_session(app_name=app_name, user_id=user_id,
                                                  session_id=sid, events=initial)
        except SessionExistsError as exc:
            raise AlreadyExistsError(f"Session with id {sid} already exists.") from exc
        version, updated = created.version, created.updated_at
        session = AdkSession(
            id=sid, app_name=app_name, user_id=user_id,
            state=created.state, events=[], last_update_time=updated,
        )
        _set_marker(session, version)
        return session

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> AdkSession | None:
        store = await self._handle.get()
        last = since = None
        if config is not None:
            last = config.num_recent_events
            since = config.after_timestamp or None  # ADK ignores a zero bound
        for sid in dict.fromkeys((session_id, session_id.strip())):
            try:
                # State and version first (no events), then the events up to that version:
                # the log below a version never changes, so both describe one moment.
                found = await store.get_session(sid, app_name=app_name, user_id=user_id, last=0)
            except (SessionNotFoundError, StoreUsageError):
                continue
            if config is None:  # the newest compaction and what follows, or the whole log
                events = order_ties(await compacted_adk_events(
                    store, found, upto=found.version, convert=adk_event_or_none))
            else:
                events = await self._events(store, found, upto=found.version, since=since,
                                            last=last)
            session = AdkSession(
                id=found.id, app_name=found.app_name, user_id=found.user_id,
                state=found.state, events=events, last_update_time=found.updated_at,
            )
            _set_marker(session, found.version)
            return session
        return None

    @staticmethod
    async def _events(
        store: EventStore, session: AdkSession | Session, *, upto: int, since: float | None,
        last: int | None,
    ) -> list[AdkEvent]:
        """The session's ADK events up to ``upto``: those at or after ``since``, the newest
        ``last`` of them, in ``order_ties`` order."""
        if last == 0:
            return []
        sid, app, user = session.id, session.app_name, session.user_id
        # Built as they are decoded: one pass, no mapping of the whole log kept alive. For the
        # newest N one more is read: when it ties with the Nth, the tie run is read whole.
        built = [e for e in await store.read_converted(
            sid, adk_event_or_none, upto=upto, since=since, backwards=last is not None,
            limit=None if last is None else last + 1, compact=True,
            app_name=app, user_id=user,
        ) if e is not None]
        if last is None:
            return order_ties(built)
        if len(built) > last and built[last].timestamp == built[last - 1].timestamp:
            bound = built[last - 1].timestamp
            run = [e for e in await store.read_converted(
                sid, adk_event_or_none, upto=upto, since=bound if since is None
                else max(bound, since), compact=True, app_name=app, user_id=user,
            ) if e is not None]
            return order_ties(run)[-last:]
        built = built[:last]
        built.reverse()
        return order_ties(built)

    async def _is_current(self, store: EventStore, session: AdkSession, version: int) -> bool:
        """ADK's rule for a session object without a marker: it is current when its newest
        event is the store's newest (or both have none)."""
        newest = await self._events(store, session, upto=version, since=None, last=1)
        if not session.events:
            return not newest
        return bool(newest) and newest[-1].id == session.events[-1].id

    @override
    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        store = await self._handle.get()
        sessions = []
        for found in await store.list_sessions_by_update(app_name=app_name, user_id=user_id):
            session = AdkSession(
                id=found.id, app_name=found.app_name, user_id=found.user_id,
                state=found.state, events=[], last_update_time=found.updated_at,
            )
            _set_marker(session, found.version)
            sessions.append(session)
        return ListSessionsResponse(sessions=sessions)

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        store = await self._handle.get()
        for sid in dict.fromkeys((session_id, session_id.strip())):
            try:
                await store.delete_session(sid, app_name=app_name, user_id=user_id)
            except (SessionNotFoundError, StoreUsageError):
                continue
            return

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        store = await self._handle.get()
        shared = await store.shared_state(app_name=app_name, user_id=user_id)
        return {k[len(_USER):]: v for k, v in shared.items() if k.startswith(_USER)}

    @override
    async def append_event(self, session: AdkSession, event: AdkEvent) -> AdkEvent:
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        store = await self._handle.get()
        expected = _marker(session)
        try:
            if expected is None:
                # A session object this service did not produce: ADK's rule for one.
                info = await store.session_info(session.id, app_name=session.app_name,
                                                user_id=session.user_id)
                if info.updated_at > session.last_update_time and not await self._is_current(
                        store, session, info.version):
                    raise StaleSessionError(_stale(session.id, "a newer update"))
                expected = info.version
            app, user = session.app_name, session.user_id
            native = from_adk_event(event)
            if event.actions.compaction is not None:
                native = await with_native_compaction(
                    store, session, native, orjson.loads(event.model_dump_json(
                        exclude_none=True)))
            try:
                [stored] = await store.append(session.id, native,
                                              expected_version=expected, app_name=app,
                                              user_id=user)
            except DuplicateEventError:
                [stored] = await store.append(session.id, _under_own_id(event),
                                              expected_version=expected, app_name=app,
                                              user_id=user)
        except ConcurrencyError as exc:
            raise StaleSessionError(_stale(session.id, f"version {exc.actual_version}")) \
                from exc
        except SessionNotFoundError as exc:
            raise AdkNotFound(f"Session {session.id} not found.") from exc
        # A re-appended event is a no-op: the session stays at the version it had.
        _set_marker(session, max(stored.seq or expected + 1, expected))
        session.last_update_time = event.timestamp
        return self._commit_event_to_session(session, event)

    async def call_record(self, session: AdkSession, call_id: str) -> CallRecord:
        """What the log says of call ``call_id`` of ``session``, as far as ``session`` has read
        it (its storage marker): ``CallLedger`` over the events from the model turn that made
        the call on (read newest first until that turn; nothing before it concerns the call)."""
        store = await self._handle.get()
        upto = _marker(session)
        if upto is None:
            upto = (await store.session_info(session.id, app_name=session.app_name,
                                             user_id=session.user_id)).version
        newest_first: list[Event] = []
        cursor, size = upto, 32
        while cursor > 0:
            page = await store.read(session.id, upto=cursor, backwards=True, limit=size,
                                    app_name=session.app_name, user_id=session.user_id)
            newest_first.extend(page)
            if any(c.id == call_id for e in page for c in e.function_calls()) or len(
                    page) < size or page[-1].seq is None:
                break
            cursor, size = page[-1].seq - 1, min(size * 2, 1024)
        newest_first.reverse()
        return CallLedger.of(newest_first).get(call_id)

    async def append_claim(
        self, session: AdkSession, *, call_ids: Sequence[str], author: str,
        invocation_id: str, branch: str | None = None,
    ) -> Event:
        """Append the claim (docs/protocol.md §3) of ``call_ids`` before their tools run, with
        ``expected_version`` = the version ``session`` was read at, and move ``session``'s
        marker past it (the claim is not one of its ADK events: ``_is_hidden``). Raises ADK's
        ``StaleSessionError`` when another writer moved the session since: the calls must not
        run then."""
        store = await self._handle.get()
        expected = _marker(session)
        if expected is None:
            expected = (await store.session_info(session.id, app_name=session.app_name,
                                                 user_id=session.user_id)).version
        claim = claim_event(session_id=session.id, call_ids=call_ids, author=author,
                            invocation_id=invocation_id, branch=branch)
        try:
            [stored] = await store.append(session.id, claim, expected_version=expected,
                                          app_name=session.app_name, user_id=session.user_id)
        except ConcurrencyError as exc:
            raise StaleSessionError(_stale(session.id, f"version {exc.actual_version}")) \
                from exc
        except SessionNotFoundError as exc:
            raise AdkNotFound(f"Session {session.id} not found.") from exc
        _set_marker(session, stored.seq or expected + 1)
        session.last_update_time = max(session.last_update_time, stored.timestamp)
        return stored

    async def close(self) -> None:
        """Close the store if this service opened it from a URL."""
        await self._handle.close()


_ADK_STALE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)
"""ADK's own words for a stale session (its database services'), which callers match on."""


def _stale(session_id: str, found: str) -> str:
    return f"{_ADK_STALE} (Session {session_id}: the store has {found} since it was read.)"

