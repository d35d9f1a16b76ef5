"""The SQLite backend's fork jobs: plain functions of the writer's connection, run inside its
write transaction (``BEGIN IMMEDIATE``: the whole fork commits or nothing does).

A fork copies stored rows with ``INSERT … SELECT``: nothing is decoded or re-encoded, so every
column of an event row — those of today and any a later revision adds — is copied as stored,
but for the ones that name the session (``row_key``, ``session_id``, ``signature``) and
``shared_state`` (see ``Backend.fork_session``). The chain hashes do not name the session and
are copied; the fork's head record is the origin's event at the fork's seq; a keyed store signs
the copies for the fork (an unkeyed one leaves them unsigned: the origin's signatures name the
origin).
"""

from __future__ import annotations

import sqlite3

from eventstore._chain import sign_event, sign_head
from eventstore._exceptions import SessionNotFoundError
from eventstore._fork import ForkLink, ForkPlan
from eventstore.backends.protocol import SessionRecord, seal_fork_link
from eventstore.backends.sql import SEQ_BITS, seq_of_row_key

from .reads import free_key

__all__ = ["fork", "insert_link", "links"]

_OVERRIDDEN = {
    # id: the copy's place in commit order (revision 0012), handed out by SQLite
    "evs_events": {"id": "NULL", "row_key": f"(:key << {SEQ_BITS}) | seq", "session_id": ":sid",
                   "shared_state": "0"},
    "evs_artifacts": {"session_scope": ":scope"},
    "evs_snapshots": {"session_id": ":sid"},
}


def _copy_sql(conn: sqlite3.Connection, table: str, where: str, *, signed: bool = False) -> str:
    """``INSERT … SELECT`` of every column of ``table`` as stored, but the overridden ones."""
    columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
    overridden = _OVERRIDDEN[table]
    if table == "evs_events":
        overridden = {**overridden, "signature": "evs_fork_sign(chain_hash)" if signed else "NULL"}
    names = ", ".join(f'"{c}"' for c in columns)
    values = ", ".join(overridden.get(c, f'"{c}"') for c in columns)
    return f"INSERT INTO {table} ({names}) SELECT {values} FROM {table} WHERE {where}"


def fork(conn: sqlite3.Connection, record: SessionRecord, plan: ForkPlan,
         signing_key: bytes | None = None) -> str:
    """Write the fork ``record`` of ``plan`` (see ``Backend.fork_session``), signed with
    ``signing_key`` when there is one. Raises
    SessionNotFoundError for a missing (or shorter) origin, sqlite3.IntegrityError for a
    taken id; the caller's transaction is then rolled back. Returns the fork's key."""
    origin = plan.origin_session_id
    row = conn.execute(
        "SELECT session_key, (SELECT max(row_key) FROM evs_events WHERE row_key > "
        f"s.session_key << {SEQ_BITS} AND row_key < (s.session_key + 1) << {SEQ_BITS}) "
        ", given_id FROM evs_sessions s WHERE session_id = ?",
        (origin,),
    ).fetchone()
    if row is None or seq_of_row_key(row[1]) < plan.seq:
        raise SessionNotFoundError(origin)
    origin_key = int(row[0])
    sid = free_key(conn, record.session_id)
    high = (origin_key << SEQ_BITS) | plan.seq
    head_hash = conn.execute("SELECT chain_hash FROM evs_events WHERE row_key = ?",
                             (high,)).fetchone()[0]
    head_signature = (None if signing_key is None or head_hash is None
                      else sign_head(signing_key, sid, plan.seq, head_hash))
    key = int(conn.execute(
        "INSERT INTO evs_sessions (session_id, given_id, session_key, app_name, user_id, "
        "created_at, head_seq, head_hash, head_signature) "
        "VALUES (?, ?, (SELECT coalesce(max(session_key), 0) + 1 FROM evs_sessions), ?, ?, ?, "
        "?, ?, ?) RETURNING session_key",
        (sid, record.id, record.app_name, record.user_id, record.created_at, plan.seq, head_hash,
         head_signature),
    ).fetchone()[0])
    # Session-scoped artifacts are kept under the id the app gave (scoped by app and user).
    params = {"sid": sid, "key": key, "origin": origin, "seq": plan.seq,
              "scope": record.id, "origin_scope": row[2],
              "low": origin_key << SEQ_BITS, "high": high}
    if signing_key is not None:
        key_bytes = signing_key
        conn.create_function(
            "evs_fork_sign", 1,
            lambda chain: None if chain is None else sign_event(key_bytes, sid, chain),
            deterministic=True)
    try:
        conn.execute(_copy_sql(conn, "evs_events", "row_key > :low AND row_key <= :high",
                               signed=signing_key is not None), params)
    finally:
        if signing_key is not None:
            conn.create_function("evs_fork_sign", 1, None)
    conn.execute(_copy_sql(conn, "evs_snapshots", "session_id = :origin AND seq <= :seq"),
                 params)
    artifacts_sql = _copy_sql(
        conn, "evs_artifacts",
        "app_name = :app AND user_id = :user AND session_scope = :origin_scope "
        "AND filename = :filename AND version <= :newest",
    )
    for filename, newest in plan.artifacts.items():
        conn.execute(artifacts_sql, {**params, "app": record.app_name, "user": record.user_id,
                                     "filename": filename, "newest": newest})
    insert_link(conn, ForkLink(session_id=sid, origin_session_id=origin, origin_seq=plan.seq,
                               forked_at=plan.forked_at), signing_key)
    return sid


def insert_link(conn: sqlite3.Connection, link: ForkLink, signing_key: bytes | None) -> None:
    """Record the fork link (``link.session_id``: the fork's key), sealed (``seal_fork_link``)."""
    link_hash, signature = seal_fork_link(signing_key, link)
    conn.execute(
        "INSERT INTO evs_session_forks (session_id, origin_session_id, origin_seq, forked_at, "
        "link_hash, signature) VALUES (?, ?, ?, ?, ?, ?)",
        (link.session_id, link.origin_session_id, link.origin_seq, link.forked_at, link_hash,
         signature),
    )


def links(conn: sqlite3.Connection, session_id: str) -> list[ForkLink]:
    """The links naming ``session_id`` as fork or origin, oldest first."""
    return [
        ForkLink(session_id=r[0], origin_session_id=r[1], origin_seq=r[2], forked_at=r[3],
                 link_hash=None if r[4] is None else bytes(r[4]),
                 signature=None if r[5] is None else bytes(r[5]))
        for r in conn.execute(
            "SELECT session_id, origin_session_id, origin_seq, forked_at, link_hash, signature "
            "FROM evs_session_forks "
            "WHERE session_id = ? OR origin_session_id = ? ORDER BY forked_at, session_id",
            (session_id, session_id),
        )
    ]
