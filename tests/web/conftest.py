"""Fixtures of the web UI tests: real SQLite files made by ``evs demo``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _web_support import evs, only_session


@pytest.fixture(scope="session")
def paused_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A demo database paused on its confirmation and its session's id (made once, copied
    per test: a copy holds the same session, so its id is looked up once, not per test)."""
    db = tmp_path_factory.mktemp("web") / "paused.db"
    done = evs("demo", "--db", str(db))
    assert done.returncode == 0, done.stderr
    return db, only_session(db)


@pytest.fixture
def paused_demo(paused_template: tuple[Path, str], tmp_path: Path) -> tuple[Path, str]:
    """A private copy of the paused demo database and its session id."""
    template, sid = paused_template
    db = tmp_path / "demo.db"
    shutil.copyfile(template, db)
    return db, sid
