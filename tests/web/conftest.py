"""Fixtures of the web UI tests: real SQLite files made by ``evs demo``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _web_support import evs, only_session


@pytest.fixture(scope="session")
def paused_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo database paused on its confirmation (made once, copied per test)."""
    db = tmp_path_factory.mktemp("web") / "paused.db"
    done = evs("demo", "--db", str(db))
    assert done.returncode == 0, done.stderr
    return db


@pytest.fixture
def paused_demo(paused_template: Path, tmp_path: Path) -> tuple[Path, str]:
    """A private copy of the paused demo database and its session id."""
    db = tmp_path / "demo.db"
    shutil.copyfile(paused_template, db)
    return db, only_session(db)
