"""Fixtures for the CLI tests: real SQLite files populated through the store API, and a private
PostgreSQL database (skipped when the server is unreachable, except under CI)."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from _cli_support import make_session, paused_weather_log

POSTGRES_URL = os.environ.get(
    "EVS_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
)


@pytest.fixture(autouse=True)
def _no_env_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVS_DATABASE_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Where a test's SQLite database lives (not created)."""
    return tmp_path / "evs.db"


@pytest.fixture
def paused_db(db: Path) -> Path:
    """A SQLite database with session ``s1`` paused on a confirmation."""
    make_session(str(db), paused_weather_log(), state={"units": "metric"})
    return db


def _dsn(url: str, database: str) -> str:
    base = url.replace("postgresql+asyncpg://", "postgresql://", 1)
    return base.rsplit("/", 1)[0] + "/" + database


async def _admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(_dsn(POSTGRES_URL, "postgres"), timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """The URL of a fresh, empty PostgreSQL database private to the test."""
    name = f"evs_cli_{uuid.uuid4().hex[:12]}"
    try:
        asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # OSError, ImportError, asyncpg's own errors
        message = f"PostgreSQL at {POSTGRES_URL} is unreachable ({exc!r})."
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield POSTGRES_URL.rsplit("/", 1)[0] + "/" + name
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
