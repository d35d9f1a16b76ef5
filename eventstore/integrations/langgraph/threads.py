"""What a saver keeps on one event loop: the store it reaches there, the folded indexes of the
threads it used lately, and the outbox of their appends.

A saver may hold one of these per loop (``loop.Home``): its async methods' on the caller's
loop, its sync methods' on a loop thread of its own. Each is used on its own loop only; two of
them see the same threads as two savers on one database do (the log decides: a cached index
is brought up to the log's head before a read, and an append names what it extends).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

from eventstore import Content, Event, EventStore, Part, SessionNotFoundError

from .._handle import StoreHandle
from .log import METADATA_KEY, ThreadIndex
from .outbox import Item, Outbox

__all__ = ["USER", "Threads"]

USER: Final = "langgraph"
"""The user id of every thread's session."""

_MAX_THREADS: Final = 1024


class Threads:
    """The thread indexes (at most ``_MAX_THREADS``, the least recently used dropped) and
    appends of a saver on the loop of ``handle``'s store (opened there on first use)."""

    def __init__(self, handle: StoreHandle, app_name: str) -> None:
        self.handle = handle
        self.app_name = app_name
        self._threads: OrderedDict[str, ThreadIndex] = OrderedDict()
        self._loading: dict[str, asyncio.Future[ThreadIndex]] = {}
        self._outbox = Outbox(self._send)

    async def store(self) -> EventStore:
        """The store (opened now if it is not)."""
        return await self.handle.get()

    async def close(self) -> None:
        """Wait for the queued appends, then close the store if it was opened from a URL."""
        await self._outbox.drain()
        await self.handle.close()

    def cached(self, thread_id: str) -> ThreadIndex | None:
        """The thread's cached index, as folded so far (None: not cached)."""
        index = self._threads.get(thread_id)
        if index is not None:
            self._threads.move_to_end(thread_id)
        return index

    def forget(self, thread_id: str) -> None:
        """Drop the thread's cached index (its session was deleted or replaced)."""
        self._threads.pop(thread_id, None)

    def _keep(self, thread_id: str, index: ThreadIndex) -> ThreadIndex:
        self._threads[thread_id] = index
        self._threads.move_to_end(thread_id)
        while len(self._threads) > _MAX_THREADS:
            self._threads.popitem(last=False)
        return index

    async def refreshed(self, thread_id: str) -> ThreadIndex:
        """The thread's index brought up to the log's head: the events after its seq are
        folded; a log that no longer holds the event at its seq (the thread was deleted, maybe
        re-created, elsewhere) is folded from scratch."""
        store = await self.store()
        index = self.cached(thread_id)
        if index is not None and index.seq:
            try:
                events = await store.read_mappings(thread_id, after=index.seq - 1, compact=True,
                                                   app_name=self.app_name, user_id=USER)
            except SessionNotFoundError:
                return self._keep(thread_id, ThreadIndex())
            if events and events[0]["seq"] == index.seq and events[0]["id"] == index.last_id:
                for event in events[1:]:
                    if event["seq"] == index.seq + 1:
                        index.apply(event)
                return index
        return await self._load(thread_id)

    async def _load(self, thread_id: str) -> ThreadIndex:
        store = await self.store()
        index = ThreadIndex()
        try:  # no session_info first: the read says as well whether the session exists
            events = await store.read_mappings(thread_id, compact=True,
                                               app_name=self.app_name, user_id=USER)
        except SessionNotFoundError:
            return self._keep(thread_id, index)
        index.exists = True
        for event in events:
            index.apply(event)
        return self._keep(thread_id, index)

    async def loaded(self, thread_id: str) -> ThreadIndex:
        """The cached index (a writer needs no fresh one: its deltas name their bases); the
        writers of a thread not cached share one read of it."""
        index = self.cached(thread_id)
        if index is not None:
            return index
        loading = self._loading.get(thread_id)
        if loading is None:
            loading = self._loading[thread_id] = asyncio.ensure_future(self._load(thread_id))
            loading.add_done_callback(
                lambda done: self._loading.pop(thread_id)
                if self._loading.get(thread_id) is done else None)
        return await asyncio.shield(loading)

    async def append(self, thread_id: str, meaning: dict[str, Any], text: str,
                     run_id: str | None,
                     whole: Callable[[], dict[str, Any]] | None = None,
                     *, waits: bool = False) -> None:
        """Append one event to the thread (creating its session when there is none), with
        the thread's other appends waiting at that moment (``outbox``); it is folded into the
        cached index when it directly follows what the index has seen. ``whole`` gives the
        meaning without deltas, for a session deleted elsewhere and made anew; ``waits``: it
        may wait for the checkpoint that normally follows it (pending writes)."""
        await self._outbox.put(thread_id, Item(meaning=meaning, text=text, run_id=run_id,
                                               whole=whole, waits=waits))

    async def _send(self, thread_id: str, items: list[Item]) -> None:
        """Append ``items`` to the thread as one batch and settle their futures."""
        def event_of(item: Item, meaning: dict[str, Any]) -> Event:
            return Event(author=USER, invocation_id=item.run_id or "",
                         content=Content(role="model", parts=(Part(text=item.text),)),
                         custom_metadata={METADATA_KEY: meaning})

        try:
            store = await self.store()
            index = self._threads.get(thread_id)
            events = [event_of(i, i.meaning) for i in items]
            stored: list[Event] | None = None
            if index is None or not index.exists:
                # A new thread, as far as this saver knows: made with the events (no state
                # fold: the saver reads none); appended to when another saver made it.
                stored = await store.append(thread_id, events, expected_version=None,
                                            app_name=self.app_name, user_id=USER,
                                            create=True)
            else:
                try:
                    stored = await store.append(thread_id, events, expected_version=None,
                                                app_name=self.app_name, user_id=USER)
                except SessionNotFoundError:  # deleted meanwhile (elsewhere): make it again
                    self.forget(thread_id)  # that index described the old session
                    index = None
                    events = [event_of(i, i.whole() if i.whole is not None else i.meaning)
                              for i in items]
                    await store.append(thread_id, events, expected_version=None,
                                       app_name=self.app_name, user_id=USER, create=True)
        except BaseException as exc:
            for item in items:
                if not item.future.done():
                    if isinstance(exc, Exception):
                        item.future.set_exception(exc)
                    else:
                        item.future.cancel()
            if not isinstance(exc, Exception):
                raise
            return
        cached = self._threads.get(thread_id)
        if (stored and index is not None and cached is index
                and stored[0].seq == index.seq + 1):
            for event in stored:
                index.apply({"seq": event.seq, "id": event.id, "m": event.custom_metadata})
        elif cached is not None:
            cached.exists = True  # read before this commit: behind, but the session is there
        for item in items:
            if not item.future.done():
                item.future.set_result(None)
