"""Databases and paths as users give them: file names with ``%``, ``?``, ``#`` and spaces,
databases migrated by a newer version, tables without ``alembic_version``, read-only files,
directories that are the problem — on SQLite files and PostgreSQL."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from _cli_support import invoke, make_session, paused_weather_log

from eventstore._migrate import head_revision
from eventstore._open import resolve_url
from eventstore.backends.sql import sqlite_file

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.mark.parametrize("name", ["new%41.db", "we?ird.db", "a#b.db", "my db.db",
                                  "pct%20and?q#frag.db"])
def test_plain_paths_name_exactly_that_file(tmp_path: Path, name: str) -> None:
    db = tmp_path / name
    assert sqlite_file(resolve_url(str(db))) == db
    make_session(str(db), paused_weather_log())
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db") == [name]
    listed = invoke("sessions", "--db", str(db), "--json")
    assert listed.exit_code == 0, listed.stderr
    assert [s["id"] for s in orjson.loads(listed.stdout)["sessions"]] == ["s1"]
    assert invoke("db", "current", "--db", str(db)).stdout == f"{head_revision()} (head)\n"
    assert invoke("verify", "--db", str(db)).exit_code == 0


def test_urls_stay_urls(tmp_path: Path) -> None:
    db = tmp_path / "newA.db"
    make_session(f"sqlite+aiosqlite:///{tmp_path}/new%41.db", [])
    assert db.is_file()
    assert not (tmp_path / "new%41.db").exists()


def _set_revision(db: Path, revision: str | None) -> None:
    with sqlite3.connect(db) as conn:
        if revision is None:
            conn.execute("DROP TABLE alembic_version")
        else:
            conn.execute("UPDATE alembic_version SET version_num = ?", (revision,))


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["sessions"], id="sessions"),
        pytest.param(["show", "s1"], id="show"),
        pytest.param(["verify"], id="verify"),
        pytest.param(["confirm", "s1", "confirm-1", "--yes"], id="confirm"),
        pytest.param(["demo"], id="demo"),
        pytest.param(["db", "upgrade"], id="db-upgrade"),
    ],
)
def test_a_newer_database_says_upgrade_agent_eventstore(paused_db: Path,
                                                        args: list[str]) -> None:
    _set_revision(paused_db, "9999")
    result = invoke(*args, "--db", str(paused_db))
    assert result.exit_code == 1
    assert "is at schema revision 9999" in result.stderr
    assert "Upgrade agent-eventstore (pip install -U agent-eventstore)" in result.stderr
    assert "run: evs db upgrade" not in result.stderr
    with sqlite3.connect(paused_db) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("9999",)]


def test_db_current_names_a_newer_database(paused_db: Path) -> None:
    _set_revision(paused_db, "9999")
    result = invoke("db", "current", "--db", str(paused_db))
    assert result.exit_code == 0
    assert result.stdout.startswith("9999 (newer than this agent-eventstore")
    assert "upgrade agent-eventstore" in result.stdout
    assert "evs db upgrade" not in result.stdout
    as_json = orjson.loads(invoke("db", "current", "--db", str(paused_db), "--json").stdout)
    assert as_json == {"current": "9999", "head": head_revision(), "at_head": False,
                       "newer": True}


@pytest.mark.parametrize("how", ["dropped", "emptied"])
@pytest.mark.parametrize("args", [["db", "current"], ["db", "upgrade"], ["sessions"]],
                         ids=" ".join)
def test_tables_without_alembic_version_get_a_clear_message(
    paused_db: Path, args: list[str], how: str
) -> None:
    with sqlite3.connect(paused_db) as conn:
        conn.execute("DROP TABLE alembic_version" if how == "dropped"
                     else "DELETE FROM alembic_version")
    result = invoke(*args, "--db", str(paused_db))
    assert result.exit_code == 1
    assert "has agent-eventstore tables but no schema revision in alembic_version" in (
        result.stderr)
    assert "stamp head" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    # Nothing was created or changed: the sessions are still there.
    with sqlite3.connect(paused_db) as conn:
        assert conn.execute("SELECT count(*) FROM evs_events").fetchone() == (9,)


def test_db_current_on_a_read_only_file(paused_db: Path) -> None:
    with sqlite3.connect(paused_db) as conn:  # a WAL database: readers need -shm
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    paused_db.chmod(0o444)
    try:
        result = invoke("db", "current", "--db", str(paused_db))
        assert result.exit_code == 0, result.stderr
        assert result.stdout == f"{head_revision()} (head)\n"
    finally:
        paused_db.chmod(0o644)


def _as_nobody() -> list[str]:
    """A command prefix that runs a child as ``nobody`` (root writes any directory, so the
    permission error only happens for another user). CAP_DAC_READ_SEARCH lets the child read and
    traverse root's directories (the interpreter may live there) but never write."""
    if shutil.which("setpriv"):
        return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    if shutil.which("runuser"):
        return ["runuser", "-u", "nobody", "--"]
    pytest.skip("running as root, and neither setpriv nor runuser exists to drop privileges")


def test_permission_errors_name_the_directory(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        if AS_ROOT:
            child = subprocess.run(
                [*_as_nobody(), sys.executable, "-m", "runtime.cli", "demo", "--db",
                 str(locked / "evs.db")],
                capture_output=True, text=True, timeout=120, check=False,
            )
            code, stderr = child.returncode, child.stderr
        else:
            result = invoke("demo", "--db", str(locked / "evs.db"))
            code, stderr = result.exit_code, result.stderr
        assert code == 1, stderr
        assert f"the directory {locked} is not writable" in stderr
        assert not (locked / "evs.db").exists()
    finally:
        locked.chmod(0o755)


def test_a_missing_directory_is_named(tmp_path: Path) -> None:
    result = invoke("demo", "--db", str(tmp_path / "nowhere" / "evs.db"))
    assert result.exit_code == 1
    assert f"the directory {tmp_path / 'nowhere'} does not exist" in result.stderr


@pytest.mark.postgres
def test_postgres_newer_and_unversioned(empty_postgres_url: str) -> None:
    import asyncio

    import asyncpg

    url = empty_postgres_url
    assert invoke("db", "upgrade", "--db", url).exit_code == 0

    async def sql(statement: str) -> None:
        conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(sql("UPDATE alembic_version SET version_num = '9999'"))
    for args in (["db", "upgrade"], ["sessions"]):
        result = invoke(*args, "--db", url)
        assert result.exit_code == 1
        assert "Upgrade agent-eventstore" in result.stderr
    assert "newer than this agent-eventstore" in invoke("db", "current", "--db", url).stdout
    asyncio.run(sql("DROP TABLE alembic_version"))
    for args in (["db", "upgrade"], ["db", "current"], ["sessions"]):
        result = invoke(*args, "--db", url)
        assert result.exit_code == 1
        assert "no schema revision in alembic_version" in result.stderr


def test_an_unwritable_directory_is_named(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the process runs as root, no directory is unwritable; the check behind the
    message is exercised by denying access to one directory."""
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access

    def access(path: object, mode: int, **kwargs: object) -> bool:
        if Path(str(path)) == locked and mode & os.W_OK:
            return False
        return real_access(path, mode)  # type: ignore[arg-type]

    monkeypatch.setattr("eventstore.backends.sqlite.driver.os.access", access)
    result = invoke("demo", "--db", str(locked / "evs.db"))
    assert result.exit_code == 1
    assert f"the directory {locked} is not writable (SQLite creates the database there)" in (
        result.stderr)
    assert not (locked / "evs.db").exists()
