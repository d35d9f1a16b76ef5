"""The revision binding caches and sealing artifacts and fork links
(``0020_caches_in_evidence.py``) up and down on populated SQLite and PostgreSQL databases:
the downgrade drops the new columns; the upgrade deletes the unbound snapshots (caches), and
backfills the digest of every artifact version and fork link, so the log, state, artifacts and
links read back unchanged, an unkeyed ``evs verify`` finds nothing, a keyed store serves the
migrated (unsigned) versions only once ``evs db sign-artifacts`` vouched for them, and an edit
made after the upgrade is found."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from _evs_support import delta_event
from alembic import command
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import create_async_engine

from eventstore import EventStore, TamperedArtifactError, open_store
from eventstore._migrate import _config, current_revision, head_revision, upgrade
from eventstore.commands._maintain import verify_session
from eventstore.commands._sign_artifacts import sign_artifacts

pytestmark = pytest.mark.slow

KEY = b"m" * 32


async def _columns(url: str, table: str) -> set[str]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return {c["name"] for c in await conn.run_sync(
                lambda sync: inspect(sync).get_columns(table))}
    finally:
        await engine.dispose()


async def _execute(url: str, sql: str) -> list[tuple[object, ...]]:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            result = await conn.execute(text(sql))
            return [tuple(r) for r in result.all()] if result.returns_rows else []
    finally:
        await engine.dispose()


async def _populate(store: EventStore) -> None:
    await store.create_session(app_name="app", user_id="ada", session_id="s")
    for n in range(4):
        await store.append("s", delta_event({"n": n, "user:role": f"r{n}"}), expected_version=n)
    await store.save_artifact("s", "a.txt", b"alpha", mime_type="text/plain",
                              metadata={"k": 1})
    await store.save_artifact(None, "b.bin", b"beta", mime_type="application/octet-stream",
                              app_name="app", user_id="ada")
    await store.fork("s", at=2, new_session_id="f")
    await store.state("s")  # writes the snapshots


async def _round_trip(url: str) -> None:
    store = await open_store(url, auto_upgrade=True, snapshot_interval=2)
    try:
        await _populate(store)
        state = await store.state("s")
        links = await store.fork_links("f", app_name="app", user_id="ada")
        artifact = await store.load_artifact("s", "a.txt")
    finally:
        await store.aclose()
    assert await _execute(url, "SELECT count(*) FROM evs_shared_snapshots") != [(0,)]
    await asyncio.to_thread(command.downgrade, _config(url), "0019")
    assert await current_revision(url) == "0019"
    assert "digest" not in await _columns(url, "evs_artifacts")
    assert "chain_hash" not in await _columns(url, "evs_snapshots")
    assert "link_hash" not in await _columns(url, "evs_session_forks")
    await upgrade(url)
    assert await current_revision(url) == head_revision()
    # Unbound caches went; every artifact version and fork link got its digest.
    assert await _execute(url, "SELECT count(*) FROM evs_snapshots") == [(0,)]
    assert await _execute(url, "SELECT count(*) FROM evs_shared_snapshots") == [(0,)]
    assert await _execute(url, "SELECT count(*) FROM evs_artifacts WHERE digest IS NULL") \
        == [(0,)]
    assert await _execute(url, "SELECT count(*) FROM evs_session_forks "
                          "WHERE link_hash IS NULL") == [(0,)]
    store = await open_store(url, snapshot_interval=2)
    try:
        assert await store.state("s") == state
        assert await store.fork_links("f", app_name="app", user_id="ada") == links
        assert await store.load_artifact("s", "a.txt") == artifact
        for sid in ("s", "f"):
            assert await verify_session(store, sid) == []
    finally:
        await store.aclose()
    # A keyed store refuses the migrated (unsigned) versions, and verify names them, until
    # the operator vouches for them (evs db sign-artifacts).
    async with await open_store(url, signing_key=KEY) as keyed:
        with pytest.raises(TamperedArtifactError):
            await keyed.load_artifact("s", "a.txt")
        codes = {f.code for f in await verify_session(keyed, "s")}
        assert "artifact_unsigned" in codes
        # The migrated (unsigned) fork link: its origin's event at the fork's seq vouches.
        assert not {f.code for f in await verify_session(keyed, "f")
                    if f.code.startswith("fork_link")}
        report = await sign_artifacts(keyed.backend, dry_run=False)
        assert (report.count("signed"), report.count("refused")) == (2, 0)
        assert (await keyed.load_artifact("s", "a.txt")).data == b"alpha"
        assert (await keyed.load_artifact(None, "b.bin", app_name="app",
                                          user_id="ada")).data == b"beta"
        assert not {f.code for f in await verify_session(keyed, "s")
                    if f.code.startswith("artifact")}
    # An edit after the upgrade is found.
    await _execute(url, "UPDATE evs_artifacts SET mime_type = 'text/html' "
                   "WHERE filename = 'a.txt'")
    async with await open_store(url) as store:
        assert "artifact_edited" in {f.code for f in await verify_session(store, "s")}


async def test_caches_migration_sqlite_up_and_down(tmp_path: Path) -> None:
    await _round_trip(f"sqlite+aiosqlite:///{tmp_path / 'caches.db'}")


@pytest.mark.postgres
async def test_caches_migration_postgres_up_and_down(empty_postgres_url: str) -> None:
    await _round_trip(empty_postgres_url)
