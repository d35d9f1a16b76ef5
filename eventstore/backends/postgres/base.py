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
  serialize every append's commit), coalesced under load; callers always re-read from their
  cursor, and ``wait_for_events`` also polls, so a dropped listener connection delays a tail
  but loses nothing.
- **Several servers.** The URL may name several hosts (``h1:5432,h2:5432/db?
  target_session_attrs=read-write``): each new connection lands on the primary, so the store
  follows a failover by itself. ``read_urls`` send the reads that may be stale to hot standbys
  (``replicas``); every connection carries TCP keepalives (``keepalive``), so an append in
  flight fails (retryably) within ``SILENCE_TIMEOUT`` when the primary's machine vanishes.
- **Errors** from asyncpg (and the network) are translated in one place (``_translate``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

import asyncpg

from eventstore._exceptions import (
    ConcurrencyError,
    SchemaError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
    StoreClosedError,
    StoreUsageError,
)
from eventstore._fork import ForkLink, ForkPlan
from eventstore._migrate import check_revision, head_revision, unversioned_message, upgrade
from eventstore._retention import RetentionPolicy
from eventstore._urls import redact_url
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
    row_key,
    scope,
    scope_entries,
    scope_heads,
    seq_bound,
    seq_of_row_key,
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
    APPEND_SQL,
    LOCK_ARTIFACT,
    append_locked,
    fast_args,
    fast_result,
    insert,
    lock_key,
    lock_shared,
)
from .group import AppendGroups
from .keepalive import SILENCE_TIMEOUT, bound_silence
from .notify import CHANNEL, Notices
from .replicas import ReadRoute

__all__ = ["CHANNEL", "POLL_INTERVAL", "SILENCE_TIMEOUT", "PostgresBackend"]

T = TypeVar("T")

POLL_INTERVAL: Final = 1.0
"""Seconds between version polls while waiting (a safety net under LISTEN/NOTIFY)."""

_SESSION_SQL = f"""
SELECT {SESSION_COLUMNS} FROM evs_sessions s
LEFT JOIN evs_events e ON e.row_key = {NEWEST_ROW_KEY}
"""
_READ_SQL = (
    f"SELECT {EVENT_COLUMNS} FROM evs_events WHERE row_key > $1 AND row_key <= $2 "
    "ORDER BY row_key {order} LIMIT $3"
)
_ROWS_SQL = _READ_SQL.replace(EVENT_COLUMNS, ROW_COLUMNS, 1)
_SCOPE_SQL = (
    "SELECT e.seq, e.app_name, e.user_id FROM evs_events e JOIN evs_sessions s "
    "ON s.session_id = e.session_id WHERE e.session_id = $1 "
    "AND (e.app_name <> s.app_name OR e.user_id <> s.user_id) ORDER BY e.seq"
)
_STREAM_SQL = (
    f"SELECT {SCOPE_COLUMNS} FROM evs_scope_entries WHERE app_name = $1 AND user_id = $2 "
    "AND stream_seq > $3 AND position <= $4 ORDER BY stream_seq"
)
_STREAM_HEADS_SQL = (
    f"SELECT {SCOPE_HEAD_COLUMNS} FROM evs_scope_heads ORDER BY app_name, user_id"
)
_SIGNED_HEAD_SQL = "SELECT 1 FROM evs_sessions WHERE head_signature IS NOT NULL LIMIT 1"


CONNECT_TIMEOUT = 10.0
"""Seconds a connection attempt may take before it fails (retryably): the bound on how long an
append waits for a server that does not answer."""


def _dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


def _translate(exc: BaseException, *, url: str, what: str, session_id: str | None) -> Exception:
    """The one place asyncpg and network errors become the store's errors."""
    if session_id is not None:
        if isinstance(exc, asyncpg.UniqueViolationError) and (
            exc.constraint_name or ""
        ).startswith(("evs_sessions", "uq_evs_sessions")):
            return SessionExistsError(session_id)
        if isinstance(exc, asyncpg.ForeignKeyViolationError):
            return SessionNotFoundError(session_id)
    if isinstance(exc, _BROKEN):
        return StorageError(
            f"PostgreSQL at {url} is unreachable or the connection broke while trying to "
            f"{what}: {type(exc).__name__}: {exc}. This is transient: retry (an append retried "
            "with the same event ids is stored once, whether or not the first attempt "
            "committed).",
            retryable=True,
        )
    return StorageError(f"PostgreSQL at {url} failed to {what}: {type(exc).__name__}: {exc}")


