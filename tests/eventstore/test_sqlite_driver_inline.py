"""The SQLite driver's inline jobs: a task with ``INLINE`` set runs its job on its own thread
when nothing is queued ahead of it, and behind the queue (on the driver's thread, in order)
when something is; without ``INLINE`` every job runs on the driver's thread."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from eventstore._inline import INLINE
from eventstore.backends.sqlite.driver import Driver, connect_writer

T = TypeVar("T")


def _where(conn: sqlite3.Connection) -> int:
    conn.execute("SELECT 1").fetchone()
    return threading.get_ident()


async def _inline(start: Callable[[], Awaitable[T]]) -> T:
    """Await ``start()`` in a task with ``INLINE`` set."""
    async def run() -> T:
        INLINE.set(True)
        return await start()
    return await asyncio.create_task(run())


async def test_an_inline_job_with_nothing_queued_runs_on_the_callers_thread(tmp_path: Path
                                                                            ) -> None:
    finished: list[int] = []
    driver = Driver("t", lambda: connect_writer(str(tmp_path / "d.db"), synchronous="NORMAL"),
                    after_job=lambda: finished.append(1))
    await driver.start()
    try:
        assert await driver.run(_where) != threading.get_ident()
        assert await _inline(lambda: driver.run(_where)) == threading.get_ident()
        assert len(finished) == 2  # after_job ran after both
    finally:
        await driver.stop()


async def test_an_inline_job_does_not_overtake_queued_jobs(tmp_path: Path) -> None:
    driver = Driver("t", lambda: connect_writer(str(tmp_path / "d.db"), synchronous="NORMAL"))
    await driver.start()
    order: list[str] = []
    release = threading.Event()

    def slow(conn: sqlite3.Connection) -> None:
        release.wait(10)
        order.append("queued")

    def quick(conn: sqlite3.Connection) -> int:
        order.append("inline")
        return threading.get_ident()

    try:
        first = asyncio.ensure_future(driver.run(slow))
        await asyncio.sleep(0)  # queued, and held on the driver's thread
        second = asyncio.ensure_future(_inline(lambda: driver.run(quick)))
        await asyncio.sleep(0.01)
        release.set()
        await first
        assert await second != threading.get_ident()  # it went behind the queue
        assert order == ["queued", "inline"]
    finally:
        await driver.stop()
