"""Opening the PostgreSQL backend's connections, and its driver's errors: the DSN asyncpg
takes, the URL shown without its password, which errors say the connection (not the statement)
failed, and their translation into the store's errors (in this one place).
"""

from __future__ import annotations

from typing import Any

import asyncpg

from eventstore._exceptions import (
    SchemaError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
)
from eventstore._migrate import unversioned_message

from .keepalive import bound_silence

__all__ = [
    "BROKEN",
    "CONNECT_TIMEOUT",
    "DRIVER_ERRORS",
    "dsn",
    "keep_session",
    "schema_revision",
    "standby_pool",
    "translate",
    "unsent",
]


CONNECT_TIMEOUT = 10.0
"""Seconds a connection attempt may take before it fails (retryably): the bound on how long an
append waits for a server that does not answer."""


def dsn(url: str) -> str:
    """The DSN asyncpg takes for a store URL."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


def translate(exc: BaseException, *, url: str, what: str, session_id: str | None) -> Exception:
    """The one place asyncpg and network errors become the store's errors."""
    if session_id is not None:
        if isinstance(exc, asyncpg.UniqueViolationError) and (
            exc.constraint_name or ""
        ).startswith(("evs_sessions", "uq_evs_sessions")):
            return SessionExistsError(session_id)
        if isinstance(exc, asyncpg.ForeignKeyViolationError):
            return SessionNotFoundError(session_id)
    if isinstance(exc, BROKEN):
        return StorageError(
            f"PostgreSQL at {url} is unreachable or the connection broke while trying to "
            f"{what}: {type(exc).__name__}: {exc}. This is transient: retry (an append retried "
            "with the same event ids is stored once, whether or not the first attempt "
            "committed).",
            retryable=True,
        )
    return StorageError(f"PostgreSQL at {url} failed to {what}: {type(exc).__name__}: {exc}")


BROKEN = (
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

DRIVER_ERRORS = (
    asyncpg.PostgresError, *BROKEN, OverflowError, ValueError,
)
"""What asyncpg and the network raise, including OverflowError/ValueError for parameters the
driver cannot encode."""


def unsent(exc: BaseException) -> bool:
    """Whether ``exc`` says a statement was refused before being sent because its connection
    is still consuming an earlier error: a pooled idle connection told by a restarting server
    that it is being terminated. Nothing of the job reached the server (or it is rolled back
    with the dead connection), so running it again on another connection is safe: a job is
    tried once more for each pooled connection (each may be one the restart left dead)."""
    return isinstance(exc, asyncpg.exceptions.InternalClientError) and str(exc).startswith(
        "cannot switch to state"
    )


async def keep_session(conn: Any) -> None:
    """The pool's reset: nothing beyond asyncpg's own (it rolls back an open transaction).
    The store's connections never LISTEN (the listener has its own connection), change
    settings or take session-level locks, so the default reset query would be a round trip
    per released connection for nothing."""


async def schema_revision(url: str, shown: str) -> str | None:
    """The database's schema revision (None when it has none); SchemaError when it has the
    store's tables but no revision. ``shown``: the URL as messages name it."""
    try:
        conn = await asyncpg.connect(dsn(url), timeout=CONNECT_TIMEOUT)
    except DRIVER_ERRORS as exc:
        raise translate(exc, url=shown, what="connect", session_id=None) from exc
    try:
        try:
            value = await conn.fetchval("SELECT version_num FROM alembic_version")
        except asyncpg.UndefinedTableError:
            value = None
        if value is None and await conn.fetchval(
            "SELECT to_regclass('evs_sessions') IS NOT NULL"
        ):
            raise SchemaError(unversioned_message(shown))
    except DRIVER_ERRORS as exc:
        raise translate(exc, url=shown, what="read the schema revision",
                        session_id=None) from exc
    finally:
        await conn.close()
    return None if value is None else str(value)


async def standby_pool(url: str, *, size: int) -> Any:
    """The pool of a hot standby's reads (``replicas``): no connection until the first read,
    so a standby down when the store opens costs nothing."""
    return await asyncpg.create_pool(dsn(url), min_size=0, max_size=size, reset=keep_session,
                                     timeout=CONNECT_TIMEOUT, init=bound_silence)
