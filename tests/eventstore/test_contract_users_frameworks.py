"""Two users with a session of the same id, through the framework adapters (ADK and the OpenAI
Agents SDK) on every backend: each user reads, appends to and deletes only their own."""

from __future__ import annotations

from _extras import require_extra

require_extra("google.adk", "adk")
require_extra("agents", "openai-agents")

from google.adk.events import Event as AdkEvent  # noqa: E402
from google.adk.events.event_actions import EventActions  # noqa: E402

from eventstore import EventStore  # noqa: E402
from eventstore.integrations.adk import EventStoreSessionService  # noqa: E402
from eventstore.integrations.openai_agents import EventStoreSession  # noqa: E402


async def test_adk_users_share_a_session_id(store: EventStore) -> None:
    service = EventStoreSessionService(store)
    first = await service.create_session(app_name="app", user_id="u1", session_id="default",
                                         state={"who": "u1"})
    second = await service.create_session(app_name="app", user_id="u2", session_id="default")
    await service.append_event(first, AdkEvent(
        author="user", invocation_id="i1", actions=EventActions(state_delta={"n": 1})))
    got1 = await service.get_session(app_name="app", user_id="u1", session_id="default")
    got2 = await service.get_session(app_name="app", user_id="u2", session_id="default")
    assert got1 is not None
    assert got2 is not None
    assert (len(got1.events), got1.state) == (1, {"who": "u1", "n": 1})
    assert (len(got2.events), got2.state) == (0, {})
    await service.append_event(second, AdkEvent(author="user", invocation_id="i2"))
    listed = await service.list_sessions(app_name="app")
    assert sorted((s.user_id, s.id) for s in listed.sessions) == [
        ("u1", "default"), ("u2", "default")]
    await service.delete_session(app_name="app", user_id="u2", session_id="default")
    assert await service.get_session(app_name="app", user_id="u2", session_id="default") is None
    kept = await service.get_session(app_name="app", user_id="u1", session_id="default")
    assert kept is not None
    assert len(kept.events) == 1


async def test_openai_agents_users_share_a_session_id(store: EventStore) -> None:
    alice = EventStoreSession("default", store, user_id="alice")
    bob = EventStoreSession("default", store, user_id="bob")
    await alice.add_items([{"role": "user", "content": "hi from alice"}])
    await bob.add_items([{"role": "user", "content": "hi from bob"}])
    await bob.add_items([{"role": "user", "content": "again"}])
    assert [i["content"] for i in await alice.get_items()] == ["hi from alice"]
    assert [i["content"] for i in await bob.get_items()] == ["hi from bob", "again"]
    assert (await bob.pop_item() or {}).get("content") == "again"
    await alice.clear_session()
    assert await alice.get_items() == []
    assert [i["content"] for i in await bob.get_items()] == ["hi from bob"]
    # A fresh object of the same user reads the same items (through the store's cache too).
    assert [i["content"] for i in
            await EventStoreSession("default", store, user_id="bob").get_items()] == [
        "hi from bob"]
