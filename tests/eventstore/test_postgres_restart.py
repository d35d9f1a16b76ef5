"""A PostgreSQL restart while many tasks append: only retryable StorageErrors come out, nothing
acknowledged is lost, and every failed append retried with the same ids is stored once.

Before, about a third of the failures were ``asyncpg.InternalClientError`` ("cannot switch to
state 13; another operation is in progress": a pooled connection the restart had left dead) and
some StorageErrors said "connection has been released back to the pool" (the group sender
went on using a broken connection). Runs on a private cluster (``_pg_cluster``): restarting
the shared server would break every other test.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest
from _evs_support import text_event
from _pg_cluster import PrivateCluster, private_cluster

from eventstore import Event, StorageError, open_store

__all__ = ["private_cluster"]

pytestmark = pytest.mark.slow

SESSIONS = 32


async def test_appends_across_two_restarts(private_cluster: PrivateCluster) -> None:
    store = await open_store(private_cluster.url, auto_upgrade=True)
    try:
        for i in range(SESSIONS):
            await store.create_session(app_name="app", user_id="u", session_id=f"s{i}")
        acknowledged: dict[str, list[str]] = {f"s{i}": [] for i in range(SESSIONS)}
        failed: list[tuple[str, Event]] = []
        errors: list[BaseException] = []
        stop = asyncio.Event()

        async def writer(sid: str) -> None:
            k = 0
            while not stop.is_set():
                event = text_event(f"{sid}-{k}", id=f"{sid}-e{k}")
                k += 1
                try:
                    await store.append(sid, event, expected_version=None)
                except Exception as exc:
                    errors.append(exc)
                    failed.append((sid, event))
                    await asyncio.sleep(0.05)
                else:
                    acknowledged[sid].append(event.id)

        def done() -> int:
            return sum(len(ids) for ids in acknowledged.values())

        def postmaster() -> str:
            return (private_cluster.data_dir / "postmaster.pid").read_text().split()[0]

        writers = [asyncio.create_task(writer(sid)) for sid in acknowledged]
        servers, progress = [postmaster()], [0]
        for _ in range(2):
            await asyncio.sleep(0.8)
            progress.append(done())
            await asyncio.to_thread(private_cluster.restart)
            servers.append(postmaster())
        await asyncio.sleep(0.8)
        progress.append(done())
        stop.set()
        await asyncio.wait_for(asyncio.gather(*writers), timeout=60)

        # The server really went away twice while the writers went on before, between and
        # after the restarts (whether an append failed depends on what was in flight: the
        # store resends what never reached the server).
        assert len(set(servers)) == 3, servers
        assert all(a < b for a, b in itertools.pairwise(progress)), progress
        for exc in errors:
            assert type(exc) is StorageError, f"{type(exc).__module__}.{exc!r}"
            assert exc.retryable, str(exc)
            assert "released back to the pool" not in str(exc)

        # Retrying with the same ids stores each failed event exactly once, whether or not
        # the failed attempt had committed.
        deadline = time.monotonic() + 30
        retry_errors: list[StorageError] = []
        for sid, event in failed:
            while True:
                try:
                    await store.append(sid, event, expected_version=None)
                    break
                except StorageError as exc:
                    retry_errors.append(exc)
                    assert time.monotonic() < deadline, "the server did not come back"
                    await asyncio.sleep(0.1)
        assert all(exc.retryable for exc in retry_errors)

        retried: dict[str, set[str]] = {sid: set() for sid in acknowledged}
        for sid, event in failed:
            retried[sid].add(event.id)
        for sid, ids in acknowledged.items():
            events = await store.read(sid)
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            stored = [e.id for e in events]
            assert len(stored) == len(set(stored)), f"{sid}: an event is stored twice"
            assert set(stored) == set(ids) | retried[sid]
            # Acknowledged appends of one writer keep their order.
            positions = {eid: n for n, eid in enumerate(stored)}
            assert [positions[i] for i in ids] == sorted(positions[i] for i in ids)
    finally:
        await store.aclose()
