"""``user:``/``app:`` state as streams of its own (``eventstore._scopes``).

Before revision 0015 shared state was the fold of the existing sessions' events, ordered by a
``position`` column the hash chain did not cover: deleting a chat erased the user's
preferences, and swapping two positions or editing a row's (or its session's) app or user
changed the state read back while ``evs verify`` said nothing. Now each scope has a chained
(and in keyed mode signed) stream; deleting a session leaves it, and every such edit is named.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _evs_support import BackendTarget, StoreFactory, delta_event
from _tamper import raw

from eventstore import EventStore, open_store
from eventstore.commands._maintain import verify_session
from eventstore.commands._verify_streams import StreamCheck

KEY = b"k" * 32
KEYED = [pytest.param(None, id="unkeyed"), pytest.param(KEY, id="keyed")]


async def test_deleting_a_chat_keeps_the_users_preferences(store_factory: StoreFactory) -> None:
    store = await store_factory()
    await store.create_session(app_name="app", user_id="ada", session_id="chat")
    await store.append("chat", delta_event({"user:lang": "fr", "app:motd": "hi", "own": 1}),
                       expected_version=0)
    await store.append("chat", delta_event({"user:lang": "de"}), expected_version=1)
    await store.delete_session("chat")
    assert await store.shared_state(app_name="app", user_id="ada") == {
        "user:lang": "de", "app:motd": "hi"}
    await store.create_session(app_name="app", user_id="ada", session_id="next")
    assert await store.state("next") == {"user:lang": "de", "app:motd": "hi"}
    assert [f.code for f in await verify_session(store, "next")] == []


async def test_the_adk_service_keeps_preferences_of_a_deleted_session(
    store_factory: StoreFactory,
) -> None:
    pytest.importorskip("google.adk")
    from google.adk.events import Event, EventActions

    from eventstore.integrations.adk import EventStoreSessionService

    service = EventStoreSessionService(await store_factory())
    chat = await service.create_session(app_name="app", user_id="ada", session_id="chat")
    await service.append_event(chat, Event(
        author="agent", invocation_id="i1",
        actions=EventActions(state_delta={"user:theme": "dark", "app:plan": "pro"})))
    await service.delete_session(app_name="app", user_id="ada", session_id="chat")
    later = await service.create_session(app_name="app", user_id="ada", session_id="later")
    assert later.state == {"user:theme": "dark", "app:plan": "pro"}
    got = await service.get_session(app_name="app", user_id="ada", session_id="later")
    assert got is not None
    assert got.state == {"user:theme": "dark", "app:plan": "pro"}


# -- tampering, SQLite and PostgreSQL, keyed and not ------------------------------------------


async def _shared_log(target: BackendTarget, key: bytes | None) -> None:
    async with await open_store(target.url, auto_upgrade=True, signing_key=key) as store:
        await store.create_session(app_name="app", user_id="ada", session_id="s")
        await store.create_session(app_name="app", user_id="bob", session_id="t")
        await store.append("s", delta_event({"user:theme": "dark"}, id="e1"),
                           expected_version=0)
        await store.append("t", delta_event({"user:theme": "blue", "app:x": 1}, id="f1"),
                           expected_version=0)
        await store.append("s", delta_event({"note": "x"}, id="e2"), expected_version=1)
        await store.append("s", delta_event({"user:theme": "light", "app:x": 2}, id="e3"),
                           expected_version=2)


async def _every_finding(target: BackendTarget, key: bytes | None) -> set[str]:
    """The codes of ``evs verify`` over every session (and every stream)."""
    async with await open_store(target.url, signing_key=key) as store:
        streams = await StreamCheck.read(store.backend, None)
        codes = set()
        for sid in ("s", "t"):
            codes |= {f.code for f in await verify_session(store, sid, streams)}
        codes |= {f.code for f in streams.streams(signing_key=key, checked_sessions={"s", "t"})}
        return codes


async def _alone(target: BackendTarget, key: bytes | None, sid: str = "s") -> set[str]:
    async with await open_store(target.url, signing_key=key) as store:
        return {f.code for f in await verify_session(store, sid)}


async def _theme(target: BackendTarget, key: bytes | None) -> Any:
    async with await open_store(target.url, signing_key=key) as store:
        await store.rebuild_snapshots()
        return (await store.state("s")).get("user:theme")


@pytest.mark.parametrize("key", KEYED)
async def test_untouched_streams_verify(sql_target: BackendTarget, key: bytes | None) -> None:
    await _shared_log(sql_target, key)
    assert await _every_finding(sql_target, key) == set()
    assert await _alone(sql_target, key) == set()
    assert await _theme(sql_target, key) == "light"


@pytest.mark.parametrize("key", KEYED)
async def test_swapped_stream_entries_are_named(sql_target: BackendTarget,
                                                key: bytes | None) -> None:
    await _shared_log(sql_target, key)
    swap = "UPDATE evs_scope_entries SET stream_seq = ? WHERE user_id = 'ada' AND stream_seq = ?"
    await raw(sql_target, swap, 99, 1)
    await raw(sql_target, swap, 1, 2)
    await raw(sql_target, swap, 2, 99)
    assert await _theme(sql_target, key) == "dark"  # what the edit does to the fold
    assert "stream_reordered" in await _every_finding(sql_target, key)
    assert "stream_reordered" in await _alone(sql_target, key)


@pytest.mark.parametrize("key", KEYED)
async def test_swapped_stream_positions_are_named(sql_target: BackendTarget,
                                                  key: bytes | None) -> None:
    await _shared_log(sql_target, key)
    rows = await raw(sql_target, "SELECT stream_seq, position FROM evs_scope_entries WHERE "
                     "user_id = 'ada' ORDER BY stream_seq")
    (_, first), (_, second) = rows
    move = "UPDATE evs_scope_entries SET position = ? WHERE user_id = 'ada' AND stream_seq = ?"
    await raw(sql_target, move, second, 1)
    await raw(sql_target, move, first, 2)
    codes = await _every_finding(sql_target, key)
    # Two entries changed in a row: the chain cannot tell which was first, only that it broke.
    assert {"stream_reordered", "stream_origin_mismatch"} <= codes
    assert codes & {"stream_edited", "stream_broken"}
    assert "stream_reordered" in await _alone(sql_target, key)


@pytest.mark.parametrize("key", KEYED)
async def test_a_stream_rechained_without_the_key_is_named(sql_target: BackendTarget,
                                                          key: bytes | None) -> None:
    """Swap two entries and recompute the chain (anyone can, without the key): the order of
    the origin events' positions still names it, and keyed, the signatures."""
    await _shared_log(sql_target, key)
    async with await open_store(sql_target.url) as store:
        entries = await store.backend.read_scope(app_name="app", user_id="ada", after=0,
                                                 upto_position=None)
    from eventstore._chain import GENESIS, link, scope_digest
    swapped = [entries[1], entries[0]]
    await raw(sql_target, "DELETE FROM evs_scope_entries WHERE user_id = 'ada'")
    prev = GENESIS
    for n, e in enumerate(swapped, 1):
        prev = link(prev, n, scope_digest(e.app_name, e.user_id, session_id=e.session_id,
                                          event_id=e.event_id, seq=e.seq, position=e.position,
                                          delta=e.delta))
        await raw(sql_target, "INSERT INTO evs_scope_entries (app_name, user_id, stream_seq, "
                  "position, session_id, seq, event_id, delta, chain_hash, signature) VALUES "
                  "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", e.app_name, e.user_id, n, e.position,
                  e.session_id, e.seq, e.event_id, e.delta, prev, e.signature)
    await raw(sql_target, "UPDATE evs_scope_heads SET head_hash = ? WHERE user_id = 'ada'", prev)
    assert await _theme(sql_target, key) == "dark"
    codes = await _every_finding(sql_target, key)
    assert "stream_reordered" in codes
    if key is not None:
        assert "stream_bad_signature" in codes


