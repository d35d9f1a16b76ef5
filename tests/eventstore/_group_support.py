"""Helpers of the SQLite group-commit tests: a store with or without group commit, a writer
held busy so that what is submitted meanwhile commits as one group, and task outcomes."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from eventstore import Event, EventStore
from eventstore.backends.sqlite.base import SQLiteBackend

__all__ = [
    "backend_of",
    "ev",
    "open_sqlite",
    "outcome",
    "outcomes_while_locked",
    "sessions",
    "submitted",
    "writer_held",
]


def ev(event_id: str, text: str = "x") -> Event:
    return Event(author="a", id=event_id, custom_metadata={"text": text})


async def open_sqlite(path: Path, *, group_commit: bool = True) -> EventStore:
    backend = await SQLiteBackend.open(
        f"sqlite+aiosqlite:///{path}", auto_upgrade=True, group_commit=group_commit
    )
    return EventStore(backend)


def backend_of(store: EventStore) -> SQLiteBackend:
    backend = store.backend
    assert isinstance(backend, SQLiteBackend)
    return backend


@contextlib.asynccontextmanager
async def writer_held(store: EventStore) -> AsyncIterator[None]:
    """Hold the writer thread busy, so that every write submitted meanwhile waits and the
    next group takes them all; release it on exit."""
    entered, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        entered.set()
        release.wait(30)

    backend = backend_of(store)
    driver, group = backend._writer, backend._group
    assert driver is not None
    # Held as a lone write would be: what arrives meanwhile queues for the next group. (The
    # writer may still be finishing the previous group's bookkeeping: wait until it is idle.)
    claimed = False
    for _ in range(1000):
        if group is None or (claimed := group.claim_alone()):
            break
        await asyncio.sleep(0.001)
    assert claimed or group is None
    held = asyncio.ensure_future(driver.run(hold))
    await asyncio.to_thread(entered.wait, 30)
    try:
        yield
    finally:
        release.set()
        await held
        if claimed:
            assert group is not None
            group.release_alone()


async def submitted(*calls: Callable[[], Awaitable[Any]]) -> list[asyncio.Task[Any]]:
    """Start the calls as tasks in order and let each reach the writer's queue."""
    tasks = []
    for call in calls:
        tasks.append(asyncio.ensure_future(call()))
        await asyncio.sleep(0)
    await asyncio.sleep(0.01)
    return tasks


async def outcome(task: asyncio.Task[Any]) -> Any:
    try:
        return await task
    except Exception as exc:
        return exc


async def sessions(store: EventStore, *ids: str) -> None:
    """Create sessions ``ids`` of app ``app``, user ``u``."""
    for sid in ids:
        await store.create_session(app_name="app", user_id="u", session_id=sid)


async def outcomes_while_locked(
    store: EventStore, path: Path, *calls: Callable[[], Awaitable[Any]]
) -> list[Any]:
    """Submit ``calls`` while another connection holds the file's write lock (the writer
    waits 50 ms for it, then gives up) and return each one's result or error."""
    driver = backend_of(store)._writer
    assert driver is not None
    await driver.run(lambda conn: conn.execute("PRAGMA busy_timeout = 50"))
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("PRAGMA busy_timeout = 0")
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the file's write lock
    try:
        tasks = await submitted(*calls)
        return [await outcome(t) for t in tasks]
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
