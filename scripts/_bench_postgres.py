"""The benchmark's PostgreSQL section: the store against raw asyncpg on the same server.

Floors (a plain table ``(session_id, seq, payload)``, primary key ``(session_id, seq)``, the
same payload bytes): one connection doing autocommit INSERTs; one connection doing a
transaction of a head ``SELECT max(seq)`` and an INSERT per event (what an append must at
least do); ten connections doing autocommit INSERTs at once. The store: one session appending
one event at a time; 64 sessions at once, all of one app and each of its own app. The floors
and the store's figures are measured in turns, three rounds (one with ``--quick``), and each
ratio is judged on its median over the rounds, each round's figure against the same round's
baseline: a single measurement of 64 sessions lasts a fraction of a second, and on a shared
machine one such figure swung the ratios by ±15%. A private database is created for the run
and dropped afterwards.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from typing import Any

from _bench_concurrency import concurrent_appends
from _bench_events import realistic_event

from eventstore import open_store
from eventstore._stored import encode_compact

__all__ = ["postgres_section"]

Results = list[tuple[str, str, str, str, bool | None]]


def _dsn(url: str, database: str) -> str:
    base = url.replace("postgresql+asyncpg://", "postgresql://", 1)
    return base.rsplit("/", 1)[0] + "/" + database


async def _floors(dsn: str, count: int) -> tuple[float, float, float]:
    import asyncpg

    payloads = [encode_compact(realistic_event(i)) for i in range(count)]
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE TABLE IF NOT EXISTS bench_events (session_id text, seq int, "
                           "payload bytea, PRIMARY KEY (session_id, seq))")
        insert = "INSERT INTO bench_events VALUES ($1, $2, $3)"
        sid = uuid.uuid4().hex
        start = time.perf_counter()
        for seq, payload in enumerate(payloads, 1):
            await conn.execute(insert, sid, seq, payload)
        autocommit = count / (time.perf_counter() - start)
        sid = uuid.uuid4().hex
        start = time.perf_counter()
        for payload in payloads:
            async with conn.transaction():
                head = await conn.fetchval(
                    "SELECT coalesce(max(seq), 0) FROM bench_events WHERE session_id = $1", sid)
                await conn.execute(insert, sid, head + 1, payload)
        transaction = count / (time.perf_counter() - start)
    finally:
        await conn.close()
    conns = [await asyncpg.connect(dsn) for _ in range(10)]
    try:
        async def one(c: Any) -> None:
            sid = uuid.uuid4().hex
            for seq, payload in enumerate(payloads, 1):
                await c.execute(insert, sid, seq, payload)

        start = time.perf_counter()
        await asyncio.gather(*(one(c) for c in conns))
        ten = 10 * count / (time.perf_counter() - start)
    finally:
        for c in conns:
            await c.close()
    return autocommit, transaction, ten


async def postgres_section(url: str, quick: bool, results: Results) -> None:
    """Measure and append the PostgreSQL rows to ``results`` (skipped when unreachable)."""
    try:
        import asyncpg

        admin = await asyncpg.connect(_dsn(url, "postgres"), timeout=5)
    except Exception as exc:
        print(f"\nPostgreSQL section skipped: {url} is unreachable ({exc}).")
        return
    name = f"evs_bench_{uuid.uuid4().hex[:10]}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    count = 300 if quick else 1_000
    rounds: list[tuple[float, float, float, float, float, float]] = []
    try:
        store_url = url.rsplit("/", 1)[0] + "/" + name
        async with await open_store(store_url, auto_upgrade=True) as store:
            # Warm the pool up: open all its connections and prepare their statements, as the
            # floor connects its ten connections before timing.
            await concurrent_appends(store, 64, 2)
            await concurrent_appends(store, 1, 50)
            per = max(10, count // 16)
            for _ in range(1 if quick else 3):
                autocommit, transaction, ten = await _floors(_dsn(url, name), count)
                one = (await concurrent_appends(store, 1, count)).rate
                same_app = (await concurrent_appends(store, 64, per, app="one-app")).rate
                apps = (await _many_apps(store, 64, per)).rate
                rounds.append((autocommit, transaction, ten, one, same_app, apps))
        async with await open_store(store_url, signing_key=b"bench-key") as keyed_store:
            await concurrent_appends(keyed_store, 1, 50)
            keyed = (await concurrent_appends(keyed_store, 1, count)).rate
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()

    def median(values: list[float]) -> float:
        return statistics.median(values)

    def spread(values: list[float]) -> str:
        return " / ".join(f"{v:.2f}" for v in values)

    autocommit, transaction, ten, one, same_app, apps = (
        median([r[i] for r in rounds]) for i in range(6))
    cost = [r[1] / r[3] for r in rounds]
    share = [r[5] / r[2] for r in rounds]
    one_app = [r[4] / r[5] for r in rounds]
    print(f"\nPostgreSQL floors (events/s, medians of {len(rounds)} rounds): autocommit INSERT "
          f"{autocommit:,.0f}, head SELECT + INSERT transaction {transaction:,.0f}, "
          f"10 connections {ten:,.0f}")
    results.append(("PostgreSQL 1 session (events/s)", f"{one:,.0f}",
                    f"SELECT+INSERT tx {transaction:,.0f}",
                    f"cost {median(cost):.2f}x ({spread(cost)}) <= 1.2x",
                    median(cost) <= 1.2))
    results.append(("  same, keyed (signed; head read + write)", f"{keyed:,.0f}",
                    f"unkeyed {one:,.0f}", f"cost {transaction / keyed:.2f}x", None))
    results.append(("PostgreSQL 64 sessions, different apps", f"{apps:,.0f}",
                    f"10 raw connections {ten:,.0f}",
                    f"{median(share):.2f}x ({spread(share)}) >= 0.6x", median(share) >= 0.6))
    results.append(("PostgreSQL 64 sessions, one app", f"{same_app:,.0f}",
                    f"different apps {apps:,.0f}",
                    f"{median(one_app):.2f}x ({spread(one_app)}) >= 0.9x",
                    median(one_app) >= 0.9))


async def _many_apps(store: Any, sessions: int, per: int) -> Any:
    from _bench_concurrency import Run, _session_writer

    ids = [(await store.create_session(app_name=f"app-{i}", user_id="u")).id
           for i in range(sessions)]
    batches = [[realistic_event(i) for i in range(per)] for _ in ids]
    latencies: list[float] = []
    start = time.perf_counter()
    await asyncio.gather(*(_session_writer(store, sid, batch, latencies)
                           for sid, batch in zip(ids, batches, strict=True)))
    return Run(sessions, sessions * per, time.perf_counter() - start, latencies)
