"""``EventStoreMemoryService``: ADK's memory service over the store's full-text memory."""

from __future__ import annotations

from _extras import require_extra

adk = require_extra("google.adk", "adk")

import pytest  # noqa: E402
from google.adk.memory.base_memory_service import BaseMemoryService  # noqa: E402
from google.adk.sessions.session import Session as AdkSession  # noqa: E402

from eventstore import (  # noqa: E402
    Content,
    Event,
    EventStore,
    Part,
    SessionNotFoundError,
)
from eventstore.integrations.adk import EventStoreMemoryService  # noqa: E402


async def _stored(store: EventStore, sid: str, user: str, *texts: str) -> AdkSession:
    await store.create_session(app_name="trips", user_id=user, session_id=sid)
    events = [
        Event(
            author="user" if i % 2 == 0 else "planner",
            content=Content(role="user" if i % 2 == 0 else "model", parts=(Part(text=t),)),
        )
        for i, t in enumerate(texts)
    ]
    await store.append(sid, events, expected_version=0)
    return AdkSession(id=sid, app_name="trips", user_id=user)


async def test_adk_memory_service_searches_the_users_remembered_sessions(
    store: EventStore,
) -> None:
    service = EventStoreMemoryService(store)
    assert isinstance(service, BaseMemoryService)
    await service.add_session_to_memory(
        await _stored(store, "s1", "ada", "Book the Kyoto ryokan", "Booked for May.")
    )
    await service.add_session_to_memory(await _stored(store, "s2", "bob", "Kyoto for me too"))

    found = await service.search_memory(app_name="trips", user_id="ada", query="kyoto may")
    assert {m.id for m in found.memories} == {"s1#1", "s1#2"}
    by_id = {m.id: m for m in found.memories}
    first = by_id["s1#1"]
    assert first.author == "user"
    assert first.content.role == "user"
    assert first.content.parts[0].text == "Book the Kyoto ryokan"
    assert first.custom_metadata == {"session_id": "s1", "seq": 1}
    assert first.timestamp is not None
    assert by_id["s1#2"].content.role == "model"
    bob = await service.search_memory(app_name="trips", user_id="bob", query="kyoto")
    assert [m.id for m in bob.memories] == ["s2#1"]


async def test_adk_memory_service_refuses_a_session_not_in_the_store(store: EventStore) -> None:
    service = EventStoreMemoryService(store)
    with pytest.raises(SessionNotFoundError):
        await service.add_session_to_memory(AdkSession(id="nope", app_name="trips", user_id="u"))
    await _stored(store, "s1", "ada", "hello")
    with pytest.raises(SessionNotFoundError, match="for app 'trips' and user 'eve'"):
        await service.add_session_to_memory(AdkSession(id="s1", app_name="trips", user_id="eve"))
