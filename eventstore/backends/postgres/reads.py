"""The PostgreSQL backend's cold-path reads: coroutines of an asyncpg connection.

Where PostgreSQL's SQL differs from SQLite's (the statements both write alike are the shared
base's, ``backends/sql/base.py``, named here ``sql.…``): a session's key, events bounded by
timestamp, the event tails of many sessions and the shared-state heads of many scopes in one
query each (array parameters: ``ANY``, ``unnest``; ``DISTINCT ON`` for the newest shared
snapshot); and the free key a new session gets, under a transaction-scoped lock. (The
snapshots and head states of many sessions are the ``snapshots`` room's.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eventstore._exceptions import SessionNotFoundError
from eventstore.backends import sql
from eventstore.backends.protocol import ScopeEntry, SharedSnapshot, StoredEvent, fresh_key

from .append import LOCK_KEY, lock_key

__all__ = [
    "free_key",
    "read_many",
    "read_shared_heads",
    "read_since",
]

_E_COLUMNS = sql.prefixed(sql.EVENT_COLUMNS, "e")


_KEY_SQL = "SELECT session_key FROM evs_sessions WHERE session_id = $1"
_OWNED_KEY_SQL = _KEY_SQL + " AND app_name = $2 AND user_id = $3"


async def session_key(conn: Any, session_id: str, owner: tuple[str, str] | None) -> int:
    """The key of the session stored under ``session_id``; SessionNotFoundError when there
    is none (or it is not ``owner``'s, when given)."""
    key = await (conn.fetchval(_KEY_SQL, session_id) if owner is None
                 else conn.fetchval(_OWNED_KEY_SQL, session_id, *owner))
    if key is None:
        raise SessionNotFoundError(session_id)
    return int(key)


async def read_since(
    conn: Any, session_id: str, *, timestamp: float, upto: int | None, newest: int | None,
    owner: tuple[str, str] | None = None,
) -> list[StoredEvent]:
    """Events ``seq <= upto`` with ``timestamp >=`` the bound, oldest first (the newest N);
    SessionNotFoundError when the session is missing (or not ``owner``'s)."""
    base = await session_key(conn, session_id, owner) << sql.SEQ_BITS
    rows = await conn.fetch(
        f"SELECT {sql.EVENT_COLUMNS} FROM evs_events WHERE row_key > $1 AND row_key <= $2 "
        "AND timestamp >= $3 ORDER BY row_key DESC LIMIT $4",
        base, base + sql.seq_bound(upto), timestamp, newest,
    )
    rows.reverse()
    return sql.stored_events(session_id, rows)


async def read_shared_heads(
    conn: Any, app_name: str, user_ids: Sequence[str | None]
) -> dict[str | None, tuple[SharedSnapshot | None, list[ScopeEntry]]]:
    """Each scope's newest shared snapshot and its stream entries after it
    (``Backend.read_shared_heads``), in two queries."""
    scopes = {sql.shared_scope(u): u for u in user_ids}
    names = list(scopes)
    snapshots = {
        row[0]: SharedSnapshot(position=int(row[1]), count=int(row[2]),
                               state=sql.payload_bytes(row[3]), chain_hash=bytes(row[4]),
                               mac=None if row[5] is None else bytes(row[5]))
        for row in await conn.fetch(
            "SELECT DISTINCT ON (sn.user_id) sn.user_id, sn.position, sn.event_count, sn.state, "
            f"sn.chain_hash, sn.mac FROM evs_shared_snapshots sn {sql.BOUND_SHARED} "
            "WHERE sn.app_name = $1 AND sn.user_id = ANY($2::varchar[]) "
            "ORDER BY sn.user_id, sn.position DESC", app_name, names)
    }
    entries: dict[str, list[ScopeEntry]] = {n: [] for n in names}
    columns = sql.prefixed(sql.SCOPE_COLUMNS, "e")
    for entry in sql.scope_entries(await conn.fetch(
        f"SELECT {columns} FROM unnest($2::varchar[], $3::bigint[]) AS w(u, low) "
        "JOIN evs_scope_entries e ON e.app_name = $1 AND e.user_id = w.u "
        "AND e.stream_seq > w.low ORDER BY e.user_id, e.stream_seq",
        app_name, names, [snapshots[n].count if n in snapshots else 0 for n in names],
    )):
        entries[entry.user_id].append(entry)
    return {scopes[n]: (snapshots.get(n), entries[n]) for n in names}


async def read_many(conn: Any, after: Mapping[str, int]) -> dict[str, list[StoredEvent]]:
    """Each session's events after its given seq, oldest first, in one query."""
    found: dict[str, list[StoredEvent]] = {sid: [] for sid in after}
    if not after:
        return found
    rows = await conn.fetch(
        f"SELECT w.sid, {_E_COLUMNS} FROM unnest($1::varchar[], $2::bigint[]) AS w(sid, low) "
        "JOIN evs_sessions s ON s.session_id = w.sid "
        f"JOIN evs_events e ON e.row_key > (s.session_key << {sql.SEQ_BITS}) + w.low "
        f"AND e.row_key < (s.session_key + 1) << {sql.SEQ_BITS} ORDER BY e.row_key",
        list(after), [sql.seq_bound(v) for v in after.values()],
    )
    for row in rows:
        found[row[0]].append(sql.stored_event(row[0], tuple(row)[1:]))
    return found


async def free_key(conn: Any, wanted: str) -> str:
    """The key a new session gets: ``wanted`` (the id its app gave) unless a session holds it,
    else a fresh one (``Backend.create_session``). The transaction-scoped lock on ``wanted``
    makes a concurrent creation of another session with that key wait for this transaction,
    then see its row: two sessions never both pick ``wanted``."""
    await conn.execute("SELECT pg_advisory_xact_lock($1, $2)", LOCK_KEY, lock_key(wanted))
    taken = await conn.fetchval("SELECT 1 FROM evs_sessions WHERE session_id = $1", wanted)
    return wanted if taken is None else fresh_key()
