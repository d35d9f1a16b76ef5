"""The event loops a LangGraph saver's store lives on, reachable from sync code in any thread and
from async code on any loop.

A store is bound to the loop it was opened on (its driver connections are), so a saver keeps
one ``Threads`` (its store, thread indexes and outbox) per loop it works on:

- opened from a URL (a file, PostgreSQL): its async methods run on the caller's loop, with a
  store opened there on first use (no thread hop: the usual ``async with`` / ``ainvoke``
  case); a call from another loop goes to that loop while it runs in another thread, and once
  it stopped the store is closed and opened anew on the caller's. Its sync methods run on a
  loop of the saver's own with a store of their own (``SharedLoop``), which the sync callers
  run themselves, one at a time: a call finding the loop idle runs its job in its own
  thread, with no hop to a loop thread and back; they work from any thread, the async
  loop's included (which hands its call to a short-lived thread);
- ``memory://`` (private to the saver: its data lives in one store) and an ``EventStore``
  handed in: one store for both, on the saver's loop thread for ``memory://``, on the given
  store's loop (known from the first async call) otherwise; async callers on another loop
  await it through ``asyncio.wrap_future``, sync callers block on it, and a sync call made on
  that loop itself (it would wait for itself forever) is refused.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import contextvars
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Generic, Protocol, TypeVar

from eventstore import EventStore, StoreClosedError, StoreUsageError, resolve_url
from eventstore._inline import INLINE

from .._handle import StoreHandle

__all__ = ["Home", "LoopThread", "Place", "SharedLoop"]

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


class _Job:
    """One coroutine a sync caller waits for on a ``SharedLoop``."""

    __slots__ = ("abandoned", "answered", "coro", "handed", "task", "wake")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro
        self.task: asyncio.Task[Any] | None = None
        # Set by the task's done callback (a task can be done with its callback still queued
        # in a loop that stopped, so ``task.done()`` does not say whether its caller was told).
        self.answered = False
        self.handed = False  # the loop was handed to its caller (under the SharedLoop's lock)
        self.abandoned = False  # its caller stopped waiting (interrupted)
        self.wake = threading.Lock()  # held until the job is done or its caller must drive
        self.wake.acquire()


class SharedLoop:
    """An event loop with no thread of its own, run by the sync callers waiting on it, one at a
    time (started on first use, closed by ``close``).

    A caller that finds nobody running the loop runs it itself until its own job is done (its
    coroutine then runs in its own thread: no hop to a loop thread and back); a caller that
    finds it run by another queues its job there and sleeps until the job is done, or until
    the runner, its own job done, hands the loop over to it. Every job in the loop has a caller
    waiting, so whenever there is work someone runs it; between calls the loop sleeps (its
    timers fire late: the next caller runs them). A caller whose thread already runs another
    event loop (a sync method called from async code) cannot run this one there: a short-lived
    thread runs it for them.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._running = False  # a caller runs the loop (or was handed it and is about to)
        self._waiting: collections.deque[_Job] = collections.deque()
        self._current: _Job | None = None  # the runner's own job (touched by the runner only)

    def is_loop(self, loop: asyncio.AbstractEventLoop | None) -> bool:
        """Whether ``loop`` is this shared loop."""
        return loop is not None and loop is self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and return its result (raise what it raised); raises
        StoreClosedError after ``close``."""
        if asyncio._get_running_loop() is not None:
            return _in_new_thread(self.run, coro)
        job = _Job(coro)
        with self._lock:
            if self._closed:
                coro.close()
                raise StoreClosedError()
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
            loop = self._loop
            runs = not self._running
            if runs:
                self._running = True
            else:
                self._waiting.append(job)
                loop.call_soon_threadsafe(self._start, job)
        if runs:
            self._start(job)
        else:
            try:
                job.wake.acquire()
            except BaseException:  # interrupted: whoever gets the loop must not be this caller
                with self._lock:
                    job.abandoned = True
                    handed = job.handed
                if handed:
                    self._hand_over()
                raise
            runs = not job.answered  # handed the loop: run it now
        if runs:
            self._run_until_done(job)
        assert job.task is not None
        return job.task.result()  # type: ignore[no-any-return]

    def _start(self, job: _Job) -> None:
        assert self._loop is not None
        # Its caller waits anyway: SQLite jobs may run on the loop's thread (see INLINE).
        context = contextvars.copy_context()
        context.run(INLINE.set, True)
        job.task = self._loop.create_task(job.coro, context=context)
        job.task.add_done_callback(lambda _: self._finished(job))

    def _finished(self, job: _Job) -> None:
        job.answered = True
        if job is self._current:
            assert self._loop is not None
            self._loop.stop()
        else:
            job.wake.release()

    def _run_until_done(self, job: _Job) -> None:
        loop = self._loop
        assert loop is not None
        self._current = job
        try:
            while not job.answered:
                loop.run_forever()
        finally:
            self._current = None
            self._hand_over()

    def _hand_over(self) -> None:
        """Pass the loop to a caller whose job is not done, or leave it idle (closing it
        after ``close``)."""
        with self._lock:
            while self._waiting:
                job = self._waiting.popleft()
                if not job.answered and not job.abandoned:
                    job.handed = True
                    job.wake.release()
                    return
            self._running = False
            if self._closed:
                self._close_loop()

    def close(self) -> None:
        """Refuse new jobs and close the loop once no caller runs it."""
        with self._lock:
            self._closed = True
            if not self._running:
                self._close_loop()

    def _close_loop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.close()


def _in_new_thread(fn: Callable[[Coroutine[Any, Any, T]], T], coro: Coroutine[Any, Any, T]) -> T:
    """``fn(coro)`` in a thread of its own (one with no event loop running), waited for."""
    outcome: list[Any] = []

    def main() -> None:
        try:
            outcome.append((True, fn(coro)))
        except BaseException as exc:
            outcome.append((False, exc))

    thread = threading.Thread(target=main, name="eventstore-langgraph-call", daemon=True)
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


class Home(Generic[P]):
    """Where a saver's store operations run (see the module): ``make(handle)`` builds what
    the saver keeps on one loop around the store ``handle`` gives there."""

    def __init__(self, url_or_store: str | os.PathLike[str] | EventStore, *,
                 make: Callable[[StoreHandle], P]) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._thread = LoopThread()
        self._shared_loop = SharedLoop()  # the sync calls' loop, for a store opened from a URL
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
        loop's: a saver opened from a URL on its ``SharedLoop`` (run by this thread when no
        other runs it), the others on the loop their store lives on."""
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
            elif self._shared is not None:
                loop, place = self._thread.loop(), self._shared
            else:
                loop, place = None, self._thread_place()
        running = asyncio._get_running_loop()
        if running is not None and (running is loop or self._shared_loop.is_loop(running)):
            raise StoreUsageError(
                "A sync EventStoreSaver method was called on the event loop its store runs "
                "on, where it would wait for itself; use the async method (aget_tuple, "
                "aput, ...) there."
            )
        if loop is None:
            return self._shared_loop.run(job(place))
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
                self._shared_loop.run(place.handle.close())
        if on_thread is not None and on_thread is self._shared:
            asyncio.run_coroutine_threadsafe(on_thread.close(), self._thread.loop()).result()
        elif on_thread is not None and self._given is None:
            self._shared_loop.run(on_thread.close())
        self._shared_loop.close()
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
        if on_thread is not None and on_thread is self._shared:
            await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(on_thread.close(), self._thread.loop()))
        elif on_thread is not None and self._given is None:
            await asyncio.to_thread(self._shared_loop.run, on_thread.close())
        self._shared_loop.close()
        await asyncio.to_thread(self._thread.stop)
