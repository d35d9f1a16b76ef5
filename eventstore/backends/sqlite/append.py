"""The SQLite backend's append jobs: one append alone, and a run of appends in one group.

Plain functions of the writer's connection, run inside its write transaction.

``append_one`` is an append with its contract: read the session's head, check the expected
version, insert the batch as one statement (a failing statement changes nothing), or judge an
idempotent retry / raise ConcurrencyError, DuplicateEventError, SessionNotFoundError.

``append_many`` gives every append of a group the same outcome ``append_one`` would give it
run one after another, in a handful of statements for the whole run: one read of every head,
one multi-row INSERT of every append that passes its checks, one position update per app. Each
statement is a hop through the GIL, and under load the event loop's thread holds the GIL most
of the time, so a write that costs two statements alone costs a fraction of one here. An
append that does not pass (no such session, another version, an id the run already holds) is
run by ``append_one`` at its place in the order, after everything before it was inserted; a
run whose INSERT clashes with a stored id (a retry) is judged append by append, likewise.

A group reads only the heads its ``HeadCache`` does not hold: the writer keeps the heads it
read and moved in its committed transactions, so under load a group costs no head read at all
(see ``HeadCache`` for why the cached heads are exact).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from eventstore._chain import GENESIS, content_digest, link, sign_event, sign_head
from eventstore._exceptions import (
    ConcurrencyError,
    SessionNotFoundError,
    StorageError,
    TamperedLogError,
)
from eventstore._scopes import ScopeWriter
from eventstore.backends.protocol import NewEvent, StoredEvent, check_retry, written
from eventstore.backends.sql import (
    EVENT_COLUMNS,
    NEWEST_ROW_KEY,
    row_key,
    seq_of_row_key,
    stored_events,
)

from .group import Outcome, savepoint

__all__ = [
    "HEAD_SQL",
    "AppendRequest",
    "Head",
    "HeadCache",
    "append_many",
    "append_one",
    "head",
    "insert",
]

# The app's position: its counter, or the highest position its shared-state events hold when
# that is higher (a counter lowered behind the store's back would hand out a taken position):
# one seek in the partial unique index, inside the same statement.
_HEAD_COLUMNS = f"""s.app_name, s.user_id, s.session_key, {NEWEST_ROW_KEY},
  max(coalesce((SELECT position FROM evs_app_positions WHERE app_name = s.app_name), 0),
      coalesce((SELECT max(position) FROM evs_events WHERE app_name = s.app_name
                AND shared_state), 0)), s.head_seq,
  s.head_hash"""

HEAD_SQL = f"SELECT {_HEAD_COLUMNS} FROM evs_sessions s WHERE s.session_id = ?"
"""The head of one session: a ``Head`` row."""

_HEADS_SQL = f"SELECT s.session_id, {_HEAD_COLUMNS} FROM evs_sessions s WHERE s.session_id IN "
_SET_APP_POSITION_SQL = (
    "INSERT INTO evs_app_positions (app_name, position) VALUES (?, ?) "
    "ON CONFLICT (app_name) DO UPDATE SET position = excluded.position"
)
_SET_HEAD_SQL = (
    "UPDATE evs_sessions SET head_seq = ?, head_hash = ?, head_signature = ? WHERE session_id = ?"
)
_INSERT_EVENT_SQL = """
INSERT INTO evs_events (row_key, position, session_id, seq, event_id, kind, invocation_id, author,
  timestamp, shared_state, app_name, user_id, schema_version, payload, chain_hash, signature)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
