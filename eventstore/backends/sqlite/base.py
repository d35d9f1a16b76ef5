"""The embedded SQLite backend: one file, many processes, one driver round trip per operation.

Design (measured, see ``scripts/bench_store.py``):

- **Driver threads.** sqlite3 is blocking, so every call must leave the event loop; each hop to a
  worker thread costs ~100 µs, which would dominate an append done statement by statement (the
  way aiosqlite or SQLAlchemy's async layer does it). aiosqlite offers no public way to run a
  whole function on its thread, so this module owns the thread itself: a ``_Driver`` is one
  thread owning one ``sqlite3`` connection and running whole jobs — e.g. ``BEGIN IMMEDIATE`` /
  version check / inserts / ``COMMIT`` — handed to it with an asyncio future. One operation, one
  hop. (aiosqlite is still what alembic and SQLAlchemy use for migrations.)
- **One writer, one reader.** The writer connection (autocommit mode, explicit transactions)
  runs jobs strictly one after another, which serializes this process's writes as a lock would;
  every write transaction starts with ``BEGIN IMMEDIATE`` so that several processes writing one
  file queue on SQLite's lock (``busy_timeout`` 30 s) instead of failing half way. The reader
  connection runs reads concurrently with writes (WAL).
- **Group commit.** Appends, session creations and artifact saves go through ``GroupCommit``
  (``group``): the writer takes every such write waiting when the previous transaction
  ends and commits them together, each with its own outcome (a write that fails changes
  nothing), each caller answered after the ``COMMIT``; a run of appends costs one multi-row
  INSERT and one head update in all (``append.append_many``). Under load from many
  sessions one commit (one fsync with ``FULL``) serves many appends; a lone append commits at
  once. Deletes, snapshots and migrations stay one write per transaction (rare, or a cache).
- **Kept heads.** The writer keeps the heads it read and moved in its own committed
  transactions (``append.HeadCache``), so a group reads only the heads of sessions it
  has not seen lately; ``PRAGMA data_version`` at the start of each group drops them when
  another connection committed, and ``_write`` clears them for every write that could move a
  head (unless told it cannot) and after every failed transaction.
- **Checkpoints off the append path.** A ``Checkpointer`` thread (``checkpoint``), with
  its own connection, copies committed WAL frames into the file soon after each write job
  (``PASSIVE``: it never blocks the writer or readers); the writer's own automatic checkpoint
  is only a safety net, so no append pays for copying the WAL of a few hundred others.
- **Durability.** ``synchronous=NORMAL`` (default): a committed append survives a crash of the
  process (or of every process); after a power failure or OS crash the newest commits may be lost,
  but the file is never corrupted. ``synchronous=FULL``: commits also survive power failure, at
  the cost of an fsync per commit.
- **Errors.** sqlite3 exceptions are translated in one place (``open.translate``)
  into the store's errors; idempotent retries and conflicts take a slower diagnostic path
  judged by ``check_retry``, the rule every backend shares.
- **Layout.** Events are addressed by ``row_key = session_key << 32 | seq`` (revision 0003),
  unique through an index of its own, and stored in commit order under a rowid ``id``
  (revision 0012): an append writes at the end of the table, plus the ``row_key`` index and the
  ``(session_id, event_id)`` guard that makes retries idempotent. (Keyed by ``row_key`` itself,
  as from 0003 to 0011, a session's rows sat together, but 64 sessions appending at once
  inserted in 64 places in the middle of the table, and SQLite rebalances pages there: a group
  commit's SQLite time per event went from 42 to 23 µs with the change. One session alone pays
  for the second index: one more B-tree insert and WAL page per commit, 11 to 15 µs more of the
  writer's job, 7 to 12% of an append, measured in place.)
- **Shared-state positions.** An app's shared-state events are numbered 1, 2, 3 … by its counter
  in ``evs_app_positions``, read and advanced inside the write transaction (every write holds
  the file's lock, so positions are handed out and committed in order); every other event takes
  the counter's current value. Deleting sessions never lowers the counter, so no position is
  handed out twice. Each shared-state event also appends its ``app:``/``user:`` stream entries
  (``evs_scope_entries``, ``evs_scope_heads``: ``eventstore._scopes``) in the same
  transaction; deleting a session leaves them, and the shared snapshots they fold into.
- **Live tails.** ``wait_for_events`` wakes at once on this process's appends and polls the
  session's version so that appends by other processes are seen within ``POLL_INTERVAL``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

from eventstore._exceptions import (
    ConcurrencyError,
    SessionNotFoundError,
    StorageError,
    StoreClosedError,
    StoreUsageError,
)
from eventstore._fork import ForkLink, ForkPlan
from eventstore._retention import RetentionPolicy
from eventstore.backends.protocol import (
    ArtifactRecord,
    EventRow,
    HeadState,
    ImportedLink,
    ImportSource,
    MemoryRow,
    NewArtifact,
    NewEvent,
    ScopeEntry,
    ScopeHead,
    SessionRecord,
    SharedSnapshot,
    StoredEvent,
    check_artifact_version,
    check_batch_ids,
)
from eventstore.backends.sql import (
    APP_POSITIONS_SQL,
    EVENT_COLUMNS,
    MAX_POSITION,
    NEWEST_ROW_KEY,
    ROW_COLUMNS,
    SCOPE_COLUMNS,
    SCOPE_HEAD_COLUMNS,
    SESSION_COLUMNS,
    Wakeups,
    event_rows,
    scope,
    scope_entries,
    scope_heads,
    seq_bound,
    session_record,
    shared_scope,
    stored_events,
)

from . import artifacts as artifacts_sql
from . import fork as forks
from . import memory_index as memory
from . import reads as queries
from . import retention, snapshots
from .append import (
    HEAD_SQL,
    AppendRequest,
    Head,
    HeadCache,
    append_many,
    append_one,
    head,
    insert,
)
from .checkpoint import WRITER_AUTOCHECKPOINT, Checkpointer
from .driver import Driver as _Driver
from .driver import (
    connect_reader,
    connect_writer,
)
from .group import GroupCommit, savepoint
from .open import ensure_schema, path_of, translate

__all__ = ["POLL_INTERVAL", "SQLiteBackend"]

T = TypeVar("T")

POLL_INTERVAL: Final = 0.1
"""Seconds between version polls while waiting for another process's appends."""

