"""Migrating populated databases keeps every event and every state, on SQLite and PostgreSQL.

Revision 0003 re-keys the events table. A database written at revision 0002 (rows inserted the
way that revision's code wrote them, sessions interleaved, shared ``user:``/``app:`` state
changing across sessions, a session deleted, shared-state snapshots saved) is upgraded, checked
against a memory store given the same appends, appended to, downgraded to 0002 and upgraded
again, with the same checks after each step.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from alembic import command
from sqlalchemy import pool, text
from sqlalchemy.ext.asyncio import create_async_engine

from eventstore import Event, EventActions, EventStore, open_store
from eventstore._codec import encode_event
from eventstore._migrate import _config, current_revision, head_revision, upgrade
from eventstore._state import apply_delta, shared_part

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

# (session, app, user): two sessions of one user, one of another user, one of another app, and
# one deleted before the upgrade.
SESSIONS = [("a", "shop", "ann"), ("b", "shop", "ann"), ("c", "shop", "bob"), ("d", "mall", "ann"),
            ("gone", "shop", "bob")]
KEPT = [sid for sid, _, _ in SESSIONS if sid != "gone"]


def _event(n: int) -> Event:
    """Event ``n`` of the scripted history: every third changes shared state, some delete."""
    delta: dict[str, object] = {f"k{n % 4}": n}
    if n % 3 == 0:
        delta["user:seen"] = n
    if n % 5 == 0:
        delta["app:count"] = n
    if n % 7 == 0:
        delta[f"k{(n + 1) % 4}"] = None
    return Event(id=f"ev{n}", author="agent", invocation_id=f"inv{n // 4}",
                 actions=EventActions(state_delta=delta), timestamp=1000.0 + n)


def _history(count: int, start: int = 0, *, sessions: list[str] | None = None
             ) -> list[tuple[str, Event]]:
    """Appends interleaved across the sessions, in commit order."""
    ids = sessions or [sid for sid, _, _ in SESSIONS]
    return [(ids[(n * 7 + n // 3) % len(ids)], _event(n)) for n in range(start, start + count)]


async def _write_at_0002(url: str, history: list[tuple[str, Event]]) -> None:
    """Insert the sessions and events as revision 0002's code did (positions in commit order)."""
    apps = {sid: (app, user) for sid, app, user in SESSIONS}
    seqs = dict.fromkeys(apps, 0)
    engine = create_async_engine(url, poolclass=pool.NullPool)
    try:
        async with engine.begin() as conn:
            for sid, (app, user) in apps.items():
                await conn.execute(
                    text("INSERT INTO evs_sessions (session_id, app_name, user_id, created_at) "
                         "VALUES (:s, :a, :u, 1.0)"), {"s": sid, "a": app, "u": user})
            for sid, event in history:
                _, new = EventStore._prepare(event)
                seqs[sid] += 1
                await conn.execute(
                    text("INSERT INTO evs_events (session_id, seq, event_id, kind, "
                         "invocation_id, author, timestamp, shared_state, app_name, user_id, "
                         "schema_version, payload) VALUES (:s, :q, :i, :k, :v, :au, :t, :sh, "
                         ":a, :u, :sv, :p)"),
                    {"s": sid, "q": seqs[sid], "i": new.event_id, "k": new.kind,
                     "v": new.invocation_id, "au": new.author, "t": new.timestamp,
                     "sh": new.shared_state, "a": apps[sid][0], "u": apps[sid][1],
                     # 0002's code stored the event JSON, schema version 1
                     "sv": 1, "p": encode_event(event)})
            await conn.execute(text("DELETE FROM evs_events WHERE session_id = 'gone'"))
            await conn.execute(text("DELETE FROM evs_sessions WHERE session_id = 'gone'"))
            # Snapshots as 0002 saved them: the fold of the scope's first shared events.
            for user in (None, "ann"):
                rows = (await conn.execute(
                    text("SELECT position, payload FROM evs_events WHERE app_name = 'shop' "
                         "AND shared_state" + ("" if user is None else " AND user_id = :u")
                         + " ORDER BY position"), {"u": user})).all()[:6]
                state: dict[str, Any] = {}
                for _, payload in rows:
                    delta = orjson.loads(payload)["actions"]["state_delta"]
                    apply_delta(state, shared_part(delta, user=user is not None))
                await conn.execute(
                    text("INSERT INTO evs_shared_snapshots (app_name, user_id, position, "
                         "event_count, state) VALUES ('shop', :u, :p, :n, :s)"),
                    {"u": user or "", "p": rows[-1][0], "n": len(rows),
                     "s": orjson.dumps(state)})
    finally:
        await engine.dispose()


async def _model(history: list[tuple[str, Event]]) -> EventStore:
    model = await open_store("memory://")
    for sid, app, user in SESSIONS:
        await model.create_session(app_name=app, user_id=user, session_id=sid, created_at=1.0)
    for sid, event in history:
        # Deleted before revision 0015 gave shared state its own streams: its deltas went with
        # it, and no migration can bring them back (after 0015 a deletion leaves them).
        if sid != "gone":
            await model.append(sid, event, expected_version=None)
    await model.delete_session("gone")
    return model


async def _assert_same(url: str, model: EventStore) -> None:
    store = await open_store(url)
    try:
        for sid in KEPT:
            expected = await model.read(sid)
            assert await store.read(sid) == expected
            assert await store.read(sid, backwards=True, limit=3) == expected[::-1][:3]
            for at in range(len(expected) + 1):
                assert await store.state(sid, at=at) == await model.state(sid, at=at), (sid, at)
            info = await store.session_info(sid)
            assert info.version == len(expected)
    finally:
        await store.aclose()


async def _append_more(url: str, model: EventStore, history: list[tuple[str, Event]]) -> None:
    store = await open_store(url)
    try:
        for sid, event in history:
            version = (await model.session_info(sid)).version
            stored = await store.append(sid, event, expected_version=version)
            assert stored == await model.append(sid, event, expected_version=version)
    finally:
        await store.aclose()


async def _downgrade(url: str, revision: str) -> None:
    await asyncio.to_thread(command.downgrade, _config(url), revision)


async def _check_migrations(url: str) -> None:
    await upgrade(url, "0002")
    history = _history(60)
    await _write_at_0002(url, history)
    model = await _model(history)
    try:
        await upgrade(url)
        assert await current_revision(url) == head_revision()
        await _assert_same(url, model)

        await _append_more(url, model, _history(30, start=60, sessions=KEPT))
        await _assert_same(url, model)

        await _downgrade(url, "0002")
        assert await current_revision(url) == "0002"
        await upgrade(url)
        await _assert_same(url, model)
        await _append_more(url, model, _history(10, start=90, sessions=KEPT))
        await _assert_same(url, model)
    finally:
        await model.aclose()


async def test_sql_migrations_sqlite_keep_events_and_state(tmp_path: Path) -> None:
    await _check_migrations(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")


@pytest.mark.postgres
async def test_sql_migrations_postgres_keep_events_and_state(empty_postgres_url: str) -> None:
    await _check_migrations(empty_postgres_url)
