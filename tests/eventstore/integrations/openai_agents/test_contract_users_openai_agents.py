"""Two users with a session of the same id, through the OpenAI Agents SDK's session on every
backend: each user reads, appends to and clears only their own."""

from __future__ import annotations

from _extras import require_extra

require_extra("agents", "openai-agents")

from eventstore import EventStore  # noqa: E402
from eventstore.integrations.openai_agents import EventStoreSession  # noqa: E402


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
