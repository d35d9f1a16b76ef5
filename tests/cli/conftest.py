"""Fixtures for the CLI tests: real SQLite files populated through the store API.

PostgreSQL tests use ``empty_postgres_url`` from ``tests/conftest.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from _cli_support import make_session, paused_weather_log


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
