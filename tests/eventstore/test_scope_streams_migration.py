"""Revision 0015 (shared state as streams) up and down on populated SQLite and PostgreSQL.

A database written at head (two apps, several users, a fork, shared and session-only changes,
``None`` values and deletions) is downgraded to 0014 (the streams go; the events stay byte for
byte) and upgraded again: the backfill rebuilds every stream from the events in the fold order
of 0014 — the same entries, byte for byte, as the store wrote — and every state reads back as
before. Keyed, the backfilled entries are unsigned and trusted through their signed events
while those exist, and sealed by the next keyed append.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa
from _evs_support import delta_event
from alembic import command
from sqlalchemy.ext.asyncio import create_async_engine

from eventstore import Event, EventActions, EventStore, open_store
from eventstore._migrate import _config, current_revision, head_revision, upgrade
from eventstore.commands._maintain import verify_session
from eventstore.commands._verify_streams import StreamCheck

_BEFORE = "0014"
KEY = b"m" * 32
SESSIONS = [("a1", "shop", "ann"), ("a2", "shop", "ann"), ("b1", "shop", "bob"),
            ("c1", "mall", "ann")]


async def _execute(url: str, sql: str, **params: Any) -> list[Any]:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            result = await conn.execute(sa.text(sql), params)
            return list(result.fetchall()) if result.returns_rows else []
    finally:
        await engine.dispose()


async def _tables(url: str) -> set[str]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return set(await conn.run_sync(lambda c: sa.inspect(c).get_table_names()))
    finally:
        await engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'streams.db'}"
    return str(request.getfixturevalue("empty_postgres_url"))


async def _populate(store: EventStore) -> None:
    for sid, app, user in SESSIONS:
        await store.create_session(app_name=app, user_id=user, session_id=sid)
    for n in range(24):
        sid = SESSIONS[n % len(SESSIONS)][0]
        delta: dict[str, Any] = {"own": n}
        if n % 2 == 0:
            delta["user:seen"] = n
        if n % 3 == 0:
            delta["app:count"] = None if n % 9 == 0 else n
        deletions: tuple[str, ...] = ()
        if n % 7 == 5:
            delta.pop("user:seen", None)
            deletions = ("user:seen",)
        await store.append(sid, Event(id=f"e{n}", author="agent", invocation_id="i",
                                      timestamp=1000.0 + n,
                                      actions=EventActions(state_delta=delta,
                                                           state_deletions=deletions)),
                           expected_version=None)
    await store.fork("a1", at=3, new_session_id="fork")
    await store.append("fork", delta_event({"user:seen": "forked"}), expected_version=None)


async def _states(store: EventStore) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for sid in [s for s, _, _ in SESSIONS] + ["fork"]:
        version = await store.version(sid)
        out[sid] = [await store.state(sid, at=at) for at in range(version + 1)]
    for app, user in (("shop", "ann"), ("shop", "bob"), ("mall", "ann")):
        out[f"{app}/{user}"] = await store.shared_state(app_name=app, user_id=user)
    return out


async def _codes(store: EventStore) -> list[tuple[str, int | None, str]]:
    streams = await StreamCheck.read(store.backend, None)
    ids = [s for s, _, _ in SESSIONS if await store.backend.get_session(s)] + ["fork"]
    found = []
    for sid in ids:
        found += await verify_session(store, sid, streams)
    found += streams.streams(signing_key=store.backend.signing_key, checked_sessions=set(ids))
    return [(f.session_id, f.seq, f.code) for f in found]


@pytest.mark.parametrize("key", [pytest.param(None, id="unkeyed"),
                                 pytest.param(KEY, id="keyed")])
async def test_streams_migrate_down_and_up(url: str, key: bytes | None) -> None:
    async with await open_store(url, auto_upgrade=True, signing_key=key,
                                snapshot_interval=2) as store:
        await _populate(store)
        before = await _states(store)
        assert await _codes(store) == []
    select = ("SELECT app_name, user_id, stream_seq, position, session_id, seq, event_id, "
              "delta, chain_hash FROM evs_scope_entries ORDER BY app_name, user_id, stream_seq")
    entries = await _execute(url, select)
    heads = await _execute(url, "SELECT app_name, user_id, head_seq, head_hash FROM "
                           "evs_scope_heads ORDER BY app_name, user_id")
    assert len(entries) > 20
    events = await _execute(url, "SELECT row_key, payload, chain_hash FROM evs_events "
                            "ORDER BY row_key")

    await asyncio.to_thread(command.downgrade, _config(url), _BEFORE)
    assert await current_revision(url) == _BEFORE
    assert not {"evs_scope_entries", "evs_scope_heads"} & await _tables(url)
    assert await _execute(url, "SELECT row_key, payload, chain_hash FROM evs_events "
                          "ORDER BY row_key") == events

    await upgrade(url)
    assert await current_revision(url) == head_revision()
    assert await _execute(url, select) == entries  # what the store wrote, rebuilt exactly
    assert await _execute(url, "SELECT app_name, user_id, head_seq, head_hash FROM "
                          "evs_scope_heads ORDER BY app_name, user_id") == heads
    assert await _execute(url, "SELECT count(*) FROM evs_scope_entries WHERE signature IS "
                          "NOT NULL") == [(0,)]
    async with await open_store(url, signing_key=key) as store:
        assert await _states(store) == before
        assert await _codes(store) == []  # keyed: vouched for by their signed events
        await store.delete_session("b1")
        codes = await _codes(store)
        if key is None:
            assert codes == []
        else:  # the deleted session's events no longer vouch for bob's migrated entries
            assert {c for _, _, c in codes} == {"stream_unsigned"}
            await store.create_session(app_name="shop", user_id="bob", session_id="b2")
            await store.append("b2", delta_event({"user:seen": "new"}), expected_version=0)
            # A keyed append seals bob's stream (its signed hash covers every entry before),
            # the app's stream is sealed by the next app: change.
            assert {(s, c) for s, _, c in await _codes(store)} <= {("b1", "stream_unsigned")}
            await store.append("b2", delta_event({"app:count": "new"}), expected_version=1)
            assert await _codes(store) == []
        assert (await store.shared_state(app_name="shop", user_id="bob"))["user:seen"] in (
            before["shop/bob"]["user:seen"], "new")
