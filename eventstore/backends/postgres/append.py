"""The PostgreSQL backend's appends: the one-statement common case and the locked transaction.

``fast_args`` / ``fast_result`` frame the common append (no ``user:``/``app:`` state, unkeyed)
as one call of the server-side function ``evs_append`` (revisions 0007, 0008, 0010, 0019), which
``group`` sends grouped with other sessions' calls. ``append_locked`` is every other
append, in a transaction of its own: the session's advisory lock, its head (version, whether an
id is stored, the app's position, the head record) read after the lock, then either a judged
retry / ConcurrencyError / TamperedLogError, or ``insert``. ``insert`` also writes a session's
initial events in ``create_session``'s transaction; ``create_at_once`` is that transaction's
common case (first events that change no shared state, no artifacts) as one statement.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Final

from eventstore._chain import GENESIS, content_digest, link, sign_event, sign_head
from eventstore._exceptions import ConcurrencyError, SessionNotFoundError, TamperedLogError
from eventstore._scopes import APP_SCOPE, ScopeWriter
from eventstore.backends.protocol import NewEvent, StoredEvent, check_retry, written
from eventstore.backends.sql import EVENT_COLUMNS, NEWEST_ROW_KEY, seq_of_row_key, stored_events

from .notify import CHANNEL

__all__ = [
    "APPEND_SQL",
    "LOCK_ARTIFACT",
    "LOCK_KEY",
    "append_locked",
    "create_at_once",
    "fast_args",
    "fast_result",
    "insert",
    "lock_key",
    "lock_shared",
]

# First key of the two-key advisory locks, so ours cannot collide with other applications'.
LOCK_SESSION: Final = 0x65767331  # "evs1"
LOCK_ARTIFACT: Final = 0x65767332  # "evs2"
LOCK_SHARED: Final = 0x65767333  # "evs3"
LOCK_KEY: Final = 0x65767334  # "evs4": choosing a new session's key

_HEAD_SQL = f"""
SELECT s.app_name, s.user_id, s.session_key, {NEWEST_ROW_KEY},
  EXISTS (SELECT 1 FROM evs_events WHERE session_id = s.session_id
          AND event_id = ANY($2::varchar[])),
  greatest((SELECT position FROM evs_app_positions WHERE app_name = s.app_name),
           (SELECT max(position) FROM evs_events WHERE app_name = s.app_name AND shared_state)),
  s.head_seq, s.head_hash
FROM evs_sessions s WHERE s.session_id = $1
"""
_SET_HEAD_SQL = (
    "UPDATE evs_sessions SET head_seq = $2, head_hash = $3, head_signature = $4 "
    "WHERE session_id = $1"
)
_INSERT_SQL = """
WITH ins AS (
  INSERT INTO evs_events (row_key, position, session_id, seq, event_id, kind, invocation_id,
    author, timestamp, shared_state, app_name, user_id, schema_version, payload, chain_hash,
    signature)
  SELECT ($13::bigint << 32) | ($2 + t.n), t.position, $1, $2 + t.n, t.event_id, t.kind,
    t.invocation_id, t.author, t.ts, t.shared, $3, $4, t.version, t.payload, t.hash, t.sig
  FROM unnest($5::varchar[], $6::varchar[], $7::varchar[], $8::varchar[], $9::float8[],
              $10::bool[], $11::int[], $12::bytea[], $14::bigint[], $15::bytea[], $16::bytea[])
    WITH ORDINALITY AS t(event_id, kind, invocation_id, author, ts, shared, version, payload,
                         position, hash, sig, n)
  RETURNING seq
)
SELECT seq FROM ins
"""
APPEND_SQL = (
    # $12, $13: the owner (app, user; NULL: anyone's), judged by the function on the session's
    # row it reads after taking the session's lock (revision 0019). $14: the sessions whose
    # NOTIFY rides in this transaction (``notify.Notices.due``; mostly none), skipped while the
    # server's notification queue is half full (a listener stuck in a transaction): a full
    # queue fails the commit, and a wake-up must never fail an append.
    "SELECT a.status, a.version, a.app_position, a.hashes FROM evs_append($1, $2, $3, $4, $5, "
    "$6, $7, $8, $9, $10, $11, $12::varchar, $13::varchar) AS a, "
    f"(SELECT count(pg_notify('{CHANNEL}', s)) FROM unnest($14::text[]) AS s "
    "WHERE pg_notification_queue_usage() < 0.5) AS n"
)
# The counter, or the highest position the app's shared-state events hold when that is higher
# (a counter lowered behind the store's back): one seek in the partial unique index.
_APP_POSITION_SQL = (
    "SELECT greatest((SELECT position FROM evs_app_positions WHERE app_name = $1), "
    "(SELECT max(position) FROM evs_events WHERE app_name = $1 AND shared_state))"
)
_SET_APP_POSITION_SQL = (
    "INSERT INTO evs_app_positions (app_name, position) VALUES ($1, $2) "
    "ON CONFLICT (app_name) DO UPDATE SET position = excluded.position"
)

_SCOPE_HEADS_SQL = (
    "SELECT user_id, head_seq, head_hash FROM evs_scope_heads "
    "WHERE app_name = $1 AND user_id = ANY($2::varchar[])"
)
_INSERT_ENTRIES_SQL = """
INSERT INTO evs_scope_entries (app_name, user_id, stream_seq, position, session_id, seq,
  event_id, delta, chain_hash, signature)
