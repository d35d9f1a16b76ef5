"""The key a store keeps for an (app, user, id) it made or found goes stale when another store
deletes that session and makes it again under another key: two stores on one database. A kept
key that no longer names the session is dropped and looked up once more — the call acts on the
session the address names today, never fails for a key it should not have trusted, and never
reads or writes the events or caches of another user that was given the key: every backend
judges the owner in the read's or write's own query (on PostgreSQL's one-statement append,
after the session's lock: revision 0019)."""

from __future__ import annotations

import asyncio

import pytest
from _evs_support import StoreFactory

from eventstore import (
    AmbiguousSessionError,
    Content,
    Event,
    EventStore,
    Part,
    SessionNotFoundError,
    open_store,
)


def _said(text: str) -> Event:
    return Event(author="user", content=Content(role="user", parts=(Part(text=text),)))


async def _texts(store: EventStore, user: str) -> list[str]:
    return [e.text() for e in await store.read("s", app_name="app", user_id=user)]


@pytest.mark.parametrize("call", ["append", "read", "read_mappings"])
async def test_key_cache_follows_a_session_made_again_under_another_key(
    sql_factory: StoreFactory, call: str,
) -> None:
    first, other = await sql_factory(), await sql_factory()
    # bob holds the key "s", so alice's "s" is stored under another key, which `first` keeps.
    await other.create_session(app_name="app", user_id="bob", session_id="s")
    await first.create_session(app_name="app", user_id="alice", session_id="s")
    await first.append("s", _said("one"), expected_version=0, app_name="app", user_id="alice")
    # Another process deletes both and makes alice's "s" again: now under the key "s".
    await other.delete_session("s", app_name="app", user_id="alice")
    await other.delete_session("s", app_name="app", user_id="bob")
    await other.create_session(app_name="app", user_id="alice", session_id="s",
                               events=[_said("two")])

    where = {"app_name": "app", "user_id": "alice"}
    if call == "append":
        await first.append("s", _said("three"), expected_version=1, **where)
        assert await _texts(other, "alice") == ["two", "three"]
    elif call == "read":
        assert [e.text() for e in await first.read("s", **where)] == ["two"]
    else:
        assert len(await first.read_mappings("s", **where)) == 1
    assert [e.text() for e in await first.read("s")][:1] == ["two"]


async def test_key_cache_never_writes_into_the_session_given_its_key(
    sql_factory: StoreFactory,
) -> None:
    first, other = await sql_factory(), await sql_factory()
    await first.create_session(app_name="app", user_id="alice", session_id="s")
    await first.append("s", _said("alice 1"), expected_version=0, app_name="app",
                       user_id="alice")
    # Another process deletes alice's "s"; bob's new "s" takes the key, alice's gets another.
    await other.delete_session("s", app_name="app", user_id="alice")
    await other.create_session(app_name="app", user_id="bob", session_id="s")
    await other.create_session(app_name="app", user_id="alice", session_id="s")

    await first.append("s", _said("alice 2"), expected_version=None, app_name="app",
                       user_id="alice")
    assert await _texts(other, "bob") == []
    assert await _texts(other, "alice") == ["alice 2"]
    # Deleting through `first` deletes alice's session, not bob's.
    await first.delete_session("s", app_name="app", user_id="alice")
    assert await _texts(other, "bob") == []


async def _swapped(factory: StoreFactory) -> tuple[EventStore, EventStore]:
    """``first`` keeps the key "s" for alice's "s"; then another process (``other``) deletes
    it and bob's new "s" takes that key (with a secret of bob's, and a cache of bob's), while
    alice's "s" is made again under another key."""
    first, other = await factory(), await factory()
    await first.create_session(app_name="app", user_id="alice", session_id="s")
    await first.append("s", _said("alice 1"), expected_version=0, app_name="app",
                       user_id="alice")
    await other.delete_session("s", app_name="app", user_id="alice")
    await other.create_session(app_name="app", user_id="bob", session_id="s",
                               events=[_said("bob's secret")])
    await other.save_cache("s", "c", 1, b"bob's cache", app_name="app", user_id="bob")
    await other.create_session(app_name="app", user_id="alice", session_id="s",
                               events=[_said("alice 2")])
    return first, other


_ALICE = {"app_name": "app", "user_id": "alice"}


@pytest.mark.parametrize("call", [
    pytest.param("read", id="read"),
    pytest.param("read_backwards", id="read_backwards"),
    pytest.param("iter_backwards", id="iter_backwards"),
    pytest.param("read_mappings", id="read_mappings"),
    pytest.param("read_mappings_since", id="read_mappings_since"),
    pytest.param("read_converted", id="read_converted"),
    pytest.param("read_compacted", id="read_compacted"),
    pytest.param("session_state_fold", id="session_state_fold"),
    pytest.param("subscribe", id="subscribe"),
])
async def test_key_cache_never_reads_the_session_given_its_key(
    sql_factory: StoreFactory, call: str,
) -> None:
    first, _ = await _swapped(sql_factory)
    texts: list[str]
    if call == "read":
        texts = [e.text() for e in await first.read("s", **_ALICE)]
    elif call == "read_backwards":
        texts = [e.text() for e in await first.read("s", backwards=True, limit=5, **_ALICE)]
    elif call == "iter_backwards":
        texts = [e.text() async for e in first.iter_backwards("s", **_ALICE)]
    elif call == "read_mappings":
        texts = [m["content"]["parts"][0]["text"]
                 for m in await first.read_mappings("s", **_ALICE)]
    elif call == "read_mappings_since":
        texts = [m["content"]["parts"][0]["text"]
                 for m in await first.read_mappings("s", since=0.0, **_ALICE)]
    elif call == "read_converted":
        texts = await first.read_converted(
            "s", lambda m: str(m["content"]["parts"][0]["text"]), **_ALICE)
    elif call == "read_compacted":
        texts = [e.text() for e in (await first.read_compacted("s", **_ALICE)).events]
    elif call == "subscribe":
        texts = []
        async for event in first.subscribe("s", poll_interval=0.05, **_ALICE):
            texts.append(event.text())
            break
    else:
        assert await first.session_state_fold("s", **_ALICE) == {}
        texts = [e.text() for e in await first.read("s", **_ALICE)]
    assert texts == ["alice 2"]


