"""Schema migrations: alembic run programmatically, and the check every SQL store does on open.

Alembic owns the schema; the revisions live in ``eventstore/migrations`` inside the package, so
this works from an installed wheel as well as from the repo root. A store opened on a database
whose schema is behind head raises SchemaOutdatedError with the command that upgrades it, unless
it is opened with ``auto_upgrade=True``.

Upgrades are serialized, so any number of threads and processes may open one database with
``auto_upgrade=True`` at once: alembic's migration environment is global to the process
(``alembic.context``), so upgrades in one process take a process-wide lock; across processes,
a SQLite upgrade holds an exclusive ``flock`` on the database file (independent of SQLite's own
``fcntl`` locks, so readers and writers are not blocked by it), and a PostgreSQL upgrade holds
a transaction-scoped advisory lock taken before alembic reads the current revision
(``migrations/env.py``). Whoever waits finds the schema at head and migrates nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shlex
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from ._exceptions import SchemaError, SchemaOutdatedError, StorageError
from ._urls import redact_url, sqlalchemy_url
from .backends.sql import sqlite_file
from .backends.sqlite.driver import connect_read_only, directory_problem

__all__ = [
    "MIGRATIONS_DIR",
    "check_revision",
    "current_revision",
    "head_revision",
    "is_later",
    "is_newer",
    "newer_message",
    "sqlite_revision",
    "unversioned_message",
    "upgrade",
    "upgrade_command",
]

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
"""Alembic's script location inside the installed package."""

_UPGRADE_LOCK = threading.Lock()
"""Alembic's migration context is process-global: one upgrade at a time per process."""


def _migration_errors() -> tuple[type[BaseException], ...]:
    """What alembic, SQLAlchemy and the drivers underneath raise when a database fails.

    SQLAlchemy wraps driver errors in ``DBAPIError`` (a ``SQLAlchemyError``); a refused or
    broken connection can still surface as ``OSError``/``TimeoutError``.
    """
    from alembic.util import CommandError
    from sqlalchemy.exc import SQLAlchemyError

    return (CommandError, SQLAlchemyError, sqlite3.Error, OSError, TimeoutError)


def _probe_sqlite(url: str, what: str) -> None:
    """Open a SQLite file with plain sqlite3 before alembic's async engine does.

    A file that cannot be opened is refused here, with a message naming the cause: an aiosqlite
    connection that fails to open can outlive the event loop that opened it and then fail in
    its own thread.
    """
    path = sqlite_file(url)
    if path is None:
        return
    problem = directory_problem(str(path))
    if problem is not None and (not path.exists() or not os.access(path, os.W_OK)
                                or "not writable" in problem):
        raise StorageError(f"{what} of {url} failed: {problem}.")
    conn = sqlite3.connect(path)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the open is lazy
    finally:
        conn.close()


@contextlib.contextmanager
def _translating(url: str, what: str) -> Iterator[None]:
    """The one place migration errors become StorageError (``raise … from exc``)."""
    errors = _migration_errors()
    try:
        yield
    except errors as exc:
        raise StorageError(
            f"{what} of {redact_url(url)} failed: {type(exc).__name__}: {exc}"
        ) from exc


def _config(url: str | None = None) -> object:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.attributes["url"] = url
    return config


