"""Benchmark retention: pruning N sessions with archives, and listing them with their state.

    flock /tmp/bench.lock .venv/bin/python scripts/bench_prune.py [--sessions N]
        [--events N] [--users N] [--postgres URL | --no-postgres]

On SQLite (a file in a temporary directory) and on PostgreSQL (a private database created and
dropped by the script), with ``--sessions`` sessions (10,000 by default) of ``--events``
realistic agent events each (``_bench_events``: calls, responses with state deltas, text turns),
spread over ``--users`` users of one app:

- ``list``: ``EventStore.list_sessions_by_update`` of the whole app and of one user, and the ADK
  adapter's ``list_sessions`` (``EventStoreSessionService``) of one user when google-adk is
  installed — each folds every session's state at head; the backend calls each makes are
  counted, so an N+1 shows as a count that grows with N;
- ``prune``: ``EventStore.prune`` of every session into an archive directory (each archive
  written, fsynced, read back and compared with the log before the session is deleted):
  sessions/s, events/s, archive bytes written;
- SQLite file size before the prune, after it (the WAL checkpointed: freed pages stay in the
  file, which does not shrink) and after ``VACUUM`` (see docs/operations.md, Retention).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_events import realistic_event

from eventstore import EventStore, open_store

APP = "bench"
DAY = 86_400.0
T = TypeVar("T")

_BACKEND_CALLS = ("get_session", "list_sessions_by_update", "load_snapshots", "read_many",
                  "read", "read_rows", "read_shared", "load_shared_snapshot",
                  "save_shared_snapshot", "load_snapshot", "save_snapshot", "list_sessions")


def _count_calls(store: EventStore) -> Counter[str]:
    """Count the store's backend calls by name from now on (wraps the instance's methods)."""
    counts: Counter[str] = Counter()
    backend = store.backend
    for name in _BACKEND_CALLS:
        method = getattr(backend, name)

        def counted(*args: Any, _name: str = name, _method: Any = method, **kw: Any) -> Any:
            counts[_name] += 1
            return _method(*args, **kw)

        setattr(backend, name, counted)
    return counts


async def _populate(store: EventStore, sessions: int, events: int, users: int) -> None:
    old = time.time() - 60 * DAY
    for n in range(sessions):
        batch = [realistic_event(n * events + i) for i in range(events)]
        await store.create_session(app_name=APP, user_id=f"user-{n % users}",
                                   session_id=f"s{n:06d}", created_at=old,
                                   events=[_aged(e, old + i) for i, e in enumerate(batch)])


def _aged(event: Any, when: float) -> Any:
    import dataclasses

    return dataclasses.replace(event, timestamp=when)


async def _timed(fn: Callable[[], Awaitable[T]]) -> tuple[float, T]:
    start = time.perf_counter()
    result = await fn()
    return time.perf_counter() - start, result


async def _lists(store: EventStore) -> None:
    counts = _count_calls(store)
    scopes: tuple[tuple[str, str | None], ...] = (("whole app", None), ("one user", "user-0"))
    for label, user in scopes:
        await store.list_sessions_by_update(app_name=APP, user_id=user)  # warm
        counts.clear()
        start = time.perf_counter()
        found = await store.list_sessions_by_update(app_name=APP, user_id=user)
        seconds = time.perf_counter() - start
        calls = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        print(f"  list_sessions_by_update ({label}, {len(found)} sessions): "
              f"{seconds * 1000:8.1f} ms   backend calls: {calls}")
    try:
        from eventstore.integrations.adk import EventStoreSessionService
    except ImportError:
        print("  ADK list_sessions: google-adk not installed, skipped")
        return
    service = EventStoreSessionService(store)
    for label, user in scopes:
        await service.list_sessions(app_name=APP, user_id=user)
        counts.clear()
        start = time.perf_counter()
        listed = await service.list_sessions(app_name=APP, user_id=user)
        seconds = time.perf_counter() - start
        calls = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        print(f"  ADK list_sessions ({label}, {len(listed.sessions)} sessions): "
              f"{seconds * 1000:8.1f} ms   backend calls: {calls}")


async def _prune(store: EventStore, archive: Path, sessions: int, events: int) -> None:
    seconds, report = await _timed(lambda: store.prune(older_than=30 * DAY, archive=archive))
    assert len(report.deleted) == sessions, (len(report.deleted), sessions)
    total = sessions * events
    files = len({s.archive for s in report.deleted})
    print(f"  prune {sessions} sessions ({total} events) with archives: {seconds:7.2f} s  "
          f"{sessions / seconds:8.0f} sessions/s  {total / seconds:9.0f} events/s  "
          f"{report.archive_bytes / 1e6:8.1f} MB of archives ({files} files, "
          f"{report.archive_bytes / total:.0f} B/event)")


def _sqlite_size(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _checkpoint_and_size(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return _sqlite_size(path)


async def _sqlite(args: argparse.Namespace, work: Path) -> None:
    path = work / "evs.db"
    print(f"SQLite ({path}):")
    store = await open_store(f"sqlite+aiosqlite:///{path}", auto_upgrade=True)
    try:
        seconds, _ = await _timed(lambda: _populate(store, args.sessions, args.events,
                                                    args.users))
        print(f"  built {args.sessions} sessions x {args.events} events in {seconds:.1f} s")
        await _lists(store)
        await store.aclose()
        before = _checkpoint_and_size(path)
        store = await open_store(f"sqlite+aiosqlite:///{path}")
        await _prune(store, work / "archive-sqlite", args.sessions, args.events)
    finally:
        await store.aclose()
    after = _checkpoint_and_size(path)
    start = time.perf_counter()
    with sqlite3.connect(path) as conn:
        conn.execute("VACUUM")
    vacuum = time.perf_counter() - start
    print(f"  file size: {before / 1e6:.1f} MB before the prune, {after / 1e6:.1f} MB after "
          f"(freed pages stay in the file), {_checkpoint_and_size(path) / 1e6:.2f} MB after VACUUM "
          f"({vacuum:.2f} s)")


async def _postgres(args: argparse.Namespace, work: Path) -> None:
    import asyncpg

    base = args.postgres.replace("postgresql+asyncpg://", "postgresql://", 1)
    admin = base.rsplit("/", 1)[0] + "/postgres"
    name = f"evs_bench_prune_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    conn = await asyncpg.connect(admin)
    await conn.execute(f'CREATE DATABASE "{name}"')
    await conn.close()
    url = args.postgres.rsplit("/", 1)[0] + "/" + name
    print(f"PostgreSQL (database {name}):")
    try:
        store = await open_store(url, auto_upgrade=True)
        try:
            seconds, _ = await _timed(lambda: _populate(store, args.sessions, args.events,
                                                        args.users))
            print(f"  built {args.sessions} sessions x {args.events} events in {seconds:.1f} s")
            await _lists(store)
            await _prune(store, work / "archive-postgres", args.sessions, args.events)
        finally:
            await store.aclose()
    finally:
        conn = await asyncpg.connect(admin)
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=10, help="events per session")
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--postgres", default="postgresql+asyncpg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-prune-"))
    try:
        await _sqlite(args, work)
        if not args.no_postgres:
            await _postgres(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
