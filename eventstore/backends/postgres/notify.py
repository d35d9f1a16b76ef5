"""LISTEN/NOTIFY for the PostgreSQL backend: tails in other processes learn of appends.

An append wakes this process's tails at once (``Wakeups``) and other processes' through a
``NOTIFY`` on ``CHANNEL`` (the payload is the session id), sent after the append committed and
shared by every append of the last few milliseconds (see ``Notices.announce`` for why): in the
statement of the next grouped append when one is sent (``Notices.due``, no transaction of its
own), else in a transaction of its own. A tail
listens on a connection of its own before it reads the version it waits past, so no
notification is missed; tails also poll, so a lost notification only delays them.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

import asyncpg

from eventstore.backends.sql import Wakeups

from .keepalive import bound_silence

__all__ = ["CHANNEL", "NOTIFY_BUSY_DELAY", "NOTIFY_DELAY", "Notices"]

CHANNEL: Final = "evs_events"
"""NOTIFY channel announcing appends; the payload is the session id."""

NOTIFY_DELAY: Final = 0.005
"""Seconds an append's NOTIFY waits to be sent together with the next appends' (see
``_announce``)."""

NOTIFY_BUSY_DELAY: Final = 0.05
"""The same while many sessions are appending (the last notification named several): each
notification is a transaction on a pooled connection, which appends then wait for."""

# A notification is only a wake-up: its transaction need not wait for a WAL flush.
_NOTIFY_SQL = (
    "WITH c AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true)) "
    f"SELECT pg_notify('{CHANNEL}', s) FROM c, unnest($1::text[]) AS s"
)


class Notices:
    """The backend's NOTIFY sender and LISTEN connection (one per backend, on its loop).

    ``errors`` are the driver errors that make a notification or a LISTEN connection give up
    quietly (tails fall back to polling)."""

    def __init__(self, dsn: str, pool: Any, wakeups: Wakeups, *,
                 errors: tuple[type[BaseException], ...]) -> None:
        self._dsn = dsn
        self._pool = pool
        self._wakeups = wakeups
        self._errors = errors
        self._closed = False
        self._listener: Any = None
        self._listener_lock = asyncio.Lock()
        self._to_notify: set[str] = set()
        self._notifier: asyncio.Task[None] | None = None
        self._loop = asyncio.get_running_loop()
        # When the last notification left (loop time) and how long the next one waits after it.
        self._sent_at = -NOTIFY_BUSY_DELAY
        self._delay = NOTIFY_DELAY

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self._wakeups.wake(payload)

    async def listen(self) -> None:
        """Make sure a LISTEN connection is up; on failure, waiting falls back to polling."""
        async with self._listener_lock:
            if self._closed or (self._listener is not None and not self._listener.is_closed()):
                return
            try:
                conn = await asyncpg.connect(self._dsn, timeout=10)
                # A listener on a vanished machine would wait silently for ever: tails would
                # fall back to polling without knowing. Keepalives break it within the bound.
                await bound_silence(conn)
                await conn.add_listener(CHANNEL, self._on_notify)
            except self._errors:
                self._listener = None
                return
            self._listener = conn

    def announce(self, session_id: str) -> None:
        """Wake this process's tails now, other processes' through NOTIFY soon.

        NOTIFY is sent after the append committed, never inside each append: a transaction
        that notifies holds a database-wide lock while it commits, so notifying in every
        append would serialize every append's commit — its WAL flush included — across all
        sessions. One notification names every append of the last ``NOTIFY_DELAY`` seconds
        (``NOTIFY_BUSY_DELAY`` while several sessions append): it rides in the next grouped
        append's statement once that much time passed since the last one (``due``), so at most
        one transaction in that time takes the lock; when no append comes, ``_notify_loop``
        sends it alone, without waiting for a WAL flush. Tails poll as well, so a lost
        notification only delays them."""
        self._wakeups.wake(session_id)
        self._to_notify.add(session_id)
        if self._notifier is None or self._notifier.done():
            self._delay = NOTIFY_DELAY
            self._notifier = self._loop.create_task(self._notify_loop())

    def due(self) -> list[str]:
        """The sessions whose notification is due now, taken to ride in the statement about to
        be sent (its transaction notifies them when it commits); empty when none is due."""
        if not self._to_notify or self._loop.time() - self._sent_at < self._delay:
            return []
        return self._take()

    def _take(self) -> list[str]:
        sessions = sorted(self._to_notify)
        self._to_notify.clear()
        self._delay = NOTIFY_BUSY_DELAY if len(sessions) > 1 else NOTIFY_DELAY
        self._sent_at = self._loop.time()
        return sessions

    async def _notify_loop(self) -> None:
        # Appends landing meanwhile share this notification (a tail waits a few ms more, up
        # to NOTIFY_BUSY_DELAY under load). Once it is due the next grouped append carries
        # it (``due``): this task sends it alone only when none came NOTIFY_DELAY later.
        await asyncio.sleep(self._delay)
        while self._to_notify and not self._closed:
            wait = self._sent_at + self._delay + NOTIFY_DELAY - self._loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            sessions = self._take()
            with contextlib.suppress(*self._errors):
                async with self._pool.acquire() as conn:
                    await conn.execute(_NOTIFY_SQL, sessions)

    async def close(self) -> None:
        """Send the notification in flight (5 s at most) and close the LISTEN connection."""
        self._closed = True
        if self._notifier is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._notifier, 5)
        async with self._listener_lock:
            if self._listener is not None:
                with contextlib.suppress(*self._errors):
                    await self._listener.close(timeout=5)
                self._listener = None
