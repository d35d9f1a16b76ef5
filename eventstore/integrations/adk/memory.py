"""``EventStoreMemoryService``: ADK's ``BaseMemoryService`` over the event store's memory.

Needs the ``[adk]`` extra (google-adk), as every room of ``eventstore.integrations.adk``; this is
the only module of the memory feature that imports it. Sessions are remembered from the store's own
log, so a session added here must be stored in the same store (ADK sessions kept by the event
store's ADK session service are): the log is the source of truth, never the ``Session`` object's
copy of the events. Each search result is one remembered event, as an ADK ``MemoryEntry`` with the
event's author and time, ``id`` ``"<session id>#<seq>"`` and the session id and seq in
``custom_metadata``.
"""

from __future__ import annotations

import datetime

from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry as AdkMemoryEntry
from google.adk.sessions.session import Session as AdkSession
from google.genai import types

from eventstore import EventStore, MemoryEntry, MemoryService, SessionNotFoundError

__all__ = ["EventStoreMemoryService", "to_adk_memory"]


def to_adk_memory(entry: MemoryEntry) -> AdkMemoryEntry:
    """The ADK ``MemoryEntry`` of one remembered event (role ``user`` for the user's events)."""
    when = datetime.datetime.fromtimestamp(entry.timestamp, tz=datetime.UTC).isoformat()
    return AdkMemoryEntry(
        content=types.Content(
            role="user" if entry.author == "user" else "model",
            parts=[types.Part(text=entry.text)],
        ),
        author=entry.author,
        timestamp=when,
        id=f"{entry.session_id}#{entry.seq}",
        custom_metadata={"session_id": entry.session_id, "seq": entry.seq},
    )


class EventStoreMemoryService(BaseMemoryService):
    """ADK memory backed by ``eventstore.MemoryService`` (full-text search in the database).

    Guarantees: ``search_memory`` returns only events of the app's user's remembered sessions;
    ``add_session_to_memory`` (re-)indexes the session from the store's log up to its head.
    Raises ``SessionNotFoundError`` when the session is not in the store under the same app and
    user.
    """

    def __init__(self, store: EventStore, *, limit: int = 10) -> None:
        self.memory = MemoryService(store)
        """The store's memory service."""
        self.limit = limit
        """Most entries one search returns."""

    async def add_session_to_memory(self, session: AdkSession) -> None:
        """Remember the ADK ``session`` from the log the store holds for its id."""
        info = await self.memory.store.session_info(session.id)
        if (info.app_name, info.user_id) != (session.app_name, session.user_id):
            raise SessionNotFoundError(
                session.id,
                detail=f"for app {session.app_name!r} and user {session.user_id!r}.",
            )
        await self.memory.add_session_to_memory(info)

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        """Search the user's memory of the app; a ``SearchMemoryResponse``, best first."""
        found = await self.memory.search_memory(
            app_name=app_name, user_id=user_id, query=query, limit=self.limit
        )
        return SearchMemoryResponse(memories=[to_adk_memory(e) for e in found])
