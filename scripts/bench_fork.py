"""Benchmark forking a 10,000-event session (``EventStore.fork``) on SQLite and PostgreSQL.

    flock /tmp/bench.lock .venv/bin/python scripts/bench_fork.py [--events N] [--runs N]
        [--postgres URL | --no-postgres]

Every figure is printed next to baselines measured in the same run, on the same session:

- ``load``: ``get_session`` of the origin (read and decode every event, state at head);
- ``raw copy``: the raw driver copying the same rows with one ``INSERT … SELECT`` into a
  temporary table of the same columns (sqlite3 on SQLite, asyncpg on PostgreSQL): the floor of
  the copy a fork does.

A fork reads and decodes the origin's events up to the seq (to check the step boundary and
find the artifact versions), copies the rows in one transaction and folds the fork's state;
so ``fork ≈ load + raw copy`` is what to expect. Median and spread of ``--runs`` runs (5 by
default). The realistic agent events of ``_bench_events`` (calls, responses with state deltas,
text turns). PostgreSQL runs in a private database created and dropped by the script.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_events import realistic_event

from eventstore import EventStore, open_store

ORIGIN = "origin"


async def _populate(store: EventStore, count: int) -> None:
    await store.create_session(app_name="bench", user_id="u", session_id=ORIGIN)
    for lo in range(0, count, 500):
        batch = [realistic_event(i) for i in range(lo, min(lo + 500, count))]
        await store.append(ORIGIN, batch, expected_version=lo)


async def _timed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return (time.perf_counter() - start) * 1000


def _summary(name: str, values: list[float], base: list[float] | None = None) -> str:
    med = statistics.median(values)
    line = f"  {name:<22} median {med:8.1f} ms  (min {min(values):.1f}, max {max(values):.1f})"
    if base is not None:
        ratios = [v / b for v, b in zip(values, base, strict=True)]
        line += (f"  = {statistics.median(ratios):.2f}x  (spread {min(ratios):.2f}-"
                 f"{max(ratios):.2f}x)")
    return line


async def _measure(store: EventStore, count: int, runs: int,
                   raw_copy: Callable[[], Awaitable[object]]) -> None:
    load, copy, fork = [], [], []
    for run in range(runs):
        load.append(await _timed(lambda: store.get_session(ORIGIN)))
        copy.append(await _timed(raw_copy))
        fork_id = f"fork-{run}"

        async def make(fork_id: str = fork_id) -> object:
            return await store.fork(ORIGIN, at=count, new_session_id=fork_id)

        fork.append(await _timed(make))
        made = await store.session_info(f"fork-{run}")
        assert made.version == count
    print(_summary("load (get_session)", load))
    print(_summary("raw INSERT…SELECT", copy))
    print(_summary("fork vs load", fork, load))
    print(_summary("fork vs raw copy", fork, copy))
    both = [a + b for a, b in zip(load, copy, strict=True)]
    print(_summary("fork vs load+raw copy", fork, both))


async def sqlite_section(count: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fork.db"
        store = await open_store(f"sqlite+aiosqlite:///{path}", auto_upgrade=True)
        try:
            await _populate(store, count)
            conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            conn.execute("CREATE TEMP TABLE copy AS SELECT * FROM evs_events WHERE 0")

            def copy_rows() -> None:
                conn.execute("BEGIN")
                conn.execute("DELETE FROM copy")
                conn.execute("INSERT INTO copy SELECT * FROM evs_events WHERE session_id = ?",
                             (ORIGIN,))
                conn.execute("COMMIT")

            print(f"SQLite ({count} events, file {path.name}):")
            await _measure(store, count, runs, lambda: asyncio.to_thread(copy_rows))
            conn.close()
        finally:
            await store.aclose()


async def postgres_section(url: str, count: int, runs: int) -> None:
    import asyncpg

    name = f"evs_bench_fork_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin_dsn = url.replace("postgresql+asyncpg://", "postgresql://", 1).rsplit("/", 1)[0]
    admin = await asyncpg.connect(admin_dsn + "/postgres")
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        store = await open_store(url.rsplit("/", 1)[0] + "/" + name, auto_upgrade=True)
        raw = await asyncpg.connect(admin_dsn + "/" + name)
        try:
            await _populate(store, count)
            await raw.execute("CREATE TEMP TABLE copy AS SELECT * FROM evs_events WITH NO DATA")

            async def copy_rows() -> None:
                async with raw.transaction():
                    await raw.execute("TRUNCATE copy")
                    await raw.execute(
                        "INSERT INTO copy SELECT * FROM evs_events WHERE session_id = $1", ORIGIN)

            print(f"PostgreSQL ({count} events, private database):")
            await _measure(store, count, runs, copy_rows)
        finally:
            await raw.close()
            await store.aclose()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def main(args: argparse.Namespace) -> None:
    print(f"Forking a {args.events}-event session at its head, {args.runs} runs each.")
    await sqlite_section(args.events, args.runs)
    if not args.no_postgres:
        await postgres_section(args.postgres, args.events, args.runs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--postgres", default=os.environ.get(
        "EVS_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    asyncio.run(main(parser.parse_args()))
