"""The SQLite driver thread: one thread owning one sqlite3 connection, one hop per job.

aiosqlite hops to its thread once per statement and has no public way to run a whole function
there; an append done that way costs several hops (~100 µs each). A ``Driver`` runs a whole job —
a plain function of the connection, e.g. a complete transaction — in one hop. A task that may
block its event loop (``INLINE`` set: a loop run by a sync caller who waits anyway) runs its
job on its own thread instead, with no hop, when nothing is queued ahead of it. The functions
that open those connections (writer, reader, read-only) live here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

from eventstore._inline import INLINE

__all__ = [
    "BUSY_TIMEOUT_MS",
    "Driver",
    "connect_read_only",
    "connect_reader",
    "connect_writer",
    "directory_problem",
]

T = TypeVar("T")

BUSY_TIMEOUT_MS: Final = 30_000
"""How long a connection waits for another writer's lock before failing."""


def directory_problem(path: str) -> str | None:
    """Say what is wrong with the directory of the SQLite file ``path`` when the directory is
    why the file cannot be created or written (it is missing, or not writable: SQLite creates
    the file and its ``-wal``/``-shm`` files there), else None."""
    directory = Path(path).absolute().parent
    if not directory.is_dir():
        return f"the directory {directory} does not exist"
    if not os.access(directory, os.W_OK | os.X_OK):
        what = "the database" if not os.path.exists(path) else "its -wal and -shm files"
        return (f"the directory {directory} is not writable (SQLite creates {what} there); "
                "make it writable or move the database")
    return None


def connect_writer(path: str, *, synchronous: str,
                   autocheckpoint: int | None = None) -> sqlite3.Connection:
    """Open the writer connection: autocommit (explicit transactions), WAL, foreign keys;
    ``autocheckpoint`` sets its ``wal_autocheckpoint`` (pages; SQLite's default otherwise)."""
    # Used by the driver's thread, or by an inline job under the driver's lock (never both).
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA foreign_keys = ON")
    if autocheckpoint is not None:
        conn.execute(f"PRAGMA wal_autocheckpoint = {int(autocheckpoint)}")
    return conn


def connect_reader(path: str, *, read_only: bool) -> sqlite3.Connection:
    """Open the reader connection (``query_only``, or a read-only open of the file)."""
    if read_only:
        conn = connect_read_only(path)
    else:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA query_only = ON")
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def _cannot_open_read_only(exc: sqlite3.Error) -> bool:
    # WAL readers need the -shm file; where they may not create it, mode=ro fails this way.
    name = getattr(exc, "sqlite_errorname", "")
    message = str(exc)
    return name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")) or (
        "attempt to write a readonly database" in message
        or "unable to open database file" in message
    )


def connect_read_only(path: str) -> sqlite3.Connection:
    """Open ``path`` read-only (``mode=ro``), falling back to ``immutable=1`` only when the
    read-only open fails because the process cannot create the WAL's ``-shm`` file (a
    directory it cannot write).

    An immutable open takes no locks and does not see changes that concurrent writers make
    after it opened — fine for inspecting a file, wrong for tailing one. It also ignores a
    ``-wal`` file, so when a non-empty one exists (committed rows not yet checkpointed into the
    database file) the original error is raised instead of reading stale data.
    """
    uri = Path(path).resolve().as_uri()
    conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None,
                           check_same_thread=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the open is lazy
    except sqlite3.Error as exc:
        conn.close()
        if not _cannot_open_read_only(exc):
            raise
        try:
            pending_wal = os.path.getsize(f"{path}-wal") > 0
        except OSError:
            pending_wal = False
        if pending_wal:
            raise
        return sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None,
                               check_same_thread=False)
    return conn


class Driver:
    """One thread owning one sqlite3 connection; jobs run in submission order, one hop each.

    A job is a plain function of the connection. If the awaiting task is cancelled the job still
    runs to completion (a transaction is never abandoned half way); its result is dropped.
    ``after_job`` (which must not raise) runs after every job: on the thread once its caller
    has been answered, or before an inline job (see ``INLINE``) returns.
    """

    def __init__(self, name: str, connect: Callable[[], sqlite3.Connection], *,
                 after_job: Callable[[], None] | None = None) -> None:
        self._after_job = after_job
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any] | None] | None
        ] = queue.SimpleQueue()
        self._connect = connect
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._ready: asyncio.Future[None] | None = None
        self._conn: sqlite3.Connection | None = None  # for inline jobs, while the thread runs
        self._using = threading.Lock()  # held while a job uses the connection
        # Jobs queued (counted by the submitting loop's thread: one at a time) and jobs the
        # thread finished (counted by the thread, under _using): equal when nothing is queued.
        self._queued = 0
        self._finished = 0

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._thread.start()
        await self._ready

    def _main(self) -> None:
        assert self._ready is not None
        ready = self._ready
        try:
            conn = self._connect()
        except BaseException as exc:
            _resolve(ready, exc, error=True)
            return
        self._conn = conn
        _resolve(ready, None, error=False)
        try:
            while (job := self._jobs.get()) is not None:
                fn, future = job
                outcome: tuple[Any, bool] | None = None
                with self._using:
                    if future is None:
                        fn(conn)  # a posted job answers its callers itself (it never raises)
                    else:
                        try:
                            outcome = (fn(conn), False)
                        except BaseException as exc:
                            outcome = (exc, True)
                    self._finished += 1
                if self._after_job is not None:
                    self._after_job()
                # Answered last: a caller told its job is done finds it counted (an inline job
                # right after it then runs inline) and after_job already run.
                if outcome is not None:
                    assert future is not None
                    _resolve(future, outcome[0], error=outcome[1])
        finally:
            with self._using:
                self._conn = None
            conn.close()

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` behind the jobs already queued, on the thread (or inline: see
        ``INLINE``); returns its result or raises what it raised."""
        if INLINE.get() and self._using.acquire(blocking=False):
            try:
                conn = self._conn
                if conn is not None and self._queued == self._finished:  # nothing to overtake
                    try:
                        return fn(conn)
                    finally:
                        if self._after_job is not None:
                            self._after_job()
            finally:
                self._using.release()
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue((fn, future))
        return await future

    def post(self, fn: Callable[[sqlite3.Connection], None]) -> None:
        """Queue ``fn`` behind the jobs already queued, without waiting for it. ``fn`` must not
        raise: it answers whoever waits for it itself (see ``GroupCommit``)."""
        self._queue((fn, None))

    def _queue(self, job: tuple[Callable[[sqlite3.Connection], Any],
                                asyncio.Future[Any] | None]) -> None:
        self._queued += 1
        self._jobs.put(job)

    async def stop(self) -> None:
        self._jobs.put(None)
        if self._thread.is_alive():
            await asyncio.to_thread(self._thread.join)


def _resolve(future: asyncio.Future[Any], value: Any, *, error: bool) -> None:
    def settle() -> None:
        if future.done():
            return
        if error:
            future.set_exception(value)
        else:
            future.set_result(value)

    with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
        future.get_loop().call_soon_threadsafe(settle)
