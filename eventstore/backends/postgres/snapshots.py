"""The PostgreSQL backend's snapshot queries: coroutines of an asyncpg connection.

Snapshots are caches (droppable, rebuilt from the log): ``evs_snapshots`` holds a session's own
state at a ``seq``, ``evs_shared_snapshots`` an app's ``app:`` state (user ``''``) or one user's
``user:`` state at a ``position``. A snapshot is read only while what it folded is still there
(the event at its seq, the stream entry at its count and position, holds the chain hash it
names: revision 0020); on a keyed store the reader checks its MAC (``eventstore._statefold``).
The other caches of state live here too: the session caches (``evs_session_caches``) and the
head states (``evs_head_states``); the snapshots and head states of many sessions are read in
one query each (``ANY``, ``unnest``; ``DISTINCT ON`` for the newest snapshot).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eventstore._exceptions import SessionNotFoundError
from eventstore.backends.protocol import HeadState, SharedSnapshot
from eventstore.backends.sql import BOUND_SHARED, MAX_POSITION, SEQ_BITS, seq_bound, shared_scope

__all__ = ["BOUND_SNAPSHOT", "drop_all", "load", "load_cache", "load_head_states", "load_many",
           "load_shared", "save", "save_cache", "save_head_states", "save_shared"]


BOUND_SNAPSHOT = (
    "JOIN evs_sessions s ON s.session_id = sn.session_id "
    "JOIN evs_events e ON e.row_key = (s.session_key << 32) + sn.seq "
    "AND e.chain_hash = sn.chain_hash"
)
"""Joined to ``evs_snapshots sn``: keeps the snapshots whose event still has their hash."""


async def load(conn: Any, session_id: str, upto: int | None) -> HeadState | None:
    """Return the session's newest snapshot at or below ``upto`` still bound to its event, or
    None; raises SessionNotFoundError when the session does not exist."""
    row = await conn.fetchrow(
        f"SELECT sn.seq, sn.state, sn.chain_hash, sn.mac FROM evs_snapshots sn {BOUND_SNAPSHOT} "
        "WHERE sn.session_id = $1 AND sn.seq <= $2 ORDER BY sn.seq DESC LIMIT 1",
        session_id, seq_bound(upto),
    )
    if row is not None:
        return HeadState(seq=int(row[0]), state=bytes(row[1]), chain_hash=bytes(row[2]),
                         mac=None if row[3] is None else bytes(row[3]))
    if await conn.fetchval("SELECT 1 FROM evs_sessions WHERE session_id = $1", session_id):
        return None
    raise SessionNotFoundError(session_id)


async def save(conn: Any, session_id: str, snapshot: HeadState) -> None:
    """Store (or replace) the session's snapshot at ``snapshot.seq``."""
    await conn.execute(
        "INSERT INTO evs_snapshots (session_id, seq, state, chain_hash, mac) "
        "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session_id, seq) DO UPDATE SET "
        "state = excluded.state, chain_hash = excluded.chain_hash, mac = excluded.mac",
        session_id, snapshot.seq, snapshot.state, snapshot.chain_hash, snapshot.mac,
    )


async def drop_all(conn: Any) -> int:
    """Delete every snapshot of both kinds, every head state and every session cache; return
    how many there were."""
    dropped = 0
    for table in ("evs_snapshots", "evs_shared_snapshots", "evs_head_states",
                  "evs_session_caches"):
        status = await conn.execute(f"DELETE FROM {table}")
        dropped += int(status.rsplit(" ", 1)[-1])
    return dropped