@pytest.mark.parametrize("key", KEYED)
@pytest.mark.parametrize("column", ["user_id", "app_name"])
async def test_an_event_rows_scope_edit_is_named_and_changes_nothing(
    sql_target: BackendTarget, key: bytes | None, column: str
) -> None:
    await _shared_log(sql_target, key)
    await raw(sql_target, f"UPDATE evs_events SET {column} = 'mallory' WHERE session_id = 's'")
    assert await _theme(sql_target, key) == "light"
    assert "scope_edited" in await _every_finding(sql_target, key)


@pytest.mark.parametrize("key", KEYED)
@pytest.mark.parametrize("column", ["user_id", "app_name"])
async def test_a_session_rows_scope_edit_is_named(
    sql_target: BackendTarget, key: bytes | None, column: str
) -> None:
    """The session row's and every event row's app/user moved together (so the rows agree):
    the session now reads another scope's state, and verify says which of its changes live
    in a stream that is not its scope's."""
    await _shared_log(sql_target, key)
    for table in ("evs_sessions", "evs_events"):
        await raw(sql_target,
                  f"UPDATE {table} SET {column} = 'mallory' WHERE session_id = 's'")
    assert await _theme(sql_target, key) is None  # mallory has no theme: the state changed
    assert "stream_scope_edited" in await _every_finding(sql_target, key)
    assert "stream_entry_missing" in await _alone(sql_target, key)


