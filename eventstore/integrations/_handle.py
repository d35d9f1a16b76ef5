"""The store an integration works on: one given, or one opened from a URL on first use.

A store belongs to the event loop it was opened on (``EventStore.loop``). Frameworks do not
promise one loop: the OpenAI Agents SDK's ``Runner.run_sync`` starts a loop of its own in each
calling thread, so one session object meets many loops, often at once. ``StoreHandle.run``
makes that safe:

- a store opened from a URL by a handle made with ``home_loop=True`` lives on the *home loop*,
  one event loop in a daemon thread of its own shared by every such handle of the process; each
  ``run(job)`` runs ``job(store)`` there, the caller awaiting it from whatever loop it is on
  (``asyncio.run_coroutine_threadsafe`` + ``asyncio.wrap_future``: one thread hop each way per
  call, so a job should be a whole operation, not one store call);
- a handle made with ``local_first=True`` too (SQLite files only: two stores of one file see
  the same data, which two ``memory://`` stores would not) opens a second store on the first
  loop that calls it, and runs that loop's jobs there with no hop: the home loop serves every
  other loop, so a loop that stops or blocks strands no one. That store is closed (from any
  loop: ``EventStore.aclose`` allows it) by ``close``, or when its loop has closed and another
  calls, which then takes its place (``asyncio.run`` after ``asyncio.run``);
- a given store runs the job on the caller's loop when it belongs to it (or to no loop yet); on
  its own loop when that one runs in another thread; and otherwise (its loop stopped or closed)
  raises StoreUsageError at once: nothing could ever run the job, so waiting would hang.

``get()`` hands out the store itself, for integrations that await it on one loop (ADK): opened
on the caller's loop, and a second loop asking for it is refused at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from eventstore import EventStore, StoreClosedError, StoreUsageError, open_store, resolve_url

__all__ = ["StoreHandle"]

T = TypeVar("T")


class _HomeLoop:
    """The process's home loop: an event loop in a daemon thread, started on first use (and
    again in a forked child, which inherits no threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def get(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is not None and self._pid == os.getpid():
            return loop
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                started = threading.Event()
                thread = threading.Thread(target=self._main, args=(loop, started),
                                          name="eventstore-home-loop", daemon=True)
                thread.start()
                started.wait()
                self._loop, self._pid = loop, os.getpid()
            return self._loop

    @staticmethod
    def _main(loop: asyncio.AbstractEventLoop, started: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(started.set)
        loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.get())

    def close_later(self, store: EventStore) -> None:
        """Close ``store`` on the home loop without waiting (from any thread: a handle that
        was dropped unclosed)."""
        loop = self._loop
        if loop is not None and not loop.is_closed() and self._pid == os.getpid():
            loop.call_soon_threadsafe(lambda: loop.create_task(store.aclose()))

    def in_it(self) -> bool:
        """Whether the caller runs on the home loop's thread."""
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False


_HOME = _HomeLoop()


class StoreHandle:
    """An EventStore given, or opened from a URL on first use (``auto_upgrade=True``) and then
    closed by ``close``; see the module for which loop runs what.

    ``home_loop=True`` keeps a store opened from a URL on the home loop, for ``run``; without
    it the store is opened on the loop of the first ``get()`` (or ``run``) and belongs there.
    ``local_first=True`` (with ``home_loop``) serves the first loop that calls ``run`` on a
    store of its own, with no hop, when the URL names a SQLite file.
    """

    def __init__(self, url_or_store: str | os.PathLike[str] | EventStore, *,
                 home_loop: bool = False, local_first: bool = False) -> None:
        if isinstance(url_or_store, EventStore):
            self._store: EventStore | None = url_or_store
            self._url: str | os.PathLike[str] | None = None
        elif isinstance(url_or_store, (str, os.PathLike)):
            self._store = None
            self._url = url_or_store
        else:
            raise StoreUsageError(
                f"url_or_store must be a store URL, a path or an EventStore, not "
                f"{url_or_store!r}."
            )
        self._home = home_loop and self._url is not None
        self._closed = False
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._local = local_first and self._home and _file_store(self._url)
        self._guard = threading.Lock()  # the local store's claim, across threads
        self._local_loop: asyncio.AbstractEventLoop | None = None
        self._local_lock: asyncio.Lock | None = None
        self._local_store: EventStore | None = None
        self._local_finalizer: weakref.finalize[Any, Any] | None = None

    @property
    def closed(self) -> bool:
        """Whether a ``home_loop`` handle was closed (it cannot be used again)."""
        return self._closed

    async def get(self) -> EventStore:
        """The store, opened on first use when given a URL (on the caller's loop, to which it
        then belongs: another loop asking while it opens is refused with StoreUsageError).
        Not for ``home_loop`` handles, whose store lives on the home loop (use ``run``)."""
        if self._home:
            raise StoreUsageError(
                "This store lives on the home loop of its integration: use StoreHandle.run().")
        if self._store is not None:
            return self._store
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            if self._lock is not None and self._lock.locked():
                raise StoreUsageError(
                    f"The store {self._url!s} is being opened on another event loop; a store "
                    "belongs to the loop it is opened on. Use one loop per store.")
            self._lock, self._lock_loop = asyncio.Lock(), loop
        async with self._lock:
            if self._store is None:
                self._store = await open_store(self._url, auto_upgrade=True)
        return self._store

    async def run(self, job: Callable[[EventStore], Coroutine[Any, Any, T]]) -> T:
        """Await ``job(store)`` on the loop the store belongs to (see the module), from any
        loop and thread. Raises StoreClosedError after ``close`` (``home_loop`` handles) and
        StoreUsageError, at once, for a given store whose loop no longer runs."""
        if self._home:
            if self._closed:
                raise StoreClosedError()
            if self._local:
                if self._local_loop is asyncio.get_running_loop() and \
                        (store := self._local_store) is not None:
                    return await job(store)
                if (store := await self._claim_local()) is not None:
                    return await job(store)
            return await asyncio.wrap_future(_HOME.submit(self._on_home(job)))
        store = self._store if self._store is not None else await self.get()
        loop = store.loop
        if loop is None or loop is asyncio.get_running_loop():
            return await job(store)
        if loop.is_closed() or not loop.is_running():
            raise StoreUsageError(
                f"The store {store.url} belongs to an event loop that no longer runs, so "
                "nothing can await it there; give the integration a store opened on a loop "
                "that keeps running, or a URL to open its own."
            )
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(job(store), loop))

    async def _claim_local(self) -> EventStore | None:
        """The running loop's own store, opened on first use, or None when another loop that
        has not closed holds the claim. A claim whose loop closed passes to this loop (that
        loop runs nothing any more, so its store is idle: it is closed here)."""
        loop = asyncio.get_running_loop()
        if _HOME.in_it():  # a job of the home loop's own: the home store serves it
            return None
        with self._guard:
            held = self._local_loop
            if held is not None and held is not loop and not held.is_closed():
                return None
            stale = None
            if held is not loop:
                stale, self._local_store = self._local_store, None
                self._local_loop, self._local_lock = loop, asyncio.Lock()
            lock = self._local_lock
        assert lock is not None
        if stale is not None:
            if self._local_finalizer is not None:
                self._local_finalizer.detach()
            await stale.aclose()
        async with lock:
            if self._local_store is None and self._local_loop is loop:
                store = await open_store(self._url, auto_upgrade=True)
                with self._guard:
                    closed = self._closed
                    if not closed:
                        self._local_store = store
                if closed:
                    await store.aclose()
                    raise StoreClosedError()
                # Dropped without close(): closed on the home loop all the same.
                self._local_finalizer = weakref.finalize(self, _close_soon, store)
        return self._local_store

    def _take_local(self) -> EventStore | None:
        """Mark the handle closed and hand over its local store (None when there is none)."""
        with self._guard:
            self._closed = True
            store, self._local_store = self._local_store, None
        if store is not None and self._local_finalizer is not None:
            self._local_finalizer.detach()
        return store

    async def _on_home(self, job: Callable[[EventStore], Coroutine[Any, Any, T]]) -> T:
        """``job(store)`` on the home loop, opening the store there first (the home loop is
        the only one touching ``_store`` and ``_lock`` of a home handle)."""
        if self._lock is None:  # first, so that close() knows a job got here
            self._lock = asyncio.Lock()
        if self._store is None:
            async with self._lock:
                if self._closed:
                    raise StoreClosedError()
                if self._store is None:
                    store = await open_store(self._url, auto_upgrade=True)
                    self._store = store
                    # Dropped without close(): its threads and file are closed all the same.
                    self._finalizer = weakref.finalize(self, _HOME.close_later, store)
        return await job(self._store)

    async def close(self) -> None:
        """Close the store if this handle opened it (a given store stays open). A
        ``home_loop`` handle is closed for good; another reopens its store on next use."""
        if self._home:
            if (local := self._take_local()) is not None:
                await local.aclose()  # allowed from any loop
            if self._lock is None:  # no job ever reached the home loop: nothing is open
                return
            if not _HOME.in_it():
                await asyncio.wrap_future(_HOME.submit(self._close_on_home()))
                return
            await self._close_on_home()
        elif self._url is not None and self._store is not None:
            store, self._store = self._store, None
            await store.aclose()

    def close_now(self) -> None:
        """``close`` for callers that cannot await: a ``home_loop`` handle's store is closed
        on the home loop while the caller waits (a few milliseconds: its threads stop and
        its file is checkpointed). Other handles' stores belong to a loop the caller may be
        running, so they are not waited for: StoreUsageError if they hold an open store."""
        if not self._home:
            if self._url is not None and self._store is not None:
                raise StoreUsageError(
                    "This store belongs to the caller's event loop: await close() instead.")
            return
        local = self._take_local()
        if local is None and self._lock is None:  # nothing was ever opened
            return
        if _HOME.in_it():  # pragma: no cover - our jobs never close their own handle
            raise StoreUsageError("close_now() cannot wait on the home loop's own thread.")
        if local is not None:
            # Its loop may be the caller's, which cannot run while the caller waits.
            _HOME.submit(local.aclose()).result()
        if self._lock is None:  # no job ever reached the home loop: nothing is open there
            return
        _HOME.submit(self._close_on_home()).result()

    async def _close_on_home(self) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # after an open under way
            if self._store is None:
                return
            store, self._store = self._store, None
            if self._finalizer is not None:
                self._finalizer.detach()
            await store.aclose()


def _file_store(url: str | os.PathLike[str] | None) -> bool:
    """Whether ``url`` names a SQLite file, which two stores can share (what one writes the
    other reads); an in-memory database is private to the store that opened it."""
    if url is None:
        return False
    try:
        resolved = resolve_url(url)
    except StoreUsageError:
        return False
    return resolved.startswith("sqlite+aiosqlite://") and ":memory:" not in resolved \
        and "mode=memory" not in resolved


def _close_soon(store: EventStore) -> None:
    """Close ``store`` on the home loop without waiting (a handle dropped unclosed)."""
    try:
        loop = _HOME.get()
    except RuntimeError:  # the interpreter is exiting: no new threads
        return
    asyncio.run_coroutine_threadsafe(store.aclose(), loop)
