"""Opening the PostgreSQL backend's connections, and its driver's errors: the DSN asyncpg
takes, the URL shown without its password, which errors say the connection (not the statement)
failed, and their translation into the store's errors (in this one place).
"""

from __future__ import annotations

from typing import Any

import asyncpg

from eventstore._exceptions import (
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
)

__all__ = [
    "BROKEN",
    "CONNECT_TIMEOUT",
    "DRIVER_ERRORS",
    "dsn",
    "keep_session",
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
