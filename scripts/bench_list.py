"""Benchmark listing 10,000 sessions with their state, through the store and through ADK.

    flock /tmp/bench.lock .venv/bin/python scripts/bench_list.py [--sessions N] [--rounds R]
        [--postgres URL | --no-postgres] [--no-sqlite] [--postgres-dbs EVS,ADK]

On SQLite (a file in a temporary directory) and PostgreSQL (a private database, dropped after),
``--sessions`` sessions of one app over 100 users are made through ADK's API
(``create_session`` then two ``append_event`` calls: a session key, a ``user:`` key and an
``app:`` key) twice: once on ADK's own ``DatabaseSessionService`` and once on ours
(``EventStoreSessionService``). Then, in ``--rounds`` alternating rounds, each timed once per
round:

- ``store``: ``EventStore.list_sessions_by_update`` of the whole app (every session's merged
  state at head), against the floor: a plain ``SELECT`` of the same session rows (id, app,
  user, created_at) on the same database with the driver alone;
- ``adk``: ``list_sessions`` of the whole app through ours, against ADK's
  ``DatabaseSessionService.list_sessions`` on the same sessions.

The first listing of ours (which folds the logs and saves the head states) is printed apart;
the rounds then measure the steady state. Prints median and spread (min to max) and the ratio of
medians.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from google.adk.events import Event as AdkEvent
from google.adk.events import EventActions as AdkActions
from google.adk.sessions import BaseSessionService, DatabaseSessionService

from eventstore import EventStore, open_store
from eventstore.integrations.adk import EventStoreSessionService

APP = "bench"
USERS = 100


async def _populate(service: BaseSessionService, sessions: int) -> None:
    for n in range(sessions):
        session = await service.create_session(app_name=APP, user_id=f"user-{n % USERS}",
                                               session_id=f"s{n:06d}", state={"topic": n})
        for step in range(2):
            await service.append_event(session, AdkEvent(
                invocation_id=f"inv-{n}", author="agent", actions=AdkActions(state_delta={
                    "turn": step, f"user:seen{step}": n, "app:last": n})))


async def _timed(fn: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


def _stats(name: str, times: list[float]) -> float:
    median = statistics.median(times)
    print(f"    {name:<44} median {median * 1000:8.1f} ms   spread "
          f"{min(times) * 1000:8.1f} to {max(times) * 1000:8.1f} ms")
    return median


async def _bench(label: str, store: EventStore, adk: BaseSessionService,
                 floor: Callable[[], Awaitable[Any]], sessions: int, rounds: int) -> None:
    ours = EventStoreSessionService(store)
    print(f"\n{label}: {sessions:,} sessions")
    first = await _timed(lambda: store.list_sessions_by_update(app_name=APP))
    print(f"    first listing (folds the logs, saves the head states): {first * 1000:.1f} ms")
    listed = await store.list_sessions_by_update(app_name=APP)
    assert len(listed) == sessions, len(listed)
    theirs = await adk.list_sessions(app_name=APP)
    mine = await ours.list_sessions(app_name=APP)
    assert {s.id: s.state for s in mine.sessions} == {s.id: s.state for s in theirs.sessions}
    times: dict[str, list[float]] = {k: [] for k in ("store", "floor", "ours", "adk")}
    for _ in range(rounds):
        times["floor"].append(await _timed(floor))
        times["store"].append(await _timed(lambda: store.list_sessions_by_update(app_name=APP)))
        times["adk"].append(await _timed(lambda: adk.list_sessions(app_name=APP)))
        times["ours"].append(await _timed(lambda: ours.list_sessions(app_name=APP)))
    store_m = _stats("EventStore.list_sessions_by_update", times["store"])
    floor_m = _stats("plain SELECT of the session rows", times["floor"])
    print(f"    -> {store_m / floor_m:.2f}x the floor")
    ours_m = _stats("ours: EventStoreSessionService.list_sessions", times["ours"])
    adk_m = _stats("ADK DatabaseSessionService.list_sessions", times["adk"])
    print(f"    -> {adk_m / ours_m:.1f}x faster than DatabaseSessionService")


async def _sqlite(tmp: Path, sessions: int, rounds: int) -> None:
    import sqlite3

    adk = DatabaseSessionService(f"sqlite+aiosqlite:///{tmp / 'adk.db'}")
    path = tmp / "evs.db"
    async with await open_store(path, auto_upgrade=True) as store:
        await _populate(adk, sessions)
        await _populate(EventStoreSessionService(store), sessions)

        def select() -> list[Any]:
            with sqlite3.connect(path) as conn:
                return conn.execute("SELECT session_id, app_name, user_id, created_at FROM "
                                    "evs_sessions WHERE app_name = ?", (APP,)).fetchall()

        async def floor() -> None:
            await asyncio.to_thread(select)

        await _bench("SQLite", store, adk, floor, sessions, rounds)


async def _postgres(url: str, sessions: int, rounds: int,
                    reuse: list[str] | None = None) -> None:
    import asyncpg

    dsn = url.replace("postgresql+asyncpg://", "postgresql://")
    admin = await asyncpg.connect(dsn.rsplit("/", 1)[0] + "/postgres")
    names = reuse or [f"evs_list_{uuid.uuid4().hex[:8]}", f"adk_list_{uuid.uuid4().hex[:8]}"]
    for name in [] if reuse else names:
        await admin.execute(f'CREATE DATABASE "{name}"')
    base = url.rsplit("/", 1)[0]
    try:
        adk = DatabaseSessionService(f"{base}/{names[1]}".replace(
            "postgresql://", "postgresql+asyncpg://"))
        async with await open_store(f"{base}/{names[0]}", auto_upgrade=True) as store:
            if not reuse:
                await _populate(adk, sessions)
                await _populate(EventStoreSessionService(store), sessions)
            conn = await asyncpg.connect(dsn.rsplit("/", 1)[0] + "/" + names[0])
            try:
                async def floor() -> None:
                    await conn.fetch("SELECT session_id, app_name, user_id, created_at FROM "
                                     "evs_sessions WHERE app_name = $1", APP)

                await _bench("PostgreSQL", store, adk, floor, sessions, rounds)
            finally:
                await conn.close()
        await adk.close() if hasattr(adk, "close") else None
    finally:
        for name in [] if reuse else names:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--postgres-dbs", metavar="EVS,ADK",
                        help="list two already populated databases (ours, ADK's; kept) "
                        "instead of making and populating new ones")
    args = parser.parse_args()
    if not args.no_sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            await _sqlite(Path(tmp), args.sessions, args.rounds)
    if not args.no_postgres:
        reuse = args.postgres_dbs.split(",") if args.postgres_dbs else None
        await _postgres(args.postgres, args.sessions, args.rounds, reuse)


if __name__ == "__main__":
    asyncio.run(main())
