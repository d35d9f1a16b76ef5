"""Two users with a session of the same id, through the ADK session service on every backend:
each user reads, appends to and deletes only their own."""

from __future__ import annotations

from _extras import require_extra

require_extra("google.adk", "adk")

from google.adk.events import Event as AdkEvent  # noqa: E402
from google.adk.events.event_actions import EventActions  # noqa: E402

from eventstore import EventStore  # noqa: E402
from eventstore.integrations.adk import EventStoreSessionService  # noqa: E402


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
