"""Benchmark the SQLite store (and PostgreSQL, when reachable) against raw-driver floors.

    .venv/bin/python scripts/bench_store.py [--quick] [--postgres URL | --no-postgres]
        [--only postgres]

Every figure is printed next to a baseline measured in the same run. Events are a realistic
agent mix by default (model turns calling tools, tool responses with nested results and state
deltas, text turns; ``_bench_events``), their sizes printed first.

(a) single session: append events one at a time, each awaited, with ``expected_version``,
    against raw aiosqlite inserting the same bytes into a minimal table, one transaction per
    insert; at least 5 alternating runs, median and spread of the ratio; the store without
    group commit (every write its own transaction, as before it) and a keyed store (every
    event signed) alongside;
(b) load a 10,000-event session with ``read`` against a plain SELECT of the same rows'
    payloads with ``orjson.loads`` of each; the newest 20 events;
(c) bytes on disk per event of that session against the events' compact JSON;
(d) concurrency: 1, 8 and 64 sessions appending at once on one file, synchronous NORMAL and
    FULL, with and without group commit: aggregate events/s, p50/p99 append latency (one pass,
    printed); the judged ratios (64 sessions against one, FULL against NORMAL) from three
    rounds of those three figures measured in turns, their medians; two OS processes of 32
    sessions each on one file;
(e) PostgreSQL (``_bench_postgres``): 1 session and 64 sessions (one app / different apps)
    against raw asyncpg floors.

Exit status 1 when a target is missed (full runs only; ``--quick`` is a smoke run).
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
from pathlib import Path

import aiosqlite
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench_concurrency import (
    concurrent_appends,
    open_sqlite,
    two_processes,
    writer_process,
)
from _bench_events import compact_json, realistic_event

from eventstore import EventStore
from eventstore._codec import encode_event
from eventstore._stored import encode_compact

PRAGMAS = (
    "PRAGMA busy_timeout = 30000",
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA foreign_keys = ON",
)

Results = list[tuple[str, str, str, str, bool | None]]
"""Rows of (figure, value, baseline, target, met) — met None: information only."""


async def store_append(store: EventStore, count: int) -> float:
    session = await store.create_session(app_name="bench", user_id="u")
    events = [realistic_event(i) for i in range(count)]
    version = session.version
    start = time.perf_counter()
    for event in events:
        await store.append(session.id, event, expected_version=version)
        version += 1
    return time.perf_counter() - start


async def floor_connection(path: str) -> aiosqlite.Connection:
    db = await aiosqlite.connect(path, isolation_level=None)
    for pragma in PRAGMAS:
        await db.execute(pragma)
    await db.execute(
        "CREATE TABLE IF NOT EXISTS events (position INTEGER PRIMARY KEY, session_id TEXT, "
        "seq INTEGER, payload BLOB, UNIQUE (session_id, seq))"
    )
    return db


async def floor_append(db: aiosqlite.Connection, count: int) -> float:
    sid = uuid.uuid4().hex
    payloads = [encode_compact(realistic_event(i)) for i in range(count)]
    start = time.perf_counter()
    for seq, payload in enumerate(payloads, 1):
        await db.execute(
            "INSERT INTO events (session_id, seq, payload) VALUES (?, ?, ?)", (sid, seq, payload)
        )
    return time.perf_counter() - start


def _checkpoint(path: str) -> int:
    """Copy the whole WAL into the file and return the file's size. Retried while busy: the
    store's own checkpointer thread may be running a checkpoint at that moment, and a
    checkpoint that did not finish would leave pages out of the size."""
    conn = sqlite3.connect(path)
    try:
        for _ in range(500):
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if not busy:
                break
            time.sleep(0.01)
        else:
            raise SystemExit(f"could not checkpoint {path}: busy for 5 s")
    finally:
        conn.close()
    return os.path.getsize(path)


async def single_session(tmp: str, appends: int, runs: int, results: Results) -> None:
    store = await open_sqlite(os.path.join(tmp, "single.db"), synchronous="NORMAL",
                              group_commit=True)
    alone = await open_sqlite(os.path.join(tmp, "alone.db"), synchronous="NORMAL",
                              group_commit=False)
    keyed = await open_sqlite(os.path.join(tmp, "keyed.db"), synchronous="NORMAL",
                              group_commit=True, signing_key=b"bench-key")
    floor = await floor_connection(os.path.join(tmp, "floor.db"))
    try:
        await store_append(store, 100)  # warm both paths up
        await store_append(alone, 100)
        await store_append(keyed, 100)
        await floor_append(floor, 100)
        ratios, alone_ratios, keyed_ratios, rates, floor_rates = [], [], [], [], []
        for _ in range(runs):
            t_store = await store_append(store, appends)
            t_floor = await floor_append(floor, appends)
            t_alone = await store_append(alone, appends)
            t_keyed = await store_append(keyed, appends)
            ratios.append(t_store / t_floor)
            alone_ratios.append(t_alone / t_floor)
            keyed_ratios.append(t_keyed / t_floor)
            rates.append(appends / t_store)
            floor_rates.append(appends / t_floor)
    finally:
        await store.aclose()
        await alone.aclose()
        await keyed.aclose()
        await floor.close()
    median = statistics.median(ratios)
    results.append((
        "single session append (events/s)",
        f"{statistics.median(rates):,.0f}",
        f"raw aiosqlite {statistics.median(floor_rates):,.0f}",
        f"cost {median:.2f}x (runs {min(ratios):.2f}-{max(ratios):.2f}) <= 1.5x",
        median <= 1.5,
    ))
    alone_median = statistics.median(alone_ratios)
    results.append((
        "  same, group commit off",
        f"cost {alone_median:.2f}x",
        f"runs {min(alone_ratios):.2f}-{max(alone_ratios):.2f}",
        f"group commit within +10%: {median / alone_median:.2f}",
        median <= alone_median * 1.10,
    ))
    keyed_median = statistics.median(keyed_ratios)
    results.append((
        "  same, keyed (every event signed)",
        f"cost {keyed_median:.2f}x",
        f"runs {min(keyed_ratios):.2f}-{max(keyed_ratios):.2f}",
        f"unkeyed {median:.2f}x",
        None,
    ))


async def load_and_bytes(tmp: str, big: int, reps: int, results: Results) -> None:
    path = os.path.join(tmp, "load.db")
    store = await open_sqlite(path, synchronous="NORMAL", group_commit=True)
    try:
        session = await store.create_session(app_name="bench", user_id="u")
        before = await asyncio.to_thread(_checkpoint, path)
        events = [realistic_event(i) for i in range(big)]
        version = 0
        for lo in range(0, big, 500):
            batch = events[lo:lo + 500]
            await store.append(session.id, batch, expected_version=version)
            version += len(batch)
        after = await asyncio.to_thread(_checkpoint, path)
        raw = sqlite3.connect(path)
        (key,) = raw.execute("SELECT session_key FROM evs_sessions WHERE session_id = ?",
                             (session.id,)).fetchone()
        raw.close()
        floor = await aiosqlite.connect(path, isolation_level=None)

        async def load_store() -> float:
            start = time.perf_counter()
            loaded = await store.read(session.id)
            assert len(loaded) == big
            return time.perf_counter() - start

        async def load_floor() -> float:
            start = time.perf_counter()
            rows = await floor.execute_fetchall(
                "SELECT payload FROM evs_events WHERE row_key > ? AND row_key < ? "
                "ORDER BY row_key", (key << 32, (key + 1) << 32))
            decoded = [orjson.loads(row[0]) for row in rows]
            assert len(decoded) == big
            return time.perf_counter() - start

        t_store, t_floor = [], []
        for _ in range(reps):
            t_store.append(await load_store())
            t_floor.append(await load_floor())
        await floor.close()
        tails = []
        for _ in range(51):
            start = time.perf_counter()
            assert len(await store.read(session.id, backwards=True, limit=20)) == 20
            tails.append(time.perf_counter() - start)
    finally:
        await store.aclose()
    load_s, load_f = min(t_store), min(t_floor)
    results.append((f"load {big:,} events (ms)", f"{load_s * 1e3:.0f}",
                    f"SELECT + orjson.loads {load_f * 1e3:.0f}",
                    f"{load_s / load_f:.2f}x <= 2.0x", load_s / load_f <= 2.0))
    tail = statistics.median(tails) * 1e3
    results.append(("newest 20 events (ms, median)", f"{tail:.2f}", "", "<= 5 ms", tail <= 5))
    compact = statistics.mean(len(compact_json(e)) for e in events)
    per_event = (after - before) / big
    results.append(("database bytes per event", f"{per_event:.0f}",
                    f"compact JSON {compact:.0f}", f"{per_event / compact:.2f}x <= 1.3x",
                    per_event / compact <= 1.3))


async def concurrency(tmp: str, quick: bool, results: Results) -> None:
    per_total = 800 if quick else 3_200
    print(f"{'sessions':>8} {'sync':>6} {'group':>6} {'events/s':>10} {'p50 ms':>8} "
          f"{'p99 ms':>8}")
    rates: dict[tuple[int, str, bool], float] = {}
    for sync in ("NORMAL", "FULL"):
        for grouped in (True, False):
            for sessions in (1, 8, 64):
                path = os.path.join(tmp, f"c-{sync}-{grouped}-{sessions}.db")
                store = await open_sqlite(path, synchronous=sync, group_commit=grouped)
                try:
                    per = max(10, per_total // sessions) if sessions > 1 else per_total // 4
                    run = await concurrent_appends(store, sessions, per)
                finally:
                    await store.aclose()
                rates[(sessions, sync, grouped)] = run.rate
                print(f"{sessions:>8} {sync:>6} {'on' if grouped else 'off':>6} "
                      f"{run.rate:>10,.0f} {run.percentile(0.5) * 1e3:>8.2f} "
                      f"{run.percentile(0.99) * 1e3:>8.2f}", flush=True)
    # The judged ratios: one measurement of 64 sessions lasts a fraction of a second, so the
    # three figures they compare are measured again in turns, in rounds, on fresh files, and
    # each ratio is judged on its median over the rounds (each round's own figures).
    rounds = []
    for r in range(1 if quick else 3):
        round_rates = []
        for sessions, sync in ((1, "NORMAL"), (64, "NORMAL"), (64, "FULL")):
            path = os.path.join(tmp, f"r{r}-{sync}-{sessions}.db")
            store = await open_sqlite(path, synchronous=sync, group_commit=True)
            try:
                per = max(10, per_total // sessions) if sessions > 1 else per_total // 4
                round_rates.append((await concurrent_appends(store, sessions, per)).rate)
            finally:
                await store.aclose()
        rounds.append(round_rates)
    one = statistics.median(r[0] for r in rounds)
    many = statistics.median(r[1] for r in rounds)
    full = statistics.median(r[2] for r in rounds)
    scale = [r[1] / r[0] for r in rounds]
    durable = [r[2] / r[1] for r in rounds]
    results.append(("64 sessions, NORMAL (events/s)", f"{many:,.0f}", f"1 session {one:,.0f}",
                    f"{statistics.median(scale):.1f}x ({' / '.join(f'{v:.1f}' for v in scale)})"
                    " >= 4x", statistics.median(scale) >= 4))
    results.append(("64 sessions, FULL (events/s)", f"{full:,.0f}", f"NORMAL {many:,.0f}",
                    f"{statistics.median(durable):.2f}x "
                    f"({' / '.join(f'{v:.2f}' for v in durable)}) >= 0.8x",
                    statistics.median(durable) >= 0.8))
    off = rates[(64, "NORMAL", False)]
    results.append(("  64 sessions, NORMAL, group commit off", f"{off:,.0f}",
                    f"on {many:,.0f}", f"{many / off:.1f}x", None))
    path = os.path.join(tmp, "two.db")
    await (await open_sqlite(path, synchronous="NORMAL", group_commit=True)).aclose()  # creates it
    rate, p50 = await asyncio.to_thread(two_processes, path, 32, 25 if quick else 50)
    results.append(("2 processes x 32 sessions (events/s)", f"{rate:,.0f}",
                    f"1 process x 64 {many:,.0f}", f"{rate / many:.2f}x, p50 {p50 * 1e3:.1f} ms",
                    None))


def sizes() -> None:
    events = [realistic_event(i) for i in range(10)]
    kinds = {"model call": events[0], "tool response": events[1], "text turn": events[4]}
    print("event sizes (bytes):   compact JSON   event JSON (v1)   stored payload (v2)")
    for name, event in kinds.items():
        print(f"  {name:<20}{len(compact_json(event)):>13}{len(encode_event(event)):>18}"
              f"{len(encode_compact(event)):>22}")
    print("  mix: 2 model calls, 2 tool responses, 1 text turn in every 5 events\n")


async def main(args: argparse.Namespace) -> int:
    quick = args.quick
    appends, big, reps, runs = (300, 2_000, 2, 3) if quick else (2_000, 10_000, 5, 5)
    results: Results = []
    if args.only != "postgres":
        sizes()
        with tempfile.TemporaryDirectory(prefix="evs-bench-") as tmp:
            await single_session(tmp, appends, runs, results)
            await load_and_bytes(tmp, big, reps, results)
            await concurrency(tmp, quick, results)
    if not args.no_postgres:
        from _bench_postgres import postgres_section

        await postgres_section(args.postgres, quick, results)
    print(f"\n{'figure':<42}{'value':>14}  {'baseline (same run)':<28}{'target':<44}result")
    for name, value, baseline, target, met in results:
        verdict = "" if met is None else "(quick)" if quick else "PASS" if met else "FAIL"
        print(f"{name:<42}{value:>14}  {baseline:<28}{target:<44}{verdict}")
    if quick:
        print("\n--quick is a smoke run: smaller sizes on a shared machine settle nothing.")
        return 0
    return 0 if all(met is not False for *_, met in results) else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--writer-process":
        asyncio.run(writer_process(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smaller sizes, fewer repetitions: a smoke run, targets not judged")
    parser.add_argument("--postgres", default=os.environ.get(
        "EVS_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"),
        help="server for the PostgreSQL section (a private database is created and dropped)")
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    parser.add_argument("--only", choices=["postgres"],
                        help="run only this section (e.g. to compare PostgreSQL changes)")
    sys.exit(asyncio.run(main(parser.parse_args())))
