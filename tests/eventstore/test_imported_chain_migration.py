"""Revision 0017 (the chain an imported log carried) up and down on populated SQLite and
PostgreSQL: the table comes and goes, the log and everything else stay as they were, and a
forced import's evidence is stored once the revision is there."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa
from _evs_support import delta_event, full_dump
from alembic import command
from sqlalchemy.ext.asyncio import create_async_engine

from eventstore import open_store
from eventstore._migrate import _config, current_revision, head_revision, upgrade
from eventstore.backends.protocol import ImportedLink

_BEFORE = "0016"


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
        return f"sqlite+aiosqlite:///{tmp_path / 'imported.db'}"
    return str(request.getfixturevalue("empty_postgres_url"))


async def test_imported_chain_migration_up_and_down(url: str) -> None:
    store = await open_store(url, auto_upgrade=True)
    try:
        await store.create_session(app_name="app", user_id="u", session_id="s")
        for i in range(4):
            await store.append("s", delta_event({"k": i}), expected_version=i)
        links = [ImportedLink(seq=n, chain_hash=bytes([n]) * 32, signature=None,
                              origin_session_id="exported") for n in (1, 2)]
        await store.create_session(app_name="app", user_id="u", session_id="imported",
                                   events=[delta_event({"a": 1}), delta_event({"a": 2})],
                                   imported_chain=links)
        assert await store.backend.read_imported("imported", after=0, limit=10) == links
        dump = await full_dump(store)
    finally:
        await store.aclose()
    assert "evs_imported_chain" in await _tables(url)

    await asyncio.to_thread(command.downgrade, _config(url), _BEFORE)
    assert await current_revision(url) == _BEFORE
    assert "evs_imported_chain" not in await _tables(url)
    await upgrade(url)
    assert await current_revision(url) == head_revision()
    store = await open_store(url)
    try:
        assert await full_dump(store) == dump
        # The evidence went with the downgrade (it is no part of the log); the table is back.
        assert await store.backend.read_imported("imported", after=0, limit=10) == []
        await store.delete_session("imported")
        await store.create_session(app_name="app", user_id="u", session_id="imported",
                                   events=[delta_event({"a": 1}), delta_event({"a": 2})],
                                   imported_chain=links)
        assert await store.backend.read_imported("imported", after=1, limit=10) == links[1:]
        await store.delete_session("imported")  # the evidence goes with the session
        assert await store.backend.read_imported("imported", after=0, limit=10) == []
    finally:
        await store.aclose()
