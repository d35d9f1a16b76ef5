"""Fixtures for the CLI tests: real SQLite files populated through the store API.

PostgreSQL tests use ``empty_postgres_url`` from ``tests/conftest.py``."""

from __future__ import annotations

import shutil
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


@pytest.fixture(scope="session")
def paused_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The paused database, built once per run through the store API; tests get a copy.

    Building it (migrating a new file, appending the log) costs about 0.3 s of CPU; a copy of the
    closed file costs nothing, and about a hundred CLI tests start from it.
    """
    path = tmp_path_factory.mktemp("cli-paused") / "evs.db"
    make_session(str(path), paused_weather_log(), state={"units": "metric"})
    wal = path.with_name("evs.db-wal")
    assert not wal.exists() or not wal.stat().st_size, "the template must be checkpointed"
    return path


@pytest.fixture
def paused_db(db: Path, paused_template: Path) -> Path:
    """A SQLite database with session ``s1`` paused on a confirmation (a private copy)."""
    shutil.copyfile(paused_template, db)
    return db
