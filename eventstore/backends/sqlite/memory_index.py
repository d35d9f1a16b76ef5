"""The SQLite backend's memory jobs: plain functions of a connection, run on a driver thread.

Rows live in ``evs_memory_rows``; ``evs_memory_fts`` (FTS5, external content) indexes their text
and is kept in step by the triggers revision 0006 created, so deleting rows (or their session)
also removes them from the index. Terms are quoted, so a query never reaches FTS5's syntax.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from eventstore.backends.protocol import MemoryRow

__all__ = ["clear_rows", "index", "remembered", "rows_of", "search"]

_ROW = "r.session_id, r.seq, r.author, r.timestamp, r.text"


def _row(values: tuple[str, int, str, float, str]) -> MemoryRow:
    return MemoryRow(session_id=values[0], seq=values[1], author=values[2], timestamp=values[3],
                     text=values[4])


def index(
    conn: sqlite3.Connection, *, app_name: str, user_id: str, session_id: str, upto_seq: int,
    rows: Sequence[MemoryRow], added_at: float,
) -> bool:
    """Record the session as remembered and replace its rows (inside the caller's transaction)."""
    if conn.execute("SELECT 1 FROM evs_sessions WHERE session_id = ?", (session_id,)).fetchone() \
            is None:
        return False
    conn.execute(
        "INSERT INTO evs_memory_sessions (session_id, app_name, user_id, upto_seq, added_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
        "upto_seq = excluded.upto_seq, added_at = excluded.added_at",
        (session_id, app_name, user_id, upto_seq, added_at),
    )
    conn.execute("DELETE FROM evs_memory_rows WHERE session_id = ?", (session_id,))
    conn.executemany(
        "INSERT INTO evs_memory_rows (session_id, seq, app_name, user_id, author, timestamp, "
        "text) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(session_id, r.seq, app_name, user_id, r.author, r.timestamp, r.text) for r in rows],
    )
    return True


def search(
    conn: sqlite3.Connection, *, app_name: str, user_id: str, terms: Sequence[str], limit: int
) -> list[MemoryRow]:
    """The rows of the app's user with a word starting with any term, best ``bm25`` first,
    then newest."""
    if not terms:
        return []
    match = " OR ".join('"' + term.replace('"', '""') + '"*' for term in terms)
    return [
        _row(values)
        for values in conn.execute(
            f"SELECT {_ROW} FROM evs_memory_fts JOIN evs_memory_rows r "
            "ON r.id = evs_memory_fts.rowid WHERE evs_memory_fts MATCH ? "
            "AND r.app_name = ? AND r.user_id = ? "
            "ORDER BY bm25(evs_memory_fts), r.timestamp DESC, r.session_id, r.seq LIMIT ?",
            (match, app_name, user_id, limit),
        )
    ]


def remembered(conn: sqlite3.Connection) -> list[tuple[str, str, str, int]]:
    """``(session_id, app_name, user_id, upto_seq)`` of every remembered session, by id."""
    return [
        (row[0], row[1], row[2], row[3])
        for row in conn.execute(
            "SELECT session_id, app_name, user_id, upto_seq FROM evs_memory_sessions "
            "ORDER BY session_id"
        )
    ]


def rows_of(conn: sqlite3.Connection, session_id: str) -> list[MemoryRow]:
    """The session's rows in ``seq`` order."""
    return [
        _row(values)
        for values in conn.execute(
            f"SELECT {_ROW} FROM evs_memory_rows r WHERE r.session_id = ? ORDER BY r.seq",
            (session_id,),
        )
    ]


def clear_rows(conn: sqlite3.Connection) -> int:
    """Delete every row and rebuild the (then empty) full-text index; return the count."""
    # First make the index agree with the rows: a row's text edited behind the store's back
    # (no trigger reindexes it) would make the delete trigger's removal fail as "malformed".
    conn.execute("INSERT INTO evs_memory_fts (evs_memory_fts) VALUES ('rebuild')")
    count = conn.execute("DELETE FROM evs_memory_rows").rowcount
    conn.execute("INSERT INTO evs_memory_fts (evs_memory_fts) VALUES ('rebuild')")
    return int(count)
