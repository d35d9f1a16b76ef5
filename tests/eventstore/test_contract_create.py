"""The backend contract for creating a session with its first events and artifacts in one
transaction (``create_session(events=…, artifacts=…)``), and for refusing NUL bytes alike on
every backend."""

from __future__ import annotations

import pytest
from _evs_support import full_dump, text_event

from eventstore import (
    Artifact,
    ArtifactConflictError,
    ArtifactNotFoundError,
    DuplicateEventError,
    Event,
    EventActions,
    EventStore,
    InvalidEventError,
    SessionExistsError,
    SessionNotFoundError,
    StoreUsageError,
)

APP = "app"
USER = "alice"


def _artifact(filename: str, version: int, data: bytes = b"x") -> Artifact:
    return Artifact(filename=filename, version=version, mime_type="text/plain", data=data,
                    created_at=1_700_000_000.5 + version)


async def test_create_session_with_events_stores_them_first(store: EventStore) -> None:
    first = text_event("hello", id="e1")
    second = Event(author="user", id="e2", actions=EventActions(state_delta={"k": 1}))
    session = await store.create_session(app_name=APP, user_id=USER, session_id="s1",
                                         state={"units": "metric"}, events=[first, second])
    assert [e.seq for e in session.events] == [1, 2, 3]
    assert [e.id for e in session.events[1:]] == ["e1", "e2"]
    assert session.version == 3
    assert session.state == {"units": "metric", "k": 1}
    assert session.updated_at == second.timestamp
    assert [e.id for e in await store.read("s1")] == [session.events[0].id, "e1", "e2"]
    info = await store.session_info("s1")
    assert info.version == 3


async def test_create_session_accepts_one_event(store: EventStore) -> None:
    session = await store.create_session(app_name=APP, user_id=USER, session_id="s1",
                                         events=text_event("hi", id="e1"))
    assert [e.id for e in session.events] == ["e1"]


async def test_create_session_with_artifacts_keeps_versions_and_times(store: EventStore) -> None:
    await store.create_session(
        app_name=APP, user_id=USER, session_id="s1", events=[text_event("hi", id="e1")],
        artifacts=[_artifact("a.txt", 0, b"v0"), _artifact("a.txt", 1, b"v1"),
                   _artifact("user:shared.txt", 0, b"u0")])
    assert await store.list_artifacts("s1") == {"a.txt": [0, 1], "user:shared.txt": [0]}
    loaded = await store.load_artifact("s1", "a.txt", version=1)
    assert (loaded.data, loaded.created_at, loaded.mime_type) == (b"v1", 1_700_000_001.5,
                                                                  "text/plain")
    # user: artifacts are the user's: another session of the user sees them.
    await store.create_session(app_name=APP, user_id=USER, session_id="s2")
    assert (await store.load_artifact("s2", "user:shared.txt")).data == b"u0"
    with pytest.raises(ArtifactNotFoundError):
        await store.load_artifact("s2", "a.txt")


@pytest.mark.parametrize(
    "artifacts",
    [
        pytest.param([_artifact("a.txt", 1)], id="version-gap"),
        pytest.param([_artifact("a.txt", 0), _artifact("a.txt", 0)], id="version-repeated"),
        pytest.param([_artifact("user:shared.txt", 0)], id="user-version-taken"),
    ],
)
async def test_create_session_artifact_conflict_writes_nothing(
    store: EventStore, artifacts: list[Artifact]
) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="other",
                               artifacts=[_artifact("user:shared.txt", 0, b"kept")])
    before = await full_dump(store)
    with pytest.raises(ArtifactConflictError) as info:
        await store.create_session(app_name=APP, user_id=USER, session_id="s1",
                                   events=[text_event("hi", id="e1")], artifacts=artifacts)
    assert info.value.session_id == "s1"
    assert info.value.filename == artifacts[-1].filename
    with pytest.raises(SessionNotFoundError):
        await store.session_info("s1")
    assert await full_dump(store) == before
    assert (await store.load_artifact("other", "user:shared.txt")).data == b"kept"


async def test_create_session_bad_event_writes_nothing(store: EventStore) -> None:
    with pytest.raises(DuplicateEventError):
        await store.create_session(app_name=APP, user_id=USER, session_id="s1",
                                   events=[text_event("a", id="e1"), text_event("b", id="e1")])
    with pytest.raises(InvalidEventError):
        await store.create_session(app_name=APP, user_id=USER, session_id="s1",
                                   events=["not an event"])  # type: ignore[list-item]
    with pytest.raises(SessionNotFoundError):
        await store.session_info("s1")


async def test_create_session_taken_id_with_events_writes_nothing(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s1")
    with pytest.raises(SessionExistsError):
        await store.create_session(app_name=APP, user_id=USER, session_id="s1",
                                   events=[text_event("a", id="e1")],
                                   artifacts=[_artifact("user:u.txt", 0)])
    assert await store.version("s1") == 0
    assert await store.list_artifacts("s1") == {}


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"session_id": "s\0"}, id="session-id"),
        pytest.param({"app_name": "a\0"}, id="app-name"),
        pytest.param({"user_id": "u\0"}, id="user-id"),
    ],
)
async def test_nul_in_ids_is_refused(store: EventStore, kwargs: dict[str, str]) -> None:
    args = {"app_name": APP, "user_id": USER, "session_id": "s1", **kwargs}
    with pytest.raises(StoreUsageError, match="without NUL"):
        await store.create_session(**args)
    assert (await store.list_sessions()).sessions == []


async def test_nul_in_event_ids_is_refused(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s1")
    for event in (text_event("a", id="e\0"),
                  Event(author="us\0er", id="e1"),
                  Event(author="user", id="e2", invocation_id="inv\0")):
        with pytest.raises(InvalidEventError, match="contains NUL"):
            await store.append("s1", event, expected_version=0)
    assert await store.version("s1") == 0


async def test_nul_in_artifact_filename_or_mime_type_is_refused(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s1")
    with pytest.raises(StoreUsageError, match="without NUL"):
        await store.save_artifact("s1", "a\0.txt", b"x", mime_type="text/plain")
    with pytest.raises(StoreUsageError, match="without NUL"):
        await store.save_artifact("s1", "a.txt", b"x", mime_type="text/\0plain")
    with pytest.raises(StoreUsageError, match="without NUL"):
        await store.load_artifact("s1", "a\0.txt")
    assert await store.list_artifacts("s1") == {}


async def test_nul_in_a_looked_up_session_id_is_not_found(store: EventStore) -> None:
    for lookup in (store.session_info("s\0"), store.read("s\0"), store.version("s\0"),
                   store.delete_session("s\0")):
        with pytest.raises(SessionNotFoundError):
            await lookup
