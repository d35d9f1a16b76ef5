"""SQLite-specific behaviour: read-only opening, error translation, corrupt rows, scale, tails."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from eventstore import (
    Content,
    CorruptEventError,
    Event,
    EventStore,
    Part,
    StorageError,
    StoreUsageError,
    open_store,
)


def _text(text: str) -> Event:
    return Event(author="user", content=Content(role="user", parts=(Part(text=text),)))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "evs.db"


@pytest.fixture
async def store(db_path: Path) -> EventStore:
    return await open_store(db_path, auto_upgrade=True)


async def test_sql_sqlite_read_only_store_refuses_writes(db_path: Path, store: EventStore) -> None:
    session = await store.create_session(app_name="a", user_id="u", session_id="s1")
    await store.append(session.id, _text("hi"), expected_version=0)
    await store.aclose()
    async with await open_store(db_path, read_only=True) as reader:
        assert [e.seq for e in await reader.read("s1")] == [1]
        assert (await reader.state("s1")) == {}
        with pytest.raises(StoreUsageError, match="read-only"):
            await reader.append("s1", _text("no"), expected_version=1)
        with pytest.raises(StoreUsageError, match="read-only"):
            await reader.create_session(app_name="a", user_id="u")
        with pytest.raises(StoreUsageError, match="read-only"):
            await reader.save_artifact("s1", "f.txt", b"x", mime_type="text/plain")
        with pytest.raises(StoreUsageError, match="read-only"):
            await reader.delete_session("s1")


async def test_sql_sqlite_read_only_missing_file_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="does not exist"):
        await open_store(tmp_path / "absent.db", read_only=True)


async def test_sql_sqlite_rejects_unknown_synchronous_mode(db_path: Path) -> None:
    with pytest.raises(StoreUsageError, match="synchronous"):
        await open_store(db_path, auto_upgrade=True, synchronous="OFF")


async def test_sql_sqlite_full_synchronous_store_works(db_path: Path) -> None:
    async with await open_store(db_path, auto_upgrade=True, synchronous="FULL") as store:
        session = await store.create_session(app_name="a", user_id="u")
        assert len(await store.append(session.id, _text("x"), expected_version=0)) == 1


async def test_sql_sqlite_dropped_table_is_a_storage_error(
    db_path: Path, store: EventStore
) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    conn = sqlite3.connect(db_path)
    conn.execute("DROP TABLE evs_events")
    conn.commit()
    conn.close()
    with pytest.raises(StorageError) as info:
        await store.read(session.id)
    assert isinstance(info.value.__cause__, sqlite3.Error)
    with pytest.raises(StorageError) as info:
        await store.append(session.id, _text("x"), expected_version=0)
    assert isinstance(info.value.__cause__, sqlite3.Error)
    await store.aclose()


async def test_sql_sqlite_corrupt_payload_names_session_and_seq(
    db_path: Path, store: EventStore
) -> None:
    session = await store.create_session(app_name="a", user_id="u", session_id="s-corrupt")
    await store.append(session.id, [_text("one"), _text("two")], expected_version=0)
    conn = sqlite3.connect(db_path)
    conn.execute(
        "UPDATE evs_events SET payload = ? WHERE session_id = ? AND seq = 2",
        (b"\x00not json", session.id),
    )
    conn.commit()
    conn.close()
    with pytest.raises(CorruptEventError) as info:
        await store.read(session.id)
    assert (info.value.session_id, info.value.seq) == ("s-corrupt", 2)
    assert "s-corrupt" in str(info.value)
    assert len(await store.read(session.id, upto=1)) == 1
    await store.aclose()


async def test_sql_sqlite_payload_stored_as_text_is_named_by_every_read(
    db_path: Path, store: EventStore
) -> None:
    session = await store.create_session(app_name="a", user_id="u", session_id="s-text")
    await store.append(session.id, [_text("one"), _text("two")], expected_version=0)
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE evs_events SET payload = CAST(payload AS TEXT) "
                 "WHERE session_id = ? AND seq = 2", (session.id,))
    conn.commit()
    conn.close()
    for read in (lambda: store.read(session.id),
                 lambda: store.read_mappings(session.id),
                 lambda: store.read_mappings(session.id, compact=True)):
        with pytest.raises(CorruptEventError) as info:
            await read()
        assert (info.value.session_id, info.value.seq) == ("s-text", 2)
        assert "stored as TEXT, not as bytes" in str(info.value)
    assert len(await store.read_mappings(session.id, upto=1, compact=True)) == 1
    await store.aclose()


async def test_sql_sqlite_lists_a_page_of_100k_sessions_fast(
    db_path: Path, store: EventStore
) -> None:
    conn = sqlite3.connect(db_path)
    conn.executemany(
        "INSERT INTO evs_sessions (session_id, given_id, session_key, app_name, user_id, "
        "created_at) VALUES (?,?,?,?,?,?)",
        ((f"s{i:06d}", f"s{i:06d}", i + 1, f"app{i % 3}", f"user{i % 50}", 0.0)
         for i in range(100_000)),
    )
    conn.commit()
    conn.close()
    await store.list_sessions(limit=10)  # warm the page cache
    for app_name, user_id, after in [
        (None, None, "s050000"),
        ("app1", None, "s050000"),
        ("app1", "user7", "s050000"),
    ]:
        started = time.perf_counter()
        page = await store.list_sessions(app_name=app_name, user_id=user_id, after=after,
                                         limit=100)
        elapsed = time.perf_counter() - started
        assert page.sessions
        assert page.sessions[0].id > after
        assert elapsed < 0.25, (app_name, user_id, elapsed)
    await store.aclose()


async def test_sql_sqlite_wait_sees_another_stores_append(db_path: Path, store: EventStore) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    other = await open_store(db_path)

    async def append_later() -> None:
        await asyncio.sleep(0.05)
        await other.append(session.id, _text("from elsewhere"), expected_version=0)

    task = asyncio.create_task(append_later())
    started = time.perf_counter()
    await store.backend.wait_for_events(session.id, after=0, max_wait=5)
    assert time.perf_counter() - started < 2
    await task
    assert [e.seq for e in await store.read(session.id)] == [1]
    await other.aclose()
    await store.aclose()


async def test_sql_sqlite_in_memory_url_is_refused() -> None:
    with pytest.raises(StoreUsageError, match="memory"):
        await open_store("sqlite+aiosqlite:///:memory:")


_READ_ONLY_CHILD = """
import asyncio, sqlite3, sys
from pathlib import Path
from eventstore import Event, open_store

