"""What ADK's database services promise beyond the base contract, restated as tests of our
session service on memory, SQLite and PostgreSQL: the stale-writer error as ADK words it,
session objects without a storage marker, events re-using an id, events tied on timestamp,
exact ``num_recent_events`` and padded session ids; and artifact versions answered as ADK's
own artifact service answers."""

from __future__ import annotations

from _extras import require_extra

adk = require_extra("google.adk", "adk")

from typing import Any  # noqa: E402

import pytest  # noqa: E402
from google.adk.artifacts import InMemoryArtifactService  # noqa: E402
from google.adk.errors import StaleSessionError  # noqa: E402
from google.adk.events import Event  # noqa: E402
from google.adk.sessions.base_session_service import GetSessionConfig  # noqa: E402
from google.genai import types  # noqa: E402

from eventstore import EventStore  # noqa: E402
from eventstore.integrations.adk import (  # noqa: E402
    EventStoreArtifactService,
    EventStoreSessionService,
)

APP = "app"
ADK_STALE = "The session has been modified in storage since it was loaded."


@pytest.fixture
def service(store: EventStore) -> EventStoreSessionService:
    return EventStoreSessionService(store)


async def _ids(service: EventStoreSessionService, sid: str = "s",
               config: GetSessionConfig | None = None) -> list[str]:
    got = await service.get_session(app_name=APP, user_id="u", session_id=sid, config=config)
    assert got is not None
    return [e.id for e in got.events]


async def test_stale_writer_gets_adk_s_words_and_writes_nothing(
    service: EventStoreSessionService, store: EventStore
) -> None:
    first = await service.create_session(app_name=APP, user_id="u", session_id="s")
    copy = first.model_copy(deep=True)
    await service.append_event(first, Event(author="user", id="won"))
    with pytest.raises(StaleSessionError, match=ADK_STALE) as raised:
        await service.append_event(copy, Event(author="user", id="lost"))
    assert isinstance(raised.value, ValueError)
    assert "Please reload the session" in str(raised.value)
    assert await _ids(service) == ["won"]
    assert await store.version("s") == 1


async def test_object_without_marker_is_stale_only_when_behind(
    service: EventStoreSessionService,
) -> None:
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    await service.append_event(session, Event(author="user", id="e1",
                                              timestamp=session.last_update_time + 5))
    behind = session.model_copy(deep=True)
    # Current, but its marker is lost and its clock reads a little early: still current.
    session._storage_update_marker = None
    session.last_update_time -= 0.001
    await service.append_event(session, Event(author="user", id="e2",
                                              timestamp=session.last_update_time + 10))
    # Behind by one event, marker lost: its newest event is not the store's newest.
    behind._storage_update_marker = None
    behind.last_update_time -= 0.001
    with pytest.raises(StaleSessionError, match=ADK_STALE):
        await service.append_event(behind, Event(author="user", id="e3"))
    assert await _ids(service) == ["e1", "e2"]


async def test_other_event_under_a_held_id_is_kept_with_adk_s_id(
    service: EventStoreSessionService, store: EventStore
) -> None:
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    first = Event(author="user", id="same", invocation_id="a", timestamp=1.0)
    other = Event(author="agent", id="same", invocation_id="b", timestamp=2.0)
    await service.append_event(session, first)
    await service.append_event(session, first)  # identical again: nothing new
    await service.append_event(session, first.model_copy(deep=True))
    await service.append_event(session, other)
    await service.append_event(session, other.model_copy(deep=True))  # retried: idempotent
    got = await service.get_session(app_name=APP, user_id="u", session_id="s")
    assert got is not None
    assert [(e.id, e.author, e.invocation_id) for e in got.events] == [
        ("same", "user", "a"), ("same", "agent", "b")]
    assert got.events[1] == other
    stored = await store.read("s")
    assert len(stored) == 2
    assert stored[0].id == "same"
    assert stored[1].id.startswith("same~")
    # The object is still current after the no-op re-appends: the next append is accepted.
    await service.append_event(session, Event(author="user", id="next", timestamp=3.0))
    assert await _ids(service) == ["same", "same", "next"]