_WIDTH: Final = 16
_ROWS_PER_INSERT: Final = 1_000
"""Rows per INSERT statement (16 parameters each, well under SQLite's 32,766)."""
_SCOPE_HEAD_SQL = (
    "SELECT head_seq, head_hash FROM evs_scope_heads WHERE app_name = ? AND user_id = ?"
)
_INSERT_ENTRY_SQL = (
    "INSERT INTO evs_scope_entries (app_name, user_id, stream_seq, position, session_id, seq, "
    "event_id, delta, chain_hash, signature) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_SET_SCOPE_HEAD_SQL = (
    "INSERT INTO evs_scope_heads (app_name, user_id, head_seq, head_hash, head_signature) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (app_name, user_id) DO UPDATE SET "
    "head_seq = excluded.head_seq, head_hash = excluded.head_hash, "
    "head_signature = excluded.head_signature"
)
_BY_IDS_SQL = f"SELECT {EVENT_COLUMNS} FROM evs_events WHERE session_id = ? AND event_id IN "


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """One caller's append, as the group job sees it."""

    session_id: str
    events: Sequence[NewEvent]
    expected_version: int | None
    key: bytes | None = None
    """The signing key of a keyed store (each row is signed), else None."""
    owner: tuple[str, str] | None = None
    """(app, user) the session must belong to (``Backend.append``), else None."""


class Head:
    """What an append needs to know of a session, read inside its write transaction."""

    __slots__ = ("app_name", "clock", "hash", "head_seq", "key", "user_id", "version")
    app_name: str
    user_id: str
    key: int
    head_seq: int

    def __init__(self, row: Sequence[Any]) -> None:
        """``row``: a ``HEAD_SQL`` row (``_HEADS_SQL`` rows end with the same columns)."""
        (self.app_name, self.user_id, self.key, newest, clock, self.head_seq,
         head_hash) = row[-7:]
        self.version: int = seq_of_row_key(newest)
        # The app's newest shared-state position (see StoredEvent.position): every write holds
        # the file's lock, so positions are handed out and committed in order.
        self.clock: int = clock or 0
        # The head record (revision 0008): where the chain continues from.
        self.hash: bytes = GENESIS if head_hash is None else bytes(head_hash)

    @property
    def consistent(self) -> bool:
        """Whether the log ends where the head record says (else it was tampered with)."""
        return self.head_seq == self.version

    def check(self, session_id: str) -> None:
        """Raise TamperedLogError unless ``consistent``."""
        if not self.consistent:
            raise TamperedLogError(session_id, head_seq=self.head_seq, version=self.version)


class HeadCache:
    """The heads of the sessions the writer appended to lately, kept between its transactions
    so that a group of appends need not read them again (one statement and a ``Head`` per
    session fewer: under load every statement is a wait for the GIL).

    Used on the writer thread only. Exact whenever it is used, because:

    - it holds only heads read or moved inside this connection's write transactions, and the
      app positions alongside them (``clock``), put there by the append jobs themselves;
    - ``check`` (at the start of every group, inside its transaction, so under the file's
      write lock) drops everything when ``PRAGMA data_version`` says another connection
      committed since: another process, the CLI, raw SQL (e.g. tampering);
    - every other write of this connection that could move a head or an app position
      (deleting, forking, importing, creating a session with events) and every transaction
      that fails or rolls back drops everything (``clear``), so moved-but-not-committed
      heads never outlive their transaction.

    At most ``limit`` sessions are kept (the least recently appended go first).
    """

    __slots__ = ("_clocks", "_heads", "_version", "limit")

    def __init__(self, limit: int = 4_096) -> None:
        self.limit = limit
        self._heads: dict[str, Head] = {}
        self._clocks: dict[str, int] = {}
        self._version: int | None = None

    def __len__(self) -> int:
        return len(self._heads)

    def clear(self) -> None:
        """Forget every head and app position."""
        self._heads.clear()
        self._clocks.clear()

    def check(self, conn: sqlite3.Connection) -> None:
        """Drop everything if another connection committed since the last check (call it
        inside the write transaction that will use the cache)."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._version:
            self.clear()
            self._version = version

    def get(self, session_id: str) -> Head | None:
        """The session's head with its app's current position, or None when not kept."""
        found = self._heads.get(session_id)
        if found is None:
            return None
        clock = self._clocks.get(found.app_name)
        if clock is None:
            return None
        found.clock = clock
        return found

    def put(self, session_id: str, head: Head, clock: int) -> None:
        """Keep ``head`` (as moved by this transaction) and its app's position ``clock``."""
        heads = self._heads
        heads.pop(session_id, None)
        heads[session_id] = head
        if len(heads) > self.limit:
            del heads[next(iter(heads))]
        self.set_clock(head.app_name, clock)

    def set_clock(self, app_name: str, clock: int) -> None:
        """Keep the app's position ``clock`` (as moved by this transaction)."""
        clocks = self._clocks
        clocks[app_name] = clock
        if len(clocks) > self.limit:  # as many apps as sessions kept: start over
            self.clear()