path = sys.argv[1]
conn = sqlite3.connect(Path(path).as_uri() + "?mode=ro", uri=True)
try:
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    print("mode=ro ok")
except sqlite3.Error as exc:
    print("mode=ro failed:", exc)
conn.close()

async def main():
    store = await open_store(path, read_only=True)
    try:
        session = await store.get_session("s1")
        print(session.version, session.state["k"])
        try:
            await store.append("s1", Event(author="user"), expected_version=None)
        except Exception as exc:
            print("append:", type(exc).__name__)
    finally:
        await store.aclose()

asyncio.run(main())
"""


def _as_nobody() -> list[str]:
    if os.geteuid() != 0:
        pytest.skip("needs root to run a child as another user")
    if shutil.which("setpriv"):
        # CAP_DAC_READ_SEARCH lets the child read and traverse (the interpreter may live in
        # root's home) but never write.
        return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    if shutil.which("runuser"):
        return ["runuser", "-u", "nobody", "--"]
    pytest.skip("neither setpriv nor runuser exists")


def _run_read_only_child(prefix: list[str], path: Path) -> list[str]:
    assert not os.path.exists(f"{path}-wal")  # checkpointed when the writer closed
    path.chmod(0o644)
    child = subprocess.run(
        [*prefix, sys.executable, "-c", _READ_ONLY_CHILD, str(path)],
        capture_output=True, text=True, timeout=60, cwd=path.parent, check=False,
    )
    assert child.returncode == 0, child.stderr
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # nothing created
    return child.stdout.splitlines()


async def test_sql_sqlite_read_only_open_in_an_unwritable_directory() -> None:
    prefix = _as_nobody()
    # Not tmp_path: its parents are private to root; the child must reach the file.
    directory = Path(tempfile.mkdtemp(prefix="evs-ro-", dir="/tmp"))
    try:
        os.chmod(directory, 0o755)
        path = directory / "evs.db"
        store = await open_store(path, auto_upgrade=True)
        await store.create_session(app_name="a", user_id="u", session_id="s1", state={"k": 7})
        await store.append("s1", _text("hello"), expected_version=1)
        await store.aclose()
        lines = await asyncio.to_thread(_run_read_only_child, prefix, path)
        # The premise: a plain read-only open of this WAL database fails here.
        assert lines[0].startswith("mode=ro failed:"), lines
        assert lines[1:] == ["2 7", "append: StoreUsageError"], lines
    finally:
        shutil.rmtree(directory)
