"""Backend fixtures for the eventstore tests.

``store_factory`` is parametrized over every backend (ids ``memory``, ``sqlite``, ``postgres``);
``sql_factory`` over the SQL ones only. A factory opens stores on one database private to the
test (a SQLite file in ``tmp_path``, a fresh PostgreSQL database) and closes them all afterwards.

The SQL params switch on by themselves once the SQLite and PostgreSQL backends' modules exist
(``backend_module_exists``). PostgreSQL tests skip when the server is
unreachable (set ``EVS_TEST_POSTGRES_URL``), except under ``CI``, where an unreachable server
fails them (``postgres_server_url`` in ``tests/conftest.py`` decides).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from _evs_support import (
    BackendTarget,
    StoreFactory,
    backend_module_exists,
    postgres_base_url,
    run_in_thread,
)

from eventstore import EventStore, open_store

_SQLITE_MISSING = pytest.mark.skipif(
    not backend_module_exists("eventstore.backends.sqlite.base"),
    reason="the SQLite backend is not written yet",
)
_POSTGRES_MISSING = pytest.mark.skipif(
    not backend_module_exists("eventstore.backends.postgres.base"),
    reason="the PostgreSQL backend is not written yet",
)

MEMORY = pytest.param("memory", id="memory")
SQLITE = pytest.param("sqlite", id="sqlite", marks=[_SQLITE_MISSING])
POSTGRES = pytest.param(
    "postgres", id="postgres", marks=[_POSTGRES_MISSING, pytest.mark.postgres]
)
ALL_BACKENDS = [MEMORY, SQLITE, POSTGRES]
SQL_BACKENDS = [SQLITE, POSTGRES]


# -- PostgreSQL: one fresh database per test, copied from a migrated template --------------------


def _asyncpg_dsn(url: str, database: str | None = None) -> str:
    dsn = url.replace("postgresql+asyncpg://", "postgresql://", 1)
    if database is not None:
        dsn = dsn.rsplit("/", 1)[0] + "/" + database
    return dsn


async def _admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(_asyncpg_dsn(postgres_base_url(), "postgres"), timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def postgres_template(postgres_server_url: str) -> Iterator[str]:
    """A database migrated to head once per test run; each test copies it.

    ``postgres_server_url`` (tests/conftest.py) skips when the server is unreachable, or fails
    under ``CI``.
    """
    name = f"evs_tmpl_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    run_in_thread(lambda: _admin(f'CREATE DATABASE "{name}"'))
    url = postgres_base_url().rsplit("/", 1)[0] + "/" + name

    async def migrate() -> None:
        store = await open_store(url, auto_upgrade=True)
        await store.aclose()

    try:
        run_in_thread(migrate)
        yield name
    finally:
        run_in_thread(lambda: _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _reset(database: str) -> None:
    """Empty every table of ``database`` but alembic's: as good as a fresh copy of the template."""
    import asyncpg

    conn = await asyncpg.connect(_asyncpg_dsn(postgres_base_url(), database), timeout=5)
    try:
        await conn.execute("SET lock_timeout = '5s'")
        await conn.execute("SET synchronous_commit = off")  # a test database: no need to wait
        tables = [
            r["tablename"]
            for r in await conn.fetch(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "AND tablename <> 'alembic_version'"
            )
        ]
        if tables:
            names = ", ".join(f'"{name}"' for name in tables)
            await conn.execute(f"TRUNCATE {names} RESTART IDENTITY CASCADE")
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def _postgres_pool(postgres_template: str) -> Iterator[list[str]]:
    """Databases copied from the template, emptied after each test and handed to the next.

    CREATE DATABASE costs about a second (a checkpoint); TRUNCATE a few milliseconds.
    """
    free: list[str] = []
    yield free
    for name in free:
        run_in_thread(partial(_admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def postgres_url(postgres_template: str, _postgres_pool: list[str]) -> Iterator[str]:
    """The URL of an empty PostgreSQL database (at schema head) private to this test."""
    if _postgres_pool:
        name = _postgres_pool.pop()
    else:
        name = f"evs_t_{os.getpid()}_{uuid.uuid4().hex[:10]}"
        run_in_thread(lambda: _admin(f'CREATE DATABASE "{name}" TEMPLATE "{postgres_template}"'))
    yield postgres_base_url().rsplit("/", 1)[0] + "/" + name
    try:
        run_in_thread(lambda: _reset(name))
    except Exception:  # something still holds a lock: do not reuse it
        run_in_thread(lambda: _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    else:
        _postgres_pool.append(name)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head once per test run; each test gets a copy.

    Running the migrations costs ~0.3 s per file; copying a closed database costs nothing.
    """
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"

    async def migrate() -> None:
        store = await open_store(f"sqlite+aiosqlite:///{path}", auto_upgrade=True)
        await store.aclose()

    run_in_thread(migrate)
    assert not path.with_name("template.db-wal").exists() or not path.with_name(
        "template.db-wal").stat().st_size, "the template must be checkpointed when closed"
    return path


# -- targets and factories -----------------------------------------------------------------------


def _target(name: str, request: pytest.FixtureRequest, tmp_path: Any) -> BackendTarget:
    if name == "memory":
        return BackendTarget("memory", "memory://")
    if name == "sqlite":
        path = tmp_path / "evs.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        return BackendTarget("sqlite", f"sqlite+aiosqlite:///{path}")
    if name == "postgres":
        return BackendTarget("postgres", request.getfixturevalue("postgres_url"))
    raise AssertionError(name)


@pytest.fixture(params=ALL_BACKENDS)
def backend_target(request: pytest.FixtureRequest, tmp_path: Any) -> BackendTarget:
    """A private database on each backend (for tests that drive their own event loop)."""
    return _target(request.param, request, tmp_path)


@pytest.fixture(params=SQL_BACKENDS)
def sql_target(request: pytest.FixtureRequest, tmp_path: Any) -> BackendTarget:
    """A private database on each SQL backend."""
    return _target(request.param, request, tmp_path)


@pytest.fixture
async def store_factory(backend_target: BackendTarget) -> AsyncIterator[StoreFactory]:
    """Opens stores on a private database of each backend (memory, sqlite, postgres)."""
    factory = StoreFactory(backend_target)
    yield factory
    await factory.aclose()


@pytest.fixture
async def sql_factory(sql_target: BackendTarget) -> AsyncIterator[StoreFactory]:
    """Opens stores on a private database of each SQL backend (sqlite, postgres)."""
    factory = StoreFactory(sql_target)
    yield factory
    await factory.aclose()


@pytest.fixture
async def store(store_factory: StoreFactory) -> EventStore:
    """An open store on each backend."""
    return await store_factory()
