"""The backend contract, part two: state, artifacts, live tails and the store lifecycle, on
every backend (sessions, appends and reads are in ``test_contract.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from _evs_support import (
    StoreFactory,
    call_event,
    delta_event,
    full_dump,
    response_event,
    text_event,
)

from eventstore import (
    ArtifactNotFoundError,
    ConcurrencyError,
    Event,
    EventActions,
    EventStore,
    InvalidEventError,
    SessionNotFoundError,
    StoreClosedError,
    StoreUsageError,
)

APP = "app"
USER = "alice"


async def _session_with(store: EventStore, n: int, *, sid: str = "s1") -> list[Event]:
    await store.create_session(app_name=APP, user_id=USER, session_id=sid)
    return await store.append(
        sid, [text_event(f"m{i}", id=f"e{i}") for i in range(1, n + 1)], expected_version=0
    )


def _seqs(events: list[Event]) -> list[int | None]:
    return [e.seq for e in events]


# -- state -----------------------------------------------------------------------------------------


async def test_state_scopes_session_user_app_temp(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id="alice", session_id="a1")
    await store.create_session(app_name=APP, user_id="alice", session_id="a2")
    await store.create_session(app_name=APP, user_id="bob", session_id="b1")
    await store.create_session(app_name="other", user_id="alice", session_id="o1")
    appended = await store.append(
        "a1",
        delta_event({"s": 1, "user:u": "alice", "app:a": "A", "temp:t": "gone"}, id="d"),
        expected_version=0,
    )
    assert appended[0].actions.state_delta == {"s": 1, "user:u": "alice", "app:a": "A"}
    assert (await store.read("a1"))[0].actions.state_delta == {
        "s": 1, "user:u": "alice", "app:a": "A"
    }
    assert await store.state("a1") == {"s": 1, "user:u": "alice", "app:a": "A"}
    assert await store.state("a2") == {"user:u": "alice", "app:a": "A"}
    assert await store.state("b1") == {"app:a": "A"}
    assert await store.state("o1") == {}
    assert (await store.get_session("a2")).state == {"user:u": "alice", "app:a": "A"}


async def test_state_none_is_a_value_and_nested_values_replace_whole(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    await store.append(
        "s",
        [
            delta_event({"a": 1, "n": {"x": 1, "y": 2}, "user:u": 1, "app:p": 1}),
            delta_event({"a": None, "n": {"z": 3}, "user:u": None, "missing": None}),
        ],
        expected_version=0,
    )
    expected = {"a": None, "n": {"z": 3}, "user:u": None, "app:p": 1, "missing": None}
    assert await store.state("s") == expected
    # Read back by a fresh fold, a listing and the user's shared state: the None stays a value.
    assert await store.session_state_fold("s") == {"a": None, "n": {"z": 3}, "missing": None}
    assert await store.shared_state(app_name=APP, user_id=USER) == {"user:u": None, "app:p": 1}
    [listed] = await store.list_sessions_by_update(app_name=APP, user_id=USER)
    assert listed.state == expected


async def test_state_deletions_remove_keys_in_every_scope(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    await store.create_session(app_name=APP, user_id=USER, session_id="t")
    await store.append("s", delta_event({"a": 1, "b": None, "user:u": 1, "app:p": 1}),
                       expected_version=0)
    [gone] = await store.append(
        "s",
        Event(author="agent", actions=EventActions(
            state_deletions=("a", "b", "user:u", "app:p", "never-set", "temp:t"))),
        expected_version=1,
    )
    assert gone.actions.state_deletions == ("a", "b", "user:u", "app:p", "never-set")
    assert (await store.read("s"))[-1].actions == gone.actions
    assert await store.state("s") == {}
    assert await store.state("s", at=1) == {"a": 1, "b": None, "user:u": 1, "app:p": 1}
    # The shared deletions reach the user's and the app's other sessions.
    assert await store.state("t") == {}
    assert await store.shared_state(app_name=APP, user_id=USER) == {}


async def test_state_refuses_a_key_both_set_and_deleted(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    bad = Event(author="agent", id="both",
                actions=EventActions(state_delta={"a": 1}, state_deletions=("a",)))
    with pytest.raises(InvalidEventError, match="both sets and deletes state key 'a'"):
        await store.append("s", bad, expected_version=0)
    assert await store.read("s") == []


async def test_state_at_seq_is_state_seen_then(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    await store.create_session(app_name=APP, user_id=USER, session_id="t")
    await store.append("s", delta_event({"a": 1, "user:u": 1}), expected_version=0)  # seq 1
    await store.append("t", delta_event({"user:u": 2, "app:x": 1}), expected_version=0)
    await store.append("s", delta_event({"a": 2, "b": 1}), expected_version=1)  # seq 2
    await store.append("t", delta_event({"app:x": 2}), expected_version=1)
    await store.append("s", delta_event({"a": None}), expected_version=2)  # seq 3
    assert await store.state("s", at=0) == {}
    assert await store.state("s", at=1) == {"a": 1, "user:u": 1}
    assert await store.state("s", at=2) == {"a": 2, "b": 1, "user:u": 2, "app:x": 1}
    assert await store.state("s", at=3) == {"a": None, "b": 1, "user:u": 2, "app:x": 2}
    assert await store.state("s") == await store.state("s", at=3)
    with pytest.raises(StoreUsageError):
        await store.state("s", at=4)
    with pytest.raises(StoreUsageError):
        await store.state("s", at=-1)


async def test_state_snapshots_do_not_change_the_answer(store_factory: StoreFactory) -> None:
    store: EventStore = await store_factory(snapshot_interval=3)
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    expected: dict[str, object] = {}
    for i in range(1, 17):
        # None values and deletions on both sides of each snapshot.
        delta = {f"k{i % 4}": i if i % 5 else None, "n": {"i": i}}
        deleted = (f"k{(i + 2) % 4}",) if i % 3 == 0 else ()
        await store.append("s", Event(author="agent", id=f"e{i}", actions=EventActions(
            state_delta=delta, state_deletions=deleted)), expected_version=i - 1)
        expected.update(delta)
        for key in deleted:
            expected.pop(key, None)
        head = await store.state("s")
        assert head == expected
        assert head == await store.session_state_fold("s")
    for at in range(17):
        assert await store.state("s", at=at) == await store.session_state_fold("s", at=at)
    await store.rebuild_snapshots()
    assert await store.state("s") == expected
    assert await store.state("s", at=7) == await store.session_state_fold("s", at=7)
    await store.rebuild_snapshots()
    for at in (16, 3, 9):
        assert await store.state("s", at=at) == await store.session_state_fold("s", at=at)


# -- artifacts -------------------------------------------------------------------------------------


async def test_artifact_versions_load_latest_and_given(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    versions = [
        await store.save_artifact("s", "doc.txt", f"v{i}".encode(), mime_type="text/plain")
        for i in range(3)
    ]
    assert versions == [0, 1, 2]
    latest = await store.load_artifact("s", "doc.txt")
    assert (latest.version, latest.data, latest.mime_type) == (2, b"v2", "text/plain")
    assert latest.filename == "doc.txt"
    for i in range(3):
        assert (await store.load_artifact("s", "doc.txt", version=i)).data == f"v{i}".encode()
    await store.save_artifact("s", "img.png", b"\x89PNG\x00\xff", mime_type="image/png")
    assert await store.list_artifacts("s") == {"doc.txt": [0, 1, 2], "img.png": [0]}
    image = await store.load_artifact("s", "img.png")
    assert (image.data, image.mime_type) == (b"\x89PNG\x00\xff", "image/png")


async def test_artifact_missing_raises(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    with pytest.raises(ArtifactNotFoundError) as info:
        await store.load_artifact("s", "nothing.txt")
    assert (info.value.session_id, info.value.filename, info.value.version) == (
        "s", "nothing.txt", None
    )
    await store.save_artifact("s", "one.txt", b"1", mime_type="text/plain")
    with pytest.raises(ArtifactNotFoundError) as info:
        await store.load_artifact("s", "one.txt", version=1)
    assert info.value.version == 1
    assert "one.txt" in str(info.value)
    with pytest.raises(SessionNotFoundError):
        await store.save_artifact("nope", "a.txt", b"", mime_type="text/plain")


async def test_artifact_session_scope_is_per_session(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    await store.create_session(app_name=APP, user_id=USER, session_id="t")
    await store.save_artifact("s", "mine.txt", b"s", mime_type="text/plain")
    assert await store.list_artifacts("t") == {}
    with pytest.raises(ArtifactNotFoundError):
        await store.load_artifact("t", "mine.txt")
    assert await store.save_artifact("t", "mine.txt", b"t", mime_type="text/plain") == 0


async def test_artifact_user_scope_is_shared_by_the_users_sessions_only(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id="alice", session_id="a1")
    await store.create_session(app_name=APP, user_id="alice", session_id="a2")
    await store.create_session(app_name=APP, user_id="bob", session_id="b1")
    await store.create_session(app_name="other", user_id="alice", session_id="o1")
    assert await store.save_artifact("a1", "user:cv", b"v0", mime_type="text/plain") == 0
    assert await store.save_artifact("a2", "user:cv", b"v1", mime_type="text/plain") == 1
    assert (await store.load_artifact("a1", "user:cv")).data == b"v1"
    assert (await store.load_artifact("a2", "user:cv", version=0)).data == b"v0"
    assert await store.list_artifacts("a2") == {"user:cv": [0, 1]}
    for other in ("b1", "o1"):
        assert await store.list_artifacts(other) == {}
        with pytest.raises(ArtifactNotFoundError):
            await store.load_artifact(other, "user:cv")
    assert await store.save_artifact("b1", "user:cv", b"bob", mime_type="text/plain") == 0


# -- subscribe -------------------------------------------------------------------------------------


async def test_subscribe_yields_existing_then_new_events(store: EventStore) -> None:
    await _session_with(store, 3)
    received: list[int | None] = []

    async def consume() -> None:
        async for event in store.subscribe("s1", after=1, poll_interval=0.05):
            received.append(event.seq)
            if len(received) == 7:
                return

    async def produce() -> None:
        for i in range(5):
            await asyncio.sleep(0.01)
            await store.append("s1", text_event(id=f"live{i}"), expected_version=3 + i)

    async with asyncio.timeout(10):
        await asyncio.gather(consume(), produce())
    assert received == [2, 3, 4, 5, 6, 7, 8]


async def test_subscribe_sees_appends_of_another_store(sql_factory: StoreFactory) -> None:
    # SQL backends only: a second memory store does not share the first one's data.
    factory = sql_factory
    reader: EventStore = await factory()
    writer: EventStore = await factory()
    await reader.create_session(app_name=APP, user_id=USER, session_id="s")
    seen: list[str] = []

    async def consume() -> None:
        async for event in reader.subscribe("s", poll_interval=0.05):
            seen.append(event.id)
            if len(seen) == 4:
                return

    async def produce() -> None:
        for i in range(4):
            await asyncio.sleep(0.02)
            await writer.append("s", text_event(id=f"w{i}"), expected_version=i)

    async with asyncio.timeout(15):
        await asyncio.gather(consume(), produce())
    assert seen == ["w0", "w1", "w2", "w3"]


async def test_subscribe_ends_when_session_is_deleted(store: EventStore) -> None:
    await _session_with(store, 2)
    received: list[int | None] = []

    async def consume() -> None:
        async for event in store.subscribe("s1", poll_interval=0.05):
            received.append(event.seq)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.1)
    await store.delete_session("s1")
    async with asyncio.timeout(10):
        await task
    assert received == [1, 2]


# -- lifecycle -------------------------------------------------------------------------------------


async def test_closed_store_raises_store_closed(store_factory: StoreFactory) -> None:
    store: EventStore = await store_factory()
    await _session_with(store, 1)
    async with store:
        pass
    await store.aclose()  # closing twice is harmless
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.create_session(app_name=APP, user_id=USER),
        lambda: store.get_session("s1"),
        lambda: store.list_sessions(),
        lambda: store.append("s1", text_event(), expected_version=1),
        lambda: store.read("s1"),
        lambda: store.state("s1"),
        lambda: store.version("s1"),
        lambda: store.delete_session("s1"),
        lambda: store.save_artifact("s1", "a", b"", mime_type="text/plain"),
        lambda: store.load_artifact("s1", "a"),
        lambda: store.list_artifacts("s1"),
        lambda: store.rebuild_snapshots(),
        lambda: store.session_state_fold("s1"),
    ]
    for call in calls:
        with pytest.raises(StoreClosedError):
            await call()
    with pytest.raises(StoreClosedError):
        async for _ in store.subscribe("s1"):
            pass


async def test_reopened_store_sees_everything(sql_factory: StoreFactory) -> None:
    # SQL backends only: the memory backend keeps nothing after close.
    factory = sql_factory
    first: EventStore = await factory(snapshot_interval=2)
    await first.create_session(app_name=APP, user_id=USER, session_id="s", state={"a": 1})
    await first.create_session(app_name=APP, user_id="bob", session_id="t")
    await first.append(
        "s",
        [call_event("c1"), response_event("c1"), delta_event({"b": 2, "user:u": 1}, id="d")],
        expected_version=1,
    )
    await first.save_artifact("s", "f.txt", b"0", mime_type="text/plain")
    await first.save_artifact("s", "user:g", b"1", mime_type="text/plain")
    assert await first.state("s") == {"a": 1, "b": 2, "user:u": 1}
    before = await full_dump(first)
    await first.aclose()

    second: EventStore = await factory(snapshot_interval=2)
    assert await full_dump(second) == before
    assert await second.state("s", at=1) == {"a": 1}
    assert (await second.load_artifact("s", "user:g")).data == b"1"
    appended = await second.append("s", text_event(id="after-reopen"), expected_version=4)
    assert appended[0].seq == 5


async def test_two_stores_on_one_database_agree(sql_factory: StoreFactory) -> None:
    # SQL backends only: two memory stores are two databases.
    factory = sql_factory
    one: EventStore = await factory()
    two: EventStore = await factory()
    await one.create_session(app_name=APP, user_id=USER, session_id="s")
    await one.append("s", text_event(id="a"), expected_version=0)
    with pytest.raises(ConcurrencyError) as info:
        await two.append("s", text_event(id="b"), expected_version=0)
    assert info.value.actual_version == 1
    await two.append("s", text_event(id="b"), expected_version=1)
    assert [e.id for e in await one.read("s")] == ["a", "b"]


async def test_event_copy_is_independent_of_store(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    event = delta_event({"n": {"x": 1}}, id="e")
    await store.append("s", event, expected_version=0)
    read = (await store.read("s"))[0]
    read.actions.state_delta["n"]["x"] = 99  # a caller mutating what it got
    assert (await store.read("s"))[0].actions.state_delta == {"n": {"x": 1}}
    assert await store.state("s") == {"n": {"x": 1}}
