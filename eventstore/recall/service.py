"""``MemoryService``: memory over past sessions, searched with the database's full-text index.

``add_session_to_memory`` remembers a session: the text of its events (see ``text``) up to
its version is indexed under the session's app and user. ``search_memory`` returns the matching
events of one app's user, best first — never another user's — and only those the log still
vouches for (each hit is checked against its event). The index is derived from the log:
what the store keeps as a fact is only *which* sessions were added and up to which ``seq``;
``rebuild`` drops every indexed row and derives them again from the log (``evs memory
rebuild``), so ``rebuild(log) == index``. Deleting a session deletes its memory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from eventstore._exceptions import CorruptEventError, SessionNotFoundError
from eventstore.backends.protocol import MemoryRow
from eventstore.store.facade import EventStore, Session, SessionInfo

from .text import event_memory_text, query_terms

__all__ = ["MemoryEntry", "MemoryRebuild", "MemoryService"]

DEFAULT_LIMIT = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEntry:
    """One remembered event that matched a search."""

    session_id: str
    """The session it is from."""
    seq: int
    """Its ``seq`` in that session."""
    author: str
    """``user`` or an agent name."""
    timestamp: float
    """When it was written (seconds since the epoch)."""
    text: str
    """The remembered text: message text, ``<tool> called with {...}``, ``<tool> returned
    {...}``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRebuild:
    """What ``MemoryService.rebuild`` did."""

    sessions: int
    """Sessions whose memory was derived again."""
    rows: int
    """Rows indexed."""
    dropped: int
    """Rows there were before."""


class MemoryService:
    """Memory over the past sessions of one store, per app and user.

    Guarantees: a search only returns events of sessions of the given app and user that were
    added to memory, up to the ``seq`` they were added at; adding a session again re-indexes it
    up to its new version; ``rebuild`` gives the same rows as adding each remembered session
    again. Raises ``SessionNotFoundError`` for an unknown session, ``StoreClosedError`` once the
    store is closed.
    """

    def __init__(self, store: EventStore) -> None:
        self.store = store
        """The store whose sessions are remembered."""

    async def _index(self, key: str, app_name: str, user_id: str, upto: int) -> int:
        """Index the session stored under ``key`` (the backend's name for it) up to ``upto``."""
        backend = self.store.backend
        stored = await backend.read(key, after=None, upto=upto, backwards=False,
                                    limit=None) if upto else []
        events = [self.store.decode(row) for row in stored]
        rows = [
            MemoryRow(session_id=key, seq=event.seq or 0, author=event.author,
                      timestamp=event.timestamp, text=text)
            for event in events
            if (text := event_memory_text(event))
        ]
        await backend.index_memory(
            app_name=app_name, user_id=user_id, session_id=key, upto_seq=upto,
            rows=rows, added_at=time.time(),
        )
        return len(rows)

    async def add_session_to_memory(self, session: Session | SessionInfo | str) -> int:
        """Remember ``session`` (an object read from this store, or an id) up to its version.

        A ``Session``/``SessionInfo`` is remembered up to the version it was read at; an id, up
        to the session's head. Returns how many events were indexed.
        """
        info = (
            await self.store.session_info(session) if isinstance(session, str) else session
        )
        key = await self.store.session_key(info.id, app_name=info.app_name,
                                           user_id=info.user_id)
        return await self._index(key, info.app_name, info.user_id, info.version)

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str, limit: int = DEFAULT_LIMIT
    ) -> list[MemoryEntry]:
        """Return up to ``limit`` remembered events of the app's user with a word starting with
        any word of ``query`` (case-insensitive, no stemming), best match first (an empty list
        when the query has no word)."""
        if limit < 1:
            return []
        rows = await self.store.backend.search_memory(
            app_name=app_name, user_id=user_id, terms=query_terms(query), limit=limit
        )
        return [
            MemoryEntry(session_id=r.session_id, seq=r.seq, author=r.author,
                        timestamp=r.timestamp, text=r.text)
            for r in rows if await self._vouched(r)
        ]

    async def _vouched(self, row: MemoryRow) -> bool:
        """Whether the log still says what the index row says (the event at its seq gives
        the same text, author and time): a row edited behind the store's back, or left by a
        log that changed, is not returned (``rebuild`` derives it again). One read per hit:
        a search returns a handful."""
        try:
            stored = await self.store.backend.read(row.session_id, after=row.seq - 1,
                                                   upto=row.seq, backwards=False, limit=1)
            if not stored or stored[0].seq != row.seq:
                return False
            event = self.store.decode(stored[0])
        except (SessionNotFoundError, CorruptEventError):
            return False
        return (event_memory_text(event) == row.text and event.author == row.author
                and event.timestamp == row.timestamp)

    async def entries(self, session_id: str) -> list[MemoryEntry]:
        """Return what is indexed of one session, in ``seq`` order (empty when not remembered)."""
        return [
            MemoryEntry(session_id=r.session_id, seq=r.seq, author=r.author,
                        timestamp=r.timestamp, text=r.text)
            for r in await self.store.backend.memory_rows(session_id)
        ]

    async def rebuild(self) -> MemoryRebuild:
        """Drop every indexed row and derive them again from the log of each remembered session
        (up to the ``seq`` it was added at)."""
        dropped = await self.store.backend.clear_memory_rows()
        remembered = await self.store.backend.remembered_sessions()
        rows = 0
        for key, app_name, user_id, upto in remembered:
            rows += await self._index(key, app_name, user_id, upto)
        return MemoryRebuild(sessions=len(remembered), rows=rows, dropped=dropped)
