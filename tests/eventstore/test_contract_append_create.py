"""The backend contract for ``append(create=True)``: an append that makes the session when the
app's user has none (one transaction, no state fold), and appends to it when there is one,
alike on every backend; keyed stores sign what it writes; ``evs verify`` finds nothing wrong."""

from __future__ import annotations

import asyncio

import pytest
from _evs_support import BackendTarget, StoreFactory, text_event

from eventstore import (
    ConcurrencyError,
    DuplicateEventError,
    Event,
    EventActions,
    EventStore,
    InvalidEventError,
    SessionExistsError,
    StoreUsageError,
    open_store,
)
from eventstore.commands._maintain import verify_session

APP = "app"
USER = "alice"


async def test_append_create_makes_a_missing_session_with_the_events_first(
        store: EventStore) -> None:
    got = await store.append("s1", [text_event("a", id="e1"), text_event("b", id="e2")],
                             expected_version=None, app_name=APP, user_id=USER, create=True)
    assert [(e.id, e.seq) for e in got] == [("e1", 1), ("e2", 2)]
    info = await store.session_info("s1", app_name=APP, user_id=USER)
    assert (info.app_name, info.user_id, info.version) == (APP, USER, 2)
    assert [e.id for e in await store.read("s1")] == ["e1", "e2"]
    assert await verify_session(store, "s1") == []
    with pytest.raises(SessionExistsError):
        await store.create_session(app_name=APP, user_id=USER, session_id="s1")


async def test_append_create_appends_to_a_session_that_exists(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s1",
                               events=[text_event("a", id="e1")])
    got = await store.append("s1", text_event("b", id="e2"), expected_version=None,
                             app_name=APP, user_id=USER, create=True)
    assert [e.seq for e in got] == [2]
    again = await store.append("s1", text_event("c", id="e3"), expected_version=0,
                               app_name="other", user_id=USER, create=True)
    assert [e.seq for e in again] == [1]  # another app's session of that id: made
    assert [e.id for e in await store.read("s1", app_name=APP, user_id=USER)] == ["e1", "e2"]
    assert await verify_session(store, "s1", app_name=APP, user_id=USER) == []


async def test_append_create_appends_to_a_session_another_store_made(
        sql_factory: StoreFactory) -> None:
    # The SQL backends only: two memory:// stores share nothing.
    first, second = await sql_factory(), await sql_factory()
    await first.create_session(app_name=APP, user_id=USER, session_id="s1",
                               events=[text_event("a", id="e1")])
    # ``second`` has never seen s1: it tries to make it, finds it, and appends.
    got = await second.append("s1", text_event("b", id="e2"), expected_version=None,
                              app_name=APP, user_id=USER, create=True)
    assert [e.seq for e in got] == [2]
    # ``second`` now knows s1; it is deleted and made again elsewhere under another key.
    await first.delete_session("s1")
    await first.create_session(app_name="other", user_id="bob", session_id="s1")
    got = await second.append("s1", text_event("c", id="e3"), expected_version=None,
                              app_name=APP, user_id=USER, create=True)
    assert [e.seq for e in got] == [1]
    assert [e.id for e in await first.read("s1", app_name=APP, user_id=USER)] == ["e3"]
    assert await first.read("s1", app_name="other", user_id="bob") == []


async def test_append_create_beside_another_users_session_of_that_id(
        store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id="bob", session_id="s1",
                               events=[text_event("bob's", id="e1")])
    got = await store.append("s1", text_event("alice's", id="e1"), expected_version=None,
                             app_name=APP, user_id=USER, create=True)
    assert [e.seq for e in got] == [1]
    assert [e.text() for e in await store.read("s1", app_name=APP, user_id=USER)] == [
        "alice's"]
    assert [e.text() for e in await store.read("s1", app_name=APP, user_id="bob")] == [
        "bob's"]
    assert await verify_session(store, "s1", app_name=APP, user_id=USER) == []


