"""Reads from hot standbys (``open_store(url, read_urls=[...])``): which reads may go there.

PostgreSQL's streaming replication makes every standby an exact but *late* copy of the
primary: a commit reaches a standby's readers once it has replayed it (``replay_lag`` in
``pg_stat_replication``, milliseconds on a healthy network). Reads that may be that stale —
session listings, a session's history and state, memory search, the version a live tail
waits past — go to a standby, in turn when there are several (one pool each, opened lazily
so a standby that is down at open costs nothing); everything a write depends on (appends,
the checks inside them, key lookups, artifacts, caches, retention) stays on the primary.

**Read-your-writes.** A session this store wrote (appended, created, imported, forked,
deleted) in the last ``fresh_for`` seconds (``READ_YOUR_WRITES``) is read on the primary, so
a process reading what it just wrote never sees an older version of it; other processes'
writes reach it after the standby's lag. The bound is a time, not a log position, so it
holds while the standby's lag stays under ``fresh_for`` (alert on ``replay_lag`` well below
it; docs/operations.md).

**A standby that fails** (unreachable, restarting, promoted away, or cancelling a query that
conflicts with its replay) fails over to the primary for that read, and reads skip it for
``RETRY_AFTER`` seconds: a read never fails because a standby did, and a dead standby costs
one failed connection per ``RETRY_AFTER``, not one per read.

**Live tails** keep working: the wake-up (``NOTIFY``, which a standby never replays) is
received on the primary; the tail then reads the version and the events on the standby, and
a wake-up that arrives before the standby replayed the commit is followed by the tail's poll
(``POLL_INTERVAL``), so an event reaches a tail within the standby's lag plus one poll.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

__all__ = ["READ_YOUR_WRITES", "RETRY_AFTER", "ReadRoute"]

READ_YOUR_WRITES: Final = 10.0
"""Seconds after this store wrote a session during which its reads of it go to the primary."""

RETRY_AFTER: Final = 5.0
"""Seconds reads skip a standby after it failed one."""

_FORGET_AFTER: Final = 4096
"""Written sessions remembered before the expired ones are dropped (bounded memory)."""


class ReadRoute:
    """Picks the pool of each read: a standby's (in turn) or None for the primary's."""

    def __init__(self, urls: Sequence[str], connect: Callable[[str], Awaitable[Any]], *,
                 fresh_for: float = READ_YOUR_WRITES) -> None:
        self.urls = list(urls)
        self._connect = connect
        self._pools: dict[int, Any] = {}
        self._turn = itertools.cycle(range(len(self.urls)))
        self._written: dict[str, float] = {}
        self._down_until: dict[int, float] = {}
        self.fresh_for = fresh_for

    def wrote(self, session_id: str) -> None:
        """Record that this store just wrote ``session_id`` (its reads go to the primary for
        ``fresh_for`` seconds)."""
        now = time.monotonic()
        self._written[session_id] = now
        if len(self._written) > _FORGET_AFTER:
            self._written = {k: t for k, t in self._written.items()
                             if now - t < self.fresh_for}

    def primary_only(self, session_id: str | None) -> bool:
        """Whether a read of ``session_id`` (None: a listing) must go to the primary."""
        if session_id is None:
            return False
        written = self._written.get(session_id)
        return written is not None and time.monotonic() - written < self.fresh_for

    async def pool(self) -> tuple[int, Any] | None:
        """The next standby's pool (opened on first use) and its index; None when every
        standby failed a read in the last ``RETRY_AFTER`` seconds (read the primary)."""
        now = time.monotonic()
        for _ in self.urls:
            index = next(self._turn)
            if self._down_until.get(index, 0.0) > now:
                continue
            pool = self._pools.get(index)
            if pool is None:
                pool = self._pools[index] = await self._connect(self.urls[index])
            return index, pool
        return None

    def failed(self, index: int) -> None:
        """Standby ``index`` failed a read: skip it for ``RETRY_AFTER`` seconds."""
        self._down_until[index] = time.monotonic() + RETRY_AFTER

    def pools(self) -> list[Any]:
        """The pools opened so far (to close them)."""
        pools = list(self._pools.values())
        self._pools.clear()
        return pools
