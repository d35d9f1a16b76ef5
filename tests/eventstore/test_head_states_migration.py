"""The head-states revision (``0018_head_states.py``) up and down on populated SQLite and
PostgreSQL databases: the upgrade backfills one row per session with events, holding the fold
of its own state at its newest event; the downgrade drops the table and the log, state and
listing are unchanged by the round trip."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from _evs_support import call_event, delta_event, response_event, text_event
from alembic import command
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import create_async_engine

from eventstore import Event, EventActions, EventStore, open_store
from eventstore._migrate import _config, current_revision, head_revision, upgrade

pytestmark = pytest.mark.slow


async def _tables(url: str) -> set[str]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return set(await conn.run_sync(lambda sync: inspect(sync).get_table_names()))
    finally:
        await engine.dispose()


async def _head_rows(url: str) -> dict[str, tuple[int, dict[str, object]]]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(text(
                "SELECT session_id, seq, state FROM evs_head_states"))).all()
    finally:
        await engine.dispose()
    return {r[0]: (int(r[1]), orjson.loads(r[2])) for r in rows}


async def _populate(store: EventStore) -> None:
    await store.create_session(app_name="app", user_id="u", session_id="s")
    await store.append("s", [text_event("hi"), delta_event({"k": 1, "user:p": 1}),
                             call_event("c1"), response_event("c1")], expected_version=0)
    await store.append("s", Event(author="agent", actions=EventActions(
        state_delta={"j": None}, state_deletions=("k",))), expected_version=4)
    await store.create_session(app_name="app", user_id="v", session_id="t",
                               events=[delta_event({"a": [1, 2], "app:x": 3})])
    await store.create_session(app_name="app", user_id="v", session_id="empty")


async def _round_trip(url: str) -> None:
    store = await open_store(url, auto_upgrade=True)
    try:
        await _populate(store)
        events = {sid: await store.read(sid) for sid in ("s", "t", "empty")}
        listed = {s.id: s.state for s in await store.list_sessions_by_update(app_name="app")}
    finally:
        await store.aclose()
    await asyncio.to_thread(command.downgrade, _config(url), "0017")
    assert await current_revision(url) == "0017"
    assert "evs_head_states" not in await _tables(url)
    await upgrade(url)
    assert await current_revision(url) == head_revision()
    # The backfill: one row per session with events, its own state at its newest event.
    assert await _head_rows(url) == {"s": (5, {"j": None}), "t": (1, {"a": [1, 2]})}
    store = await open_store(url)
    try:
        assert {sid: await store.read(sid) for sid in events} == events
        assert {s.id: s.state for s in await store.list_sessions_by_update(
            app_name="app")} == listed
        assert listed["s"] == await store.state("s") == {"j": None, "user:p": 1, "app:x": 3}
    finally:
        await store.aclose()


async def test_head_states_migration_sqlite_up_and_down(tmp_path: Path) -> None:
    await _round_trip(f"sqlite+aiosqlite:///{tmp_path / 'heads.db'}")


@pytest.mark.postgres
async def test_head_states_migration_postgres_up_and_down(empty_postgres_url: str) -> None:
    await _round_trip(empty_postgres_url)
