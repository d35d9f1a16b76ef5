"""PostgreSQL streaming replication, measured on one machine: a primary and a hot standby on
private ports (``tests/eventstore/_pg_cluster.py``: ``initdb``, ``pg_basebackup -R``).

Usage::

    .venv/bin/python scripts/bench_replication.py                # throughput, reads, lag
    .venv/bin/python scripts/bench_replication.py --failovers 5  # failovers under load

Throughput: ``--writers`` sessions appending one ~480-byte event at a time for ``--seconds``,
with the standby synchronous (``synchronous_standby_names = '*'``: a commit waits for the
standby's flush) and asynchronous (``''``), in turns on the same pair, three rounds; the
ratio is judged on the median. Reads: while the writers run (asynchronous), ``--readers``
tasks list sessions (``list_sessions(limit=50)``) on a store with ``read_urls=[standby]``
and on one without, in turns; the standby's replay lag is sampled once a second meanwhile.

Failovers: ``--writers`` writers through the multi-host URL, each retrying its event (same id)
after a retryable error; ``--failovers`` times the primary's postmaster is SIGKILLed, the
standby promoted and the old primary rebuilt as its standby (``pg_rewind`` and a new base
backup in turn); then every acknowledged event is looked for (lost, stored twice, gaps) and
every chain verified.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "eventstore"))

from _bench_events import realistic_event
from _pg_cluster import Replication, _binaries, _root

from eventstore import EventStore, StorageError, open_store
from eventstore.commands import verify_session


def _pair(*, synchronous: bool) -> Replication:
    bin_dir, run_as = _binaries()
    pair = Replication(bin_dir=bin_dir, run_as=run_as, root=_root(run_as),
                       synchronous=synchronous)
    pair.start()
    return pair


def _set_sync(pair: Replication, on: bool) -> None:
    value = "'*'" if on else "''"
    pair.primary.sql(f"ALTER SYSTEM SET synchronous_standby_names = {value}")
    pair.primary.sql("SELECT pg_reload_conf()")
    time.sleep(0.5)


async def _append_for(store: EventStore, sessions: list[str], seconds: float) -> int:
    count = 0
    stop = time.monotonic() + seconds

    async def write(sid: str) -> None:
        nonlocal count
        while time.monotonic() < stop:
            await store.append(sid, realistic_event(count), expected_version=None)
            count += 1

    await asyncio.gather(*(write(sid) for sid in sessions))
    return count


async def _list_for(store: EventStore, readers: int, seconds: float) -> int:
    count = 0
    stop = time.monotonic() + seconds

    async def read() -> None:
        nonlocal count
        while time.monotonic() < stop:
            await store.list_sessions(limit=50)
            count += 1

    await asyncio.gather(*(read() for _ in range(readers)))
    return count


def _lag(pair: Replication) -> tuple[float, int]:
    row = pair.primary.sql(
        "SELECT coalesce(extract(epoch FROM replay_lag), 0) || ',' || "
        "coalesce(pg_wal_lsn_diff(sent_lsn, replay_lsn), 0) FROM pg_stat_replication")
    seconds, behind = row.split(",") if row else ("0", "0")
    return float(seconds), int(float(behind))


async def throughput(args: argparse.Namespace) -> None:
    pair = _pair(synchronous=True)
    try:
        store = await open_store(pair.primary.url, auto_upgrade=True)
        sessions = [f"w{i}" for i in range(args.writers)]
        for sid in sessions:
            await store.create_session(app_name="bench", user_id="u", session_id=sid)
        rates: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(3):
            for sync in (True, False):
                await asyncio.to_thread(_set_sync, pair, sync)
                rates[sync].append(await _append_for(store, sessions, args.seconds)
                                   / args.seconds)
        sync_rate, async_rate = (statistics.median(rates[s]) for s in (True, False))
        print(f"appends/s, {args.writers} writers: synchronous standby {sync_rate:,.0f}, "
              f"asynchronous {async_rate:,.0f}, ratio {sync_rate / async_rate:.2f} "
              f"(rounds: {[round(r) for r in rates[True]]} vs "
              f"{[round(r) for r in rates[False]]})")

        await asyncio.to_thread(_set_sync, pair, False)
        for i in range(args.sessions):
            await store.create_session(app_name="bench", user_id="u", session_id=f"r{i}")
        on_standby = await open_store(pair.primary.url, read_urls=[pair.standby.url])
        lags: list[tuple[float, int]] = []
        stop = asyncio.Event()

        async def sample() -> None:
            while not stop.is_set():
                lags.append(await asyncio.to_thread(_lag, pair))
                await asyncio.sleep(1)

        sampler = asyncio.create_task(sample())
        reads: dict[str, list[float]] = {"standby": [], "primary": []}
        for _ in range(3):
            for where, reader in (("standby", on_standby), ("primary", store)):
                writing = asyncio.create_task(_append_for(store, sessions, args.seconds))
                listed = await _list_for(reader, args.readers, args.seconds)
                written = await writing
                reads[where].append(listed / args.seconds)
                print(f"  {where}: {listed / args.seconds:,.0f} listings/s while "
                      f"{written / args.seconds:,.0f} appends/s")
        stop.set()
        await sampler
        standby_rate, primary_rate = (statistics.median(reads[w])
                                      for w in ("standby", "primary"))
        print(f"listings/s ({args.readers} readers, {args.writers} writers appending): "
              f"reads on the standby {standby_rate:,.0f}, on the primary {primary_rate:,.0f}, "
              f"ratio {standby_rate / primary_rate:.2f}")
        seconds = [s for s, _ in lags]
        behind = [b for _, b in lags]
        middle = int(statistics.median(behind))
        print(f"standby replay lag: median {statistics.median(seconds) * 1000:.1f} ms, max "
              f"{max(seconds) * 1000:.1f} ms; WAL behind: median {middle:,} "
              f"bytes, max {max(behind):,} ({len(lags)} samples)")
        await on_standby.aclose()
        await store.aclose()
    finally:
        pair.stop()


async def failovers(args: argparse.Namespace) -> None:
    pair = _pair(synchronous=True)
    try:
        store = await open_store(pair.url, auto_upgrade=True)
        sessions = [f"w{i}" for i in range(args.writers)]
        for sid in sessions:
            await store.create_session(app_name="bench", user_id="u", session_id=sid)
        acked: dict[str, list[str]] = {sid: [] for sid in sessions}
        errors: list[StorageError] = []
        slowest = 0.0
        halt = asyncio.Event()
        progressed = asyncio.Event()

        async def write(sid: str) -> None:
            nonlocal slowest
            n = 0
            while not halt.is_set():
                # The same event (id, timestamp) at each try: a retry re-sends it.
                event = replace(realistic_event(n), id=f"{sid}-{n}")
                while True:
                    began = time.monotonic()
                    try:
                        await store.append(sid, event, expected_version=None)
                        break
                    except StorageError as exc:
                        slowest = max(slowest, time.monotonic() - began)
                        errors.append(exc)
                        await asyncio.sleep(0.05)
                acked[sid].append(event.id)
                progressed.set()
                n += 1

        tasks = [asyncio.create_task(write(sid)) for sid in sessions]
        await asyncio.sleep(0.5)
        if failed := [t for t in tasks if t.done()]:
            await failed[0]  # a writer died: say why rather than wait for its acks
        outages: list[float] = []
        for k in range(args.failovers):
            await asyncio.sleep(args.seconds)
            began = time.monotonic()
            await asyncio.to_thread(pair.fail_over)
            how = await asyncio.to_thread(pair.rebuild_standby, rewind=k % 2 == 0)
            progressed.clear()
            await asyncio.wait_for(progressed.wait(), timeout=120)
            outages.append(time.monotonic() - began)
            if how != "pg_rewind" and k % 2 == 0:
                print("  pg_rewind failed:", pair.rewind_errors[-1].strip().splitlines()[-1])
            print(f"failover {k + 1}: node {pair.primary_index} primary; writes back after "
                  f"{outages[-1]:.1f} s (old primary rebuilt by {how})")
        await asyncio.sleep(args.seconds)
        halt.set()
        await asyncio.gather(*tasks)
        await store.aclose()

        lost = duplicated = gaps = unverified = 0
        async with await open_store(pair.url) as check:
            for sid, ids in acked.items():
                events = await check.read(sid)
                stored = [e.id for e in events]
                gaps += [e.seq for e in events] != list(range(1, len(events) + 1))
                duplicated += len(stored) - len(set(stored))
                lost += len(set(ids) - set(stored))
                unverified += bool(await verify_session(check, sid))
        total = sum(map(len, acked.values()))
        print(f"{args.failovers} failovers, {args.writers} writers: {total:,} acknowledged "
              f"appends, {lost} lost, {duplicated} stored twice, {gaps} sessions with gaps, "
              f"{unverified} chains failing verify; {len(errors)} errors, all retryable: "
              f"{all(e.retryable for e in errors)}; slowest failure {slowest:.2f} s")
    finally:
        pair.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=32)
    parser.add_argument("--readers", type=int, default=8)
    parser.add_argument("--sessions", type=int, default=1000,
                        help="sessions the listings page through (besides the writers')")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--failovers", type=int, default=0,
                        help="run failovers under load instead of the throughput figures")
    args = parser.parse_args()
    asyncio.run(failovers(args) if args.failovers else throughput(args))


if __name__ == "__main__":
    main()
