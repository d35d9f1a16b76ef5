"""WAL checkpoints run on the SQLite backend's checkpointer thread, off the append path: the
events reach the database file itself while the store stays open, a checkpoint that cannot run
costs nothing, and closing the store ends the thread."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import threading
import time
from pathlib import Path

from eventstore import Event, open_store
from eventstore.backends.sqlite.base import SQLiteBackend
from eventstore.backends.sqlite.checkpoint import WRITER_AUTOCHECKPOINT, Checkpointer


def _events_in_main_file(db: Path, scratch: Path) -> int:
    """Count the events the database file holds without its WAL (a copy of the file alone; 0
    when the copy caught a checkpoint half written, as a copy taken meanwhile may)."""
    copy = scratch / "main-only.db"
    shutil.copyfile(db, copy)
    conn = sqlite3.connect(copy)
    try:
        return int(conn.execute("SELECT count(*) FROM evs_events").fetchone()[0])
    except sqlite3.DatabaseError:  # "database disk image is malformed": read it again
        return 0
    finally:
        conn.close()


def _checkpoint_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("evs-sqlite-checkpoint")]


async def test_committed_events_reach_the_database_file_while_the_store_is_open(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ckpt.db"
    store = await open_store(str(db), auto_upgrade=True)
    try:
        backend = store._backend
        assert isinstance(backend, SQLiteBackend)
        session = await store.create_session(app_name="a", user_id="u")
        for n in range(300):
            await store.append(session.id, Event(author="a", custom_metadata={"n": n}),
                               expected_version=n)
        # 300 events are far below the writer's own checkpoint threshold: only the
        # checkpointer thread can have copied them into the file.
        assert WRITER_AUTOCHECKPOINT > 300 * 4
        deadline = time.monotonic() + 10
        while _events_in_main_file(db, tmp_path) < 300:
            assert time.monotonic() < deadline, "no checkpoint copied the events"
            await asyncio.sleep(0.05)
        assert backend._checkpointer is not None
        assert backend._checkpointer.checkpoints >= 1
        assert len(await store.read(session.id)) == 300
    finally:
        await store.aclose()
    assert _checkpoint_threads() == []


async def test_read_only_store_runs_no_checkpointer(tmp_path: Path) -> None:
    db = tmp_path / "ro.db"
    async with await open_store(str(db), auto_upgrade=True) as writer:
        await writer.create_session(app_name="a", user_id="u", session_id="s")
    async with await open_store(str(db), read_only=True) as reader:
        assert [s.id for s in (await reader.list_sessions()).sessions] == ["s"]
        assert _checkpoint_threads() == []


def test_a_checkpointer_that_cannot_open_its_file_ends_quietly(tmp_path: Path) -> None:
    checkpointer = Checkpointer(str(tmp_path / "missing-dir" / "x.db"))
    checkpointer.start()
    checkpointer.notify()
    checkpointer.stop()
    assert checkpointer.checkpoints == 0
    assert _checkpoint_threads() == []
