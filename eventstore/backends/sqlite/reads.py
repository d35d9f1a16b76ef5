"""The SQLite backend's cold-path reads: plain functions of a connection, run on a driver thread.

Where SQLite's SQL differs from PostgreSQL's (the statements both write alike are the shared
base's, ``backends/sql/base.py``): events bounded by timestamp, and the snapshots, head states
and event tails of many sessions, read a chunk of ``_CHUNK`` ids per statement (SQLite has no
array parameters) so that listing sessions with their state costs a fixed number of statements
per chunk, not one per session; and the free key a new session gets.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar

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

__all__ = [
    "free_key",
    "load_head_states",
    "load_snapshots",
    "read_many",
    "read_shared_heads",
    "read_since",
    "save_head_states",
]

T = TypeVar("T")

_CHUNK = 500
"""Ids per statement (well below SQLite's limit on bound parameters)."""


def _chunks(items: Sequence[T]) -> Iterator[tuple[Sequence[T], str]]:
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
    sql = "SELECT session_key FROM evs_sessions WHERE session_id = ?"
    if owner is not None:
        sql += " AND app_name = ? AND user_id = ?"
    row = conn.execute(sql, (session_id,) if owner is None else (session_id, *owner)).fetchone()
    if row is None:
        raise SessionNotFoundError(session_id)
    base = int(row[0]) << SEQ_BITS
    rows = conn.execute(
        f"SELECT {EVENT_COLUMNS} FROM evs_events WHERE row_key > ? AND row_key <= ? "
        "AND timestamp >= ? ORDER BY row_key DESC LIMIT ?",
        (base, base + seq_bound(upto), timestamp, -1 if newest is None else newest),
    ).fetchall()
    rows.reverse()
    return stored_events(session_id, rows)




def load_snapshots(
    conn: sqlite3.Connection, session_ids: Sequence[str]
) -> dict[str, HeadState]:
    """The newest snapshot of each session that has one still bound to its event."""
    found: dict[str, HeadState] = {}
    for chunk, marks in _chunks(session_ids):
        for sid, seq, state, chain_hash, mac in conn.execute(
            "SELECT sn.session_id, sn.seq, sn.state, sn.chain_hash, sn.mac FROM evs_snapshots sn "
            "JOIN evs_sessions s ON s.session_id = sn.session_id "
            f"JOIN evs_events e ON e.row_key = (s.session_key << {SEQ_BITS}) + sn.seq "
            f"WHERE sn.session_id IN ({marks}) AND e.chain_hash = sn.chain_hash "
            "ORDER BY sn.session_id, sn.seq",
            tuple(chunk),
        ):
            found[sid] = HeadState(seq=int(seq), state=bytes(state), chain_hash=bytes(chain_hash),
                                   mac=mac if isinstance(mac, bytes) else None)
    return found


def read_shared_heads(
    conn: sqlite3.Connection, app_name: str, user_ids: Sequence[str | None]
) -> dict[str | None, tuple[SharedSnapshot | None, list[ScopeEntry]]]:
    """Each scope's newest shared snapshot and its stream entries after it
    (``Backend.read_shared_heads``): one statement of each kind per chunk of scopes."""
    scopes = {shared_scope(u): u for u in user_ids}
    names = list(scopes)
    snapshots: dict[str, SharedSnapshot] = {}
    entries: dict[str, list[ScopeEntry]] = {n: [] for n in names}
    for chunk, marks in _chunks(names):
        for user, position, count, state, chain_hash, mac in conn.execute(
            "SELECT sn.user_id, sn.position, sn.event_count, sn.state, sn.chain_hash, sn.mac "
            f"FROM evs_shared_snapshots sn {BOUND_SHARED} "
            f"WHERE sn.app_name = ? AND sn.user_id IN ({marks}) ORDER BY sn.user_id, sn.position",
            (app_name, *chunk),
        ):
            snapshots[user] = SharedSnapshot(position=int(position), count=int(count),
                                             state=payload_bytes(state),
                                             chain_hash=bytes(chain_hash),
                                             mac=mac if isinstance(mac, bytes) else None)
        values = ", ".join("(?, ?)" for _ in chunk)
        params = tuple(v for n in chunk for v in (n, snapshots[n].count if n in snapshots
                                                   else 0))
        columns = ", ".join("e." + c.strip() for c in SCOPE_COLUMNS.split(","))
        for entry in scope_entries(conn.execute(
            f"WITH wanted(u, low) AS (VALUES {values}) SELECT {columns} FROM wanted "
            "JOIN evs_scope_entries e ON e.app_name = ? AND e.user_id = wanted.u "
            "AND e.stream_seq > wanted.low ORDER BY e.user_id, e.stream_seq",
            (*params, app_name),
        )):
            entries[entry.user_id].append(entry)
    return {scopes[n]: (snapshots.get(n), entries[n]) for n in names}


def load_head_states(
    conn: sqlite3.Connection, session_ids: Sequence[str]
) -> dict[str, HeadState]:
    """The head state of each session that has one still current (its event at ``seq``
    holds its chain hash), one statement per chunk of ids."""
    found: dict[str, HeadState] = {}
    for chunk, marks in _chunks(session_ids):
        for sid, seq, chain_hash, state, mac in conn.execute(
            "SELECT h.session_id, h.seq, h.chain_hash, h.state, h.mac FROM evs_head_states h "
            "JOIN evs_sessions s ON s.session_id = h.session_id "
            f"JOIN evs_events e ON e.row_key = (s.session_key << {SEQ_BITS}) + h.seq "
            f"WHERE h.session_id IN ({marks}) AND e.chain_hash = h.chain_hash",
            tuple(chunk),
        ):
            if isinstance(state, bytes) and isinstance(chain_hash, bytes):
                found[sid] = HeadState(seq=int(seq), chain_hash=chain_hash, state=state,
                                       mac=mac if isinstance(mac, bytes) else None)
    return found


def save_head_states(conn: sqlite3.Connection, states: Mapping[str, HeadState]) -> None:
    """Store (or replace) each head state whose session's event at ``seq`` holds its chain
    hash (``Backend.save_head_states``)."""
    conn.executemany(
        "INSERT INTO evs_head_states (session_id, seq, chain_hash, state, mac) "
        "SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM evs_sessions s "
        f"JOIN evs_events e ON e.row_key = (s.session_key << {SEQ_BITS}) + ?2 "
        "WHERE s.session_id = ?1 AND e.chain_hash = ?3) "
        "ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, "
        "chain_hash = excluded.chain_hash, state = excluded.state, mac = excluded.mac",
        [(sid, h.seq, h.chain_hash, h.state, h.mac) for sid, h in states.items()],
    )


def read_many(
    conn: sqlite3.Connection, after: Mapping[str, int]
) -> dict[str, list[StoredEvent]]:
    """Each session's events after its given seq, oldest first (one statement per chunk)."""
    found: dict[str, list[StoredEvent]] = {sid: [] for sid in after}
    items = list(after.items())
    for chunk, _ in _chunks(items):
        values = ", ".join("(?, ?)" for _ in chunk)
        params = tuple(v for sid, low in chunk for v in (sid, seq_bound(low)))
        rows = conn.execute(
            f"WITH wanted(sid, low) AS (VALUES {values}) "
            f"SELECT wanted.sid, {', '.join('e.' + c.strip() for c in EVENT_COLUMNS.split(','))} "
            "FROM wanted JOIN evs_sessions s ON s.session_id = wanted.sid "
            "JOIN evs_events e ON e.row_key > (s.session_key << 32) + wanted.low "
            "AND e.row_key < (s.session_key + 1) << 32 ORDER BY e.row_key",
            params,
        )
        for row in rows:
            found[row[0]].append(stored_event(row[0], row[1:]))
    return found


def free_key(conn: sqlite3.Connection, wanted: str) -> str:
    """The key a new session gets: ``wanted`` (the id its app gave) unless a session holds it,
    else a fresh one (``Backend.create_session``). Called inside the writing transaction, which
    SQLite runs one at a time: no other writer takes the key in between."""
    taken = conn.execute(
        "SELECT 1 FROM evs_sessions WHERE session_id = ?", (wanted,)
    ).fetchone()
    return wanted if taken is None else fresh_key()