SELECT * FROM unnest($1::varchar[], $2::varchar[], $3::bigint[], $4::bigint[], $5::varchar[],
                     $6::int[], $7::varchar[], $8::bytea[], $9::bytea[], $10::bytea[])
"""
_SET_SCOPE_HEAD_SQL = (
    "INSERT INTO evs_scope_heads (app_name, user_id, head_seq, head_hash, head_signature) "
    "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (app_name, user_id) DO UPDATE SET "
    "head_seq = excluded.head_seq, head_hash = excluded.head_hash, "
    "head_signature = excluded.head_signature"
)


# A new session and its first events in one statement (``create_at_once``): the session row is
# written with its head already set (the client chains the events), its key from the identity.
# The lock on the key it wants comes first (``free_key`` takes the same one), so a creation on
# the locked path never picks that key while this one writes it; a key held already (another
# user's session, or this one's) inserts nothing and the caller takes the locked path.
_CREATE_SQL = f"""
WITH lock AS MATERIALIZED (SELECT pg_advisory_xact_lock({LOCK_KEY}, $1)),
s AS (
  INSERT INTO evs_sessions (session_id, given_id, app_name, user_id, created_at, head_seq,
    head_hash, head_signature)
  SELECT $2, $16, $3, $4, $5, cardinality($14::bytea[]), $14[cardinality($14)], $15 FROM lock
  ON CONFLICT (session_id) DO NOTHING
  RETURNING session_key
),
ins AS (
  INSERT INTO evs_events (row_key, position, session_id, seq, event_id, kind, invocation_id,
    author, timestamp, shared_state, app_name, user_id, schema_version, payload, chain_hash,
    signature)
  SELECT (s.session_key << 32) | t.n, coalesce(greatest(
      (SELECT position FROM evs_app_positions WHERE app_name = $3),
      (SELECT max(position) FROM evs_events WHERE app_name = $3 AND shared_state)), 0),
    $2, t.n, t.event_id, t.kind, t.invocation_id, t.author, t.ts, false, $3, $4, t.version,
    t.payload, t.hash, t.sig
  FROM s, unnest($6::varchar[], $7::varchar[], $8::varchar[], $9::varchar[], $10::float8[],
                 $11::int[], $12::bytea[], $14::bytea[], $13::bytea[])
    WITH ORDINALITY AS t(event_id, kind, invocation_id, author, ts, version, payload, hash,
                         sig, n)
  RETURNING position
)
SELECT (SELECT session_key FROM s), (SELECT min(position) FROM ins)
"""


def lock_key(text: str) -> int:
    """The second key of an advisory lock on ``text`` (a session id, an app, artifact names)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big",
                          signed=True)


def _chained(session_id: str, events: Sequence[NewEvent], start: int, prev: bytes | None,
             signing_key: bytes | None) -> tuple[list[bytes], list[bytes | None]]:
    """The chain hashes of ``events`` at ``start``, after the event whose hash is ``prev``
    (None: the session's first), and their signatures (None each when unkeyed)."""
    hashes: list[bytes] = []
    chain = GENESIS if prev is None else prev
    for seq, e in enumerate(events, start):
        chain = link(chain, seq, content_digest(e))
        hashes.append(chain)
    return hashes, [None if signing_key is None else sign_event(signing_key, session_id, h)
                    for h in hashes]