@functools.cache
def head_revision() -> str:
    """Return the newest revision id the code's migrations define."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = _config()
    assert isinstance(config, Config)
    head = ScriptDirectory.from_config(config).get_current_head()
    if head is None:  # pragma: no cover - the package always ships revisions
        raise SchemaError(f"No alembic revisions found in {MIGRATIONS_DIR}.")
    return head


@functools.cache
def _known_revisions() -> frozenset[str]:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = _config()
    assert isinstance(config, Config)
    return frozenset(s.revision for s in ScriptDirectory.from_config(config).walk_revisions())


def upgrade_command(url: str) -> str:
    """Return the shell command that upgrades the database at ``url`` to head."""
    quoted = shlex.quote(url)
    return f"evs db upgrade --db {quoted}  (or: alembic -x url={quoted} upgrade head)"


def is_newer(current: str | None) -> bool:
    """Whether ``current`` is a revision this code does not know: a newer agent-eventstore
    migrated the database."""
    return current is not None and current not in _known_revisions()


def is_later(current: str | None) -> bool:
    """Whether ``current`` is numbered past this code's head (the project numbers its
    revisions ``0001``, ``0002``, …): a newer agent-eventstore may have written it. An unknown
    revision that is not (``0005``, skipped; another application's ``ae1027a6``) is one no
    agent-eventstore ever had."""
    head = head_revision()
    return (current is not None and current.isdigit() and head.isdigit()
            and int(current) > int(head))


def newer_message(url: str, current: str) -> str:
    """The sentence every command says about a database at a revision this code does not know:
    a newer version migrated it, or (numbered within this code's history, or not numbered as
    ours are) no agent-eventstore ever did."""
    if not is_later(current):
        return (f"The database {url} is at schema revision {current}, which no version of "
                f"agent-eventstore has ever had (this version's newest is {head_revision()}): "
                "it was stamped by hand or by another application's migrations. Neither evs "
                "db upgrade nor a newer agent-eventstore can use it as it is.")
    return (f"The database {url} is at schema revision {current}, which this version of "
            f"agent-eventstore does not know (its newest is {head_revision()}): a newer "
            "version migrated it. Upgrade agent-eventstore (pip install -U agent-eventstore) "
            "to use it; evs db upgrade cannot help.")


def unversioned_message(url: str) -> str:
    """The sentence every command says about tables without ``alembic_version``."""
    return (f"The database {url} has agent-eventstore tables but no schema revision in "
            "alembic_version (the table is missing or empty: created outside the migrations, "
            "or dropped), so its schema is unknown and evs db upgrade cannot migrate it. If its "
            "tables are those "
            f"of revision {head_revision()}, record that with: alembic -x url={url} stamp "
            "head; otherwise restore it from a backup or export its sessions with an older "
            "evs.")


def check_revision(url: str, current: str | None, *, unversioned: bool = False) -> None:
    """Raise unless ``current`` is head: SchemaOutdatedError when behind (with the upgrade
    command), SchemaError when the database was migrated by newer code or has the store's
    tables without ``alembic_version`` (``unversioned``)."""
    head = head_revision()
    if current == head:
        return
    if is_newer(current):
        assert current is not None
        raise SchemaError(newer_message(url, current))
    if current is None and unversioned:
        raise SchemaError(unversioned_message(url))
    raise SchemaOutdatedError(url, current=current, head=head, command=upgrade_command(url))


def sqlite_revision(path: str) -> tuple[str | None, bool]:
    """Return the revision of the SQLite file (None when it has none) and whether it holds
    store tables without a revision in ``alembic_version``. Opens the file read-only, so it
    works on a file the process may not write."""
    if not os.path.exists(path):
        return None, False
    conn = connect_read_only(path)
    try:
        tables = {row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        row = (conn.execute("SELECT version_num FROM alembic_version").fetchone()
               if "alembic_version" in tables else None)
    finally:
        conn.close()
    if row is None:  # no alembic_version table, or an empty one
        return None, any(t.startswith("evs_") for t in tables)
    return str(row[0]), False


async def current_revision(url: str) -> str | None:
    """Return the database's alembic revision, or None when it has no schema.

    Raises SchemaError for store tables without ``alembic_version``."""
    path = sqlite_file(url)
    if path is not None:
        problem = directory_problem(str(path))
        if problem is not None and not path.parent.is_dir():
            raise StorageError(f"Reading the schema revision of {url} failed: {problem}.")
        with _translating(url, "Reading the schema revision"):
            current, unversioned = await asyncio.to_thread(sqlite_revision, str(path))
        if unversioned:
            raise SchemaError(unversioned_message(url))
        return current
    shown = redact_url(url)
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import inspect, pool
    from sqlalchemy.engine import Connection
    from sqlalchemy.ext.asyncio import create_async_engine

    def read(connection: Connection) -> str | None:
        current = MigrationContext.configure(connection).get_current_revision()
        if current is None and inspect(connection).has_table("evs_sessions"):
            raise SchemaError(unversioned_message(shown))
        return current

    with _translating(url, "Reading the schema revision"):
        await asyncio.to_thread(_probe_sqlite, url, "Reading the schema revision")
        engine = create_async_engine(sqlalchemy_url(url), poolclass=pool.NullPool)
        try:
            async with engine.connect() as connection:
                return await connection.run_sync(read)
        finally:
            await engine.dispose()


async def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` to ``revision`` (head by default), creating it if new.

    Runs alembic's command API in a worker thread (the migration environment runs its own
    event loop). Raises StorageError when the database fails.
    """
    from alembic import command
    from alembic.config import Config

    config = _config(url)
    assert isinstance(config, Config)

    path = sqlite_file(url)

    def run() -> None:
        with _UPGRADE_LOCK, _file_lock(url):
            if path is not None:
                # Read under the lock: outside it, another process's upgrade may be under way.
                # (Its DDL is inside the upgrade's one transaction — migrations/env.py — so
                # an upgrade killed midway leaves nothing; a database made before that, or
                # by hand, can still hold tables without a revision.)
                current, unversioned = sqlite_revision(str(path))
                if unversioned:
                    raise SchemaError(unversioned_message(url))
                if is_newer(current):
                    assert current is not None
                    raise SchemaError(newer_message(url, current))
            command.upgrade(config, revision)

    with _translating(url, "Upgrading the schema"):
        await asyncio.to_thread(_probe_sqlite, url, "Upgrading the schema")
    if path is None:
        current = await current_revision(url)
        if is_newer(current):
            assert current is not None
            raise SchemaError(newer_message(redact_url(url), current))
    with _translating(url, "Upgrading the schema"):
        await asyncio.to_thread(run)


@contextlib.contextmanager
def _file_lock(url: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the SQLite file ``url`` names (no-op for other URLs and
    where ``flock`` does not exist): serializes upgrades across processes."""
    path = sqlite_file(url)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        path = None
    if path is None:
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
