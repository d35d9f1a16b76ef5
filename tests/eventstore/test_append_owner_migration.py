"""The append-owner revision (``0019_append_owner.py``) up and down on a populated PostgreSQL
database: after the upgrade ``evs_append`` takes the owner (app, user) and refuses, writing
nothing, a session that is not theirs; a caller of the eleven arguments revision 0010 took (a
process opened before the upgrade) still appends; the downgrade restores revision 0010's
function; the log is unchanged by the round trip. On SQLite the revision changes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from _evs_support import text_event
from alembic import command

from eventstore import EventStore, open_store
from eventstore._migrate import _config, current_revision, head_revision, upgrade
from eventstore.backends.postgres.append import fast_args

pytestmark = pytest.mark.slow

_CALL = "SELECT status FROM evs_append({})"


def _args(text: str, owner: tuple[str, str] | None) -> tuple[Any, ...]:
    """``evs_append``'s arguments for one event appended at head of the session ``s``."""
    _, new = EventStore._prepare(text_event(text))
    return fast_args("s", [new], None, owner)


async def _functions(conn: Any) -> list[tuple[int, int]]:
    rows = await conn.fetch("SELECT pronargs, pronargdefaults FROM pg_proc "
                            "WHERE proname = 'evs_append' ORDER BY pronargs")
    return [(int(r[0]), int(r[1])) for r in rows]


async def _append(conn: Any, args: tuple[Any, ...]) -> int:
    marks = ", ".join(f"${i}" for i in range(1, len(args) + 1))
    return int(await conn.fetchval(_CALL.format(marks), *args))


@pytest.mark.postgres
async def test_append_owner_migration_postgres_up_and_down(empty_postgres_url: str) -> None:
    import asyncpg

    url = empty_postgres_url
    store = await open_store(url, auto_upgrade=True)
    try:
        await store.create_session(app_name="app", user_id="alice", session_id="s",
                                   events=[text_event("before")])
    finally:
        await store.aclose()
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        assert await _functions(conn) == [(13, 2)]
        await asyncio.to_thread(command.downgrade, _config(url), "0018")
        assert await current_revision(url) == "0018"
        assert await _functions(conn) == [(11, 0)]
        assert await _append(conn, _args("at 0018", None)[:11]) == 0

        await upgrade(url)
        assert await current_revision(url) == head_revision()
        assert await _functions(conn) == [(13, 2)]
        # Not the owner's session: status 1 (no such session), nothing written.
        assert await _append(conn, _args("bob's", ("app", "bob"))) == 1
        assert await _append(conn, _args("other app's", ("shop", "alice"))) == 1
        assert await _append(conn, _args("alice's", ("app", "alice"))) == 0
        # The eleven arguments of revision 0010: anyone's, as before.
        assert await _append(conn, _args("unchecked", None)[:11]) == 0
        assert await _append(conn, _args("unchecked too", None)) == 0
    finally:
        await conn.close()
    store = await open_store(url)
    try:
        assert [e.text() for e in await store.read("s")] == [
            "before", "at 0018", "alice's", "unchecked", "unchecked too"]
        # The head records the function kept agree with the log: the next append goes through.
        await store.append("s", text_event("next"), expected_version=5)
    finally:
        await store.aclose()


async def test_append_owner_migration_sqlite_up_and_down(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'owner.db'}"
    store = await open_store(url, auto_upgrade=True)
    try:
        await store.create_session(app_name="app", user_id="alice", session_id="s",
                                   events=[text_event("before")])
    finally:
        await store.aclose()
    await asyncio.to_thread(command.downgrade, _config(url), "0018")
    assert await current_revision(url) == "0018"
    await upgrade(url)
    store = await open_store(url)
    try:
        await store.append("s", text_event("after"), expected_version=1)
        assert [e.text() for e in await store.read("s")] == ["before", "after"]
    finally:
        await store.aclose()