_SESSION_SQL = f"""
SELECT {SESSION_COLUMNS} FROM evs_sessions s
LEFT JOIN evs_events e ON e.row_key = {NEWEST_ROW_KEY}
"""
# One statement, so the session key and the rows come from one snapshot: a key freed by a
# deleted session and taken by a new one can never mix two sessions' events.
# The owner's variants judge the session's (app, user) in that same statement. The unary
# ``+`` keeps SQLite on the primary key: through the (app, user) index it would no longer know
# the session is one row, and would sort the events in a temporary B-tree (70 % slower).
_OWNED: Final = " AND +app_name = ? AND +user_id = ?"
_READ_SQL = (
    f"SELECT {EVENT_COLUMNS} FROM evs_events, "
    "(SELECT session_key << 32 AS base FROM evs_sessions WHERE session_id = ?{owned}) "
    "WHERE row_key > base + ? AND row_key <= base + ? ORDER BY row_key {order} LIMIT ?"
)
_RANGE_SQL: Final = {
    (rows, backwards, owned): _READ_SQL.format(
        order="DESC" if backwards else "ASC", owned=_OWNED if owned else ""
    ).replace(EVENT_COLUMNS, ROW_COLUMNS if rows else EVENT_COLUMNS, 1)
    for rows in (False, True) for backwards in (False, True) for owned in (False, True)
}
"""(plain rows?, backwards?, owner checked?) -> the range read's statement."""
_STREAM_SQL: Final = (
    f"SELECT {SCOPE_COLUMNS} FROM evs_scope_entries WHERE app_name = ? AND user_id = ? "
    "AND stream_seq > ? AND position <= ? ORDER BY stream_seq"
)
_STREAM_HEADS_SQL: Final = (
    f"SELECT {SCOPE_HEAD_COLUMNS} FROM evs_scope_heads ORDER BY app_name, user_id"
)
_KEY_SQL = "SELECT session_key FROM evs_sessions WHERE session_id = ?"
_SCOPE_SQL = (
    "SELECT e.seq, e.app_name, e.user_id FROM evs_events e JOIN evs_sessions s "
    "ON s.session_id = e.session_id WHERE e.session_id = ? "
    "AND (e.app_name <> s.app_name OR e.user_id <> s.user_id) ORDER BY e.seq"
)
_SIGNED_HEAD_SQL = "SELECT 1 FROM evs_sessions WHERE head_signature IS NOT NULL LIMIT 1"


