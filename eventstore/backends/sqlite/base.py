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
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar, cast

from eventstore._exceptions import (
    ConcurrencyError,
    SessionNotFoundError,
    StorageError,
    StoreClosedError,
    StoreUsageError,
)
from eventstore.backends import records, rules
from eventstore.backends.sql import (
    EVENT_COLUMNS,
    ROW_COLUMNS,
    Wakeups,
    scope,
)
from eventstore.backends.sql.base import RangeRead, SQLBackendBase

from . import artifacts as artifacts_sql
from . import fork as forks
from . import reads as queries
from . import retention
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

R = TypeVar("R")
T = TypeVar("T")

POLL_INTERVAL: Final = 0.1
"""Seconds between version polls while waiting for another process's appends."""

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
_KEY_SQL = "SELECT session_key FROM evs_sessions WHERE session_id = ?"


_DRIVER_ERRORS = (sqlite3.Error, OverflowError, ValueError)
"""What the driver raises: its own errors, and OverflowError/ValueError for parameters it
cannot bind (e.g. an int past 64 bits)."""


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")


class SQLiteBackend(SQLBackendBase):
    """The SQLite backend (see the module docstring for the design and its guarantees).

    Open it with ``SQLiteBackend.open(url)`` (``open_store`` does); close it with ``aclose()``.
    """

    _ID_CONTAINS_SQL = "instr(lower(s.given_id), lower(?)) > 0"

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

    # -- the shared base's hooks (``SQLBackendBase``: its jobs are this package's functions) --

    async def _read_job(
        self, job: Callable[[Any], R | Awaitable[R]], *, what: str, stale_ok: bool = False,
        session_id: str | None = None,
    ) -> R:
        return cast("R", await self._read(job, what=what))

    async def _write_job(
        self, job: Callable[[Any], R | Awaitable[R]], *, what: str,
        session_id: str | None = None, keeps_heads: bool = False,
    ) -> R:
        return cast("R", await self._write(job, what=what, session_id=session_id,
                                           keeps_heads=keeps_heads))

    def _statement_job(self, sql: str, params: Sequence[Any]
                       ) -> Callable[[sqlite3.Connection], list[Any]]:
        return lambda conn: conn.execute(sql, params).fetchall()

    def _range_job(self, wanted: RangeRead, build: Callable[[str, list[Any]], list[T]]
                   ) -> Callable[[sqlite3.Connection], list[T]]:
        """One of the range reads (``_RANGE_SQL``), ``build`` applied to its rows; when
        nothing came back, the session's key is looked up to tell a missing session (or one
        not the owner's) from an empty range."""
        session_id, owner = wanted.session_id, wanted.owner
        sql = _RANGE_SQL[wanted.plain, wanted.backwards, owner is not None]
        whose: tuple[str, ...] = (session_id,) if owner is None else (session_id, *owner)
        params = (*whose, wanted.low, wanted.high, -1 if wanted.limit is None else wanted.limit)

        def job(conn: sqlite3.Connection) -> list[T]:
            rows = conn.execute(sql, params).fetchall()
            if not rows and conn.execute(
                    _KEY_SQL if owner is None else _KEY_SQL + _OWNED, whose).fetchone() is None:
                raise SessionNotFoundError(session_id)
            return build(session_id, rows)

        return job

    async def _cache_write(self, job: Callable[[Any], Awaitable[None] | None], *, what: str,
                           session_id: str | None = None, transaction: bool = False) -> None:
        if self._read_only:
            return  # a cache: a read-only store simply does not keep one
        # Always a transaction of its own on the writer (every write here is one).
        await self._write(job, what=what, session_id=session_id, keeps_heads=True)

    # -- sessions ------------------------------------------------------------------------------

    async def _create_session(self, record: records.SessionRecord,
                              initial: Sequence[records.NewEvent],
                              artifacts: Sequence[records.NewArtifact],
                              imported: Sequence[records.ImportedLink]) -> str:
        given = record.id

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
                rules.check_artifact_version(sid, artifact, artifacts_sql.save(
                    conn, key, mime_type=artifact.mime_type, data=artifact.data,
                    created_at=artifact.created_at, signing_key=self.signing_key))
            return sid

        return await self._grouped(job, what=f"create session {given!r}", session_id=given)

    async def import_session(self, record: records.SessionRecord,
                             source: records.ImportSource) -> str:
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
                    rules.check_batch_ids(given, page.events)
                    insert(conn, sid, head(conn, sid), page.events, self.signing_key)
                conn.executemany(
                    "INSERT INTO evs_imported_chain (session_id, seq, chain_hash, signature, "
                    "origin_session_id) VALUES (?, ?, ?, ?, ?)",
                    [(sid, link.seq, link.chain_hash, link.signature, link.origin_session_id)
                     for link in page.imported])
                for artifact in page.artifacts:
                    key = (record.app_name, record.user_id,
                           scope(given if artifact.session_scoped else None), artifact.filename)
                    rules.check_artifact_version(sid, artifact, artifacts_sql.save(
                        conn, key, mime_type=artifact.mime_type, data=artifact.data,
                        created_at=artifact.created_at, signing_key=self.signing_key))
                if page.copy_of is not None:
                    forks.insert_link(conn, dataclasses.replace(page.copy_of, session_id=sid),
                                      self.signing_key)
            return sid

        return await self._write(job, what=f"import session {given!r}", session_id=given)

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

    async def _append(self, session_id: str, events: Sequence[records.NewEvent],
                      expected_version: int | None,
                      owner: tuple[str, str] | None) -> list[records.StoredEvent]:
        request = AppendRequest(session_id, events, expected_version, self.signing_key, owner)

        heads = self._heads

        def job(conn: sqlite3.Connection) -> list[records.StoredEvent]:
            return append_one(conn, request, heads)

        stored = await self._grouped(job, what=f"append to session {session_id!r}",
                                     session_id=session_id, request=request)
        self._wakeups.wake(session_id)
        return stored

    # -- artifacts -----------------------------------------------------------------------------

    async def _save_artifact(self, key: tuple[str, str, str, str], *, mime_type: str,
                             data: bytes, created_at: float, metadata: bytes | None) -> int:
        filename = key[3]
        return await self._grouped(
            lambda conn: artifacts_sql.save(conn, key, mime_type=mime_type, data=data,
                                            created_at=created_at, metadata=metadata,
                                            signing_key=self.signing_key),
            what=f"save artifact {filename!r}",
        )

    # -- memory (see memory_index) -------------------------------------------------------------

    async def _delete_artifact(self, key: tuple[str, str, str, str]) -> int:
        filename = key[3]
        return await self._write(lambda conn: artifacts_sql.delete(conn, key),
                                 what=f"delete artifact {filename!r}")

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

