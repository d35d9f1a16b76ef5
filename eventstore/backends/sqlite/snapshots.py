"""The SQLite backend's snapshot jobs: plain functions of a connection, run on a driver thread.

Snapshots are caches (droppable, rebuilt from the log): ``evs_snapshots`` holds a session's own
state at a ``seq``, ``evs_shared_snapshots`` an app's ``app:`` state (user ``''``) or one user's
``user:`` state at a ``position``. A snapshot is read only while what it folded is still there:
the event at its seq (the stream entry at its count and position) holds the chain hash it names
(revision 0020); the MAC, on a keyed store, is checked by the reader (``eventstore._statefold``).
The other caches of state live here too: the session caches (``evs_session_caches``) and the
head states (``evs_head_states``); the snapshots and head states of many sessions are read a
chunk of ids per statement (``reads.chunks``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence

from eventstore._exceptions import CorruptSnapshotError, SessionNotFoundError
from eventstore.backends.protocol import HeadState, SharedSnapshot
from eventstore.backends.sql import (
    BOUND_SHARED,
    MAX_POSITION,
    SEQ_BITS,
    payload_bytes,
    seq_bound,
    shared_scope,
    stored_type,
)

from .reads import chunks

__all__ = ["drop_all", "load", "load_cache", "load_head_states", "load_many", "load_shared", "save",
           "save_cache", "save_head_states", "save_shared"]


def load(conn: sqlite3.Connection, session_id: str, upto: int | None) -> HeadState | None:
    """Return the session's newest snapshot at or below ``upto`` that is still bound to its
    event, or None; raises SessionNotFoundError when the session does not exist."""
    row = conn.execute(
        "SELECT sn.seq, sn.state, sn.chain_hash, sn.mac FROM evs_snapshots sn "
        "JOIN evs_sessions s ON s.session_id = sn.session_id "
        f"JOIN evs_events e ON e.row_key = (s.session_key << {SEQ_BITS}) + sn.seq "
        "WHERE sn.session_id = ? AND sn.seq <= ? AND e.chain_hash = sn.chain_hash "
        "ORDER BY sn.seq DESC LIMIT 1",
        (session_id, seq_bound(upto)),
    ).fetchone()
    if row is not None:
        if not isinstance(row[1], bytes):
            raise CorruptSnapshotError(session_id, int(row[0]), f"it is stored as "
                                       f"{stored_type(row[1])}, not as bytes.")
        return HeadState(seq=int(row[0]), state=row[1], chain_hash=bytes(row[2]),
                         mac=row[3] if isinstance(row[3], bytes) else None)
    if conn.execute("SELECT 1 FROM evs_sessions WHERE session_id = ?", (session_id,)).fetchone():
        return None
    raise SessionNotFoundError(session_id)


def save(conn: sqlite3.Connection, session_id: str, snapshot: HeadState) -> None:
    """Store (or replace) the session's snapshot at ``snapshot.seq``."""
    conn.execute(
        "INSERT INTO evs_snapshots (session_id, seq, state, chain_hash, mac) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, seq) DO UPDATE SET "
        "state = excluded.state, chain_hash = excluded.chain_hash, mac = excluded.mac",
        (session_id, snapshot.seq, snapshot.state, snapshot.chain_hash, snapshot.mac),
    )


def drop_all(conn: sqlite3.Connection) -> int:
    """Delete every snapshot of both kinds, every head state and every session cache; return
    how many."""
    return (conn.execute("DELETE FROM evs_snapshots").rowcount
            + conn.execute("DELETE FROM evs_head_states").rowcount
            + conn.execute("DELETE FROM evs_shared_snapshots").rowcount
            + conn.execute("DELETE FROM evs_session_caches").rowcount)