_BROKEN = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
)
"""Errors that say the connection (not the statement) failed: the server went away, restarts,
refuses connections for now, or the protocol was left mid-operation by a broken connection
(``InternalClientError``). A connection that raised one is never used again."""

_DRIVER_ERRORS = (
    asyncpg.PostgresError, *_BROKEN, OverflowError, ValueError,
)




def unsent(exc: BaseException) -> bool:
    """Whether ``exc`` says a statement was refused before being sent because its connection
    is still consuming an earlier error: a pooled idle connection told by a restarting server
    that it is being terminated. Nothing of the job reached the server (or it is rolled back
    with the dead connection), so running it again on another connection is safe: a job is
    tried once more for each pooled connection (each may be one the restart left dead)."""
    return isinstance(exc, asyncpg.exceptions.InternalClientError) and str(exc).startswith(
        "cannot switch to state"
    )
"""What asyncpg and the network raise, including OverflowError/ValueError for parameters the
driver cannot encode."""


async def _keep_session(conn: Any) -> None:
    """The pool's reset: nothing beyond asyncpg's own (it rolls back an open transaction).
    The store's connections never LISTEN (the listener has its own connection), change
    settings or take session-level locks, so the default reset query would be a round trip
    per released connection for nothing."""


class PostgresBackend:
    """The PostgreSQL backend (see the module docstring for its guarantees).

    Open it with ``PostgresBackend.open(url)`` (``open_store`` does); close it with ``aclose()``.
    """

    def __init__(self, url: str, pool: Any, *, signing_key: bytes | None = None,
                 reads: ReadRoute | None = None) -> None:
        self.url = redact_url(url)
        self._reads = reads
        self.signing_key = signing_key
        self._dsn = _dsn(url)
        self._pool = pool
        self._closed = False
        self._wakeups = Wakeups(poll_interval=POLL_INTERVAL)
        self._loop = asyncio.get_running_loop()
        self._notices = Notices(self._dsn, pool, self._wakeups, errors=_DRIVER_ERRORS)
        # Half the pool at most sends grouped appends: the rest serves reads and the
        # multi-statement path meanwhile.
        self._appends = AppendGroups(pool, APPEND_SQL, max_senders=pool.get_max_size() // 2,
                                     errors=_DRIVER_ERRORS, broken=_BROKEN,
                                     unsent=unsent, unsent_retries=pool.get_max_size(),
                                     lock_position=1)

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
        current = await cls._revision(url, shown)
        if current != head_revision() and auto_upgrade:
            try:
                await upgrade(url)
            except StorageError:
                # Another process may have upgraded the same database at the same moment.
                if await cls._revision(url, shown) != head_revision():
                    raise
            current = await cls._revision(url, shown)
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
        reads = None
        if read_urls:
            async def connect(read_url: str) -> Any:
                # No connection until the first read: a standby down at open costs nothing.
                return await asyncpg.create_pool(
                    _dsn(read_url), min_size=0, max_size=max_connections,
                    reset=_keep_session, timeout=CONNECT_TIMEOUT, init=bound_silence)

            reads = ReadRoute(read_urls, connect)
        return cls(url, pool, signing_key=signing_key, reads=reads)

    @staticmethod
    async def _revision(url: str, shown: str) -> str | None:
        try:
            conn = await asyncpg.connect(_dsn(url), timeout=CONNECT_TIMEOUT)
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, url=shown, what="connect", session_id=None) from exc
        try:
            try:
                value = await conn.fetchval("SELECT version_num FROM alembic_version")
            except asyncpg.UndefinedTableError:
                value = None
            if value is None and await conn.fetchval(
                "SELECT to_regclass('evs_sessions') IS NOT NULL"
            ):
                raise SchemaError(unversioned_message(shown))
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, url=shown, what="read the schema revision",
                             session_id=None) from exc
        finally:
            await conn.close()
        return None if value is None else str(value)

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
        pool = self._pool if pool is None else pool
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
                check_artifact_version(sid, artifact, await artifacts_sql.save(
                    conn, names, mime_type=artifact.mime_type, data=artifact.data,
                    created_at=artifact.created_at, signing_key=self.signing_key))
            return str(sid)

        created = await self._run(job, what=f"create session {given!r}", session_id=given,
                                  write=True)
        self._wrote(given, created)
        return created

    async def import_session(self, record: SessionRecord, source: ImportSource) -> str:
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
                    check_batch_ids(given, page.events)
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
                    check_artifact_version(sid, artifact, await artifacts_sql.save(
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

    async def fork_session(self, record: SessionRecord, plan: ForkPlan) -> str:
        forked = await self._run(lambda conn: forks.fork(conn, record, plan, self.signing_key),
                                 what=f"fork session {plan.origin_session_id!r}",
                                 session_id=record.id, write=True)
        self._wrote(record.id, forked)
        return forked

    async def fork_links(self, session_id: str) -> list[ForkLink]:
        return await self._run(lambda conn: forks.links(conn, session_id),
                               what=f"read the fork links of session {session_id!r}")

    async def scope_mismatches(self, session_id: str) -> list[tuple[int, str, str]]:
        async def job(conn: Any) -> list[tuple[int, str, str]]:
            return [(r[0], r[1], r[2]) for r in await conn.fetch(_SCOPE_SQL, session_id)]

        return await self._run(job, what=f"read the scope of session {session_id!r}'s events")

    async def has_signed_heads(self) -> bool:
        async def job(conn: Any) -> bool:
            return await conn.fetchval(_SIGNED_HEAD_SQL) is not None

        return await self._run(job, what="read whether the database is keyed")

    async def get_session(self, session_id: str) -> SessionRecord | None:
        async def job(conn: Any) -> SessionRecord | None:
            row = await conn.fetchrow(f"{_SESSION_SQL} WHERE s.session_id = $1", session_id)
            return None if row is None else session_record(row)

        return await self._read(job, what=f"read session {session_id!r}",
                                session_id=session_id)

    async def find_sessions(
        self, given_id: str, *, app_name: str | None, user_id: str | None
    ) -> list[SessionRecord]:
        return await self._run(lambda conn: queries.find(conn, given_id, app_name, user_id),
                               what=f"find session {given_id!r}")

    async def list_sessions(
        self, *, app_name: str | None, user_id: str | None, after: str | None, limit: int
    ) -> list[SessionRecord]:
        params: list[Any] = [after or ""]
        where = ["s.session_id > $1"]
        if app_name is not None:
            params.append(app_name)
            where.append(f"s.app_name = ${len(params)}")
        if user_id is not None:
            params.append(user_id)
            where.append(f"s.user_id = ${len(params)}")
        params.append(limit)
        sql = (f"{_SESSION_SQL} WHERE {' AND '.join(where)} ORDER BY s.session_id "
               f"LIMIT ${len(params)}")

        async def job(conn: Any) -> list[SessionRecord]:
            return [session_record(row) for row in await conn.fetch(sql, *params)]

        return await self._read(job, what="list sessions")

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

    async def append(
        self, session_id: str, events: Sequence[NewEvent], *, expected_version: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[StoredEvent]:
        check_batch_ids(session_id, events)
        if self.signing_key is None and not any(e.shared_state for e in events):
            fast = await self._append_fast(session_id, events, expected_version, owner)
            if fast is not None:
                self._wrote(session_id)
                self._announce(session_id)
                return fast

        async def job(conn: Any) -> list[StoredEvent]:
            return await append_locked(conn, session_id, events, expected_version,
                                       self.signing_key, owner=owner)

        stored = await self._run(job, what=f"append to session {session_id!r}",
                                 session_id=session_id, write=True)
        self._wrote(session_id)
        self._announce(session_id)
        return stored

    async def _append_fast(
        self, session_id: str, events: Sequence[NewEvent], expected_version: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[StoredEvent] | None:
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
        sql = _READ_SQL.format(order="DESC" if backwards else "ASC")
        return await self._read_range(session_id, sql, stored_events, after=after, upto=upto,
                                      limit=limit, owner=owner)

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
        sql = _ROWS_SQL.format(order="DESC" if backwards else "ASC")
        return await self._read_range(session_id, sql, event_rows, after=after, upto=upto,
                                      limit=limit, owner=owner)

    async def _read_range(
        self,
        session_id: str,
        sql: str,
        build: Callable[[str, list[Any]], list[T]],
        *,
        after: int | None,
        upto: int | None,
        limit: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[T]:
        """Run one of the range reads (row keys ``low..high``, ``limit``) and ``build`` its
        rows; raises SessionNotFoundError for a missing session (or one not ``owner``'s: the
        key's lookup judges it)."""
        low, high = seq_bound(after or 0), seq_bound(upto)

        async def job(conn: Any) -> list[T]:
            key = await queries.session_key(conn, session_id, owner)
            rows = await conn.fetch(sql, row_key(key, low), row_key(key, high), limit)
            return build(session_id, rows)

        return await self._read(job, what=f"read session {session_id!r}",
                                session_id=session_id)

    async def read_scope(
        self, *, app_name: str, user_id: str | None, after: int, upto_position: int | None,
    ) -> list[ScopeEntry]:
        params = (app_name, shared_scope(user_id), after,
                  MAX_POSITION if upto_position is None else upto_position)

        async def job(conn: Any) -> list[ScopeEntry]:
            return scope_entries(await conn.fetch(_STREAM_SQL, *params))

        return await self._run(job, what=f"read shared state of app {app_name!r}")

    async def scope_heads(self) -> list[ScopeHead]:
        async def job(conn: Any) -> list[ScopeHead]:
            return scope_heads(await conn.fetch(_STREAM_HEADS_SQL))

        return await self._run(job, what="read the shared-state streams' heads")

    async def app_positions(self) -> list[tuple[str, int | None, int]]:
        async def job(conn: Any) -> list[tuple[str, int | None, int]]:
            return [(str(r[0]), None if r[1] is None else int(r[1]), int(r[2]))
                    for r in await conn.fetch(APP_POSITIONS_SQL)]

        return await self._run(job, what="read the apps' positions")

    # -- snapshots -----------------------------------------------------------------------------

    async def load_snapshot(self, session_id: str, *, upto: int | None) -> HeadState | None:
        return await self._run(lambda conn: snapshots.load(conn, session_id, upto),
                               what=f"load a snapshot of session {session_id!r}")

    async def save_snapshot(self, session_id: str, snapshot: HeadState) -> None:
        await self._run(lambda conn: snapshots.save(conn, session_id, snapshot),
                        what=f"save a snapshot of session {session_id!r}",
                        session_id=session_id)

    async def drop_snapshots(self) -> int:
        return await self._run(snapshots.drop_all, what="drop snapshots", write=True)

    async def read_imported(
        self, session_id: str, *, after: int, limit: int
    ) -> list[ImportedLink]:
        async def job(conn: Any) -> list[ImportedLink]:
            rows = await conn.fetch(
                "SELECT seq, chain_hash, signature, origin_session_id FROM evs_imported_chain "
                "WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                session_id, after, limit)
            return [ImportedLink(seq=r[0], chain_hash=bytes(r[1]),
                                 signature=None if r[2] is None else bytes(r[2]),
                                 origin_session_id=r[3]) for r in rows]

        return await self._run(job, what=f"read the imported chain of session {session_id!r}")

    async def load_cache(
        self, session_id: str, name: str, *, owner: tuple[str, str] | None = None
    ) -> tuple[int, bytes] | None:
        return await self._run(lambda conn: snapshots.load_cache(conn, session_id, name, owner),
                               what=f"load cache {name!r} of session {session_id!r}")

    async def save_cache(
        self, session_id: str, name: str, seq: int, data: bytes, *,
        owner: tuple[str, str] | None = None,
    ) -> None:
        await self._run(lambda conn: snapshots.save_cache(conn, session_id, name, seq, data,
                                                          owner),
                        what=f"save cache {name!r} of session {session_id!r}",
                        session_id=session_id)

    async def load_shared_snapshot(
        self, *, app_name: str, user_id: str | None, upto_position: int | None
    ) -> SharedSnapshot | None:
        return await self._run(
            lambda conn: snapshots.load_shared(conn, app_name, user_id, upto_position),
            what=f"load a shared-state snapshot of app {app_name!r}",
        )

    async def save_shared_snapshot(
        self, *, app_name: str, user_id: str | None, snapshot: SharedSnapshot
    ) -> None:
        await self._run(lambda conn: snapshots.save_shared(conn, app_name, user_id, snapshot),
                        what=f"save a shared-state snapshot of app {app_name!r}", write=True)

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

        async def job(conn: Any) -> int:
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1, $2)", LOCK_ARTIFACT, lock_key("\0".join(key))
            )
            return await artifacts_sql.save(conn, key, mime_type=mime_type, data=data,
                                        created_at=created_at, metadata=metadata,
                                        signing_key=self.signing_key)

        return await self._run(job, what=f"save artifact {filename!r}", write=True)

    async def load_artifact(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str,
        version: int | None,
    ) -> ArtifactRecord | None:
        key = (app_name, user_id, scope(session_id), filename)
        return await self._run(lambda conn: artifacts_sql.load(conn, key, version),
                               what=f"load artifact {filename!r}")

    async def list_artifacts(
        self, *, app_name: str, user_id: str, session_id: str | None
    ) -> dict[str, list[int]]:
        return await self._run(
            lambda conn: artifacts_sql.list_versions(conn, app_name, user_id, scope(session_id)),
            what="list artifacts",
        )

    # -- memory (see memory_index) -----------------------------------------------------------

    async def index_memory(
        self, *, app_name: str, user_id: str, session_id: str, upto_seq: int,
        rows: Sequence[MemoryRow], added_at: float,
    ) -> bool:
        return await self._run(
            lambda conn: memory.index(conn, app_name=app_name, user_id=user_id,
                                      session_id=session_id, upto_seq=upto_seq, rows=rows,
                                      added_at=added_at),
            what=f"add session {session_id!r} to memory", session_id=session_id, write=True,
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
        return await self._run(memory.remembered, what="list remembered sessions")

    async def memory_rows(self, session_id: str) -> list[MemoryRow]:
        return await self._run(lambda conn: memory.rows_of(conn, session_id),
                               what=f"read the memory of session {session_id!r}")

    async def clear_memory_rows(self) -> int:
        return await self._run(memory.clear_rows, what="clear memory rows", write=True)

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str
    ) -> list[ArtifactRecord]:
        key = (app_name, user_id, scope(session_id), filename)
        return await self._run(lambda conn: artifacts_sql.versions(conn, key),
                               what=f"list versions of artifact {filename!r}")

    async def delete_artifact(
        self, *, app_name: str, user_id: str, session_id: str | None, filename: str
    ) -> int:
        key = (app_name, user_id, scope(session_id), filename)

        async def job(conn: Any) -> int:
            await conn.execute(
                "SELECT pg_advisory_xact_lock($1, $2)", LOCK_ARTIFACT, lock_key("\0".join(key))
            )
            return await artifacts_sql.delete(conn, key)

        return await self._run(job, what=f"delete artifact {filename!r}", write=True)

    # -- cold-path reads (framework adapters) ----------------------------------------------------

    async def read_since(
        self, session_id: str, *, timestamp: float, upto: int | None, newest: int | None,
        owner: tuple[str, str] | None = None,
    ) -> list[StoredEvent]:
        return await self._read(
            lambda conn: queries.read_since(conn, session_id, timestamp=timestamp, upto=upto,
                                            newest=newest, owner=owner),
            what=f"read session {session_id!r}", session_id=session_id,
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
        return await self._run(
            lambda conn: retention.updated_before(conn, before, app_name, after, limit),
            what="list sessions by last update")

    async def retention_policies(self) -> list[RetentionPolicy]:
        return await self._run(retention.policies, what="read the retention policies")

    async def set_retention_policy(self, policy: RetentionPolicy) -> None:
        await self._run(lambda conn: retention.set_policy(conn, policy),
                        what=f"set the retention policy of app {policy.app_name!r}", write=True)

    async def clear_retention_policy(self, app_name: str | None) -> int:
        return await self._run(lambda conn: retention.clear_policy(conn, app_name),
                               what="clear retention policies", write=True)

    async def load_snapshots(self, session_ids: Sequence[str]) -> dict[str, HeadState]:
        return await self._run(lambda conn: queries.load_snapshots(conn, session_ids),
                               what="load snapshots")

    async def read_many(self, after: Mapping[str, int]) -> dict[str, list[StoredEvent]]:
        return await self._run(lambda conn: queries.read_many(conn, after), what="read sessions")

    async def read_shared_heads(
        self, *, app_name: str, user_ids: Sequence[str | None]
    ) -> dict[str | None, tuple[SharedSnapshot | None, list[ScopeEntry]]]:
        return await self._run(lambda conn: queries.read_shared_heads(conn, app_name, user_ids),
                               what=f"read shared state of app {app_name!r}")

    async def load_head_states(self, session_ids: Sequence[str]) -> dict[str, HeadState]:
        return await self._run(lambda conn: queries.load_head_states(conn, session_ids),
                               what="load head states")

    async def save_head_states(self, states: Mapping[str, HeadState]) -> None:
        if not states:
            return
        await self._run(lambda conn: queries.save_head_states(conn, states),
                        what="save head states", write=True)

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
        if asyncio.get_running_loop() is not self._loop:
            # Its connections cannot be closed politely from here: drop them.
            self._pool.terminate()
            for replica in [] if self._reads is None else self._reads.pools():
                replica.terminate()
            self._wakeups.close()
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._appends.drain(), 10)
        await self._notices.close()
        for replica in [] if self._reads is None else self._reads.pools():
            try:
                await asyncio.wait_for(replica.close(), 10)
            except (TimeoutError, *_DRIVER_ERRORS):
                replica.terminate()
        try:
            await asyncio.wait_for(self._pool.close(), 10)
        except (TimeoutError, *_DRIVER_ERRORS):
            self._pool.terminate()
        self._wakeups.close()