async def test_append_create_keeps_shared_state_right(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="before",
                               state={"user:lang": "en", "app:mode": "fast"})
    shared = Event(author="user", id="e1",
                   actions=EventActions(state_delta={"k": 1, "user:seen": True}))
    await store.append("s1", [text_event("a", id="e0"), shared], expected_version=0,
                       app_name=APP, user_id=USER, create=True)
    assert await store.state("s1", app_name=APP, user_id=USER) == {
        "k": 1, "user:seen": True, "user:lang": "en", "app:mode": "fast"}
    assert await store.shared_state(app_name=APP, user_id=USER) == {
        "user:seen": True, "user:lang": "en", "app:mode": "fast"}
    assert await verify_session(store, "s1") == []


async def test_append_create_of_many_sessions_at_once(store: EventStore) -> None:
    users = {f"s{i}": USER if i % 2 else "bob" for i in range(12)}
    await asyncio.gather(*(
        store.append(sid, text_event(sid, id=f"e{turn}"), expected_version=None, app_name=APP,
                     user_id=user, create=True)
        for turn in range(2) for sid, user in users.items()))
    for sid, user in users.items():
        events = await store.read(sid, app_name=APP, user_id=user)
        assert sorted(e.id for e in events) == ["e0", "e1"]
        assert [e.seq for e in events] == [1, 2]
    assert len((await store.list_sessions()).sessions) == 12


async def test_append_create_races_itself_on_one_session(store: EventStore) -> None:
    results = await asyncio.gather(*(
        store.append("s1", text_event(str(i), id=f"e{i}"), expected_version=None,
                     app_name=APP, user_id=USER, create=True) for i in range(6)))
    assert sorted(r[0].seq for r in results) == [1, 2, 3, 4, 5, 6]
    assert await verify_session(store, "s1") == []


@pytest.mark.parametrize("call", [
    pytest.param({"app_name": None, "user_id": USER}, id="no-app"),
    pytest.param({"app_name": APP, "user_id": None}, id="no-user"),
    pytest.param({"app_name": APP, "user_id": USER, "expected_version": 3},
                 id="expected-version"),
    pytest.param({"app_name": APP, "user_id": USER, "create": 1}, id="not-a-bool"),
])
async def test_append_create_refuses_what_it_cannot_do(store: EventStore,
                                                       call: dict[str, object]) -> None:
    options: dict[str, object] = {"expected_version": None, "create": True, **call}
    with pytest.raises(StoreUsageError):
        await store.append("s1", text_event("a", id="e1"), **options)  # type: ignore[arg-type]
    assert (await store.list_sessions()).sessions == []


async def test_append_create_writes_nothing_it_refuses(store: EventStore) -> None:
    with pytest.raises(DuplicateEventError):
        await store.append("s1", [text_event("a", id="e1"), text_event("b", id="e1")],
                           expected_version=None, app_name=APP, user_id=USER, create=True)
    with pytest.raises(InvalidEventError):
        await store.append("s1", text_event("a", id="e\0"), expected_version=None,
                           app_name=APP, user_id=USER, create=True)
    assert (await store.list_sessions()).sessions == []
    await store.create_session(app_name=APP, user_id=USER, session_id="s2",
                               events=[text_event("a", id="e1")])
    with pytest.raises(ConcurrencyError):
        await store.append("s2", text_event("b", id="e2"), expected_version=0,
                           app_name=APP, user_id=USER, create=True)
    assert await store.version("s2") == 1


async def test_append_create_on_a_keyed_store_signs_it(sql_target: BackendTarget) -> None:
    async with await open_store(sql_target.url, signing_key=b"k" * 32,
                                auto_upgrade=True) as keyed:
        await keyed.append("s1", [text_event("a", id="e1"), text_event("b", id="e2")],
                           expected_version=None, app_name=APP, user_id=USER, create=True)
        await keyed.append("s1", text_event("c", id="e3"), expected_version=2, app_name=APP,
                           user_id=USER)
        assert await keyed.untrusted("s1") == {}
        assert await verify_session(keyed, "s1") == []
