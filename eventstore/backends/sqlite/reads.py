"""The SQLite backend's cold-path reads: plain functions of a connection, run on a driver thread.

Where SQLite's SQL differs from PostgreSQL's (the statements both write alike are the shared
base's, ``backends/sql/base.py``, named here ``sql.…``): events bounded by timestamp, the
event tails of many sessions and the shared-state heads of many scopes, read a chunk of
``_CHUNK`` ids per statement (``chunks``: SQLite has no array parameters) so that listing
sessions with their state costs a fixed number of statements per chunk, not one per session;
and the free key a new session gets. (The snapshots and head states of many sessions are the
``snapshots`` room's.)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

from eventstore._exceptions import SessionNotFoundError
from eventstore.backends import sql
from eventstore.backends.protocol import ScopeEntry, SharedSnapshot, StoredEvent, fresh_key

__all__ = [
    "chunks",
    "free_key",
    "read_many",
    "read_shared_heads",
    "read_since",
]

T = TypeVar("T")

_CHUNK = 500
"""Ids per statement (well below SQLite's limit on bound parameters)."""


def chunks(items: Sequence[T]) -> Iterator[tuple[Sequence[T], str]]:
    """``items`` a chunk of ``_CHUNK`` at a time, each with its ``?`` placeholders."""
    for start in range(0, len(items), _CHUNK):
        chunk = items[start:start + _CHUNK]
        yield chunk, ", ".join("?" * len(chunk))


def read_since(
    conn: sqlite3.Connection,
    session_id: str,
    *,
    timestamp: float,
    upto: int | None,
    newest: int | None,
    owner: tuple[str, str] | None = None,
) -> list[StoredEvent]:
    """Events ``seq <= upto`` with ``timestamp >=`` the bound, oldest first (the newest N);
    SessionNotFoundError when the session is missing (or not ``owner``'s)."""
    key_sql = "SELECT session_key FROM evs_sessions WHERE session_id = ?"
    if owner is not None:
        key_sql += " AND app_name = ? AND user_id = ?"
    row = conn.execute(key_sql, (session_id,) if owner is None else (session_id, *owner)).fetchone()
    if row is None:
        raise SessionNotFoundError(session_id)
    base = int(row[0]) << sql.SEQ_BITS
    rows = conn.execute(
        f"SELECT {sql.EVENT_COLUMNS} FROM evs_events WHERE row_key > ? AND row_key <= ? "
        "AND timestamp >= ? ORDER BY row_key DESC LIMIT ?",
        (base, base + sql.seq_bound(upto), timestamp, -1 if newest is None else newest),
    ).fetchall()
    rows.reverse()
    return sql.stored_events(session_id, rows)


def read_shared_heads(
    conn: sqlite3.Connection, app_name: str, user_ids: Sequence[str | None]
) -> dict[str | None, tuple[SharedSnapshot | None, list[ScopeEntry]]]:
    """Each scope's newest shared snapshot and its stream entries after it
    (``Backend.read_shared_heads``): one statement of each kind per chunk of scopes."""
    scopes = {sql.shared_scope(u): u for u in user_ids}
    names = list(scopes)
    snapshots: dict[str, SharedSnapshot] = {}
    entries: dict[str, list[ScopeEntry]] = {n: [] for n in names}
    for chunk, marks in chunks(names):
        for user, position, count, state, chain_hash, mac in conn.execute(
            "SELECT sn.user_id, sn.position, sn.event_count, sn.state, sn.chain_hash, sn.mac "
            f"FROM evs_shared_snapshots sn {sql.BOUND_SHARED} "
            f"WHERE sn.app_name = ? AND sn.user_id IN ({marks}) ORDER BY sn.user_id, sn.position",
            (app_name, *chunk),
        ):
            snapshots[user] = SharedSnapshot(position=int(position), count=int(count),
                                             state=sql.payload_bytes(state),
                                             chain_hash=bytes(chain_hash),
                                             mac=mac if isinstance(mac, bytes) else None)
        values = ", ".join("(?, ?)" for _ in chunk)
        params = tuple(v for n in chunk for v in (n, snapshots[n].count if n in snapshots
                                                   else 0))
        columns = sql.prefixed(sql.SCOPE_COLUMNS, "e")
        for entry in sql.scope_entries(conn.execute(
            f"WITH wanted(u, low) AS (VALUES {values}) SELECT {columns} FROM wanted "
            "JOIN evs_scope_entries e ON e.app_name = ? AND e.user_id = wanted.u "
            "AND e.stream_seq > wanted.low ORDER BY e.user_id, e.stream_seq",
            (*params, app_name),
        )):
            entries[entry.user_id].append(entry)
    return {scopes[n]: (snapshots.get(n), entries[n]) for n in names}


def read_many(
    conn: sqlite3.Connection, after: Mapping[str, int]
) -> dict[str, list[StoredEvent]]:
    """Each session's events after its given seq, oldest first (one statement per chunk)."""
    found: dict[str, list[StoredEvent]] = {sid: [] for sid in after}
    items = list(after.items())
    for chunk, _ in chunks(items):
        values = ", ".join("(?, ?)" for _ in chunk)
        params = tuple(v for sid, low in chunk for v in (sid, sql.seq_bound(low)))
        rows = conn.execute(
            f"WITH wanted(sid, low) AS (VALUES {values}) "
            f"SELECT wanted.sid, {sql.prefixed(sql.EVENT_COLUMNS, 'e')} "
            "FROM wanted JOIN evs_sessions s ON s.session_id = wanted.sid "
            "JOIN evs_events e ON e.row_key > (s.session_key << 32) + wanted.low "
            "AND e.row_key < (s.session_key + 1) << 32 ORDER BY e.row_key",
            params,
        )
        for row in rows:
            found[row[0]].append(sql.stored_event(row[0], row[1:]))
    return found


def free_key(conn: sqlite3.Connection, wanted: str) -> str:
    """The key a new session gets: ``wanted`` (the id its app gave) unless a session holds it,
    else a fresh one (``Backend.create_session``). Called inside the writing transaction, which
    SQLite runs one at a time: no other writer takes the key in between."""
    taken = conn.execute(
        "SELECT 1 FROM evs_sessions WHERE session_id = ?", (wanted,)
    ).fetchone()
    return wanted if taken is None else fresh_key()