async def load_cache(conn: Any, session_id: str, name: str,
                     owner: tuple[str, str] | None = None) -> tuple[int, bytes] | None:
    """Return ``(seq, data)`` of the session's cache ``name``, or None; SessionNotFoundError
    when ``owner`` is given and holds no session under ``session_id``."""
    if owner is None:
        row = await conn.fetchrow(
            "SELECT seq, data FROM evs_session_caches WHERE session_id = $1 AND name = $2",
            session_id, name,
        )
    else:
        row = await conn.fetchrow(
            "SELECT c.seq, c.data FROM evs_sessions s LEFT JOIN evs_session_caches c "
            "ON c.session_id = s.session_id AND c.name = $2 "
            "WHERE s.session_id = $1 AND s.app_name = $3 AND s.user_id = $4",
            session_id, name, *owner,
        )
        if row is None:
            raise SessionNotFoundError(session_id)
    return None if row is None or row[0] is None else (int(row[0]), bytes(row[1]))


async def save_cache(conn: Any, session_id: str, name: str, seq: int, data: bytes,
                     owner: tuple[str, str] | None = None) -> None:
    """Store (or replace) the session's cache ``name``; nothing when the session is gone
    (SessionNotFoundError then, and when it is not ``owner``'s, if ``owner`` is given)."""
    whose = "" if owner is None else " AND app_name = $5 AND user_id = $6"
    status = await conn.execute(
        "INSERT INTO evs_session_caches (session_id, name, seq, data) "
        "SELECT $1::varchar, $2::varchar, $3::integer, $4::bytea "
        f"WHERE EXISTS (SELECT 1 FROM evs_sessions WHERE session_id = $1{whose}) "
        "ON CONFLICT (session_id, name) DO UPDATE SET seq = excluded.seq, data = excluded.data",
        session_id, name, seq, data, *(owner or ()),
    )
    if owner is not None and status.endswith(" 0"):
        raise SessionNotFoundError(session_id)


async def load_shared(
    conn: Any, app_name: str, user_id: str | None, upto_position: int | None
) -> SharedSnapshot | None:
    """Return the scope's newest shared snapshot at or below ``upto_position`` still bound to
    its stream entry, or None."""
    row = await conn.fetchrow(
        "SELECT sn.position, sn.event_count, sn.state, sn.chain_hash, sn.mac "
        f"FROM evs_shared_snapshots sn {BOUND_SHARED} "
        "WHERE sn.app_name = $1 AND sn.user_id = $2 AND sn.position <= $3 "
        "ORDER BY sn.position DESC LIMIT 1",
        app_name, shared_scope(user_id),
        MAX_POSITION if upto_position is None else upto_position,
    )
    return None if row is None else SharedSnapshot(
        position=int(row[0]), count=int(row[1]), state=bytes(row[2]),
        chain_hash=bytes(row[3]), mac=None if row[4] is None else bytes(row[4]),
    )


async def save_shared(
    conn: Any, app_name: str, user_id: str | None, snapshot: SharedSnapshot
) -> None:
    """Store (or replace) the shared snapshot: the fold of its stream's entries
    ``1..snapshot.count``, which are never removed."""
    await conn.execute(
        "INSERT INTO evs_shared_snapshots (app_name, user_id, position, event_count, state, "
        "chain_hash, mac) VALUES ($1, $2, $3, $4, $5, $6, $7) "
        "ON CONFLICT (app_name, user_id, position) DO UPDATE SET "
        "event_count = excluded.event_count, state = excluded.state, "
        "chain_hash = excluded.chain_hash, mac = excluded.mac",
        app_name, shared_scope(user_id), snapshot.position, snapshot.count, snapshot.state,
        snapshot.chain_hash, snapshot.mac,
    )


async def load_many(conn: Any, session_ids: Sequence[str]) -> dict[str, HeadState]:
    """The newest snapshot of each session that has one still bound to its event."""
    rows = await conn.fetch(
        "SELECT DISTINCT ON (sn.session_id) sn.session_id, sn.seq, sn.state, sn.chain_hash, "
        f"sn.mac FROM evs_snapshots sn {BOUND_SNAPSHOT} "
        "WHERE sn.session_id = ANY($1::varchar[]) ORDER BY sn.session_id, sn.seq DESC",
        list(session_ids),
    )
    return {row[0]: HeadState(seq=int(row[1]), state=bytes(row[2]), chain_hash=bytes(row[3]),
                              mac=None if row[4] is None else bytes(row[4])) for row in rows}


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
