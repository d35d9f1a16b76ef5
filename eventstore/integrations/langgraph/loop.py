"""The event loops a LangGraph saver's store lives on, reachable from sync code in any thread and
from async code on any loop.

A store is bound to the loop it was opened on (its driver connections are), so a saver keeps
one ``Threads`` (its store, thread indexes and outbox) per loop it works on:

- opened from a URL (a file, PostgreSQL): its async methods run on the caller's loop, with a
  store opened there on first use (no thread hop: the usual ``async with`` / ``ainvoke``
  case); a call from another loop goes to that loop while it runs in another thread, and once
  it stopped the store is closed and opened anew on the caller's. Its sync methods run on a
  loop thread of the saver's own (``LoopThread``) with a store of their own, so they work
  from any thread, the async loop's included;
- ``memory://`` (private to the saver: its data lives in one store) and an ``EventStore``
  handed in: one store for both, on the saver's loop thread for ``memory://``, on the given
  store's loop (known from the first async call) otherwise; async callers on another loop
  await it through ``asyncio.wrap_future``, sync callers block on it, and a sync call made on
  that loop itself (it would wait for itself forever) is refused.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Generic, Protocol, TypeVar

from eventstore import EventStore, StoreClosedError, StoreUsageError, resolve_url

from .._handle import StoreHandle

__all__ = ["Home", "LoopThread", "Place"]

T = TypeVar("T")


class Place(Protocol):
    """What a saver keeps on one loop, as ``Home`` needs it."""

    handle: StoreHandle

    async def close(self) -> None:
        """Finish the queued work and close the store if it was opened from a URL."""


P = TypeVar("P", bound=Place)


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


class Home(Generic[P]):
    """Where a saver's store operations run (see the module): ``make(handle)`` builds what
    the saver keeps on one loop around the store ``handle`` gives there."""

    def __init__(self, url_or_store: str | os.PathLike[str] | EventStore, *,
                 make: Callable[[StoreHandle], P]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._thread = LoopThread()
        self._closed = False
        self._url: str | os.PathLike[str] | None = None
        self._given: P | None = None
        self._given_loop: asyncio.AbstractEventLoop | None = None
        self._shared: P | None = None  # memory://: one store, on the loop thread
        self._on_thread: P | None = None
        self._on_caller: tuple[asyncio.AbstractEventLoop, P] | None = None
        self._closing: set[asyncio.Task[None]] = set()
        if isinstance(url_or_store, EventStore):
            self._given = make(StoreHandle(url_or_store))
        elif resolve_url(url_or_store) == "memory://":
            self._shared = make(StoreHandle(url_or_store))
        else:
            self._url = url_or_store

    @property
    def closed(self) -> bool:
        """Whether ``close``/``aclose`` ran (every later call raises StoreClosedError)."""
        return self._closed

    def _thread_place(self) -> P:
        if self._shared is not None:
            return self._shared
        if self._on_thread is None:
            assert self._url is not None
            self._on_thread = self._make(StoreHandle(self._url))
        return self._on_thread

    def _async_place(self, current: asyncio.AbstractEventLoop
                     ) -> tuple[asyncio.AbstractEventLoop, P, P | None]:
        """The loop to run on and what the saver keeps there, and a place to close (its
        loop stopped), under the lock."""
        if self._closed:
            raise StoreClosedError()
        if self._given is not None:
            if self._given_loop is None:
                self._given_loop = current
            return self._given_loop, self._given, None
        if self._shared is not None:
            return self._thread.loop(), self._shared, None
        held, stale = self._on_caller, None
        if held is not None:
            loop, place = held
            if loop is current or (loop.is_running() and not loop.is_closed()):
                return loop, place, None
            stale = place  # its loop stopped: nothing can await its store there any more
        assert self._url is not None
        place = self._make(StoreHandle(self._url))
        self._on_caller = (current, place)
        return current, place, stale

    async def run(self, job: Callable[[P], Coroutine[Any, Any, T]]) -> T:
        """Await ``job(place)`` on its loop from whatever loop is running."""
        current = asyncio.get_running_loop()
        with self._lock:
            loop, place, stale = self._async_place(current)
        if stale is not None:
            # Closed off its loop: the drivers drop what they cannot close politely.
            with contextlib.suppress(Exception):
                await stale.handle.close()
        if loop is current:
            return await job(place)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(job(place), loop))

    def run_sync(self, job: Callable[[P], Coroutine[Any, Any, T]]) -> T:
        """Run ``job(place)`` on its loop and wait for it, from a thread that is not that
        loop's."""
        with self._lock:
            if self._closed:
                raise StoreClosedError()
            if self._given is not None:
                loop, place = self._given_loop, self._given
                if loop is None:
                    raise StoreUsageError(
                        "This EventStoreSaver works on an EventStore it was given, whose event "
                        "loop it learns from its first async call; before that its sync "
                        "methods cannot reach the store. Give it a URL (it then runs its own "
                        "loop) or call an async method first."
                    )
            else:
                loop, place = self._thread.loop(), self._thread_place()
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
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(job(place),
                                                                                loop)
        return future.result()

    def _take(self) -> tuple[P | None, tuple[asyncio.AbstractEventLoop, P] | None]:
        with self._lock:
            if self._closed:
                return None, None
            self._closed = True
            on_thread = self._shared if self._shared is not None else self._on_thread
            on_caller, self._on_caller = self._on_caller, None
            self._on_thread = None
            return on_thread, on_caller

    def close(self) -> None:
        """Close the stores opened from a URL (a given store is left open) and stop the loop
        thread. Idempotent."""
        on_thread, on_caller = self._take()
        if on_caller is not None:
            loop, place = on_caller
            try:
                running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if loop is running:  # called on that loop: it cannot wait there, so it does not
                task = loop.create_task(place.close())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
            elif loop.is_running() and not loop.is_closed():
                asyncio.run_coroutine_threadsafe(place.close(), loop).result()
            else:  # its loop stopped: nothing queued there can run; its drivers are dropped
                asyncio.run_coroutine_threadsafe(place.handle.close(),
                                                 self._thread.loop()).result()
        if on_thread is not None and self._given is None:
            asyncio.run_coroutine_threadsafe(on_thread.close(), self._thread.loop()).result()
        self._thread.stop()

    async def aclose(self) -> None:
        """``close`` from async code."""
        on_thread, on_caller = self._take()
        if on_caller is not None:
            loop, place = on_caller
            if loop is asyncio.get_running_loop():
                await place.close()
            elif loop.is_running() and not loop.is_closed():
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(place.close(), loop))
            else:  # its loop stopped: nothing queued there can run; its drivers are dropped
                await place.handle.close()
        if on_thread is not None and self._given is None:
            await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(on_thread.close(), self._thread.loop()))
        await asyncio.to_thread(self._thread.stop)
