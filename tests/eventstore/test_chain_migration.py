"""Revision 0008 backfills the hash chain in place, up and down, on populated databases.

A log written by the store at head, downgraded to 0007 (the chain columns dropped) and upgraded
again gets back exactly the hashes the store computed while appending, on SQLite and
PostgreSQL; the frozen ``tests/recordings/sessions-0003.db`` (upgraded in a temporary copy)
verifies with no chain finding and its hashes equal a recompute from its rows.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

import pytest
from alembic import command

from eventstore import Event, EventActions, open_store
from eventstore._chain import GENESIS, chain_hashes
from eventstore._migrate import _config, current_revision, upgrade
from eventstore.commands._maintain import verify_session

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

RECORDINGS = Path(__file__).resolve().parent.parent / "recordings"

_CHAIN_CODES = ("chain_", "tail_removed", "head_mismatch")


async def _populate(url: str) -> dict[str, list[tuple[int, bytes]]]:
    """Three interleaved sessions, some batches, some shared state; return each session's
    ``(seq, chain_hash)`` as the store computed them while appending."""
    async with await open_store(url, auto_upgrade=True) as store:
        for sid in ("a", "b", "c"):
            await store.create_session(app_name="app", user_id=f"u-{sid}", session_id=sid,
                                       state={"start": sid})
        for n in range(40):
            sid = "abc"[n % 3]
            delta: dict[str, object] = {"n": n} if n % 4 else {"user:seen": n}
            batch = [Event(author="agent", id=f"{sid}{n}-{i}", timestamp=100.0 + n,
                           actions=EventActions(state_delta=delta)) for i in range(1 + n % 3)]
            await store.append(sid, batch, expected_version=None)
        return {sid: [(r.seq, r.chain_hash or b"") for r in await store.backend.read(
            sid, after=None, upto=None, backwards=False, limit=None)] for sid in "abc"}


async def _hashes(url: str) -> dict[str, list[tuple[int, bytes]]]:
    async with await open_store(url) as store:
        out = {}
        for sid in "abc":
            rows = await store.backend.read(sid, after=None, upto=None, backwards=False,
                                            limit=None)
            out[sid] = [(r.seq, r.chain_hash or b"") for r in rows]
            assert await verify_session(store, sid) == []
        return out


async def _downgrade(url: str, revision: str) -> None:
    await asyncio.to_thread(command.downgrade, _config(url), revision)


async def _check(url: str) -> None:
    appended = await _populate(url)
    assert all(h for rows in appended.values() for _, h in rows)
    await _downgrade(url, "0007")
    assert await current_revision(url) == "0007"
    await upgrade(url)
    assert await _hashes(url) == appended
    # A store at head appends after the backfilled head, and the chain still checks out.
    async with await open_store(url) as store:
        await store.append("a", Event(author="user"), expected_version=None)
        assert await verify_session(store, "a") == []


async def test_chain_migration_sqlite_backfills_what_appends_computed(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'chain.db'}"
    await _check(url)
    await _downgrade(url, "0007")
    conn = sqlite3.connect(tmp_path / "chain.db")
    try:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(evs_events)")}
        session_columns = {r[1] for r in conn.execute("PRAGMA table_info(evs_sessions)")}
    finally:
        conn.close()
    assert "chain_hash" not in columns
    assert "signature" not in columns
    assert not {"head_seq", "head_hash", "head_signature"} & session_columns


@pytest.mark.postgres
async def test_chain_migration_postgres_backfills_what_appends_computed(
    empty_postgres_url: str,
) -> None:
    await _check(empty_postgres_url)
    await _downgrade(empty_postgres_url, "0007")
    import asyncpg

    conn = await asyncpg.connect(empty_postgres_url.replace("postgresql+asyncpg", "postgresql"))
    try:
        columns = {r[0] for r in await conn.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_name = "
            "'evs_events'")}
        args = await conn.fetchval(
            "SELECT pg_get_function_identity_arguments('evs_append'::regproc)")
    finally:
        await conn.close()
    assert "chain_hash" not in columns
    assert args.count("[]") == 7  # 0007's evs_append is back (no digests argument)
    await upgrade(empty_postgres_url)  # and up once more, over the same rows
    async with await open_store(empty_postgres_url) as store:
        for sid in "abc":
            assert await verify_session(store, sid) == []


async def test_chain_migration_frozen_recordings_database(tmp_path: Path) -> None:
    copy = tmp_path / "sessions-0003.db"
    shutil.copyfile(RECORDINGS / "sessions-0003.db", copy)
    url = f"sqlite+aiosqlite:///{copy}"
    await upgrade(url)
    async with await open_store(url) as store:
        page = await store.list_sessions(limit=1000)
        assert page.sessions
        for info in page.sessions:
            rows = await store.backend.read(info.id, after=None, upto=None, backwards=False,
                                            limit=None)
            assert [r.chain_hash for r in rows] == chain_hashes(GENESIS, 1, rows)
            record = await store.backend.get_session(info.id)
            assert record is not None
            assert record.head_seq == info.version
            codes = [f.code for f in await verify_session(store, info.id)]
            assert not [c for c in codes if c.startswith(_CHAIN_CODES)], (info.id, codes)
    await _downgrade(url, "0007")
    assert await current_revision(url) == "0007"
    await upgrade(url)
    assert await current_revision(url) != "0007"
