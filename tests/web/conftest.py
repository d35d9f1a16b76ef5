"""Fixtures of the web UI tests: real SQLite files made by ``evs demo`` or written in process
(``paused``: no subprocess, for the quick subset)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from _web_support import evs, only_session, paused_log

from eventstore import open_store


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


@pytest.fixture
def paused(tmp_path: Path) -> tuple[Path, str]:
    """A database holding one session ``s1`` (app ``weather``, user ``ada``) paused on
    confirmation ``confirm-1`` (``paused_log``), and its id."""
    db = tmp_path / "paused.db"

    async def work() -> None:
        async with await open_store(str(db), auto_upgrade=True) as store:
            await store.create_session(app_name="weather", user_id="ada", session_id="s1",
                                       events=paused_log("ada"))

    asyncio.run(work())
    return db, "s1"
