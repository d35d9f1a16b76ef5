"""Fixtures of the web UI tests: real SQLite files made by ``evs demo``, and the app."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest


def evs(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``evs`` in a subprocess (bounded), as a user would."""
    return subprocess.run([sys.executable, "-m", "runtime.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def only_session(db: Path) -> str:
    """The id of the only session of ``db``."""
    done = evs("sessions", "--db", str(db), "--json")
    [session] = orjson.loads(done.stdout)["sessions"]
    return str(session["id"])


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