async def insert(
    conn: Any, session_id: str, app_name: str, user_id: str, session_key: int,
    events: Sequence[NewEvent], start: int, *, clock: int | None = None,
    prev: bytes | None = None, signing_key: bytes | None = None,
) -> list[StoredEvent]:
    """Insert ``events`` at ``start``, chained after the event whose chain hash is ``prev``
    (None: the session's first events) and signed with ``signing_key`` when given, and move
    the session's head record past them; ``clock`` is the app's committed position if the
    caller read it already (it is re-read under the lock when the batch changes shared
    state)."""
    shared = any(e.shared_state for e in events)
    if shared:
        # Shared-state appends of one app take positions and commit one at a time, in order.
        await lock_shared(conn, app_name)
    if shared or clock is None:
        # After the lock, a statement sees every position committed before it was granted.
        # Without the lock (no shared state here) the events take the newest committed
        # position: a shared-state event still in flight gets a larger one, so no fold changes.
        clock = await conn.fetchval(_APP_POSITION_SQL, app_name) or 0
    positions = []
    scopes: ScopeWriter | None = None
    if shared:  # under the app's lock: the streams' heads as committed
        found = {row[0]: (int(row[1]), row[2]) for row in await conn.fetch(
            _SCOPE_HEADS_SQL, app_name, [APP_SCOPE, user_id])}
        scopes = ScopeWriter(lambda _app, user: found.get(user, (0, None)), signing_key)
    for seq, e in enumerate(events, start):
        if e.shared_state:
            clock += 1
            assert scopes is not None
            scopes.add(app_name, user_id, session_id=session_id, seq=seq, event_id=e.event_id,
                       position=clock, app_delta=e.app_delta, user_delta=e.user_delta)
        positions.append(clock)
    hashes, signatures = _chained(session_id, events, start, prev, signing_key)
    chain = hashes[-1]
    rows = await conn.fetch(
        _INSERT_SQL, session_id, start - 1, app_name, user_id,
        [e.event_id for e in events], [e.kind for e in events],
        [e.invocation_id for e in events], [e.author for e in events],
        [e.timestamp for e in events], [e.shared_state for e in events],
        [e.schema_version for e in events], [e.payload for e in events], session_key,
        positions, hashes, signatures,
    )
    assert len(rows) == len(events)
    head_seq = start + len(events) - 1
    await conn.execute(_SET_HEAD_SQL, session_id, head_seq, chain, None if signing_key is None
                       else sign_head(signing_key, session_id, head_seq, chain))
    if shared:
        await conn.execute(_SET_APP_POSITION_SQL, app_name, clock)
    if scopes is not None and scopes.entries:
        entries = scopes.entries
        await conn.execute(
            _INSERT_ENTRIES_SQL, [e.app_name for e in entries], [e.user_id for e in entries],
            [e.stream_seq for e in entries], [e.position for e in entries],
            [e.session_id for e in entries], [e.seq for e in entries],
            [e.event_id for e in entries], [e.delta for e in entries],
            [e.chain_hash for e in entries], [e.signature for e in entries])
        await conn.executemany(_SET_SCOPE_HEAD_SQL, [
            (h.app_name, h.user_id, h.head_seq, h.head_hash, h.head_signature)
            for h in scopes.heads()])
    return [
        written(session_id, e, seq=start + i, position=positions[i], chain_hash=hashes[i],
                signature=signatures[i])
        for i, e in enumerate(events)
    ]


