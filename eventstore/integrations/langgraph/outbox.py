"""A thread's appends: one in flight at a time, those that arrive meanwhile sent together.

LangGraph puts a thread's checkpoints one after another (a step's checkpoint is put when its
parent's put has returned) and its tasks' pending writes beside them, awaited only when the
run ends. The store serializes appends to one session anyway (the session's lock), so each
append sent alone costs a commit — a WAL flush on PostgreSQL — that the next one waits for.
The saver therefore sends a thread's appends one transaction at a time, and whatever arrived
while one was in flight goes out next as one append: one commit for all of it.

Pending writes alone wait up to ``WRITES_WAIT`` seconds before they are sent: in LangGraph's
loop the writes of a step's tasks are followed at once by the next checkpoint (put as soon as
its parent's put returns), and the two then share one commit instead of the checkpoint waiting
behind the writes' commit. A checkpoint (or a drop) ends the wait at once and never waits
itself. Writes to a LangGraph ``DeltaChannel`` do not wait (the saver says so per item): there
LangGraph puts the next checkpoint only after those writes committed. Nothing is answered
before the commit that holds it: the wait can delay an answer, never make it less durable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["WRITES_WAIT", "Item", "Outbox"]

WRITES_WAIT: Final = 0.003
"""Seconds pending writes wait for the checkpoint that normally follows them (see the module):
more than the time LangGraph takes from one put's return to the next put, less than a commit
on a loaded PostgreSQL server (5-15 ms measured)."""


@dataclass(kw_only=True, eq=False)
class Item:
    """One append a saver call waits for: ``meaning`` with its readable ``text``."""

    meaning: dict[str, Any]
    text: str
    run_id: str | None
    whole: Callable[[], dict[str, Any]] | None = None
    """The meaning without deltas, for a session deleted elsewhere and made anew."""
    waits: bool = False
    """Whether this item alone may wait for company (pending writes)."""
    future: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())


Send = Callable[[str, list[Item]], Awaitable[None]]


class Outbox:
    """Per thread, the queue of ``Item``s and the one task sending them (on one loop).

    ``send(thread_id, items)`` appends the items as one batch and settles every item's future
    (result or exception); it is never called twice at once for one thread."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._queues: dict[str, list[Item]] = {}
        self._wake: dict[str, asyncio.Future[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def put(self, thread_id: str, item: Item) -> None:
        """Queue ``item`` and return once the append holding it committed (or raise what it
        raised)."""
        queue = self._queues.get(thread_id)
        if queue is None:
            self._queues[thread_id] = [item]
            task = asyncio.get_running_loop().create_task(self._drain(thread_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            queue.append(item)
            if not item.waits:
                wake = self._wake.pop(thread_id, None)
                if wake is not None and not wake.done():
                    wake.set_result(None)
        # Shielded: a caller that stops waiting does not cancel the others' append.
        await asyncio.shield(item.future)

    async def _drain(self, thread_id: str) -> None:
        queue = self._queues[thread_id]
        batch: list[Item] = []
        try:
            while queue:
                if all(i.waits for i in queue):
                    loop = asyncio.get_running_loop()
                    wake = self._wake[thread_id] = loop.create_future()
                    timer = loop.call_later(WRITES_WAIT, _settle, wake)
                    try:
                        await wake
                    finally:
                        timer.cancel()
                        self._wake.pop(thread_id, None)
                batch = queue[:]
                del queue[:]
                await self._send(thread_id, batch)
                batch = []
        finally:
            del self._queues[thread_id]
            for item in (*batch, *queue):  # cancelled (the loop is closing): nobody is answered
                if not item.future.done():
                    item.future.cancel()

    async def drain(self) -> None:
        """Wait until every queued item was sent."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
