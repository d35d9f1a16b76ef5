"""SQLite's events in commit order (revision 0012) up and down on a populated file.

The upgrade gives the events table a rowid ``id`` in commit order and makes ``row_key`` unique
through an index of its own; the downgrade puts ``row_key`` back as the rowid. Every column of
every row survives both ways, the logs still verify, and appends afterwards land at the end of
the table in the order they committed.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _evs_support import call_event, delta_event, full_dump, response_event, text_event
from alembic import command

from eventstore import EventStore, open_store
from eventstore._migrate import _config, current_revision, head_revision, upgrade
from eventstore.commands._maintain import verify_session

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

_BEFORE = "0011"
_COLUMNS = (
    "row_key, position, session_id, seq, event_id, kind, invocation_id, author, timestamp, "
    "shared_state, app_name, user_id, schema_version, payload, chain_hash, signature"
)
SESSIONS = ["a", "b", "c", "d"]


def _rows(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"SELECT {_COLUMNS} FROM evs_events ORDER BY row_key").fetchall()


def _ids_by_row_key(path: Path) -> list[tuple[int, int]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT id, row_key FROM evs_events ORDER BY row_key").fetchall()


def _key_columns(path: Path) -> dict[str, int]:
    """Each column of evs_events and its place in the primary key (0: not in it)."""
    with sqlite3.connect(path) as conn:
        return {row[1]: row[5] for row in conn.execute("PRAGMA table_info(evs_events)")}


def _integrity(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


async def _interleave(store: EventStore, rounds: int, start: int) -> None:
    """Append to every session in turn, so their events are interleaved in commit order."""
    for n in range(start, start + rounds):
        for sid in SESSIONS:
            version = await store.version(sid)
            event = [text_event(f"{sid}{n}"), delta_event({"k": n, "user:seen": n}),
                     call_event(f"{sid}-c{n}"), response_event(f"{sid}-c{n - 1}")][n % 4]
            await store.append(sid, event, expected_version=version)


async def _verified(store: EventStore) -> None:
    page = await store.list_sessions(limit=100)
    assert {info.id for info in page.sessions} >= set(SESSIONS)
    for info in page.sessions:
        assert await verify_session(store, info.id) == [], info.id


async def test_events_layout_migration_round_trip_keeps_every_row(tmp_path: Path) -> None:
    path = tmp_path / "layout.db"
    url = f"sqlite+aiosqlite:///{path}"
    store = await open_store(url, auto_upgrade=True)
    try:
        for sid in SESSIONS:
            await store.create_session(app_name="app", user_id="u", session_id=sid)
        await _interleave(store, 12, 0)
        await store.fork("a", at=8, new_session_id="fork")
        dump = await full_dump(store)
    finally:
        await store.aclose()
    rows = _rows(path)
    assert len(rows) == 12 * len(SESSIONS) + 8
    # At head the ids follow commit order: the sessions' rows are interleaved in the table.
    ids = _ids_by_row_key(path)
    assert [i for i, _ in ids] != sorted(i for i, _ in ids)

    await asyncio.to_thread(command.downgrade, _config(url), _BEFORE)
    assert await current_revision(url) == _BEFORE
    assert _key_columns(path)["row_key"] == 1
    assert "id" not in _key_columns(path)
    assert _rows(path) == rows
    assert _integrity(path) == "ok"

    await upgrade(url)
    assert await current_revision(url) == head_revision()
    columns = _key_columns(path)
    assert columns["id"] == 1
    assert columns["row_key"] == 0
    assert _rows(path) == rows
    assert _integrity(path) == "ok"
    # Copied in row_key order, so a session's old events are together again.
    ids = _ids_by_row_key(path)
    assert [i for i, _ in ids] == sorted(i for i, _ in ids)
    newest_old = max(i for i, _ in ids)

    store = await open_store(url)
    try:
        assert await full_dump(store) == dump
        await _verified(store)
        await _interleave(store, 3, 12)
        await _verified(store)
    finally:
        await store.aclose()
    with sqlite3.connect(path) as conn:
        new = conn.execute(
            "SELECT session_id, seq FROM evs_events WHERE id > ? ORDER BY id", (newest_old,)
        ).fetchall()
    # The appends after the upgrade sit at the end of the table, in the order they committed.
    assert new == [(sid, 12 + n) for n in range(1, 4) for sid in SESSIONS]


async def test_events_layout_row_key_stays_unique(tmp_path: Path) -> None:
    path = tmp_path / "unique.db"
    store = await open_store(f"sqlite+aiosqlite:///{path}", auto_upgrade=True)
    try:
        await store.create_session(app_name="app", user_id="u", session_id="s")
        await store.append("s", [text_event("one"), text_event("two")], expected_version=0)
    finally:
        await store.aclose()
    with sqlite3.connect(path) as conn:
        row = conn.execute(f"SELECT {_COLUMNS} FROM evs_events WHERE seq = 2").fetchone()
        copy = (row[0], *row[1:4], "another-id", *row[5:])
        marks = ", ".join("?" * len(copy))
        with pytest.raises(sqlite3.IntegrityError, match="row_key"):
            conn.execute(f"INSERT INTO evs_events ({_COLUMNS}) VALUES ({marks})", copy)


async def test_events_layout_upgrade_after_an_interrupted_one(tmp_path: Path) -> None:
    """An upgrade that stopped after creating the copy (pysqlite runs that CREATE TABLE before
    the transaction the row copy opens) leaves an empty ``evs_events_next``; the next upgrade
    goes through and keeps every row."""
    path = tmp_path / "interrupted.db"
    url = f"sqlite+aiosqlite:///{path}"
    store = await open_store(url, auto_upgrade=True)
    try:
        await store.create_session(app_name="app", user_id="u", session_id="s")
        await store.append("s", [text_event("one"), text_event("two")], expected_version=0)
    finally:
        await store.aclose()
    await asyncio.to_thread(command.downgrade, _config(url), _BEFORE)
    rows = _rows(path)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE evs_events_next (id INTEGER PRIMARY KEY, row_key INTEGER)")
    await upgrade(url)
    assert await current_revision(url) == head_revision()
    assert _rows(path) == rows
    assert _integrity(path) == "ok"
    with sqlite3.connect(path) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert "evs_events_next" not in names
