"""The PostgreSQL backend: many runtimes on many machines sharing one database (asyncpg).

- **Appends** run in one transaction that first takes a transaction-scoped advisory lock keyed
  by the session id (``pg_advisory_xact_lock``). The common append (no ``user:``/``app:``
  state, at the expected version, no id stored yet) is one round trip: the server-side function
  ``evs_append`` (revisions 0007, 0008, 0010, 0019) does lock, head, owner, chain, insert in
  one statement; the rest (conflicts, retries, duplicates, shared state) take the
  multi-statement path below.
  Under load, the ``evs_append`` calls waiting at one moment share round trips and commits
  (``group``: groups of at most 8, several in flight); each is still judged alone.
  The append path's SQL and both paths live in ``append``.
  Appends to one session are therefore serialized: ``seq`` stays gap-free, and event ``n + 1``
  never commits before event ``n``, so a reader tailing by ``seq`` cannot skip an event that
  commits late. Appends to different
  sessions do not wait for each other. The database's unique constraints stay the last guard.
- **Shared state.** An append carrying ``user:``/``app:`` deltas also takes an advisory lock keyed
  by the app, numbers its shared-state events after the app's counter (``evs_app_positions``)
  and holds the lock until commit, so the app's shared-state events commit in position order and
  a snapshot of their fold at a position stays right. Other appends take the counter's committed
  value without the lock. Under the same lock the append adds the events' ``app:``/``user:``
  stream entries and moves the streams' heads (``eventstore._scopes``), so a stream's entries
  are numbered and committed in order; deleting a session leaves them.
- **Live tails** use LISTEN/NOTIFY (channel ``evs_events``, payload: the session id) purely as a
  wake-up, sent after the append committed (see ``notify``: a notifying transaction would
  serialize every append's commit), coalesced, in the next grouped append's statement when one
  comes; callers always re-read from their cursor, and ``wait_for_events`` also polls, so a
  dropped listener connection delays a tail but loses nothing.
- **Several servers.** The URL may name several hosts (``h1:5432,h2:5432/db?
  target_session_attrs=read-write``): each new connection lands on the primary, so the store
  follows a failover by itself. ``read_urls`` send the reads that may be stale to hot standbys
  (``replicas``); every connection carries TCP keepalives (``keepalive``), so an append in
  flight fails (retryably) within ``SILENCE_TIMEOUT`` when the primary's machine vanishes.
- **Connections.** A job on the primary takes the connection the last job released cleanly
  (``warm``), asyncpg's pool only when that one is in use.
- **Errors** from asyncpg (and the network) are translated in one place (``_translate``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar, cast

import asyncpg

from eventstore._exceptions import (
    ConcurrencyError,
    StorageError,
    StoreClosedError,
    StoreUsageError,
)
from eventstore._migrate import check_revision, head_revision, upgrade
from eventstore._urls import redact_url
from eventstore.backends import records, rules
from eventstore.backends.sql import (
    EVENT_COLUMNS,
    NEWEST_ROW_KEY,
    ROW_COLUMNS,
    Wakeups,
    row_key,
    scope,
    seq_of_row_key,
)
from eventstore.backends.sql.base import RangeRead, SQLBackendBase, numbered

from . import artifacts as artifacts_sql
from . import fork as forks
from . import reads as queries
from . import retention
from .append import (
    APPEND_SQL,
    LOCK_ARTIFACT,
    append_locked,
    create_at_once,
    fast_args,
    fast_result,
    insert,
    lock_key,
    lock_shared,
)
from .group import AppendGroups
from .keepalive import SILENCE_TIMEOUT, bound_silence
from .notify import CHANNEL, Notices
from .open import BROKEN as _BROKEN
from .open import CONNECT_TIMEOUT, schema_revision, standby_pool, unsent
from .open import DRIVER_ERRORS as _DRIVER_ERRORS
from .open import dsn as _dsn
from .open import keep_session as _keep_session
from .open import translate as _translate
from .replicas import ReadRoute
from .warm import WarmPool

__all__ = ["CHANNEL", "POLL_INTERVAL", "SILENCE_TIMEOUT", "PostgresBackend"]

R = TypeVar("R")
T = TypeVar("T")

POLL_INTERVAL: Final = 1.0
"""Seconds between version polls while waiting (a safety net under LISTEN/NOTIFY)."""

_READ_SQL = (
    f"SELECT {EVENT_COLUMNS} FROM evs_events WHERE row_key > $1 AND row_key <= $2 "
    "ORDER BY row_key {order} LIMIT $3"
)
_ROWS_SQL = _READ_SQL.replace(EVENT_COLUMNS, ROW_COLUMNS, 1)
_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = _UPPER.lower()


class PostgresBackend(SQLBackendBase):
    """The PostgreSQL backend (see the module docstring for its guarantees).

    Open it with ``PostgresBackend.open(url)`` (``open_store`` does); close it with ``aclose()``.
    """

    _ID_CONTAINS_SQL = "strpos(translate(s.given_id, ?, ?), translate(?, ?, ?)) > 0"

    @staticmethod
    def _id_contains_params(text: str) -> list[Any]:
        return [_UPPER, _LOWER, text, _UPPER, _LOWER]

    def __init__(self, url: str, pool: Any, *, signing_key: bytes | None = None,
                 reads: ReadRoute | None = None) -> None:
        self.url = redact_url(url)
        self._reads = reads
        self.signing_key = signing_key
        self._dsn = _dsn(url)
        self._pool = pool
        # Every job on the primary takes its connection here (``warm``), the pool's only when
        # the last one released is in use.
        self._warm = WarmPool(pool)
        self._closed = False
        self._wakeups = Wakeups(poll_interval=POLL_INTERVAL)
        self._loop = asyncio.get_running_loop()
        self._notices = Notices(self._dsn, self._warm, self._wakeups, errors=_DRIVER_ERRORS)
        # Half the pool at most sends grouped appends: the rest serves reads and the
        # multi-statement path meanwhile.
        self._appends = AppendGroups(self._warm, APPEND_SQL, max_senders=pool.get_max_size() // 2,
                                     errors=_DRIVER_ERRORS, broken=_BROKEN,
                                     unsent=unsent, unsent_retries=pool.get_max_size(),
                                     lock_position=1, ride=self._notices.due, nothing=())

    @classmethod
    async def open(
        cls, url: str, *, auto_upgrade: bool = False, max_connections: int = 10,
        signing_key: bytes | None = None, read_urls: Sequence[str] = (),
    ) -> PostgresBackend:
        """Connect to the database ``url`` names (``postgresql+asyncpg://…``).

        ``read_urls`` name hot standbys of it: the reads that may be stale go there
        (``replicas``: which, read-your-writes, failing back to the primary).

        ``signing_key`` signs every appended event (keyed mode, see ``eventstore._chain``);
        keyed appends take the multi-statement path (the signature needs the chain hash,
        which the one-statement ``evs_append`` computes on the server).

        Raises SchemaOutdatedError (with the upgrade command) when its schema is behind head,
        unless ``auto_upgrade`` (then it is upgraded first), StorageError when unreachable.
        """
        shown = redact_url(url)
        current = await schema_revision(url, shown)
        if current != head_revision() and auto_upgrade:
            try:
                await upgrade(url)
            except StorageError:
                # Another process may have upgraded the same database at the same moment.
                if await schema_revision(url, shown) != head_revision():
                    raise
            current = await schema_revision(url, shown)
        check_revision(shown, current)
        try:
            pool = await asyncpg.create_pool(
                _dsn(url), min_size=1, max_size=max_connections, reset=_keep_session,
                # A new connection (the pool's first, or one replacing a broken one) gives up
                # after this long: an append during an outage fails within it, retryably.
                timeout=CONNECT_TIMEOUT, init=bound_silence,
                # evs_append runs as its own transaction and must see, after the session's
                # lock, what the lock's previous holder committed, whatever the server default.
                server_settings={"default_transaction_isolation": "read committed"},
            )
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, url=shown, what="connect", session_id=None) from exc
        reads = ReadRoute(read_urls, functools.partial(standby_pool, size=max_connections))
        return cls(url, pool, signing_key=signing_key, reads=reads if read_urls else None)

    def _check_loop(self) -> None:
        """Refuse use from an event loop other than the one that opened the store: asyncpg
        connections belong to their loop and fail there in ways that look like outages."""
        if asyncio.get_running_loop() is not self._loop:
            raise StoreUsageError(
                f"The PostgreSQL store {self.url} was opened on another event loop; its "
                "connections belong to that loop. Open one store per event loop (e.g. per "
                "thread or per asyncio.run())."
            )

    async def _run(
        self,
        fn: Callable[[Any], Awaitable[T]],
        *,
        what: str,
        session_id: str | None = None,
        write: bool = False,
        pool: Any = None,
    ) -> T:
        if self._closed:
            raise StoreClosedError()
        self._check_loop()
        pool = self._warm if pool is None else pool
        retries = pool.get_max_size()  # every pooled connection may be dead
        for attempt in range(retries + 1):
            try:
                async with pool.acquire() as conn:
                    try:
                        if not write:
                            return await fn(conn)
                        # READ COMMITTED whatever the server's default: a statement after an
                        # advisory lock must see what the lock's previous holder committed.
                        async with conn.transaction(isolation="read_committed"):
                            return await fn(conn)
                    except asyncpg.exceptions.InternalClientError as exc:
                        if unsent(exc):
                            conn.terminate()
                        raise
            except _DRIVER_ERRORS as exc:
                if attempt < retries and unsent(exc):
                    continue
                raise _translate(exc, url=self.url, what=what, session_id=session_id) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _read(
        self, fn: Callable[[Any], Awaitable[T]], *, what: str, session_id: str | None = None,
    ) -> T:
        """``_run`` for a read that may be stale: on a standby when there are any, unless
        this store wrote ``session_id`` just now; on the primary when the standby fails."""
        route = self._reads
        picked = None if route is None or route.primary_only(session_id) else await route.pool()
        if picked is None:
            return await self._run(fn, what=what)
        assert route is not None
        index, pool = picked
        try:
            return await self._run(fn, what=what, pool=pool)
        except StorageError:
            route.failed(index)
            return await self._run(fn, what=what)

    def _wrote(self, *session_ids: str) -> None:
        if self._reads is not None:
            for session_id in session_ids:
                self._reads.wrote(session_id)

    # -- the shared base's hooks (``SQLBackendBase``: its jobs are this package's coroutines) -

    async def _read_job(
        self, job: Callable[[Any], R | Awaitable[R]], *, what: str, stale_ok: bool = False,
        session_id: str | None = None,
    ) -> R:
        """A read; ``stale_ok``: it may go to a standby (``_read``)."""
        coroutine_job = cast("Callable[[Any], Awaitable[R]]", job)
        if stale_ok:
            return await self._read(coroutine_job, what=what, session_id=session_id)
        return await self._run(coroutine_job, what=what)

    async def _write_job(
        self, job: Callable[[Any], R | Awaitable[R]], *, what: str,
        session_id: str | None = None, keeps_heads: bool = False,
    ) -> R:
        """A write transaction (``keeps_heads`` means nothing here: no heads are kept)."""
        result = await self._run(cast("Callable[[Any], Awaitable[R]]", job), what=what,
                                 session_id=session_id, write=True)
        if session_id is not None:
            self._wrote(session_id)
        return result

    def _statement_job(self, sql: str, params: Sequence[Any]
                       ) -> Callable[[Any], Awaitable[list[Any]]]:
        async def job(conn: Any) -> list[Any]:
            return list(await conn.fetch(numbered(sql), *params))

        return job

    def _range_job(self, wanted: RangeRead, build: Callable[[str, list[Any]], list[T]]
                   ) -> Callable[[Any], Awaitable[list[T]]]:
        """The range read of row keys ``low..high`` (``limit``), ``build`` applied to its
        rows; the key's lookup judges a missing session (or one not the owner's)."""
        sql = (_ROWS_SQL if wanted.plain else _READ_SQL).format(
            order="DESC" if wanted.backwards else "ASC")

        async def job(conn: Any) -> list[T]:
            key = await queries.session_key(conn, wanted.session_id, wanted.owner)
            rows = await conn.fetch(sql, row_key(key, wanted.low), row_key(key, wanted.high),
                                    wanted.limit)
            return build(wanted.session_id, rows)

        return job

    async def _cache_write(self, job: Callable[[Any], Awaitable[None] | None], *, what: str,
                           session_id: str | None = None, transaction: bool = False) -> None:
        await self._run(cast("Callable[[Any], Awaitable[None]]", job), what=what,
                        session_id=session_id, write=transaction)

    # -- sessions ------------------------------------------------------------------------------

    async def _create_session(self, record: records.SessionRecord,
                              initial: Sequence[records.NewEvent],
                              artifacts: Sequence[records.NewArtifact],
                              imported: Sequence[records.ImportedLink]) -> str:
        given = record.id
        if initial and not artifacts and not imported and not any(
                e.shared_state for e in initial):
            async def at_once(conn: Any) -> list[records.StoredEvent] | None:
                return await create_at_once(conn, record.session_id, given, record.app_name,
                                            record.user_id, record.created_at, initial,
                                            signing_key=self.signing_key)

            # One round trip, the common case; None: the key is held, the locked path picks.
            if await self._run(at_once, what=f"create session {given!r}",
                               session_id=given) is not None:
                self._wrote(given)
                return record.session_id

        async def job(conn: Any) -> str:
            sid = await queries.free_key(conn, record.session_id)
            key = await conn.fetchval(
                "INSERT INTO evs_sessions (session_id, given_id, app_name, user_id, created_at) "
                "VALUES ($1, $2, $3, $4, $5) RETURNING session_key",
                sid, given, record.app_name, record.user_id, record.created_at,
            )
            if initial:
                await insert(conn, sid, record.app_name, record.user_id, key, initial, 1,
                              signing_key=self.signing_key)
            if imported:
                await conn.executemany(
                    "INSERT INTO evs_imported_chain (session_id, seq, chain_hash, signature, "
                    "origin_session_id) VALUES ($1, $2, $3, $4, $5)",
                    [(sid, link.seq, link.chain_hash, link.signature, link.origin_session_id)
                     for link in imported])
            for artifact in artifacts:
                names = (record.app_name, record.user_id,
                         scope(given if artifact.session_scoped else None), artifact.filename)
                await conn.execute("SELECT pg_advisory_xact_lock($1, $2)", LOCK_ARTIFACT,
                                   lock_key("\0".join(names)))
                rules.check_artifact_version(sid, artifact, await artifacts_sql.save(
                    conn, names, mime_type=artifact.mime_type, data=artifact.data,
                    created_at=artifact.created_at, signing_key=self.signing_key))
            return str(sid)

        created = await self._run(job, what=f"create session {given!r}", session_id=given,
                                  write=True)
        self._wrote(given, created)
        return created

    async def import_session(self, record: records.SessionRecord,
                             source: records.ImportSource) -> str:
        given = record.id
        consumed = False

        async def job(conn: Any) -> str:
            nonlocal consumed
            if consumed:  # a retry after a lost connection: the pages read are gone
                raise StorageError(f"The import of session {given!r} into {self.url} lost its "
                                   "connection; nothing was imported (run it again).",
                                   retryable=True)
            sid = await queries.free_key(conn, record.session_id)
            key = await conn.fetchval(
                "INSERT INTO evs_sessions (session_id, given_id, app_name, user_id, created_at) "
                "VALUES ($1, $2, $3, $4, $5) RETURNING session_key",
                sid, given, record.app_name, record.user_id, record.created_at,
            )
            start, prev = 1, None
            while True:
                consumed = True
                page = await asyncio.to_thread(source)  # reads the file: off the event loop
                if page is None:
                    return str(sid)
                if page.events:
                    rules.check_batch_ids(given, page.events)
                    rows = await insert(conn, sid, record.app_name, record.user_id, key,
                                        page.events, start, prev=prev,
                                        signing_key=self.signing_key)
                    start, prev = start + len(rows), rows[-1].chain_hash
                if page.imported:
                    await conn.executemany(
                        "INSERT INTO evs_imported_chain (session_id, seq, chain_hash, "
                        "signature, origin_session_id) VALUES ($1, $2, $3, $4, $5)",
                        [(sid, link.seq, link.chain_hash, link.signature,
                          link.origin_session_id) for link in page.imported])
                for artifact in page.artifacts:
                    names = (record.app_name, record.user_id,
                             scope(given if artifact.session_scoped else None),
                             artifact.filename)
                    await conn.execute("SELECT pg_advisory_xact_lock($1, $2)", LOCK_ARTIFACT,
                                       lock_key("\0".join(names)))
                    rules.check_artifact_version(sid, artifact, await artifacts_sql.save(
                        conn, names, mime_type=artifact.mime_type, data=artifact.data,
                        created_at=artifact.created_at, signing_key=self.signing_key))
                if page.copy_of is not None:
                    await forks.insert_link(
                        conn, dataclasses.replace(page.copy_of, session_id=str(sid)),
                        self.signing_key)

        imported_as = await self._run(job, what=f"import session {given!r}",
                                      session_id=given, write=True)
        self._wrote(given, imported_as)
        return imported_as

    async def delete_session(self, session_id: str, *, expected_version: int | None = None
                             ) -> bool:
        async def job(conn: Any) -> bool:
            app_name = await conn.fetchval(
                "SELECT app_name FROM evs_sessions WHERE session_id = $1", session_id
            )
            if app_name is None:
                return False
            # Its user:/app: stream entries stay: they belong to their scope.
            if expected_version is not None:
                # The append lock after the shared one, in the order appends take them.
                await lock_shared(conn, app_name)
                actual = await retention.locked_version(conn, session_id)
                if actual is None:
                    return False
                if actual != expected_version:
                    raise ConcurrencyError(session_id, expected_version=expected_version,
                                           actual_version=actual, refused="nothing was deleted")
            row = await conn.fetchrow(
                "DELETE FROM evs_sessions WHERE session_id = $1 "
                "RETURNING app_name, user_id, given_id",
                session_id,
            )
            if row is None:
                return False
            await conn.execute(
                "DELETE FROM evs_artifacts WHERE app_name = $1 AND user_id = $2 "
                "AND session_scope = $3",
                row[0], row[1], row[2],
            )
            await conn.execute(f"SELECT pg_notify('{CHANNEL}', $1)", session_id)
            return True

        deleted = await self._run(job, what=f"delete session {session_id!r}", write=True)
        self._wrote(session_id)
        self._wakeups.wake(session_id)
        return deleted

    # -- the log -------------------------------------------------------------------------------

    async def _append(self, session_id: str, events: Sequence[records.NewEvent],
                      expected_version: int | None,
                      owner: tuple[str, str] | None) -> list[records.StoredEvent]:
        if self.signing_key is None and not any(e.shared_state for e in events):
            fast = await self._append_fast(session_id, events, expected_version, owner)
            if fast is not None:
                self._wrote(session_id)
                self._announce(session_id)
                return fast

        async def job(conn: Any) -> list[records.StoredEvent]:
            return await append_locked(conn, session_id, events, expected_version,
                                       self.signing_key, owner=owner)

        stored = await self._run(job, what=f"append to session {session_id!r}",
                                 session_id=session_id, write=True)
        self._wrote(session_id)
        self._announce(session_id)
        return stored

    async def _append_fast(
        self, session_id: str, events: Sequence[records.NewEvent], expected_version: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[records.StoredEvent] | None:
        """The common append in one round trip (``evs_append``, revisions 0010, 0019): one
        statement, committed together with the other sessions' appends sent at the same
        moment (``group``). Returns None when the case needs the slower path (a
        conflict, a retry or a duplicate to judge, a head record that disagrees with the
        log); nothing was written then. The client computes each event's content digest and
        the server chains them (``eventstore._chain``)."""
        if self._closed:
            raise StoreClosedError()
        self._check_loop()
        args = fast_args(session_id, events, expected_version, owner)
        try:
            status, version, position, hashes = await self._appends.run(args)
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, url=self.url, what=f"append to session {session_id!r}",
                             session_id=session_id) from exc
        return fast_result(session_id, events, status, version, position, hashes)

    # -- artifacts -----------------------------------------------------------------------------

    async def _save_artifact(self, key: tuple[str, str, str, str], *, mime_type: str,
                             data: bytes, created_at: float, metadata: bytes | None) -> int:
        filename = key[3]

        async def job(conn: Any) -> int:
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1, $2)", LOCK_ARTIFACT, lock_key("\0".join(key))
            )
            return await artifacts_sql.save(conn, key, mime_type=mime_type, data=data,
                                        created_at=created_at, metadata=metadata,
                                        signing_key=self.signing_key)

        return await self._run(job, what=f"save artifact {filename!r}", write=True)

    # -- memory (see memory_index) -----------------------------------------------------------

    async def _delete_artifact(self, key: tuple[str, str, str, str]) -> int:
        filename = key[3]

        async def job(conn: Any) -> int:
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1, $2)", LOCK_ARTIFACT, lock_key("\0".join(key))
            )
            return await artifacts_sql.delete(conn, key)

        return await self._run(job, what=f"delete artifact {filename!r}", write=True)

    # -- live tails ----------------------------------------------------------------------------

    async def wait_for_events(self, session_id: str, *, after: int, max_wait: float) -> None:
        async def version(conn: Any) -> int | None:
            row = await conn.fetchrow(
                f"SELECT {NEWEST_ROW_KEY} FROM evs_sessions s WHERE s.session_id = $1",
                session_id,
            )
            if row is None:
                return None
            return seq_of_row_key(row[0])

        async def read_version() -> int | None:
            # Listening before the version is read, so no notification is missed.
            self._check_loop()
            await self._notices.listen()
            return await self._read(version, what=f"read session {session_id!r}",
                                    session_id=session_id)

        await self._wakeups.wait(
            session_id, after=after, max_wait=max_wait, read_version=read_version
        )

    def _announce(self, session_id: str) -> None:
        """Wake this process's tails now, other processes' soon (``Notices.announce``)."""
        self._check_loop()
        self._notices.announce(session_id)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        replicas = [] if self._reads is None else self._reads.pools()
        if asyncio.get_running_loop() is not self._loop:
            # Its connections cannot be closed politely from here: drop them.
            for pool in (self._pool, *replicas):
                pool.terminate()
            self._wakeups.close()
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._appends.drain(), 10)
        await self._notices.close()
        await self._warm.close()
        for pool in (*replicas, self._pool):
            try:
                await asyncio.wait_for(pool.close(), 10)
            except (TimeoutError, *_DRIVER_ERRORS):
                pool.terminate()
        self._wakeups.close()
