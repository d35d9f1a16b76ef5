"""The primary's pool with its last released connection kept warm for the next job.

asyncpg's acquire and release of a pooled connection cost about 15 microseconds of client CPU
together (a queue, a shielded task, the connection's reset, an inactivity timer), a third of a
round trip's, and a LangGraph thread of one invoke acquires four times. ``WarmPool`` keeps the
connection a job released cleanly (no exception, no open transaction, still open) for the next
job, which takes it without asking the pool: about 1.5 microseconds. Only one is kept, and not
while a job waits for the pool (it goes back to the pool then, so no job waits while a
connection idles here); one unused for ``LINGER`` seconds goes back too, so the pool's own
care of idle connections still applies. A job that raised gives its connection back to the
pool, whose release resets it (rolls back, waits for a cancellation) or discards it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

import asyncpg

__all__ = ["LINGER", "WarmPool"]

LINGER: Final = 1.0
"""Seconds the warm connection may stay unused before it goes back to the pool."""


def _open(conn: Any) -> bool:
    """Whether the pooled ``conn`` may still be used: open, and not handed back to the pool
    already (asyncpg hands a connection back by itself when it closes, and its proxy then
    refuses every call)."""
    try:
        return not conn.is_closed()
    except asyncpg.InterfaceError:
        return False


class _Lease:
    """``async with warm.acquire() as conn``: one job's use of a connection."""

    __slots__ = ("_conn", "_warm")

    def __init__(self, warm: WarmPool) -> None:
        self._warm = warm
        self._conn: Any = None

    async def __aenter__(self) -> Any:
        self._conn = await self._warm._take()
        return self._conn

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        await self._warm._give(self._conn, failed=exc_type is not None)


class WarmPool:
    """``pool`` (asyncpg's) with its last cleanly released connection kept for the next
    ``acquire`` (see the module docstring); ``close`` gives it back before the pool closes."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._loop = asyncio.get_running_loop()
        self._idle: Any = None
        self._idle_since = 0.0
        self._waiting = 0  # jobs waiting for the pool: no connection idles here meanwhile
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._releases: set[asyncio.Task[None]] = set()

    def acquire(self) -> _Lease:
        """A connection for one job, as ``async with``; the pool's when none is warm."""
        return _Lease(self)

    def get_max_size(self) -> int:
        """The pool's size."""
        return int(self._pool.get_max_size())

    async def _take(self) -> Any:
        conn = self._idle
        if conn is not None:
            self._idle = None
            if _open(conn):
                return conn
            await self._pool.release(conn)
        self._waiting += 1
        try:
            return await self._pool.acquire()
        finally:
            self._waiting -= 1

    async def _give(self, conn: Any, *, failed: bool) -> None:
        if (failed or self._closed or self._waiting or self._idle is not None
                or not _open(conn) or conn.is_in_transaction()):
            await self._pool.release(conn)
            return
        self._idle = conn
        self._idle_since = self._loop.time()
        if self._timer is None:
            self._timer = self._loop.call_later(LINGER, self._cool)

    def _cool(self) -> None:
        self._timer = None
        conn = self._idle
        if conn is None:
            return
        left = self._idle_since + LINGER - self._loop.time()
        if left > 0:
            self._timer = self._loop.call_later(left, self._cool)
            return
        self._idle = None
        task = self._loop.create_task(self._release_quietly(conn))
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def _release_quietly(self, conn: Any) -> None:
        # No job waits for this release: a connection that fails it is discarded by the pool.
        with contextlib.suppress(Exception):
            await self._pool.release(conn)

    async def close(self) -> None:
        """Give the warm connection back to the pool (before the pool closes); later releases
        go to the pool."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        conn, self._idle = self._idle, None
        if conn is not None:
            await self._pool.release(conn)
        if self._releases:
            await asyncio.gather(*self._releases, return_exceptions=True)