async def create_at_once(
    conn: Any, session_id: str, given_id: str, app_name: str, user_id: str, created_at: float,
    events: Sequence[NewEvent], *, signing_key: bytes | None = None,
) -> list[StoredEvent] | None:
    """Create the session ``given_id`` under the key ``session_id`` with ``events`` (at least
    one, none changing ``user:``/``app:`` state) as its first, in one statement (its own
    transaction) on ``conn``, and return them as stored; None when another session holds
    that key (nothing written: the locked path picks a key). Raises asyncpg's
    UniqueViolationError when the app's user has a session of that id under another key."""
    assert events
    assert not any(e.shared_state for e in events)
    hashes, signatures = _chained(session_id, events, 1, None, signing_key)
    head = None if signing_key is None else sign_head(signing_key, session_id, len(events),
                                                      hashes[-1])
    key, position = await conn.fetchrow(
        _CREATE_SQL, lock_key(session_id), session_id, app_name, user_id, created_at,
        [e.event_id for e in events], [e.kind for e in events],
        [e.invocation_id for e in events], [e.author for e in events],
        [e.timestamp for e in events], [e.schema_version for e in events],
        [e.payload for e in events], signatures, hashes, head, given_id,
    )
    if key is None:
        return None
    return [
        written(session_id, e, seq=i, position=position, chain_hash=hashes[i - 1],
                signature=signatures[i - 1])
        for i, e in enumerate(events, 1)
    ]


async def lock_shared(conn: Any, app_name: str) -> None:
    """Take the app's shared-state lock until the transaction ends (see the module docstring)."""
    await conn.execute("SELECT pg_advisory_xact_lock($1, $2)", LOCK_SHARED, lock_key(app_name))




async def append_locked(
    conn: Any, session_id: str, events: Sequence[NewEvent], expected_version: int | None,
    signing_key: bytes | None, *, owner: tuple[str, str] | None = None,
) -> list[StoredEvent]:
    """Append with the contract, in the caller's transaction on ``conn``: raises
    SessionNotFoundError, ConcurrencyError, TamperedLogError, or returns a judged retry's
    stored events; nothing is written when it raises."""
    ids = [e.event_id for e in events]
    await conn.execute(
        "SELECT pg_advisory_xact_lock($1, $2)", LOCK_SESSION, lock_key(session_id)
    )
    # A separate statement: under READ COMMITTED it sees every append that committed
    # while this transaction waited for the lock.
    head = await conn.fetchrow(_HEAD_SQL, session_id, ids)
    if head is None:
        raise SessionNotFoundError(session_id)
    app_name, user_id, key, newest, known, clock, head_seq, head_hash = head
    if owner is not None and (app_name, user_id) != owner:
        raise SessionNotFoundError(session_id)
    actual = seq_of_row_key(newest)
    if known or (expected_version is not None and expected_version != actual):
        rows = await conn.fetch(
            f"SELECT {EVENT_COLUMNS} FROM evs_events WHERE session_id = $1 "
            "AND event_id = ANY($2::varchar[])",
            session_id, ids,
        )
        retried = check_retry(
            session_id, events, {s.event_id: s for s in stored_events(session_id, rows)}
        )
        if retried is not None:
            return retried
        assert expected_version is not None
        raise ConcurrencyError(
            session_id, expected_version=expected_version, actual_version=actual
        )
    if head_seq != actual:
        raise TamperedLogError(session_id, head_seq=head_seq, version=actual)
    return await insert(conn, session_id, app_name, user_id, key, events, actual + 1,
                         clock=clock or 0, prev=head_hash,
                         signing_key=signing_key)


def fast_args(session_id: str, events: Sequence[NewEvent],
              expected_version: int | None,
              owner: tuple[str, str] | None = None) -> tuple[Any, ...]:
    """The arguments of ``APPEND_SQL`` for this append but the last (the sessions notified,
    which ``group`` adds when it sends the call); the client computes each event's content
    digest, the server chains them (``eventstore._chain``); ``owner`` (app, user) the
    session stored under ``session_id`` must belong to."""
    return (
        session_id, lock_key(session_id), expected_version, [e.event_id for e in events],
        [e.kind for e in events], [e.invocation_id for e in events],
        [e.author for e in events], [e.timestamp for e in events],
        [e.schema_version for e in events], [e.payload for e in events],
        [content_digest(e) for e in events],
        None if owner is None else owner[0], None if owner is None else owner[1],
    )


def fast_result(session_id: str, events: Sequence[NewEvent], status: int, version: int,
                position: int, hashes: list[bytes]) -> list[StoredEvent] | None:
    """The stored events of an ``evs_append`` call's row; None when the case needs the locked
    path (nothing was written then). Raises SessionNotFoundError."""
    if status == 1:
        raise SessionNotFoundError(session_id)
    if status != 0:
        return None
    return [written(session_id, e, seq=version + i, position=position,
                    chain_hash=hashes[i - 1])
            for i, e in enumerate(events, 1)]