_DRIVER_ERRORS = (sqlite3.Error, OverflowError, ValueError)
"""What the driver raises: its own errors, and OverflowError/ValueError for parameters it
cannot bind (e.g. an int past 64 bits)."""


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")


class SQLiteBackend:
    """The SQLite backend (see the module docstring for the design and its guarantees).

    Open it with ``SQLiteBackend.open(url)`` (``open_store`` does); close it with ``aclose()``.
    """

    def __init__(self, url: str, path: str, *, read_only: bool, group_commit: bool = True,
                 signing_key: bytes | None = None) -> None:
        self.url = url
        self.signing_key = signing_key
        self._path = path
        self._read_only = read_only
        self._group_commit = group_commit
        self._group: GroupCommit | None = None
        self._writer: _Driver | None = None
        self._checkpointer: Checkpointer | None = None
        self._reader: _Driver | None = None
        self._closed = False
        self._wakeups = Wakeups(poll_interval=POLL_INTERVAL)
        self._heads = HeadCache()
        """The writer's heads between transactions (``append.HeadCache``): only the
        append jobs keep it; every other write that could move a head clears it."""

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        auto_upgrade: bool = False,
        read_only: bool = False,
        synchronous: str = "NORMAL",
        group_commit: bool = True,
        signing_key: bytes | None = None,
    ) -> SQLiteBackend:
        """Open the SQLite file ``url`` names.

        Raises SchemaOutdatedError (with the upgrade command) when its schema is behind head,
        unless ``auto_upgrade`` (then it is upgraded first; a file that does not exist is
        created). ``read_only`` opens the file read-only: writes raise StoreUsageError. In a
        directory the process cannot write (a WAL reader cannot create the ``-shm`` file) it is
        opened immutable instead, which does not see changes other writers make after the
        open — fine for inspection (see ``connect_read_only``).
        ``synchronous`` is ``NORMAL`` or ``FULL`` (see the module docstring).
        ``group_commit=False`` commits every write alone (the behaviour before group commit;
        for comparisons in tests and benchmarks). ``signing_key`` signs every appended event
        (keyed mode, see ``eventstore._chain``).
        """
        sync = synchronous.upper() if isinstance(synchronous, str) else ""
        if sync not in ("NORMAL", "FULL"):
            raise StoreUsageError(f"synchronous must be 'NORMAL' or 'FULL', not {synchronous!r}.")
        path = path_of(url)
        if read_only and not await asyncio.to_thread(os.path.exists, path):
            raise StorageError(f"Cannot open {url} read-only: the file {path} does not exist.")
        await ensure_schema(url, path, auto_upgrade=auto_upgrade and not read_only)
        backend = cls(url, path, read_only=read_only, group_commit=group_commit,
                      signing_key=signing_key)
        await backend._start(sync)
        return backend

    async def _start(self, synchronous: str) -> None:
        path = self._path

        def writer() -> sqlite3.Connection:
            return connect_writer(path, synchronous=synchronous,
                                  autocheckpoint=WRITER_AUTOCHECKPOINT)

        def reader() -> sqlite3.Connection:
            return connect_reader(path, read_only=self._read_only)

        try:
            if not self._read_only:
                self._checkpointer = Checkpointer(path)
                self._checkpointer.start()
                self._writer = _Driver(f"evs-sqlite-writer:{path}", writer,
                                       after_job=self._checkpointer.notify)
                await self._writer.start()
                if self._group_commit:
                    self._group = GroupCommit(
                        self._writer.post, batch=functools.partial(append_many, cache=self._heads),
                        on_failure=self._heads.clear)
            self._reader = _Driver(f"evs-sqlite-reader:{path}", reader)
            await self._reader.start()
        except sqlite3.Error as exc:
            await self.aclose()
            raise translate(exc, url=self.url, what="open the database", session_id=None) \
                from exc

    # -- running jobs --------------------------------------------------------------------------

    async def _run(
        self,
        driver: _Driver | None,
        fn: Callable[[sqlite3.Connection], T],
        *,
        what: str,
        session_id: str | None = None,
    ) -> T:
        if self._closed or self._reader is None:
            raise StoreClosedError()
        if driver is None:
            raise StoreUsageError(
                f"Cannot {what}: the store at {self.url} was opened read-only."
            )
        try:
            return await driver.run(fn)
        except _DRIVER_ERRORS as exc:
            raise translate(exc, url=self.url, what=what, session_id=session_id) from exc

    async def _write(
        self, fn: Callable[[sqlite3.Connection], T], *, what: str, session_id: str | None = None,
        keeps_heads: bool = False,
    ) -> T:
        """Run ``fn`` in a transaction of its own. Unless ``keeps_heads`` (``fn`` moves no head
        or app position, or keeps ``self._heads`` exact itself) the head cache is cleared
        first; it is cleared whenever the transaction fails."""
        heads = self._heads

        def transaction(conn: sqlite3.Connection) -> T:
            if not keeps_heads:
                heads.clear()
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
                if conn.in_transaction:  # a diagnostic path may have rolled back already
                    conn.execute("COMMIT")
            except BaseException:
                heads.clear()
                _rollback(conn)
                raise
            return result

        return await self._run(self._writer, transaction, what=what, session_id=session_id)

    async def _grouped(
        self, fn: Callable[[sqlite3.Connection], T], *, what: str, session_id: str | None = None,
        request: AppendRequest | None = None,
    ) -> T:
        """Run ``fn`` as one write of a group transaction (see ``group`` for what
        ``fn`` must guarantee); without group commit, in a transaction of its own. ``fn``
        moves no head or app position, or keeps the head cache exact itself (an append
        job) or clears it."""
        group = self._group
        if group is None:
            return await self._write(fn, what=what, session_id=session_id, keeps_heads=True)
        if group.claim_alone():
            try:
                return await self._write(fn, what=what, session_id=session_id,
                                         keeps_heads=True)
            finally:
                group.release_alone()
        if self._closed or self._reader is None:
            raise StoreClosedError()
        try:
            return await group.run(fn, request=request)
        except _DRIVER_ERRORS as exc:
            raise translate(exc, url=self.url, what=what, session_id=session_id) from exc

    async def _read(
        self, fn: Callable[[sqlite3.Connection], T], *, what: str, session_id: str | None = None
    ) -> T:
        return await self._run(self._reader, fn, what=what, session_id=session_id)

    # -- sessions ------------------------------------------------------------------------------

    async def create_session(
        self,
        record: SessionRecord,
        initial: Sequence[NewEvent],
        artifacts: Sequence[NewArtifact] = (),
        imported: Sequence[ImportedLink] = (),
    ) -> str:
        given = record.id
        check_batch_ids(given, initial)

        def job(conn: sqlite3.Connection) -> str:
            if not initial and not artifacts and not imported:
                return create(conn)  # one statement: nothing to undo if it fails
            with savepoint(conn):
                return create(conn)

        def create(conn: sqlite3.Connection) -> str:
            sid = queries.free_key(conn, record.session_id)
            conn.execute(
                "INSERT INTO evs_sessions (session_id, given_id, session_key, app_name, "
                "user_id, created_at) VALUES (?, ?, (SELECT coalesce(max(session_key), 0) + 1 "
                "FROM evs_sessions), ?, ?, ?)",
                (sid, given, record.app_name, record.user_id, record.created_at),
            )
            if initial:
                self._heads.clear()  # the events may move the app's position
                insert(conn, sid, head(conn, sid), initial, self.signing_key)
            conn.executemany(
                "INSERT INTO evs_imported_chain (session_id, seq, chain_hash, signature, "
                "origin_session_id) VALUES (?, ?, ?, ?, ?)",
                [(sid, link.seq, link.chain_hash, link.signature, link.origin_session_id)
                 for link in imported])
            for artifact in artifacts:
                key = (record.app_name, record.user_id,
                       scope(given if artifact.session_scoped else None), artifact.filename)
                check_artifact_version(sid, artifact, artifacts_sql.save(
                    conn, key, mime_type=artifact.mime_type, data=artifact.data,
                    created_at=artifact.created_at, signing_key=self.signing_key))
            return sid

        return await self._grouped(job, what=f"create session {given!r}", session_id=given)

    async def import_session(self, record: SessionRecord, source: ImportSource) -> str:
        given = record.id

        def job(conn: sqlite3.Connection) -> str:
            # The whole import is this one writer transaction; ``source`` reads the file in
            # the writer's thread, a page at a time, so the event loop never blocks on it.
            sid = queries.free_key(conn, record.session_id)
            conn.execute(
                "INSERT INTO evs_sessions (session_id, given_id, session_key, app_name, "
                "user_id, created_at) VALUES (?, ?, (SELECT coalesce(max(session_key), 0) + 1 "
                "FROM evs_sessions), ?, ?, ?)",
                (sid, given, record.app_name, record.user_id, record.created_at),
            )
            while (page := source()) is not None:
                if page.events:
                    check_batch_ids(given, page.events)
                    insert(conn, sid, head(conn, sid), page.events, self.signing_key)
                conn.executemany(
                    "INSERT INTO evs_imported_chain (session_id, seq, chain_hash, signature, "
                    "origin_session_id) VALUES (?, ?, ?, ?, ?)",
                    [(sid, link.seq, link.chain_hash, link.signature, link.origin_session_id)
                     for link in page.imported])
                for artifact in page.artifacts:
                    key = (record.app_name, record.user_id,
                           scope(given if artifact.session_scoped else None), artifact.filename)
                    check_artifact_version(sid, artifact, artifacts_sql.save(
                        conn, key, mime_type=artifact.mime_type, data=artifact.data,
                        created_at=artifact.created_at, signing_key=self.signing_key))
                if page.copy_of is not None:
                    forks.insert_link(conn, dataclasses.replace(page.copy_of, session_id=sid),
                                      self.signing_key)
            return sid

        return await self._write(job, what=f"import session {given!r}", session_id=given)

    async def fork_session(self, record: SessionRecord, plan: ForkPlan) -> str:
        return await self._write(lambda conn: forks.fork(conn, record, plan, self.signing_key),
                                 what=f"fork session {plan.origin_session_id!r}",
                                 session_id=record.id)

    async def fork_links(self, session_id: str) -> list[ForkLink]:
        return await self._read(lambda conn: forks.links(conn, session_id),
                                what=f"read the fork links of session {session_id!r}")

    async def scope_mismatches(self, session_id: str) -> list[tuple[int, str, str]]:
        def job(conn: sqlite3.Connection) -> list[tuple[int, str, str]]:
            return [(r[0], r[1], r[2]) for r in conn.execute(_SCOPE_SQL, (session_id,))]

        return await self._read(job, what=f"read the scope of session {session_id!r}'s events")

    async def has_signed_heads(self) -> bool:
        def job(conn: sqlite3.Connection) -> bool:
            return conn.execute(_SIGNED_HEAD_SQL).fetchone() is not None

        return await self._read(job, what="read whether the database is keyed")

    async def get_session(self, session_id: str) -> SessionRecord | None:
        def job(conn: sqlite3.Connection) -> SessionRecord | None:
            row = conn.execute(f"{_SESSION_SQL} WHERE s.session_id = ?", (session_id,)).fetchone()
            return None if row is None else session_record(row)

        return await self._read(job, what=f"read session {session_id!r}")

    async def find_sessions(
        self, given_id: str, *, app_name: str | None, user_id: str | None
    ) -> list[SessionRecord]:
        return await self._read(lambda conn: queries.find(conn, given_id, app_name, user_id),
                                what=f"find session {given_id!r}")

    async def list_sessions(
        self, *, app_name: str | None, user_id: str | None, after: str | None, limit: int
    ) -> list[SessionRecord]:
        where = ["s.session_id > ?"]
        params: list[Any] = [after or ""]
        if app_name is not None:
            where.append("s.app_name = ?")
            params.append(app_name)
        if user_id is not None:
            where.append("s.user_id = ?")
            params.append(user_id)
        params.append(limit)
        sql = f"{_SESSION_SQL} WHERE {' AND '.join(where)} ORDER BY s.session_id LIMIT ?"

        def job(conn: sqlite3.Connection) -> list[SessionRecord]:
            return [session_record(row) for row in conn.execute(sql, params)]

        return await self._read(job, what="list sessions")

    async def delete_session(self, session_id: str, *, expected_version: int | None = None
                             ) -> bool:
        def job(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT app_name, user_id, given_id FROM evs_sessions WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                return False
            if expected_version is not None:  # in the write transaction: no append between
                actual = retention.version(conn, session_id)
                if actual != expected_version:
                    raise ConcurrencyError(session_id, expected_version=expected_version,
                                           actual_version=actual or 0,
                                           refused="nothing was deleted")
            conn.execute(
                "DELETE FROM evs_artifacts WHERE app_name = ? AND user_id = ? "
                "AND session_scope = ?",
                (row[0], row[1], row[2]),
            )
            # Events and snapshots go with the session (ON DELETE CASCADE); its user:/app:
            # stream entries stay (they belong to their scope).
            conn.execute("DELETE FROM evs_sessions WHERE session_id = ?", (session_id,))
            return True

        deleted = await self._write(job, what=f"delete session {session_id!r}")
        self._wakeups.wake(session_id)
        return deleted

    # -- the log -------------------------------------------------------------------------------

    async def append(
        self, session_id: str, events: Sequence[NewEvent], *, expected_version: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[StoredEvent]:
        check_batch_ids(session_id, events)

        request = AppendRequest(session_id, events, expected_version, self.signing_key, owner)

        heads = self._heads

        def job(conn: sqlite3.Connection) -> list[StoredEvent]:
            return append_one(conn, request, heads)

        stored = await self._grouped(job, what=f"append to session {session_id!r}",
                                     session_id=session_id, request=request)
        self._wakeups.wake(session_id)
        return stored

    async def read(
        self,
        session_id: str,
        *,
        after: int | None,
        upto: int | None,
        backwards: bool,
        limit: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[StoredEvent]:
        return await self._read_range(session_id, False, backwards, stored_events, after=after,
                                      upto=upto, limit=limit, owner=owner)

    async def read_rows(
        self,
        session_id: str,
        *,
        after: int | None,
        upto: int | None,
        backwards: bool,
        limit: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[EventRow]:
        return await self._read_range(session_id, True, backwards, event_rows, after=after,
                                      upto=upto, limit=limit, owner=owner)

    async def _read_range(
        self,
        session_id: str,
        plain: bool,
        backwards: bool,
        build: Callable[[str, list[Any]], list[T]],
        *,
        after: int | None,
        upto: int | None,
        limit: int | None,
        owner: tuple[str, str] | None,
    ) -> list[T]:
        """Run one of the range reads (``_RANGE_SQL``) and ``build`` its rows; raises
        SessionNotFoundError when nothing came back for a missing session (or one not of
        ``owner``'s)."""
        low, high = seq_bound(after or 0), seq_bound(upto)
        count = -1 if limit is None else limit
        sql = _RANGE_SQL[plain, backwards, owner is not None]
        whose: tuple[str, ...] = (session_id,) if owner is None else (session_id, *owner)

        def job(conn: sqlite3.Connection) -> list[T]:
            rows = conn.execute(sql, (*whose, low, high, count)).fetchall()
            if not rows and conn.execute(
                    _KEY_SQL if owner is None else _KEY_SQL + _OWNED, whose).fetchone() is None:
                raise SessionNotFoundError(session_id)
            return build(session_id, rows)

        return await self._read(job, what=f"read session {session_id!r}")

    async def read_scope(
        self, *, app_name: str, user_id: str | None, after: int, upto_position: int | None,
    ) -> list[ScopeEntry]:
        params = (app_name, shared_scope(user_id), after,
                  MAX_POSITION if upto_position is None else upto_position)
        return await self._read(lambda conn: scope_entries(conn.execute(_STREAM_SQL, params)),
                                what=f"read shared state of app {app_name!r}")

    async def scope_heads(self) -> list[ScopeHead]:
        return await self._read(lambda conn: scope_heads(conn.execute(_STREAM_HEADS_SQL)),
                                what="read the shared-state streams' heads")

    async def app_positions(self) -> list[tuple[str, int | None, int]]:
        def job(conn: sqlite3.Connection) -> list[tuple[str, int | None, int]]:
            return [(str(a), None if p is None else int(p), int(h))
                    for a, p, h in conn.execute(APP_POSITIONS_SQL)]

        return await self._read(job, what="read the apps' positions")

    # -- snapshots -----------------------------------------------------------------------------

    async def load_snapshot(self, session_id: str, *, upto: int | None) -> HeadState | None:
        return await self._read(lambda conn: snapshots.load(conn, session_id, upto),
                                what=f"load a snapshot of session {session_id!r}")

    async def save_snapshot(self, session_id: str, snapshot: HeadState) -> None:
        if self._read_only:
            return  # snapshots are a cache; a read-only store simply does not keep one
        await self._write(lambda conn: snapshots.save(conn, session_id, snapshot),
                          what=f"save a snapshot of session {session_id!r}",
                          session_id=session_id, keeps_heads=True)

    async def drop_snapshots(self) -> int:
        return await self._write(snapshots.drop_all, what="drop snapshots")

    async def read_imported(
        self, session_id: str, *, after: int, limit: int
    ) -> list[ImportedLink]:
        def job(conn: sqlite3.Connection) -> list[ImportedLink]:
            rows = conn.execute(
                "SELECT seq, chain_hash, signature, origin_session_id FROM evs_imported_chain "
                "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (session_id, after, limit)).fetchall()
            return [ImportedLink(seq=r[0], chain_hash=bytes(r[1]),
                                 signature=None if r[2] is None else bytes(r[2]),
                                 origin_session_id=r[3]) for r in rows]

        return await self._read(job, what=f"read the imported chain of session {session_id!r}")

    async def load_cache(
        self, session_id: str, name: str, *, owner: tuple[str, str] | None = None
    ) -> tuple[int, bytes] | None:
        return await self._read(lambda conn: snapshots.load_cache(conn, session_id, name, owner),
                                what=f"load cache {name!r} of session {session_id!r}")

    async def save_cache(
        self, session_id: str, name: str, seq: int, data: bytes, *,
        owner: tuple[str, str] | None = None,
    ) -> None:
        if self._read_only:
            return  # a cache; a read-only store simply does not keep one
        await self._write(lambda conn: snapshots.save_cache(conn, session_id, name, seq, data,
                                                            owner),
                          what=f"save cache {name!r} of session {session_id!r}",
                          session_id=session_id, keeps_heads=True)

    async def load_shared_snapshot(
        self, *, app_name: str, user_id: str | None, upto_position: int | None
    ) -> SharedSnapshot | None:
        return await self._read(
            lambda conn: snapshots.load_shared(conn, app_name, user_id, upto_position),
            what=f"load a shared-state snapshot of app {app_name!r}",
        )

    async def save_shared_snapshot(
        self, *, app_name: str, user_id: str | None, snapshot: SharedSnapshot
    ) -> None:
        if self._read_only:
            return  # a cache: a read-only store does not keep one
        # Counted inside the write transaction, so a concurrent delete cannot slip in between.
        await self._write(
            lambda conn: snapshots.save_shared(conn, app_name, user_id, snapshot),
            what=f"save a shared-state snapshot of app {app_name!r}", keeps_heads=True,
        )

    # -- artifacts -----------------------------------------------------------------------------

    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str | None,
        filename: str,
        mime_type: str,
        data: bytes,
        created_at: float,
        metadata: bytes | None = None,
    ) -> int:
        key = (app_name, user_id, scope(session_id), filename)
        return await self._grouped(
            lambda conn: artifacts_sql.save(conn, key, mime_type=mime_type, data=data,
                                            created_at=created_at, metadata=metadata,
                                            signing_key=self.signing_key),
            what=f"save artifact {filename!r}",
        )

    async def load_artifact(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str,
        version: int | None,
    ) -> ArtifactRecord | None:
        key = (app_name, user_id, scope(session_id), filename)
        return await self._read(lambda conn: artifacts_sql.load(conn, key, version),
                                what=f"load artifact {filename!r}")

    async def list_artifacts(
        self, *, app_name: str, user_id: str, session_id: str | None
    ) -> dict[str, list[int]]:
        return await self._read(
            lambda conn: artifacts_sql.list_versions(conn, app_name, user_id, scope(session_id)),
            what="list artifacts",
        )

    # -- memory (see memory_index) -------------------------------------------------------------

    async def index_memory(
        self, *, app_name: str, user_id: str, session_id: str, upto_seq: int,
        rows: Sequence[MemoryRow], added_at: float,
    ) -> bool:
        return await self._write(
            lambda conn: memory.index(conn, app_name=app_name, user_id=user_id,
                                      session_id=session_id, upto_seq=upto_seq, rows=rows,
                                      added_at=added_at),
            what=f"add session {session_id!r} to memory", session_id=session_id,
        )

    async def search_memory(
        self, *, app_name: str, user_id: str, terms: Sequence[str], limit: int
    ) -> list[MemoryRow]:
        return await self._read(
            lambda conn: memory.search(conn, app_name=app_name, user_id=user_id, terms=terms,
                                       limit=limit),
            what="search memory",
        )

    async def remembered_sessions(self) -> list[tuple[str, str, str, int]]:
        return await self._read(memory.remembered, what="list remembered sessions")

    async def memory_rows(self, session_id: str) -> list[MemoryRow]:
        return await self._read(lambda conn: memory.rows_of(conn, session_id),
                                what=f"read the memory of session {session_id!r}")

    async def clear_memory_rows(self) -> int:
        return await self._write(memory.clear_rows, what="clear memory rows")

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str
    ) -> list[ArtifactRecord]:
        key = (app_name, user_id, scope(session_id), filename)
        return await self._read(lambda conn: artifacts_sql.versions(conn, key),
                                what=f"list versions of artifact {filename!r}")

    async def delete_artifact(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str
    ) -> int:
        key = (app_name, user_id, scope(session_id), filename)
        return await self._write(lambda conn: artifacts_sql.delete(conn, key),
                                 what=f"delete artifact {filename!r}")

    # -- cold-path reads (framework adapters) ----------------------------------------------------

    async def read_since(
        self, session_id: str, *, timestamp: float, upto: int | None, newest: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[StoredEvent]:
        return await self._read(
            lambda conn: queries.read_since(conn, session_id, timestamp=timestamp, upto=upto,
                                            newest=newest, owner=owner),
            what=f"read session {session_id!r}",
        )

    async def list_sessions_by_update(
        self, *, app_name: str, user_id: str | None
    ) -> list[SessionRecord]:
        return await self._read(lambda conn: queries.list_by_update(conn, app_name, user_id),
                                what="list sessions")

    async def list_sessions_newest(
        self, *, app_name: str | None, user_id: str | None, id_contains: str | None,
        updated_since: float | None, before: tuple[float, str] | None, limit: int,
    ) -> list[SessionRecord]:
        return await self._read(
            lambda conn: queries.list_newest(
                conn, app_name=app_name, user_id=user_id, id_contains=id_contains,
                updated_since=updated_since, before=before, limit=limit),
            what="list sessions")
    async def sessions_updated_before(
        self, *, before: float, app_name: str | None, after: tuple[float, str] | None,
        limit: int,
    ) -> list[SessionRecord]:
        return await self._read(
            lambda conn: retention.updated_before(conn, before, app_name, after, limit),
            what="list sessions by last update")

    async def retention_policies(self) -> list[RetentionPolicy]:
        return await self._read(retention.policies, what="read the retention policies")

    async def set_retention_policy(self, policy: RetentionPolicy) -> None:
        await self._write(lambda conn: retention.set_policy(conn, policy),
                          what=f"set the retention policy of app {policy.app_name!r}",
                          keeps_heads=True)

    async def clear_retention_policy(self, app_name: str | None) -> int:
        return await self._write(lambda conn: retention.clear_policy(conn, app_name),
                                 what="clear retention policies", keeps_heads=True)

    async def load_snapshots(self, session_ids: Sequence[str]) -> dict[str, HeadState]:
        return await self._read(lambda conn: queries.load_snapshots(conn, session_ids),
                                what="load snapshots")

    async def read_many(self, after: Mapping[str, int]) -> dict[str, list[StoredEvent]]:
        return await self._read(lambda conn: queries.read_many(conn, after),
                                what="read sessions")

    async def read_shared_heads(
        self, *, app_name: str, user_ids: Sequence[str | None]
    ) -> dict[str | None, tuple[SharedSnapshot | None, list[ScopeEntry]]]:
        return await self._read(lambda conn: queries.read_shared_heads(conn, app_name, user_ids),
                                what=f"read shared state of app {app_name!r}")

    async def load_head_states(self, session_ids: Sequence[str]) -> dict[str, HeadState]:
        return await self._read(lambda conn: queries.load_head_states(conn, session_ids),
                                what="load head states")

    async def save_head_states(self, states: Mapping[str, HeadState]) -> None:
        if self._read_only or not states:
            return  # a cache: a read-only store does not keep one
        await self._write(lambda conn: queries.save_head_states(conn, states),
                          what="save head states", keeps_heads=True)

    # -- live tails ----------------------------------------------------------------------------

    async def wait_for_events(self, session_id: str, *, after: int, max_wait: float) -> None:
        def version(conn: sqlite3.Connection) -> int | None:
            row = conn.execute(HEAD_SQL, (session_id,)).fetchone()
            return None if row is None else Head(row).version

        await self._wakeups.wait(
            session_id,
            after=after,
            max_wait=max_wait,
            read_version=lambda: self._read(version, what=f"read session {session_id!r}"),
        )

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        for driver in (self._writer, self._reader):
            if driver is not None:
                await driver.stop()
        if self._checkpointer is not None:
            try:
                await asyncio.to_thread(self._checkpointer.stop)
            except RuntimeError:
                # The interpreter is exiting (a store dropped unclosed is closed by its
                # finalizer then) and no executor takes new work: stop it right here.
                self._checkpointer.stop()
        self._wakeups.close()