async def test_events_tied_on_timestamp_come_back_ordered_by_id(
    service: EventStoreSessionService,
) -> None:
    session = await service.create_session(app_name=APP, user_id="u", session_id="s")
    for event_id, ts in [("a0", 50.0), ("z", 100.0), ("m", 100.0), ("a", 100.0), ("b9", 200.0)]:
        await service.append_event(session, Event(author="user", id=event_id, timestamp=ts))
    assert await _ids(service) == ["a0", "a", "m", "z", "b9"]
    recent = GetSessionConfig
    # The newest N in that order, exactly N, also when N cuts through the tie.
    assert await _ids(service, config=recent(num_recent_events=2)) == ["z", "b9"]
    assert await _ids(service, config=recent(num_recent_events=3)) == ["m", "z", "b9"]
    assert await _ids(service, config=recent(num_recent_events=4)) == ["a", "m", "z", "b9"]
    assert await _ids(service, config=recent(num_recent_events=9)) == [
        "a0", "a", "m", "z", "b9"]
    assert await _ids(service, config=recent(num_recent_events=0)) == []
    assert await _ids(service, config=recent(num_recent_events=2, after_timestamp=100.0)) == [
        "z", "b9"]
    assert await _ids(service, config=recent(after_timestamp=100.0)) == ["a", "m", "z", "b9"]


async def test_padded_session_id_reaches_the_session_on_get_and_delete(
    service: EventStoreSessionService,
) -> None:
    created = await service.create_session(app_name=APP, user_id="u", session_id=" s-1\t\n")
    assert created.id == "s-1"
    got = await service.get_session(app_name=APP, user_id="u", session_id="s-1\n")
    assert got is not None
    assert got.id == "s-1"
    # Another user's padded id deletes nothing of this one.
    await service.delete_session(app_name=APP, user_id="v", session_id=" s-1 ")
    assert await service.get_session(app_name=APP, user_id="u", session_id="s-1") is not None
    await service.delete_session(app_name=APP, user_id="u", session_id=" s-1 ")
    assert await service.get_session(app_name=APP, user_id="u", session_id="s-1") is None


async def _artifact_answers(service: Any) -> list[object]:
    """What an artifact service answers about versions after one mixed sequence of saves."""
    saves = [
        ("s", "f.bin", types.Part.from_bytes(data=b"ab", mime_type="image/png"), {"k": 1}),
        ("s", "f.bin", types.Part(text="hello"), None),
        ("s", "user:u.txt", types.Part.from_bytes(data=b"x", mime_type="text/plain"), {}),
        (None, "user:n.txt", types.Part(text="t"), {"a": "b"}),
    ]
    for sid, name, part, metadata in saves:
        await service.save_artifact(app_name=APP, user_id="u", session_id=sid, filename=name,
                                    artifact=part, custom_metadata=metadata)
    out: list[object] = []
    for sid, name in [("s", "f.bin"), ("s", "user:u.txt"), (None, "user:u.txt"),
                      (None, "user:n.txt"), ("s", "missing"), ("other", "f.bin")]:
        versions = await service.list_artifact_versions(
            app_name=APP, user_id="u", session_id=sid, filename=name)
        # The URI's scheme names the service (memory://, evs://); the rest must agree.
        out.append([(v.version, v.canonical_uri.split("://", 1)[1], v.custom_metadata,
                     v.mime_type, type(v.create_time)) for v in versions])
        for version in (None, 0, 1, 5):
            found = await service.get_artifact_version(
                app_name=APP, user_id="u", session_id=sid, filename=name, version=version)
            out.append(None if found is None else (found.version, found.custom_metadata,
                                                   found.mime_type))
        out.append(await service.list_versions(app_name=APP, user_id="u", session_id=sid,
                                               filename=name))
        out.append(await service.list_artifact_keys(app_name=APP, user_id="u",
                                                    session_id=sid))
    return out


async def test_artifact_versions_answer_as_adk_s_own_service(store: EventStore) -> None:
    ours = await _artifact_answers(EventStoreArtifactService(store))
    assert ours == await _artifact_answers(InMemoryArtifactService())
