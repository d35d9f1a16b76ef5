"""The key a store keeps for an (app, user, id) it made or found goes stale when another store
deletes that session and makes it again under another key: two stores on one database. A kept
key that no longer names the session is dropped and looked up once more — the call acts on the
session the address names today, never fails for a key it should not have trusted, and (where
the backend checks the owner: SQLite, memory) never writes into the session of another user
that was given the key."""

from __future__ import annotations

import pytest
from _evs_support import StoreFactory

from eventstore import Content, Event, EventStore, Part


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
