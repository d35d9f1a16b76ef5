"""The PostgreSQL backend's fork queries: coroutines of an asyncpg connection, run inside one
transaction (the whole fork commits or nothing does).

A fork copies stored rows with ``INSERT … SELECT``: nothing is decoded or re-encoded, so every
column of an event row — those of today and any a later revision adds — is copied as stored,
but for the ones that name the session (``row_key``, ``session_id``, ``signature``) and
``shared_state`` (see ``Backend.fork_session``). The chain hashes do not name the session and
are copied; the fork's head record is the origin's event at the fork's seq; a keyed store signs
the copies for the fork (an unkeyed one leaves them unsigned). The origin's session row is
locked ``FOR SHARE`` first, so a concurrent delete of the origin waits for the fork to commit
(or the fork sees it gone).
"""

from __future__ import annotations

from typing import Any

from eventstore._chain import sign_event, sign_head
from eventstore._exceptions import SessionNotFoundError
from eventstore._fork import ForkLink, ForkPlan
from eventstore.backends.protocol import SessionRecord, seal_fork_link
from eventstore.backends.sql import SEQ_BITS, seq_of_row_key

from .reads import free_key

__all__ = ["fork", "insert_link", "links"]

_OVERRIDDEN = {
    "evs_events": {"row_key": f"($1::bigint << {SEQ_BITS}) | e.seq", "session_id": "$2",
                   "shared_state": "false", "signature": "NULL"},
    "evs_snapshots": {"session_id": "$1"},
    "evs_artifacts": {"session_scope": "$1"},
}
_FROM = {
    "evs_events": "evs_events e",
    "evs_snapshots": "evs_snapshots",
    "evs_artifacts": "evs_artifacts",
}
_SIGNED_EVENTS = ("evs_events e JOIN unnest($5::int[], $6::bytea[]) AS g(seq, signature) "
                  "ON g.seq = e.seq")
"""A keyed fork's rows: each copy joined to the signature computed for the fork."""
_WHERE = {
    "evs_events": "e.row_key > $3 AND e.row_key <= $4",
    "evs_snapshots": "session_id = $2 AND seq <= $3",
    "evs_artifacts": "app_name = $2 AND user_id = $3 AND session_scope = $4 AND filename = $5 "
                     "AND version <= $6",
}


async def _copy_statements(conn: Any, *, signed: bool) -> dict[str, str]:
    """``INSERT … SELECT`` per table, of every column as stored but the overridden ones."""
    columns: dict[str, list[str]] = {}
    for table, column in await conn.fetch(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = ANY($1::text[]) "
        "AND is_generated = 'NEVER' ORDER BY table_name, ordinal_position",
        list(_OVERRIDDEN),
    ):
        columns.setdefault(table, []).append(column)
    statements = {}
    for table, names in columns.items():
        overridden = _OVERRIDDEN[table]
        source = _FROM[table]
        if table == "evs_events" and signed:
            overridden, source = {**overridden, "signature": "g.signature"}, _SIGNED_EVENTS
        qualifier = "e." if table == "evs_events" else ""
        quoted = ", ".join(f'"{c}"' for c in names)
        values = ", ".join(overridden.get(c, f'{qualifier}"{c}"') for c in names)
        statements[table] = (
            f"INSERT INTO {table} ({quoted}) SELECT {values} FROM {source} WHERE {_WHERE[table]}"
        )
    return statements


async def fork(conn: Any, record: SessionRecord, plan: ForkPlan,
               signing_key: bytes | None = None) -> str:
    """Write the fork ``record`` of ``plan`` (see ``Backend.fork_session``), signed with
    ``signing_key`` when there is one. Raises
    SessionNotFoundError for a missing (or shorter) origin, asyncpg's UniqueViolationError for
    a taken id; the caller rolls the transaction back. Returns the fork's key."""
    origin = plan.origin_session_id
    row = await conn.fetchrow(
        "SELECT session_key, (SELECT max(row_key) FROM evs_events WHERE row_key > "
        f"s.session_key << {SEQ_BITS} AND row_key < (s.session_key + 1) << {SEQ_BITS}) "
        ", given_id FROM evs_sessions s WHERE session_id = $1 FOR SHARE",
        origin,
    )
    if row is None or seq_of_row_key(row[1]) < plan.seq:
        raise SessionNotFoundError(origin)
    base = int(row[0]) << SEQ_BITS
    origin_given = row[2]  # session-scoped artifacts are kept under the id the app gave
    sid = await free_key(conn, record.session_id)
    hashes = await conn.fetch(
        "SELECT seq, chain_hash FROM evs_events WHERE row_key > $1 AND row_key <= $2 "
        "ORDER BY row_key", base, base | plan.seq) if signing_key is not None else None
    head_hash = (hashes[-1][1] if hashes else await conn.fetchval(
        "SELECT chain_hash FROM evs_events WHERE row_key = $1", base | plan.seq))
    head_signature = (None if signing_key is None or head_hash is None
                      else sign_head(signing_key, sid, plan.seq, head_hash))
    key = await conn.fetchval(
        "INSERT INTO evs_sessions (session_id, given_id, app_name, user_id, created_at, "
        "head_seq, head_hash, head_signature) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
        "RETURNING session_key",
        sid, record.id, record.app_name, record.user_id, record.created_at, plan.seq, head_hash,
        head_signature,
    )
    copy = await _copy_statements(conn, signed=signing_key is not None)
    if signing_key is None or hashes is None:
        await conn.execute(copy["evs_events"], key, sid, base, base | plan.seq)
    else:
        await conn.execute(
            copy["evs_events"], key, sid, base, base | plan.seq, [r[0] for r in hashes],
            [None if r[1] is None else sign_event(signing_key, sid, r[1]) for r in hashes])
    await conn.execute(copy["evs_snapshots"], sid, origin, plan.seq)
    for filename, newest in plan.artifacts.items():
        await conn.execute(copy["evs_artifacts"], record.id, record.app_name, record.user_id,
                           origin_given, filename, newest)
    await insert_link(conn, ForkLink(session_id=sid, origin_session_id=origin,
                                     origin_seq=plan.seq, forked_at=plan.forked_at), signing_key)
    return sid


async def insert_link(conn: Any, link: ForkLink, signing_key: bytes | None) -> None:
    """Record the fork link (``link.session_id``: the fork's key), sealed (``seal_fork_link``)."""
    link_hash, signature = seal_fork_link(signing_key, link)
    await conn.execute(
        "INSERT INTO evs_session_forks (session_id, origin_session_id, origin_seq, forked_at, "
        "link_hash, signature) VALUES ($1, $2, $3, $4, $5, $6)",
        link.session_id, link.origin_session_id, link.origin_seq, link.forked_at, link_hash,
        signature,
    )


async def links(conn: Any, session_id: str) -> list[ForkLink]:
    """The links naming ``session_id`` as fork or origin, oldest first."""
    return [
        ForkLink(session_id=r[0], origin_session_id=r[1], origin_seq=r[2], forked_at=r[3],
                 link_hash=None if r[4] is None else bytes(r[4]),
                 signature=None if r[5] is None else bytes(r[5]))
        for r in await conn.fetch(
            "SELECT session_id, origin_session_id, origin_seq, forked_at, link_hash, signature "
            "FROM evs_session_forks "
            "WHERE session_id = $1 OR origin_session_id = $1 ORDER BY forked_at, session_id",
            session_id,
        )
    ]
