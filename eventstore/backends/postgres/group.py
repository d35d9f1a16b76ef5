"""Group commit for PostgreSQL's one-statement appends (``evs_append``).

Under load the cost of an append is its commit (a WAL flush) and its round trip, not the
function's work. The appends waiting at one moment, of any sessions, are therefore sent on one
pooled connection as one pipelined round trip (asyncpg's ``fetchmany``: one ``evs_append`` per
append, one ``Sync``), which makes them one transaction and one commit. Each append keeps its
own contract, because ``evs_append`` judges each call alone: it takes the session's lock, checks
the head and the ids, and either writes or returns a status without writing (the caller then
takes the multi-statement path). A caller is answered only after the commit that holds its
events. If the group's transaction fails as a whole (e.g. a session deleted meanwhile), nothing
of it was written and each append is run again alone, so an error reaches only its own caller.

A lone append does not wait for company: it is sent as soon as a connection is free. At most
``max_senders`` connections send groups at once (the rest of the pool stays free for reads and
the multi-statement path), each of at most ``MAX_GROUP`` appends: one group of everything leaves
the client idle while one server process works and that process idle while the client answers,
where several small groups in flight keep the client and several server processes busy (64
sessions on 2 cores, five senders: 14,000 events/s in groups of 64, 17,500 of 32, 20,000 of 8,
17,000 of 4). Within a group the calls are ordered by lock key, so two groups take
their sessions' locks in the same order and cannot deadlock each other.

Each call's statement has one parameter more than its caller gave, the last: what rides in the
group's transaction (the sessions whose NOTIFY is due, ``notify.Notices.due``), given to the
group's first call, ``nothing`` to the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Final

__all__ = ["AppendGroups", "MAX_GROUP"]

MAX_GROUP: Final = 8
"""The most appends one round trip carries (more in flight at once, on several connections,
beat one big group: see the module docstring)."""

_Pending = tuple[Sequence[Any], "asyncio.Future[Any]"]


class AppendGroups:
    """Runs ``sql`` (one row per call) for each submitted argument tuple, grouping the calls
    waiting at one moment into one transaction (see the module docstring).

    ``errors`` are the exceptions of a failed group that make each of its calls run again
    alone, except ``broken`` ones (the connection failed, not the group): those fail the whole
    group and every call after it on that connection, which is then never used again (a
    broken connection left mid-operation would raise asyncpg's internal errors, or be used
    after the pool took it back). A group that ``unsent`` says was refused before being sent
    (a dead pooled connection) is sent again on another connection, up to ``unsent_retries``
    times; ``lock_position`` is the index of the lock key in each argument tuple (the order
    within a group); at most ``max_senders`` pooled connections send groups at once;
    ``ride`` gives the last parameter of each group's first call, the others get ``nothing``
    (see the module docstring)."""

    def __init__(self, pool: Any, sql: str, *, max_senders: int,
                 errors: tuple[type[BaseException], ...],
                 broken: tuple[type[BaseException], ...] = (),
                 unsent: Callable[[BaseException], bool] = lambda exc: False,
                 unsent_retries: int = 0, lock_position: int,
                 ride: Callable[[], Any], nothing: Any) -> None:
        self._pool = pool
        self._sql = sql
        self._max_senders = max(1, max_senders)
        self._errors = errors
        self._broken = broken
        self._unsent = unsent
        self._unsent_retries = unsent_retries
        self._lock_position = lock_position
        self._ride = ride
        self._nothing = nothing
        self._pending: list[_Pending] = []
        self._senders = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self, args: Sequence[Any]) -> Any:
        """The row ``sql`` returns for ``args``, after the transaction holding it committed.
        Raises what running it alone would raise."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((args, future))
        if self._senders < self._max_senders:
            self._start_sender()
        return await future

    async def _send(self) -> None:
        group: list[_Pending] = []
        try:
            for attempt in range(self._unsent_retries + 1):
                async with self._pool.acquire() as conn:
                    try:
                        while self._pending:
                            group = [p for p in self._take() if not p[1].done()]
                            if group:
                                await self._send_group(conn, group)
                            group = []
                        return
                    except BaseException as exc:
                        if attempt == self._unsent_retries or not self._unsent(exc):
                            raise
                        # A dead pooled connection refused the group before sending it: the
                        # group goes first again, on another connection.
                        conn.terminate()
                        self._pending[:0] = group
                        group = []
        except BaseException as exc:
            # No connection, a broken one, or this task was cancelled: its group fails with it.
            # A connection's failure meets every queued call alike (the server is down or
            # unreachable): they fail now too, each caller told to retry, rather than wait for
            # senders that cannot connect either — a failed sender starting the next one would
            # loop on the outage without answering anyone. A cancelled sender leaves the queue
            # to the other senders unless it was the last. A later call starts a sender of its
            # own.
            unanswered = group
            if isinstance(exc, Exception) or self._senders == 1:
                unanswered += self._pending
                self._pending = []
            for _, future in unanswered:
                if future.done():
                    continue
                if isinstance(exc, Exception):
                    future.set_exception(exc)
                else:
                    future.cancel()
            if not isinstance(exc, Exception):
                raise
        finally:
            self._senders -= 1
            # Calls queued while this sender released its connection.
            if self._pending and self._senders < self._max_senders:
                self._start_sender()

    def _take(self) -> list[_Pending]:
        """The next group: the oldest ``MAX_GROUP`` waiting calls, and every later waiting
        call of a session they hold (so a session's calls stay in one group, in order)."""
        pending = self._pending
        size = MAX_GROUP
        group = pending[:size]
        if len(pending) > size:
            keys = {args[self._lock_position] for args, _ in group}
            rest: list[_Pending] = []
            for item in pending[size:]:
                (group if item[0][self._lock_position] in keys else rest).append(item)
            self._pending = rest
        else:
            self._pending = []
        return group

    def _start_sender(self) -> None:
        self._senders += 1
        task = asyncio.get_running_loop().create_task(self._send())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_group(self, conn: Any, group: list[_Pending]) -> None:
        if len(group) > 1:
            group.sort(key=lambda p: p[0][self._lock_position])
        riding = self._ride()
        calls = [(*args, self._nothing) for args, _ in group]
        calls[0] = (*group[0][0], riding)
        if len(group) > 1:
            try:
                rows = await conn.fetchmany(self._sql, calls)
            except self._broken:
                raise  # the connection is gone: _send fails the group and stops using it
            except self._errors:
                pass  # nothing of the group was written: each call runs again alone
            else:
                for (_, future), row in zip(group, rows, strict=True):
                    if not future.done():
                        future.set_result(row)
                return
        for (_, future), call in zip(group, calls, strict=True):
            try:
                row = await conn.fetchrow(self._sql, *call)
            except self._broken:
                raise
            except self._errors as exc:
                if not future.done():
                    future.set_exception(exc)
            else:
                if not future.done():
                    future.set_result(row)

    async def drain(self) -> None:
        """Wait for the groups being sent (before the pool closes)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
