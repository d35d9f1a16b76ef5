"""Fixtures shared by every test package.

PostgreSQL: ``EVS_TEST_POSTGRES_URL`` (default ``postgresql+asyncpg://postgres@127.0.0.1:5432/test``)
names the server. When it is unreachable the tests that need it skip, saying how to enable them —
except when ``CI`` is set, where they fail: CI must not go green without PostgreSQL.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import uuid
from collections.abc import Iterator

import pytest

POSTGRES_URL_ENV = "EVS_TEST_POSTGRES_URL"
DEFAULT_TEST_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


def test_postgres_url() -> str:
    """The PostgreSQL server URL the tests use."""
    return os.environ.get(POSTGRES_URL_ENV, DEFAULT_TEST_POSTGRES_URL)


test_postgres_url.__test__ = False  # type: ignore[attr-defined]


def _dsn(url: str, database: str) -> str:
    base = url.replace("postgresql+asyncpg://", "postgresql://", 1)
    return base.rsplit("/", 1)[0] + "/" + database


def _admin(url: str, *statements: str) -> None:
    async def run() -> None:
        import asyncpg

        conn = await asyncpg.connect(_dsn(url, "postgres"), timeout=5)
        try:
            for sql in statements:
                await conn.execute(sql)
        finally:
            await conn.close()

    # A private loop in a worker thread: sync fixtures must not touch pytest-asyncio's loop.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, run()).result()


@pytest.fixture(scope="session")
def postgres_server_url() -> str:
    """The URL of a reachable PostgreSQL server; skips (fails under ``CI``) when there is none."""
    url = test_postgres_url()
    try:
        _admin(url, "SELECT 1")
    except Exception as exc:  # OSError, ImportError, asyncpg's own (auth, unknown database …)
        message = (
            f"PostgreSQL not reachable at {url} ({type(exc).__name__}: {exc}); start it or set "
            f"{POSTGRES_URL_ENV}"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return url


@pytest.fixture
def empty_postgres_url(postgres_server_url: str) -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database private to this test (dropped after it).

    Unique names make parallel test runs against one server safe.
    """
    name = f"evs_e_{os.getpid()}_{uuid.uuid4().hex[:10]}"
    _admin(postgres_server_url, f'CREATE DATABASE "{name}"')
    try:
        yield postgres_server_url.rsplit("/", 1)[0] + "/" + name
    finally:
        _admin(postgres_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
