"""The test run's new SQLite files (``tests/_fresh_sqlite.py``) are what the migrations make: the
same schema and revision as a file alembic migrates, and the same errors where a file cannot be
made; files that exist are upgraded by alembic as before."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import _fresh_sqlite
import pytest

from eventstore import StorageError, open_store
from eventstore._migrate import head_revision, sqlite_revision, upgrade


def _schema(path: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(path)
    try:
        return sorted(conn.execute("SELECT type, name, sql FROM sqlite_master "
                                   "WHERE name NOT LIKE 'sqlite_%'").fetchall())
    finally:
        conn.close()


async def test_a_new_file_is_the_database_the_migrations_make(tmp_path: Path) -> None:
    copied, migrated = tmp_path / "copied.db", tmp_path / "migrated.db"
    async with await open_store(copied, auto_upgrade=True) as store:
        await store.create_session(app_name="a", user_id="u", session_id="s")
    await upgrade(f"sqlite+aiosqlite:///{migrated}")  # alembic, as evs db upgrade runs it
    assert _schema(copied) == _schema(migrated)
    assert sqlite_revision(str(copied)) == (head_revision(), False)
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".fresh")]


@pytest.mark.real_migrations
async def test_real_migrations_tests_migrate_new_files_with_alembic(tmp_path: Path) -> None:
    before = _fresh_sqlite._state.get("bytes")
    _fresh_sqlite._state.pop("bytes", None)
    try:
        async with await open_store(tmp_path / "real.db", auto_upgrade=True):
            pass
        assert "bytes" not in _fresh_sqlite._state  # no template was made or used
    finally:
        if before is not None:
            _fresh_sqlite._state["bytes"] = before
    assert sqlite_revision(str(tmp_path / "real.db")) == (head_revision(), False)


async def test_a_file_that_cannot_be_made_is_the_same_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="does not exist"):
        await open_store(tmp_path / "missing" / "x.db", auto_upgrade=True)
