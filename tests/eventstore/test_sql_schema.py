"""Alembic owns the schema: migrations match ``_schema``, the CLI works, opening checks it."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.util import CommandError
from sqlalchemy import pool
from sqlalchemy.ext.asyncio import create_async_engine

from eventstore import SchemaOutdatedError, StorageError, open_store
from eventstore._migrate import current_revision, head_revision, upgrade
from eventstore._schema import described_by_models, metadata

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]


async def _drift(url: str) -> list[Any]:
    engine = create_async_engine(url, poolclass=pool.NullPool)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(
                lambda sync: compare_metadata(
                    MigrationContext.configure(
                        sync, opts={"compare_type": True, "include_name": described_by_models}
                    ),
                    metadata,
                )
            )
    finally:
        await engine.dispose()


async def test_sql_schema_sqlite_has_no_drift(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'evs.db'}"
    await upgrade(url)
    assert await current_revision(url) == head_revision()
    assert await _drift(url) == []


@pytest.mark.postgres
async def test_sql_schema_postgres_has_no_drift(empty_postgres_url: str) -> None:
    await upgrade(empty_postgres_url)
    assert await current_revision(empty_postgres_url) == head_revision()
    assert await _drift(empty_postgres_url) == []


def test_sql_schema_alembic_cli_upgrades_from_repo_root(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    env = {k: v for k, v in os.environ.items() if k != "EVS_DATABASE_URL"}
    done = subprocess.run(
        [sys.executable, "-m", "alembic", "-x", f"url={url}", "upgrade", "head"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert asyncio.run(current_revision(url)) == head_revision()


def _alembic(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the alembic CLI from the project's directory, as a developer would."""
    env = {k: v for k, v in os.environ.items() if k != "EVS_DATABASE_URL"}
    return subprocess.run([sys.executable, "-m", "alembic", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def _check_is_clean(url: str) -> None:
    """``alembic check`` (what ``revision --autogenerate`` would write) proposes nothing on a
    database at head: not dropping the memory index or SQLite's event layout, which the models
    leave out on purpose (``_schema.described_by_models``)."""
    done = _alembic("-x", f"url={url}", "upgrade", "head")
    assert done.returncode == 0, done.stderr
    done = _alembic("-x", f"url={url}", "check")
    assert done.returncode == 0, done.stderr
    assert "No new upgrade operations detected." in done.stdout + done.stderr


def test_sql_schema_alembic_check_is_clean_on_sqlite(tmp_path: Path) -> None:
    _check_is_clean(f"sqlite+aiosqlite:///{tmp_path / 'check.db'}")


@pytest.mark.postgres
def test_sql_schema_alembic_check_is_clean_on_postgres(empty_postgres_url: str) -> None:
    _check_is_clean(empty_postgres_url)


def test_sql_schema_alembic_check_still_sees_drift_of_modelled_tables(tmp_path: Path) -> None:
    """The filter hides only what the models leave out: an index they describe, dropped by
    hand, is drift."""
    path = tmp_path / "drift.db"
    url = f"sqlite+aiosqlite:///{path}"
    assert _alembic("-x", f"url={url}", "upgrade", "head").returncode == 0
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX ix_evs_sessions_app_user")
    done = _alembic("-x", f"url={url}", "check")
    assert done.returncode != 0
    assert "ix_evs_sessions_app_user" in done.stdout + done.stderr
    assert "evs_memory" not in done.stdout + done.stderr
    assert "uq_evs_events_row_key" not in done.stdout + done.stderr


async def test_sql_schema_unmigrated_file_raises_with_upgrade_command(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    sqlite3.connect(path).close()
    url = f"sqlite+aiosqlite:///{path}"
    with pytest.raises(SchemaOutdatedError) as info:
        await open_store(url)
    assert f"evs db upgrade --db {url}" in str(info.value)
    assert f"alembic -x url={url} upgrade head" in str(info.value)
    assert info.value.current is None
    assert info.value.head == head_revision()


async def test_sql_schema_missing_file_is_not_created_without_auto_upgrade(
    tmp_path: Path,
) -> None:
    path = tmp_path / "new.db"
    with pytest.raises(SchemaOutdatedError):
        await open_store(path)
    assert not path.exists()


async def test_sql_schema_auto_upgrade_migrates_then_opens(tmp_path: Path) -> None:
    path = tmp_path / "auto.db"
    sqlite3.connect(path).close()
    async with await open_store(path, auto_upgrade=True) as store:
        session = await store.create_session(app_name="a", user_id="u")
        assert (await store.session_info(session.id)).version == 0
    assert await current_revision(f"sqlite+aiosqlite:///{path}") == head_revision()


@pytest.mark.postgres
async def test_sql_schema_postgres_unmigrated_raises_then_auto_upgrades(
    empty_postgres_url: str,
) -> None:
    with pytest.raises(SchemaOutdatedError) as info:
        await open_store(empty_postgres_url)
    assert f"evs db upgrade --db {empty_postgres_url}" in str(info.value)
    async with await open_store(empty_postgres_url, auto_upgrade=True) as store:
        await store.create_session(app_name="a", user_id="u", session_id="s1")
    assert await current_revision(empty_postgres_url) == head_revision()


@pytest.mark.parametrize("backend", [pytest.param("sqlite", id="sqlite"),
                                     pytest.param("postgres", id="postgres",
                                                  marks=pytest.mark.postgres)])
async def test_sql_schema_0001_database_is_outdated_then_upgrades(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'v1.db'}"
    else:
        url = request.getfixturevalue("empty_postgres_url")
    await upgrade(url, "0001")
    assert head_revision() != "0001"
    with pytest.raises(SchemaOutdatedError) as info:
        await open_store(url)
    assert (info.value.current, info.value.head) == ("0001", head_revision())
    async with await open_store(url, auto_upgrade=True, snapshot_interval=1) as store:
        await store.create_session(app_name="a", user_id="u", session_id="s",
                                   state={"app:x": 1, "user:y": 2})
        assert await store.state("s") == {"app:x": 1, "user:y": 2}
    assert await current_revision(url) == head_revision()


async def test_sql_schema_unknown_revision_is_a_storage_error(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"
    with pytest.raises(StorageError, match="Upgrading the schema") as info:
        await upgrade(url, "no-such-revision")
    assert isinstance(info.value.__cause__, CommandError)


async def test_sql_schema_unopenable_database_is_a_storage_error(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'missing-dir' / 'x.db'}"
    with pytest.raises(StorageError, match="Reading the schema revision") as info:
        await current_revision(url)
    assert f"the directory {tmp_path / 'missing-dir'} does not exist" in str(info.value)
    with pytest.raises(StorageError, match="Upgrading the schema") as info:
        await upgrade(url)
    assert f"the directory {tmp_path / 'missing-dir'} does not exist" in str(info.value)
    assert not (tmp_path / "missing-dir").exists()


async def test_sql_schema_unreadable_file_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()  # a directory where the database file should be
    url = f"sqlite+aiosqlite:///{tmp_path / 'dir.db'}"
    with pytest.raises(StorageError, match="Reading the schema revision") as info:
        await current_revision(url)
    assert isinstance(info.value.__cause__, sqlite3.Error)
    with pytest.raises(StorageError, match="Upgrading the schema") as info:
        await upgrade(url)
    assert isinstance(info.value.__cause__, sqlite3.Error)
