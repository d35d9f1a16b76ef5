"""Benchmark memory search (the database's full-text index) against a scan of the same rows.

    .venv/bin/python scripts/bench_memory.py [--quick]

One temporary SQLite file; one user of one app has ``SESSIONS`` remembered sessions of ten
events each (another user as many more), indexed by ``MemoryService.add_session_to_memory``.
Per query, the median time of ``search_memory`` (FTS5 through the store, one driver hop) is
printed next to a baseline measured in the same run on the same file: a plain ``sqlite3``
``LIKE '%word%'`` scan of the user's rows for the same words. Information only: no target.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eventstore import Content, Event, MemoryService, Part, open_store

WORDS = [f"w{n}" for n in range(5000)] + ["kyoto", "ryokan", "glacier", "ferry", "umbrella"]
QUERIES = ["kyoto ryokan", "glacier", "ferry umbrella", "w17 w4242"]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(20))


async def _fill(path: Path, sessions: int) -> None:
    rng = random.Random(7)
    async with await open_store(path, auto_upgrade=True) as store:
        memory = MemoryService(store)
        for user in ("ada", "bob"):
            for n in range(sessions):
                sid = f"{user}-{n}"
                await store.create_session(app_name="trips", user_id=user, session_id=sid)
                events = [
                    Event(author="user" if i % 2 == 0 else "planner",
                          content=Content(role="user" if i % 2 == 0 else "model",
                                          parts=(Part(text=_text(rng)),)))
                    for i in range(10)
                ]
                await store.append(sid, events, expected_version=0)
                await memory.add_session_to_memory(sid)


async def _fts(path: Path, rounds: int) -> dict[str, float]:
    async with await open_store(path) as store:
        memory = MemoryService(store)
        timings: dict[str, float] = {}
        for query in QUERIES:
            samples = []
            for _ in range(rounds):
                start = time.perf_counter()
                await memory.search_memory(app_name="trips", user_id="ada", query=query)
                samples.append(time.perf_counter() - start)
            timings[query] = statistics.median(samples)
        return timings


def _scan(path: Path, rounds: int) -> dict[str, float]:
    conn = sqlite3.connect(path)
    timings: dict[str, float] = {}
    for query in QUERIES:
        words = query.split()
        where = " OR ".join("lower(text) LIKE ?" for _ in words)
        sql = (f"SELECT session_id, seq, author, timestamp, text FROM evs_memory_rows "
               f"WHERE app_name = ? AND user_id = ? AND ({where}) LIMIT 10")
        samples = []
        for _ in range(rounds):
            start = time.perf_counter()
            conn.execute(sql, ("trips", "ada", *(f"%{w}%" for w in words))).fetchall()
            samples.append(time.perf_counter() - start)
        timings[query] = statistics.median(samples)
    conn.close()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smoke run (small and short)")
    quick = parser.parse_args().quick
    sessions, rounds = (50, 5) if quick else (1000, 30)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        asyncio.run(_fill(path, sessions))
        fts = asyncio.run(_fts(path, rounds))
        scan = _scan(path, rounds)
    print(f"{sessions} sessions x 10 events per user, 2 users; medians of {rounds} runs")
    for query in QUERIES:
        print(f"  {query!r:20} search_memory {fts[query] * 1000:7.2f} ms   "
              f"LIKE scan {scan[query] * 1000:7.2f} ms   ratio {fts[query] / scan[query]:.2f}x")


if __name__ == "__main__":
    main()
