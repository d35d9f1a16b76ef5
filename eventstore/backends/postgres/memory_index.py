"""The PostgreSQL backend's memory queries: coroutines of an asyncpg connection.

Rows live in ``evs_memory_rows``, whose stored ``tsv`` column (``to_tsvector('simple', text)``,
GIN-indexed; revision 0006) is what a search matches. The query is built from the terms with
``to_tsquery`` over words that are only letters and digits, so no user input reaches tsquery
syntax.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventstore.backends.protocol import MemoryRow

__all__ = ["clear_rows", "index", "remembered", "rows_of", "search"]

_ROW = "session_id, seq, author, timestamp, text"


def _row(values: Any) -> MemoryRow:
    return MemoryRow(session_id=values[0], seq=values[1], author=values[2], timestamp=values[3],
                     text=values[4])


async def index(
    conn: Any, *, app_name: str, user_id: str, session_id: str, upto_seq: int,
    rows: Sequence[MemoryRow], added_at: float,
) -> bool:
    """Record the session as remembered and replace its rows (inside the caller's transaction)."""
    # Locks the session row, so two processes adding one session serialize here.
    found = await conn.fetchval(
        "SELECT 1 FROM evs_sessions WHERE session_id = $1 FOR UPDATE", session_id
    )
    if found is None:
        return False
    await conn.execute(
        "INSERT INTO evs_memory_sessions (session_id, app_name, user_id, upto_seq, added_at) "
        "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session_id) DO UPDATE SET "
        "upto_seq = excluded.upto_seq, added_at = excluded.added_at",
        session_id, app_name, user_id, upto_seq, added_at,
    )
    await conn.execute("DELETE FROM evs_memory_rows WHERE session_id = $1", session_id)
    await conn.executemany(
        "INSERT INTO evs_memory_rows (session_id, seq, app_name, user_id, author, timestamp, "
        "text) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        [(session_id, r.seq, app_name, user_id, r.author, r.timestamp, r.text) for r in rows],
    )
    return True


async def search(
    conn: Any, *, app_name: str, user_id: str, terms: Sequence[str], limit: int
) -> list[MemoryRow]:
    """The rows of the app's user with a word starting with any term, best ``ts_rank``
    first, then newest."""
    if not terms:
        return []
    rows = await conn.fetch(
        f"SELECT {_ROW} FROM evs_memory_rows, "
        "to_tsquery('simple', array_to_string($3::text[], ':* | ') || ':*') AS q "
        "WHERE app_name = $1 AND user_id = $2 AND tsv @@ q "
        "ORDER BY ts_rank(tsv, q) DESC, timestamp DESC, session_id, seq LIMIT $4",
        app_name, user_id, list(terms), limit,
    )
    return [_row(r) for r in rows]


async def remembered(conn: Any) -> list[tuple[str, str, str, int]]:
    """``(session_id, app_name, user_id, upto_seq)`` of every remembered session, by id."""
    rows = await conn.fetch(
        "SELECT session_id, app_name, user_id, upto_seq FROM evs_memory_sessions "
        "ORDER BY session_id"
    )
    return [(r[0], r[1], r[2], r[3]) for r in rows]


async def rows_of(conn: Any, session_id: str) -> list[MemoryRow]:
    """The session's rows in ``seq`` order."""
    rows = await conn.fetch(
        f"SELECT {_ROW} FROM evs_memory_rows WHERE session_id = $1 ORDER BY seq", session_id
    )
    return [_row(r) for r in rows]


async def clear_rows(conn: Any) -> int:
    """Delete every row; return the count."""
    status = await conn.execute("DELETE FROM evs_memory_rows")
    return int(status.split()[-1])
