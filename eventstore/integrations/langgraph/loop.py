"""The event loop a LangGraph saver's store lives on, reachable from sync code in any thread and
from async code on any loop.

A store is bound to the loop it was opened on (its driver connections are). The saver opened
from a URL owns a background thread running a loop of its own (``LoopThread``) and opens the
store there; an ``EventStore`` handed in stays on the loop it came from, which becomes known on
the saver's first async call. Every store operation runs on that home loop: async callers on
another loop await it through ``asyncio.wrap_future``, sync callers block on it; a sync call
made on the home loop itself (it would wait for itself forever) is refused.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from eventstore import StoreClosedError, StoreUsageError

__all__ = ["Home", "LoopThread"]

T = TypeVar("T")


class LoopThread:
    """A daemon thread running an event loop, started on first use, stopped by ``stop``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (started now if it is not)."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                started = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set)
                    loop.run_forever()

                thread = threading.Thread(target=run, name="eventstore-langgraph", daemon=True)
                thread.start()
                started.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    def stop(self) -> None:
        """Stop the loop and join its thread (from any thread but the loop's own)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join()
            loop.close()


class Home:
    """Where a saver's store operations run: a ``LoopThread`` of its own, or the loop of the
    store it was given (known from the first async call)."""

    def __init__(self, *, own: bool) -> None:
        self._thread = LoopThread() if own else None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    def _home(self) -> asyncio.AbstractEventLoop | None:
        if self._closed:
            raise StoreClosedError()
        if self._thread is not None:
            return self._thread.loop()
        return self._loop

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the home loop from whatever loop is running."""
        try:
            loop = self._home()
        except BaseException:
            coro.close()
            raise
        current = asyncio.get_running_loop()
        if loop is None:
            self._loop = loop = current
        if loop is current:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the home loop and wait for it, from a thread that is not the
        home loop's."""
        try:
            loop = self._home()
            if loop is None:
                raise StoreUsageError(
                    "This EventStoreSaver works on an EventStore it was given, whose event loop "
                    "it learns from its first async call; before that its sync methods cannot "
                    "reach the store. Give it a URL (it then runs its own loop) or call an "
                    "async method first."
                )
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                raise StoreUsageError(
                    "A sync EventStoreSaver method was called on the event loop its store runs "
                    "on, where it would wait for itself; use the async method (aget_tuple, "
                    "aput, ...) there."
                )
        except BaseException:
            coro.close()
            raise
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, loop)
        return future.result()

    def close(self) -> None:
        """Stop the own loop thread (the given store's loop is left alone)."""
        self._closed = True
        if self._thread is not None:
            self._thread.stop()
