"""Opening one database concurrently is safe: ``open_store(url, auto_upgrade=True)`` from several
threads and from several processes at once, on a database with no schema yet (SQLite file and
PostgreSQL); and a PostgreSQL store used from a second event loop is refused clearly."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _evs_support import postgres_base_url, run_in_thread

from eventstore import Event, StoreUsageError, open_store
from eventstore._migrate import current_revision, head_revision

pytestmark = [pytest.mark.slow, pytest.mark.real_migrations]

REPO = Path(__file__).resolve().parents[2]
THREADS = 6
PROCESSES = 4

_OPEN = """
import asyncio, sys
from eventstore import open_store

async def main() -> None:
    store = await open_store(sys.argv[1], auto_upgrade=True)
    await store.create_session(app_name="a", user_id="u", session_id=sys.argv[2])
    await store.aclose()

asyncio.run(main())
"""


async def _admin(sql: str) -> None:
    import asyncpg

    dsn = postgres_base_url().replace("postgresql+asyncpg://", "postgresql://", 1)
    conn = await asyncpg.connect(dsn.rsplit("/", 1)[0] + "/postgres", timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no schema at all."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
        return
    request.getfixturevalue("postgres_server_url")
    name = f"evs_fresh_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    run_in_thread(lambda: _admin(f'CREATE DATABASE "{name}"'))
    try:
        yield postgres_base_url().rsplit("/", 1)[0] + "/" + name
    finally:
        run_in_thread(lambda: _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def test_open_with_auto_upgrade_from_many_threads_at_once(fresh_url: str) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def worker(n: int) -> None:
        async def main() -> None:
            store = await open_store(fresh_url, auto_upgrade=True)
            await store.create_session(app_name="a", user_id="u", session_id=f"t{n}")
            await store.aclose()

        start.wait()
        try:
            asyncio.run(main())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(t.is_alive() for t in threads), "an open hung"
    assert errors == []
    assert run_in_thread(lambda: current_revision(fresh_url)) == head_revision()


def test_open_with_auto_upgrade_from_four_processes_at_once(fresh_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    children = [
        subprocess.Popen([sys.executable, "-c", _OPEN, fresh_url, f"p{n}"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n in range(PROCESSES)
    ]
    results = [child.communicate(timeout=120) for child in children]
    assert [c.returncode for c in children] == [0] * PROCESSES, [err for _, err in results]

    async def listed() -> list[str]:
        async with await open_store(fresh_url) as store:
            return [s.id for s in (await store.list_sessions()).sessions]

    assert run_in_thread(listed) == [f"p{n}" for n in range(PROCESSES)]


@pytest.mark.postgres
def test_postgres_store_from_a_second_event_loop_is_refused(postgres_url: str) -> None:
    loop = asyncio.new_event_loop()
    try:
        store = loop.run_until_complete(open_store(postgres_url))
        loop.run_until_complete(store.create_session(app_name="a", user_id="u", session_id="s"))

        async def elsewhere() -> None:
            with pytest.raises(StoreUsageError, match="another event loop"):
                await store.get_session("s")
            with pytest.raises(StoreUsageError, match="another event loop"):
                await store.append("s", Event(author="user"), expected_version=None)

        run_in_thread(elsewhere)
        # The store still works on its own loop.
        assert loop.run_until_complete(store.version("s")) == 0
        loop.run_until_complete(store.aclose())
    finally:
        loop.close()


def test_sqlite_open_waits_for_an_upgrade_half_done_in_another_process(tmp_path: Path) -> None:
    """An upgrade in progress elsewhere can leave the store's tables visible before
    ``alembic_version`` has its row; an auto-upgrading open must wait for that upgrade's file
    lock and then find head, not refuse the file as unversioned."""
    import sqlite3

    from eventstore._migrate import _file_lock, upgrade

    url = f"sqlite+aiosqlite:///{tmp_path / 'half.db'}"
    run_in_thread(lambda: upgrade(url))
    conn = sqlite3.connect(tmp_path / "half.db")
    (version,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    conn.execute("DELETE FROM alembic_version")
    conn.commit()
    outcome: list[object] = []

    def opener() -> None:
        async def main() -> None:
            async with await open_store(url, auto_upgrade=True) as store:
                await store.create_session(app_name="a", user_id="u", session_id="late")
        try:
            asyncio.run(main())
            outcome.append("opened")
        except BaseException as exc:
            outcome.append(exc)

    with _file_lock(url):  # the other process's upgrade, not finished yet
        thread = threading.Thread(target=opener)
        thread.start()
        thread.join(1.0)
        assert outcome == [], "the open did not wait for the upgrade in progress"
        conn.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (version,))
        conn.commit()
    conn.close()
    thread.join(60)
    assert outcome == ["opened"]
    assert run_in_thread(lambda: current_revision(url)) == head_revision()