async def test_key_cache_never_reads_through_a_bare_id_given_to_another_user(
    sql_factory: StoreFactory,
) -> None:
    first, _ = await _swapped(sql_factory)
    # A bare id this store knew for alice only: now two users hold "s", so the call is
    # ambiguous — it never answers with bob's events.
    with pytest.raises(AmbiguousSessionError):
        await first.read("s")
    with pytest.raises(AmbiguousSessionError):
        await first.load_cache("s", "c")


async def test_key_cache_never_loads_or_saves_the_cache_of_the_session_given_its_key(
    sql_factory: StoreFactory,
) -> None:
    first, other = await _swapped(sql_factory)
    assert await first.load_cache("s", "c", **_ALICE) is None
    await first.save_cache("s", "c", 1, b"alice's cache", **_ALICE)
    assert await other.load_cache("s", "c", app_name="app", user_id="bob") == (
        1, b"bob's cache")
    assert await other.load_cache("s", "c", **_ALICE) == (1, b"alice's cache")


async def test_key_cache_never_checks_signatures_of_the_session_given_its_key(
    sql_factory: StoreFactory,
) -> None:
    first = await sql_factory(signing_key=b"k")
    other, keyed = await sql_factory(), await sql_factory(signing_key=b"k")
    await first.create_session(app_name="app", user_id="alice", session_id="s")
    await other.delete_session("s", app_name="app", user_id="alice")
    # bob's "s" takes the key, written by an unkeyed store: its event is unsigned.
    await other.create_session(app_name="app", user_id="bob", session_id="s",
                               events=[_said("bob's secret")])
    await keyed.create_session(app_name="app", user_id="alice", session_id="s",
                               events=[_said("alice 2")])
    assert await first.untrusted("s", **_ALICE) == {}


async def test_backend_reads_judge_the_owner_in_the_read(store_factory: StoreFactory) -> None:
    store = await store_factory()
    await store.create_session(app_name="app", user_id="alice", session_id="s",
                               events=[_said("alice 1")])
    await store.save_cache("s", "c", 1, b"alice's", **_ALICE)
    backend, key = store.backend, await store.session_key("s")
    page = {"after": None, "upto": None, "backwards": False, "limit": None}
    assert len(await backend.read(key, **page, owner=("app", "alice"))) == 1
    assert len(await backend.read_rows(key, **page, owner=("app", "alice"))) == 1
    assert await backend.load_cache(key, "c", owner=("app", "alice")) == (1, b"alice's")
    for owner in [("app", "bob"), ("other", "alice")]:
        with pytest.raises(SessionNotFoundError):
            await backend.read(key, **page, owner=owner)
        with pytest.raises(SessionNotFoundError):
            await backend.read_rows(key, **page, owner=owner)
        with pytest.raises(SessionNotFoundError):
            await backend.read_since(key, timestamp=0.0, upto=None, newest=None, owner=owner)
        with pytest.raises(SessionNotFoundError):
            await backend.load_cache(key, "c", owner=owner)
        with pytest.raises(SessionNotFoundError):
            await backend.save_cache(key, "c", 1, b"bob's", owner=owner)
    assert await backend.load_cache(key, "c") == (1, b"alice's")
    assert await backend.load_cache("gone", "c") is None
    with pytest.raises(SessionNotFoundError):
        await backend.load_cache("gone", "c", owner=("app", "alice"))


@pytest.mark.postgres
async def test_key_cache_append_judges_the_owner_after_the_session_lock(
    postgres_url: str,
) -> None:
    import asyncpg

    from eventstore.backends.postgres.append import LOCK_SESSION, lock_key

    first, other = await open_store(postgres_url), await open_store(postgres_url)
    holder = await asyncpg.connect(postgres_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await first.create_session(app_name="app", user_id="alice", session_id="s")
        # Hold the session's lock, so the one-statement append waits inside evs_append, past
        # any check made before the lock.
        lock = holder.transaction()
        await lock.start()
        await holder.execute("SELECT pg_advisory_xact_lock($1, $2)", LOCK_SESSION,
                             lock_key("s"))
        append = asyncio.create_task(first.append("s", _said("alice's"), expected_version=None,
                                                  **_ALICE))
        for _ in range(500):
            waiting = await holder.fetchval(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                "AND database = (SELECT oid FROM pg_database WHERE datname = "
                "current_database())")
            if waiting:
                break
            await asyncio.sleep(0.01)
        assert waiting, "the append never waited for the session's lock"
        # Meanwhile another process deletes alice's "s"; bob's new "s" takes its key, alice's
        # new one another.
        await other.delete_session("s", **_ALICE)
        await other.create_session(app_name="app", user_id="bob", session_id="s")
        await other.create_session(app_name="app", user_id="alice", session_id="s")
        await lock.rollback()
        await asyncio.wait_for(append, 10)
        assert await _texts(other, "bob") == []
        assert await _texts(other, "alice") == ["alice's"]
    finally:
        await holder.close()
        await first.aclose()
        await other.aclose()
