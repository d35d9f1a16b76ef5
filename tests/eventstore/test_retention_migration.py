"""The retention-policies revision (``*_retention_policies.py``) up and down on populated SQLite
and PostgreSQL databases: sessions, events, state and artifacts stay; the policies go with the
table and can be set again after the round trip; the table matches the model at head."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from _evs_support import call_event, delta_event, response_event, text_event
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import create_async_engine

from eventstore import EventStore, open_store
from eventstore._migrate import _config, current_revision, head_revision, upgrade

pytestmark = pytest.mark.slow


def _retention_revision() -> tuple[str, str]:
    """``(revision, down_revision)`` of the retention revision, whatever its number."""
    scripts = ScriptDirectory.from_config(_config())  # type: ignore[arg-type]
    for rev in scripts.walk_revisions():
        if rev.path.endswith("_retention_policies.py"):
            assert isinstance(rev.down_revision, str)
            return rev.revision, rev.down_revision
    raise AssertionError("no *_retention_policies.py revision")


async def _tables(url: str) -> set[str]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return set(await conn.run_sync(lambda sync: inspect(sync).get_table_names()))
    finally:
        await engine.dispose()


async def _populate(store: EventStore) -> None:
    await store.create_session(app_name="app", user_id="u", session_id="s")
    await store.save_artifact("s", "a.txt", b"a", mime_type="text/plain")
    await store.append("s", [text_event("hi"), delta_event({"k": 1, "user:p": 1}),
                             call_event("c1"), response_event("c1")], expected_version=0)
    await store.set_retention(app_name="app", older_than=30 * 86_400, archive="/tmp/arch")
    await store.set_retention(app_name="other", older_than=3_600)


async def _round_trip(url: str) -> None:
    _, down = _retention_revision()
    store = await open_store(url, auto_upgrade=True)
    try:
        await _populate(store)
        events, state = await store.read("s"), await store.state("s")
        assert len(await store.retention_policies()) == 2
    finally:
        await store.aclose()
    await asyncio.to_thread(command.downgrade, _config(url), down)
    assert await current_revision(url) == down
    assert "evs_retention_policies" not in await _tables(url)
    await upgrade(url)
    assert await current_revision(url) == head_revision()
    assert "evs_retention_policies" in await _tables(url)
    store = await open_store(url)
    try:
        assert await store.read("s") == events
        assert await store.state("s") == state
        assert await store.list_artifacts("s") == {"a.txt": [0]}
        assert await store.retention_policies() == []
        await store.set_retention(app_name="app", older_than=60)
        assert [p.older_than for p in await store.retention_policies()] == [60]
    finally:
        await store.aclose()


async def test_retention_migration_sqlite_up_and_down(tmp_path: Path) -> None:
    await _round_trip(f"sqlite+aiosqlite:///{tmp_path / 'retention.db'}")


@pytest.mark.postgres
async def test_retention_migration_postgres_up_and_down(empty_postgres_url: str) -> None:
    await _round_trip(empty_postgres_url)