def head(conn: sqlite3.Connection, session_id: str) -> Head:
    """Read the session's head; raises SessionNotFoundError."""
    row = conn.execute(HEAD_SQL, (session_id,)).fetchone()
    if row is None:
        raise SessionNotFoundError(session_id)
    return Head(row)


@functools.lru_cache(maxsize=64)
def _insert_sql(rows: int) -> str:
    return _INSERT_EVENT_SQL + (", (" + ", ".join("?" * _WIDTH) + ")") * (rows - 1)


def _insert_rows(conn: sqlite3.Connection, params: list[Any]) -> None:
    """Insert rows (``_WIDTH`` parameters each); raises sqlite3.IntegrityError having changed
    nothing (one statement, or several in a savepoint)."""
    rows = len(params) // _WIDTH
    if rows == 0:
        return
    if rows <= _ROWS_PER_INSERT:
        conn.execute(_insert_sql(rows), params)
        return
    step = _WIDTH * _ROWS_PER_INSERT
    with savepoint(conn):
        for lo in range(0, len(params), step):
            chunk = params[lo:lo + step]
            conn.execute(_insert_sql(len(chunk) // _WIDTH), chunk)


def scope_writer(conn: sqlite3.Connection, key: bytes | None) -> ScopeWriter:
    """A ``ScopeWriter`` reading stream heads inside the caller's write transaction."""

    def read_head(app_name: str, user_id: str) -> tuple[int, bytes | None]:
        row = conn.execute(_SCOPE_HEAD_SQL, (app_name, user_id)).fetchone()
        return (0, None) if row is None else (int(row[0]), row[1])

    return ScopeWriter(read_head, key)


def write_scopes(conn: sqlite3.Connection, scopes: ScopeWriter) -> None:
    """Store the streams' new entries and heads (after the events that made them, in the same
    transaction). Raises StorageError when a stream holds an entry beyond its head record (one
    written behind the store's back): the caller's savepoint then takes back the events."""
    try:
        conn.executemany(_INSERT_ENTRY_SQL, [
            (e.app_name, e.user_id, e.stream_seq, e.position, e.session_id, e.seq, e.event_id,
             e.delta, e.chain_hash, e.signature) for e in scopes.entries])
    except sqlite3.IntegrityError as exc:
        raise StorageError(
            "A user:/app: state stream holds an entry beyond its head record (written behind "
            "the store's back); nothing was appended. `evs verify` names it.") from exc
    conn.executemany(_SET_SCOPE_HEAD_SQL, [
        (h.app_name, h.user_id, h.head_seq, h.head_hash, h.head_signature)
        for h in scopes.heads()])


def _rows(session_id: str, head: Head, events: Sequence[NewEvent], clock: int,
          params: list[Any], key: bytes | None,
          scopes: ScopeWriter) -> tuple[list[StoredEvent], int]:
    """Add the batch's rows at the head to ``params``, chained (and signed with ``key``) after
    it, and move the head past them; add the shared-state stream entries to ``scopes``; return
    the envelopes and the app's position after it."""
    out = []
    chain = head.hash
    for offset, e in enumerate(events, 1):
        seq = head.version + offset
        if e.shared_state:
            clock += 1
            scopes.add(head.app_name, head.user_id, session_id=session_id, seq=seq,
                       event_id=e.event_id, position=clock, app_delta=e.app_delta,
                       user_delta=e.user_delta)
        chain = link(chain, seq, content_digest(e))
        signature = None if key is None else sign_event(key, session_id, chain)
        params += (row_key(head.key, seq), clock, session_id, seq, e.event_id, e.kind,
                   e.invocation_id, e.author, e.timestamp, e.shared_state, head.app_name,
                   head.user_id, e.schema_version, e.payload, chain, signature)
        out.append(written(session_id, e, seq=seq, position=clock, chain_hash=chain,
                           signature=signature))
    head.version += len(events)
    head.head_seq = head.version
    head.hash = chain
    return out, clock


def _head_params(session_id: str, head: Head, key: bytes | None) -> tuple[Any, ...]:
    signature = None if key is None else sign_head(key, session_id, head.head_seq, head.hash)
    return head.head_seq, head.hash, signature, session_id


def insert(
    conn: sqlite3.Connection, session_id: str, head: Head, events: Sequence[NewEvent],
    key: bytes | None = None,
) -> list[StoredEvent]:
    """Insert the batch at the head, chained after it (signed with ``key``). Raises
    sqlite3.IntegrityError (a stored id) having changed nothing. The head record and the app
    position are updated after the rows (statements with no constraint to fail)."""
    return _insert(conn, session_id, head, events, key)[0]


def _insert(
    conn: sqlite3.Connection, session_id: str, head: Head, events: Sequence[NewEvent],
    key: bytes | None,
) -> tuple[list[StoredEvent], int]:
    params: list[Any] = []
    clock = head.clock
    scopes = scope_writer(conn, key)
    out, clock = _rows(session_id, head, events, clock, params, key, scopes)
    if scopes.entries:
        with savepoint(conn):
            _insert_rows(conn, params)
            write_scopes(conn, scopes)
    else:
        _insert_rows(conn, params)
    conn.execute(_SET_HEAD_SQL, _head_params(session_id, head, key))
    if clock != head.clock:
        conn.execute(_SET_APP_POSITION_SQL, (head.app_name, clock))
    return out, clock


def _stored_by_ids(
    conn: sqlite3.Connection, session_id: str, events: Sequence[NewEvent]
) -> dict[str, StoredEvent]:
    marks = ", ".join("?" * len(events))
    rows = conn.execute(
        f"{_BY_IDS_SQL}({marks})", (session_id, *(e.event_id for e in events))
    ).fetchall()
    return {s.event_id: s for s in stored_events(session_id, rows)}


def append_one(conn: sqlite3.Connection, request: AppendRequest,
               cache: HeadCache | None = None) -> list[StoredEvent]:
    """Append one batch with its contract (see the module docstring); changes nothing when
    it raises. The head is read, not taken from ``cache``; the moved head is put there."""
    session_id, events, expected = request.session_id, request.events, request.expected_version
    current = head(conn, session_id)
    if request.owner is not None and (current.app_name, current.user_id) != request.owner:
        raise SessionNotFoundError(session_id)
    actual = current.version
    if expected is None or expected == actual:
        current.check(session_id)
        try:
            out, clock = _insert(conn, session_id, current, events, request.key)
            if cache is not None:
                cache.put(session_id, current, clock)
            return out
        except sqlite3.IntegrityError:  # insert changed nothing
            retried = check_retry(session_id, events, _stored_by_ids(conn, session_id, events))
            if retried is not None:
                return retried
            raise
    retried = check_retry(session_id, events, _stored_by_ids(conn, session_id, events))
    if retried is not None:
        return retried
    raise ConcurrencyError(session_id, expected_version=expected, actual_version=actual)


def _alone(conn: sqlite3.Connection, request: AppendRequest, cache: HeadCache) -> Outcome:
    try:
        return False, append_one(conn, request, cache)
    except Exception as exc:
        if not conn.in_transaction:
            raise  # SQLite aborted the transaction: the whole group fails
        return True, exc


def _heads(conn: sqlite3.Connection, session_ids: set[str], cache: HeadCache) -> dict[str, Head]:
    """The sessions' heads: from ``cache`` where it holds them, else read (and kept there)."""
    found: dict[str, Head] = {}
    missing: list[str] = []
    for session_id in session_ids:
        cached = cache.get(session_id)
        if cached is None:
            missing.append(session_id)
        else:
            found[session_id] = cached
    for lo in range(0, len(missing), 500):
        chunk = missing[lo:lo + 500]
        sql = f"{_HEADS_SQL}({', '.join('?' * len(chunk))})"
        for row in conn.execute(sql, chunk):
            read = found[row[0]] = Head(row)
            if read.consistent:  # a tampered log is judged again by append_one
                cache.put(row[0], read, read.clock)
    return found


def append_many(conn: sqlite3.Connection, requests: Sequence[AppendRequest],
                cache: HeadCache) -> list[Outcome]:
    """Run the appends in order and return each one's outcome ``(failed, result or error)``:
    the outcomes ``append_one`` would give them one after another (see the module docstring).
    Heads come from ``cache`` where it holds them (checked first: see ``HeadCache``), and the
    moved heads are kept there. Raises only what fails the whole transaction (the caller then
    clears ``cache``)."""
    if len(requests) == 1:  # a lone append: the same statements, less bookkeeping
        return [_alone(conn, requests[0], cache)]
    cache.check(conn)
    outcomes: list[Outcome] = []
    i, n = 0, len(requests)
    while i < n:
        heads = _heads(conn, {r.session_id for r in requests[i:]}, cache)
        start_clocks = {h.app_name: h.clock for h in heads.values()}
        clocks = dict(start_clocks)
        taken: dict[str, set[str]] = {}
        moved: dict[str, tuple[Head, AppendRequest]] = {}
        params: list[Any] = []
        results: list[list[StoredEvent]] = []
        scopes: ScopeWriter | None = None
        first = i
        while i < n:
            request = requests[i]
            current = heads.get(request.session_id)
            if current is None or request.expected_version not in (None, current.version) \
                    or not current.consistent or (request.owner is not None and (
                        current.app_name, current.user_id) != request.owner):
                break
            if scopes is None:
                scopes = scope_writer(conn, request.key)
            elif scopes.key != request.key:
                break  # a run's stream entries are signed with one key
            ids = taken.setdefault(request.session_id, set())
            if any(e.event_id in ids for e in request.events):
                break
            ids.update(e.event_id for e in request.events)
            out, clocks[current.app_name] = _rows(
                request.session_id, current, request.events, clocks[current.app_name], params,
                request.key, scopes)
            moved[request.session_id] = (current, request)
            results.append(out)
            i += 1
        if results:
            try:
                if scopes is not None and scopes.entries:
                    with savepoint(conn):
                        _insert_rows(conn, params)
                        write_scopes(conn, scopes)
                else:
                    _insert_rows(conn, params)
            except (sqlite3.IntegrityError, StorageError):  # nothing written: one by one
                cache.clear()  # its heads were moved past rows that are not there
                outcomes.extend(_alone(conn, r, cache) for r in requests[first:i])
            else:
                # One head update per session of the run, however many appends it had.
                conn.executemany(_SET_HEAD_SQL, [_head_params(sid, h, r.key)
                                                 for sid, (h, r) in moved.items()])
                for app_name, clock in clocks.items():
                    if clock != start_clocks[app_name]:
                        conn.execute(_SET_APP_POSITION_SQL, (app_name, clock))
                        cache.set_clock(app_name, clock)
                outcomes.extend((False, out) for out in results)
        if i < n:  # the append that stopped the run, at its place in the order
            outcomes.append(_alone(conn, requests[i], cache))
            i += 1
    return outcomes
