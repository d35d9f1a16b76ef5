"""The SQLite driver thread: one thread owning one sqlite3 connection, one hop per job.

aiosqlite hops to its thread once per statement and has no public way to run a whole function
there; an append done that way costs several hops (~100 µs each). A ``Driver`` runs a whole job —
a plain function of the connection, e.g. a complete transaction — in one hop.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Driver"]

T = TypeVar("T")


class Driver:
    """One thread owning one sqlite3 connection; jobs run in submission order, one hop each.

    A job is a plain function of the connection. If the awaiting task is cancelled the job still
    runs to completion (a transaction is never abandoned half way); its result is dropped.
    """

    def __init__(self, name: str, connect: Callable[[], sqlite3.Connection]) -> None:
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any]] | None
        ] = queue.SimpleQueue()
        self._connect = connect
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._ready: asyncio.Future[None] | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._thread.start()
        await self._ready

    def _main(self) -> None:
        assert self._ready is not None
        ready = self._ready
        try:
            conn = self._connect()
        except BaseException as exc:
            _resolve(ready, exc, error=True)
            return
        _resolve(ready, None, error=False)
        try:
            while (job := self._jobs.get()) is not None:
                fn, future = job
                try:
                    result = fn(conn)
                except BaseException as exc:
                    _resolve(future, exc, error=True)
                else:
                    _resolve(future, result, error=False)
        finally:
            conn.close()

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._jobs.put((fn, future))
        return await future

    async def stop(self) -> None:
        self._jobs.put(None)
        if self._thread.is_alive():
            await asyncio.to_thread(self._thread.join)


def _resolve(future: asyncio.Future[Any], value: Any, *, error: bool) -> None:
    def settle() -> None:
        if future.done():
            return
        if error:
            future.set_exception(value)
        else:
            future.set_result(value)

    with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
        future.get_loop().call_soon_threadsafe(settle)
