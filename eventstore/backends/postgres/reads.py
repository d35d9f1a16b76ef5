"""The PostgreSQL backend's cold-path reads: coroutines of an asyncpg connection.

Where PostgreSQL's SQL differs from SQLite's (the statements both write alike are the shared
base's, ``backends/sql/base.py``): a session's key, events bounded by timestamp, and the
snapshots, head states and event tails of many sessions in one query each (array parameters:
``ANY``, ``unnest``; ``DISTINCT ON`` for the newest snapshot); and the free key a new session
gets, under a transaction-scoped lock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eventstore._exceptions import SessionNotFoundError
from eventstore.backends.protocol import (
    HeadState,
    ScopeEntry,
    SharedSnapshot,
    StoredEvent,
    fresh_key,
)
from eventstore.backends.sql import (
    BOUND_SHARED,
    EVENT_COLUMNS,
    SCOPE_COLUMNS,
    SEQ_BITS,
    payload_bytes,
    scope_entries,
    seq_bound,
    shared_scope,
    stored_event,
    stored_events,
)

from .append import LOCK_KEY, lock_key
from .snapshots import BOUND_SNAPSHOT

__all__ = [
    "free_key",
    "load_head_states",
    "load_snapshots",
    "read_many",
    "read_shared_heads",
    "read_since",
    "save_head_states",
]

_E_COLUMNS = ", ".join("e." + c.strip() for c in EVENT_COLUMNS.split(","))


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
    base = await session_key(conn, session_id, owner) << SEQ_BITS
    rows = await conn.fetch(
        f"SELECT {EVENT_COLUMNS} FROM evs_events WHERE row_key > $1 AND row_key <= $2 "
        "AND timestamp >= $3 ORDER BY row_key DESC LIMIT $4",
        base, base + seq_bound(upto), timestamp, newest,
    )
    rows.reverse()
    return stored_events(session_id, rows)





async def load_snapshots(conn: Any, session_ids: Sequence[str]) -> dict[str, HeadState]:
    """The newest snapshot of each session that has one still bound to its event."""
    rows = await conn.fetch(
        "SELECT DISTINCT ON (sn.session_id) sn.session_id, sn.seq, sn.state, sn.chain_hash, "
        f"sn.mac FROM evs_snapshots sn {BOUND_SNAPSHOT} "
        "WHERE sn.session_id = ANY($1::varchar[]) ORDER BY sn.session_id, sn.seq DESC",
        list(session_ids),
    )
    return {row[0]: HeadState(seq=int(row[1]), state=bytes(row[2]), chain_hash=bytes(row[3]),
                              mac=None if row[4] is None else bytes(row[4])) for row in rows}


async def read_shared_heads(
    conn: Any, app_name: str, user_ids: Sequence[str | None]
) -> dict[str | None, tuple[SharedSnapshot | None, list[ScopeEntry]]]:
    """Each scope's newest shared snapshot and its stream entries after it
    (``Backend.read_shared_heads``), in two queries."""
    scopes = {shared_scope(u): u for u in user_ids}
    names = list(scopes)
    snapshots = {
        row[0]: SharedSnapshot(position=int(row[1]), count=int(row[2]),
                               state=payload_bytes(row[3]), chain_hash=bytes(row[4]),
                               mac=None if row[5] is None else bytes(row[5]))
        for row in await conn.fetch(
            "SELECT DISTINCT ON (sn.user_id) sn.user_id, sn.position, sn.event_count, sn.state, "
            f"sn.chain_hash, sn.mac FROM evs_shared_snapshots sn {BOUND_SHARED} "
            "WHERE sn.app_name = $1 AND sn.user_id = ANY($2::varchar[]) "
            "ORDER BY sn.user_id, sn.position DESC", app_name, names)
    }
    entries: dict[str, list[ScopeEntry]] = {n: [] for n in names}
    columns = ", ".join("e." + c.strip() for c in SCOPE_COLUMNS.split(","))
    for entry in scope_entries(await conn.fetch(
        f"SELECT {columns} FROM unnest($2::varchar[], $3::bigint[]) AS w(u, low) "
        "JOIN evs_scope_entries e ON e.app_name = $1 AND e.user_id = w.u "
        "AND e.stream_seq > w.low ORDER BY e.user_id, e.stream_seq",
        app_name, names, [snapshots[n].count if n in snapshots else 0 for n in names],
    )):
        entries[entry.user_id].append(entry)
    return {scopes[n]: (snapshots.get(n), entries[n]) for n in names}


async def load_head_states(conn: Any, session_ids: Sequence[str]) -> dict[str, HeadState]:
    """The head state of each session that has one still current (its event at ``seq``
    holds its chain hash), in one query."""
    rows = await conn.fetch(
        "SELECT h.session_id, h.seq, h.chain_hash, h.state, h.mac FROM evs_head_states h "
        "JOIN evs_sessions s ON s.session_id = h.session_id "
        f"JOIN evs_events e ON e.row_key = (s.session_key << {SEQ_BITS}) + h.seq "
        "WHERE h.session_id = ANY($1::varchar[]) AND e.chain_hash = h.chain_hash",
        list(session_ids),
    )
    return {row[0]: HeadState(seq=int(row[1]), chain_hash=bytes(row[2]), state=bytes(row[3]),
                              mac=None if row[4] is None else bytes(row[4]))
            for row in rows}


async def save_head_states(conn: Any, states: Mapping[str, HeadState]) -> None:
    """Store (or replace) each head state whose session's event at ``seq`` holds its chain
    hash (``Backend.save_head_states``), in one statement."""
    items = list(states.items())
    await conn.execute(
        "INSERT INTO evs_head_states (session_id, seq, chain_hash, state, mac) "
        "SELECT w.sid, w.seq, w.chain_hash, w.state, w.mac FROM unnest($1::varchar[], "
        "$2::int[], $3::bytea[], $4::bytea[], $5::bytea[]) AS w(sid, seq, chain_hash, state, mac) "
        "JOIN evs_sessions s ON s.session_id = w.sid "
        f"JOIN evs_events e ON e.row_key = (s.session_key << {SEQ_BITS}) + w.seq "
        "AND e.chain_hash = w.chain_hash "
        "ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, "
        "chain_hash = excluded.chain_hash, state = excluded.state, mac = excluded.mac",
        [sid for sid, _ in items], [h.seq for _, h in items], [h.chain_hash for _, h in items],
        [h.state for _, h in items], [h.mac for _, h in items],
    )


async def read_many(conn: Any, after: Mapping[str, int]) -> dict[str, list[StoredEvent]]:
    """Each session's events after its given seq, oldest first, in one query."""
    found: dict[str, list[StoredEvent]] = {sid: [] for sid in after}
    if not after:
        return found
    rows = await conn.fetch(
        f"SELECT w.sid, {_E_COLUMNS} FROM unnest($1::varchar[], $2::bigint[]) AS w(sid, low) "
        "JOIN evs_sessions s ON s.session_id = w.sid "
        f"JOIN evs_events e ON e.row_key > (s.session_key << {SEQ_BITS}) + w.low "
        f"AND e.row_key < (s.session_key + 1) << {SEQ_BITS} ORDER BY e.row_key",
        list(after), [seq_bound(v) for v in after.values()],
    )
    for row in rows:
        found[row[0]].append(stored_event(row[0], tuple(row)[1:]))
    return found


async def free_key(conn: Any, wanted: str) -> str:
    """The key a new session gets: ``wanted`` (the id its app gave) unless a session holds it,
    else a fresh one (``Backend.create_session``). The transaction-scoped lock on ``wanted``
    makes a concurrent creation of another session with that key wait for this transaction,
    then see its row: two sessions never both pick ``wanted``."""
    await conn.execute("SELECT pg_advisory_xact_lock($1, $2)", LOCK_KEY, lock_key(wanted))
    taken = await conn.fetchval("SELECT 1 FROM evs_sessions WHERE session_id = $1", wanted)
    return wanted if taken is None else fresh_key()
