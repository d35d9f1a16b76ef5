"""Revision 0013 (``None`` is a state value) up and down on populated SQLite and PostgreSQL.

Caches folded under the old rule ("``None`` deletes") would now give a wrong state, so the
upgrade drops every snapshot and session cache; the log itself is untouched (each row's bytes
stay equal) and the next reads fold it afresh, keeping the ``None`` values.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
import sqlalchemy as sa
from _evs_support import delta_event, full_dump
from alembic import command
from sqlalchemy.ext.asyncio import create_async_engine

from eventstore import open_store
from eventstore._migrate import _config, current_revision, head_revision, upgrade

_BEFORE = "0012"
_CACHES = ("evs_snapshots", "evs_shared_snapshots", "evs_session_caches")


async def _execute(url: str, sql: str, **params: Any) -> list[Any]:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            result = await conn.execute(sa.text(sql), params)
            return list(result.fetchall()) if result.returns_rows else []
    finally:
        await engine.dispose()


async def _counts(url: str) -> dict[str, int]:
    return {t: (await _execute(url, f"SELECT count(*) FROM {t}"))[0][0] for t in _CACHES}


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'none.db'}"
    return str(request.getfixturevalue("empty_postgres_url"))


async def test_none_value_migration_drops_old_rule_caches(url: str) -> None:
    store = await open_store(url, auto_upgrade=True, snapshot_interval=2)
    try:
        await store.create_session(app_name="app", user_id="u", session_id="s")
        for i in range(6):
            await store.append("s", delta_event({"k": i, "user:p": i}), expected_version=i)
        await store.append("s", delta_event({"k": None, "user:p": None}), expected_version=6)
        await store.save_cache("s", "reader", 7, b"derived")
        assert await store.state("s") == {"k": None, "user:p": None}
        dump = await full_dump(store)
    finally:
        await store.aclose()
    events = await _execute(url, "SELECT row_key, payload FROM evs_events ORDER BY row_key")

    await asyncio.to_thread(command.downgrade, _config(url), _BEFORE)
    assert await current_revision(url) == _BEFORE
    assert await _counts(url) == dict.fromkeys(_CACHES, 0)
    # What revision 0012's code left behind: snapshots folded with None as a deletion.
    await _execute(url, "INSERT INTO evs_snapshots (session_id, seq, state) VALUES ('s', 7, :b)",
                   b=orjson.dumps({}))
    await _execute(
        url, "INSERT INTO evs_shared_snapshots (app_name, user_id, position, event_count, state) "
        "SELECT 'app', 'u', max(position), 7, :b FROM evs_events", b=orjson.dumps({}))
    await _execute(url, "INSERT INTO evs_session_caches (session_id, name, seq, data) "
                   "VALUES ('s', 'reader', 7, :b)", b=b"old rule")

    await upgrade(url)
    assert await current_revision(url) == head_revision()
    assert await _counts(url) == dict.fromkeys(_CACHES, 0)
    assert await _execute(url, "SELECT row_key, payload FROM evs_events ORDER BY row_key") \
        == events
    store = await open_store(url)
    try:
        assert await store.state("s") == {"k": None, "user:p": None}
        assert await store.state("s", at=7) == await store.state("s")
        assert await store.load_cache("s", "reader") is None
        assert await full_dump(store) == dump
    finally:
        await store.aclose()