@pytest.mark.parametrize("key", KEYED)
async def test_an_entry_moved_to_another_user_is_named(sql_target: BackendTarget,
                                                       key: bytes | None) -> None:
    await _shared_log(sql_target, key)
    await raw(sql_target, "UPDATE evs_scope_entries SET user_id = 'bob', stream_seq = 2 "
              "WHERE user_id = 'ada' AND stream_seq = 2")
    await raw(sql_target, "UPDATE evs_scope_heads SET head_seq = 1 WHERE user_id = 'ada'")
    codes = await _every_finding(sql_target, key)
    assert {"stream_scope_edited", "stream_inserted"} <= codes
    assert {"stream_entry_missing", "stream_head_mismatch"} & await _alone(sql_target, key)


@pytest.mark.parametrize("key", KEYED)
async def test_an_edited_or_removed_entry_is_named(sql_target: BackendTarget,
                                                   key: bytes | None) -> None:
    await _shared_log(sql_target, key)
    [(original,)] = await raw(sql_target, "SELECT delta FROM evs_scope_entries WHERE "
                              "user_id = 'ada' AND stream_seq = 1")
    edit = "UPDATE evs_scope_entries SET delta = ? WHERE user_id = 'ada' AND stream_seq = 1"
    await raw(sql_target, edit, b'{"sd":{"user:theme":"pink"}}')
    codes = await _every_finding(sql_target, key)
    assert {"stream_edited", "stream_origin_mismatch"} <= codes
    await raw(sql_target, edit, bytes(original))
    assert await _every_finding(sql_target, key) == set()
    await raw(sql_target, "DELETE FROM evs_scope_entries WHERE user_id = 'ada' AND "
              "stream_seq = 2")
    codes = await _every_finding(sql_target, key)
    assert {"stream_deleted", "stream_entry_missing"} <= codes


@pytest.mark.parametrize("key", KEYED)
async def test_an_entry_of_a_deleted_session_is_still_checked(sql_target: BackendTarget,
                                                              key: bytes | None) -> None:
    await _shared_log(sql_target, key)
    async with await open_store(sql_target.url, signing_key=key) as store:
        await store.delete_session("t")
    assert await _alone(sql_target, key) == set()
    await raw(sql_target, "UPDATE evs_scope_entries SET delta = ? WHERE user_id = '' AND "
              "stream_seq = 1", b'{"sd":{"app:x":5}}')
    assert "stream_edited" in await _alone(sql_target, key)


# -- concurrency ----------------------------------------------------------------------------


async def test_streams_serialize_across_stores_and_tasks(sql_factory: StoreFactory) -> None:
    """Four stores on one database (four connections: as many processes would be), 8 tasks
    each, all changing one user's and one app's state: each stream is gap-free, chained, and
    folds to what every change made."""
    stores: list[EventStore] = [await sql_factory() for _ in range(4)]
    first = stores[0]
    for n in range(8):
        await first.create_session(app_name="app", user_id="ada", session_id=f"s{n}")

    async def writer(store: EventStore, n: int) -> None:
        for i in range(6):
            await store.append(f"s{n}", delta_event({f"user:k{n}": i, "app:last": [n, i],
                                                     "own": i}), expected_version=None)

    await asyncio.gather(*(writer(stores[n % 4], n) for n in range(8)))
    async with await open_store(first.url) as store:
        entries = await store.backend.read_scope(app_name="app", user_id="ada", after=0,
                                                 upto_position=None)
        assert [e.stream_seq for e in entries] == list(range(1, 49))
        state = await store.shared_state(app_name="app", user_id="ada")
        assert {k: v for k, v in state.items() if k.startswith("user:")} == {
            f"user:k{n}": 5 for n in range(8)}
        app_entries = await store.backend.read_scope(app_name="app", user_id=None, after=0,
                                                     upto_position=None)
        assert len(app_entries) == 48
        assert state["app:last"][1] == 5  # the last committed change is some writer's last
        for n in range(8):
            assert [f.code for f in await verify_session(store, f"s{n}")] == []
