"""Opening a SQLite store's file: the path a URL names, its schema revision (upgraded first
under ``auto_upgrade``, several processes at once included), and the one place sqlite3 errors
become the store's errors.
"""

from __future__ import annotations

import asyncio
import sqlite3

from eventstore._exceptions import (
    SchemaError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
    StoreUsageError,
)
from eventstore._migrate import (
    check_revision,
    head_revision,
    sqlite_revision,
    unversioned_message,
    upgrade,
)
from eventstore.backends.sql import sqlite_file

from .driver import BUSY_TIMEOUT_MS, directory_problem

__all__ = ["ensure_schema", "path_of", "translate"]


def translate(exc: Exception, *, url: str, what: str, session_id: str | None) -> Exception:
    """The one place sqlite3 errors become the store's errors."""
    message = str(exc)
    if isinstance(exc, sqlite3.IntegrityError) and session_id is not None:
        if "evs_sessions.session_id" in message or "evs_sessions.given_id" in message:
            return SessionExistsError(session_id)
        if "FOREIGN KEY" in message:
            return SessionNotFoundError(session_id)
    if ("readonly" in message or "read-only" in message
            or "unable to open database file" in message):
        path = sqlite_file(url)
        problem = directory_problem(str(path)) if path is not None else None
        if problem is not None:
            return StorageError(f"SQLite {url} refused to {what}: {problem} ({message}).")
    if "readonly" in message or "read-only" in message:
        return StorageError(f"SQLite {url} refused to {what}: the database is read-only "
                            f"({message}).")
    if "locked" in message or "busy" in message:
        return StorageError(f"SQLite {url} stayed locked by another writer for more than "
                            f"{BUSY_TIMEOUT_MS // 1000} s while trying to {what} ({message}).",
                            retryable=True)
    return StorageError(f"SQLite {url} failed to {what}: {type(exc).__name__}: {message}")


def path_of(url: str) -> str:
    """The file a SQLite URL names; StoreUsageError for an in-memory database."""
    path = sqlite_file(url)
    if path is None:
        raise StoreUsageError(
            f"{url!r} names an in-memory SQLite database, which every connection sees empty; "
            "use memory:// for an in-memory store or give a file path."
        )
    return str(path)


def _read_revision(path: str) -> str | None:
    current, unversioned = sqlite_revision(path)
    if unversioned:
        raise SchemaError(unversioned_message(f"sqlite+aiosqlite:///{path}"))
    return current


async def ensure_schema(url: str, path: str, *, auto_upgrade: bool) -> None:
    """Check the file's schema revision, upgrading it first under ``auto_upgrade`` (a file
    that does not exist is created); raises SchemaOutdatedError, SchemaError or StorageError."""
    try:
        current, unversioned = await asyncio.to_thread(sqlite_revision, path)
    except sqlite3.Error as exc:
        raise translate(exc, url=url, what="read its schema revision", session_id=None) \
            from exc
    if current == head_revision() or not auto_upgrade:
        check_revision(url, current, unversioned=unversioned)
        return
    # An unversioned read here may be another process's upgrade half done: upgrade()
    # decides under the file lock.
    try:
        await upgrade(url)
    except StorageError:
        # Another process may have upgraded the same file at the same moment.
        if await asyncio.to_thread(_read_revision, path) != head_revision():
            raise
    check_revision(url, await asyncio.to_thread(_read_revision, path))
