"""The benchmark's concurrency section: many sessions appending at once on one SQLite file.

Each session is one task appending realistic events one at a time, each append awaited (as a
runtime does); the figures are the aggregate events/s over all sessions and the p50/p99 latency
of one append. ``two_processes`` runs two OS processes of 32 sessions each on one file (group
commit is per process; ``BEGIN IMMEDIATE`` still serializes the processes).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from _bench_events import realistic_event

from eventstore import Event, EventStore, open_store
from eventstore.backends.sqlite.base import SQLiteBackend

__all__ = ["Run", "concurrent_appends", "two_processes", "writer_process"]


@dataclass(frozen=True)
class Run:
    """One measurement: ``sessions`` tasks appending ``events`` events in all."""

    sessions: int
    events: int
    seconds: float
    latencies: list[float]

    @property
    def rate(self) -> float:
        return self.events / self.seconds

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def open_sqlite(path: str, *, synchronous: str, group_commit: bool,
                      signing_key: bytes | None = None) -> EventStore:
    backend = await SQLiteBackend.open(
        f"sqlite+aiosqlite:///{path}", auto_upgrade=True, synchronous=synchronous,
        group_commit=group_commit, signing_key=signing_key,
    )
    return EventStore(backend)


async def _session_writer(store: EventStore, session_id: str, events: list[Event],
                          latencies: list[float]) -> None:
    clock = time.perf_counter
    for version, event in enumerate(events):
        start = clock()
        await store.append(session_id, event, expected_version=version)
        latencies.append(clock() - start)


async def concurrent_appends(store: EventStore, sessions: int, per_session: int,
                             *, app: str = "bench") -> Run:
    """``sessions`` sessions append ``per_session`` events each, concurrently."""
    ids = []
    for _ in range(sessions):
        ids.append((await store.create_session(app_name=app, user_id="u")).id)
    batches = [[realistic_event(i) for i in range(per_session)] for _ in ids]
    latencies: list[float] = []
    start = time.perf_counter()
    await asyncio.gather(*(_session_writer(store, sid, batch, latencies)
                           for sid, batch in zip(ids, batches, strict=True)))
    seconds = time.perf_counter() - start
    return Run(sessions, sessions * per_session, seconds, latencies)


async def writer_process(path: str, sessions: int, per_session: int) -> None:
    """The child side of ``two_processes``: waits for a line on stdin, then appends and prints
    ``events seconds``."""
    store = await open_store(path)
    try:
        ids = [(await store.create_session(app_name="bench", user_id="u")).id
               for _ in range(sessions)]
        batches = [[realistic_event(i) for i in range(per_session)] for _ in ids]
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        latencies: list[float] = []
        start = time.perf_counter()
        await asyncio.gather(*(_session_writer(store, sid, batch, latencies)
                               for sid, batch in zip(ids, batches, strict=True)))
        seconds = time.perf_counter() - start
        print(f"{sessions * per_session} {seconds} {statistics.median(latencies)}", flush=True)
    finally:
        await store.aclose()


def two_processes(path: str, sessions: int, per_session: int) -> tuple[float, float]:
    """Two OS processes, ``sessions`` sessions each, on one file: (aggregate events/s, the
    larger of the two p50 latencies)."""
    script = Path(__file__).with_name("bench_store.py")
    env = {**os.environ, "PYTHONPATH": str(script.parent.parent)}
    children = [
        subprocess.Popen(
            [sys.executable, str(script), "--writer-process", path, str(sessions),
             str(per_session)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )
        for _ in range(2)
    ]
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
    start = time.perf_counter()
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    results = []
    for child in children:
        out, _ = child.communicate(timeout=600)
        events, _seconds, p50 = out.split()
        results.append((int(events), float(p50)))
    elapsed = time.perf_counter() - start
    return sum(e for e, _ in results) / elapsed, max(p for _, p in results)