def load_cache(conn: sqlite3.Connection, session_id: str, name: str,
               owner: tuple[str, str] | None = None) -> tuple[int, bytes] | None:
    """Return ``(seq, data)`` of the session's cache ``name``, or None; raises
    CorruptSnapshotError when its data is not stored as bytes, and SessionNotFoundError when
    ``owner`` is given and holds no session under ``session_id``."""
    if owner is None:
        row = conn.execute(
            "SELECT seq, data FROM evs_session_caches WHERE session_id = ? AND name = ?",
            (session_id, name),
        ).fetchone()
    else:
        found = conn.execute(
            "SELECT c.seq, c.data FROM evs_sessions s LEFT JOIN evs_session_caches c "
            "ON c.session_id = s.session_id AND c.name = ? "
            "WHERE s.session_id = ? AND s.app_name = ? AND s.user_id = ?",
            (name, session_id, *owner),
        ).fetchone()
        if found is None:
            raise SessionNotFoundError(session_id)
        row = None if found[0] is None else found
    if row is None:
        return None
    if not isinstance(row[1], bytes):
        raise CorruptSnapshotError(session_id, int(row[0]), f"its cache {name!r} is stored as "
                                   f"{stored_type(row[1])}, not as bytes.")
    return int(row[0]), row[1]


def save_cache(conn: sqlite3.Connection, session_id: str, name: str, seq: int,
               data: bytes, owner: tuple[str, str] | None = None) -> None:
    """Store (or replace) the session's cache ``name``; nothing when the session is gone
    (SessionNotFoundError then, and when it is not ``owner``'s, if ``owner`` is given)."""
    whose = "" if owner is None else " AND app_name = ? AND user_id = ?"
    stored = conn.execute(
        "INSERT INTO evs_session_caches (session_id, name, seq, data) SELECT ?, ?, ?, ? "
        f"WHERE EXISTS (SELECT 1 FROM evs_sessions WHERE session_id = ?{whose}) "
        "ON CONFLICT (session_id, name) DO UPDATE SET seq = excluded.seq, data = excluded.data",
        (session_id, name, seq, data, session_id, *(owner or ())),
    ).rowcount
    if owner is not None and stored == 0:
        raise SessionNotFoundError(session_id)


def load_shared(
    conn: sqlite3.Connection, app_name: str, user_id: str | None, upto_position: int | None
) -> SharedSnapshot | None:
    """Return the scope's newest shared snapshot at or below ``upto_position`` still bound to
    its stream entry, or None."""
    row = conn.execute(
        "SELECT sn.position, sn.event_count, sn.state, sn.chain_hash, sn.mac "
        f"FROM evs_shared_snapshots sn {BOUND_SHARED} "
        "WHERE sn.app_name = ? AND sn.user_id = ? AND sn.position <= ? "
        "ORDER BY sn.position DESC LIMIT 1",
        (app_name, shared_scope(user_id),
         MAX_POSITION if upto_position is None else upto_position),
    ).fetchone()
    return None if row is None else SharedSnapshot(
        position=int(row[0]), count=int(row[1]), state=payload_bytes(row[2]),
        chain_hash=bytes(row[3]), mac=row[4] if isinstance(row[4], bytes) else None,
    )


def save_shared(
    conn: sqlite3.Connection, app_name: str, user_id: str | None, snapshot: SharedSnapshot
) -> None:
    """Store (or replace) the shared snapshot: the fold of its stream's entries
    ``1..snapshot.count``, which are never removed."""
    conn.execute(
        "INSERT INTO evs_shared_snapshots (app_name, user_id, position, event_count, state, "
        "chain_hash, mac) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (app_name, user_id, position) "
        "DO UPDATE SET event_count = excluded.event_count, state = excluded.state, "
        "chain_hash = excluded.chain_hash, mac = excluded.mac",
        (app_name, shared_scope(user_id), snapshot.position, snapshot.count, snapshot.state,
         snapshot.chain_hash, snapshot.mac),
    )


def load_many(
    conn: sqlite3.Connection, session_ids: Sequence[str]
) -> dict[str, HeadState]:
    """The newest snapshot of each session that has one still bound to its event."""
    found: dict[str, HeadState] = {}
    for chunk, marks in chunks(session_ids):
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


def load_head_states(
    conn: sqlite3.Connection, session_ids: Sequence[str]
) -> dict[str, HeadState]:
    """The head state of each session that has one still current (its event at ``seq``
    holds its chain hash), one statement per chunk of ids."""
    found: dict[str, HeadState] = {}
    for chunk, marks in chunks(session_ids):
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
