"""While no server accepts connections, appends fail at once with a retryable StorageError and
nothing spins; when the server is back, the same store appends again.

Before, the group commit's senders each failed to connect and started the next one while
more than one was left, so the queued appends were never answered (they hung past 20 s) and
tens of thousands of tasks looped on ``ConnectionRefusedError``. Runs on a private cluster
(``_pg_cluster``): stopping the shared server would break every other test.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from _evs_support import text_event
from _pg_cluster import PrivateCluster, private_cluster

from eventstore import StorageError, open_store
from eventstore.backends.postgres.group import AppendGroups

__all__ = ["private_cluster"]

pytestmark = pytest.mark.slow

SESSIONS = 16
APPENDS = 64


async def test_postgres_outage_appends_fail_fast_and_retryably(
    private_cluster: PrivateCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[int] = []
    real_start = AppendGroups._start_sender

    def counting_start(self: AppendGroups) -> None:
        started.append(1)
        real_start(self)

    monkeypatch.setattr(AppendGroups, "_start_sender", counting_start)
    store = await open_store(private_cluster.url, auto_upgrade=True)
    try:
        for i in range(SESSIONS):
            await store.create_session(app_name="app", user_id="u", session_id=f"s{i}")
        private_cluster.stop()
        started.clear()
        began = time.monotonic()

        async def append(k: int) -> BaseException | None:
            try:
                await store.append(f"s{k % SESSIONS}", text_event(f"m{k}", id=f"e{k}"),
                                   expected_version=None)
            except BaseException as exc:
                return exc
            return None

        outcomes = await asyncio.wait_for(
            asyncio.gather(*(append(k) for k in range(APPENDS))), timeout=30
        )
        elapsed = time.monotonic() - began
        assert all(isinstance(o, StorageError) and o.retryable for o in outcomes), outcomes
        assert elapsed < 15, elapsed
        # One sender per append at most (each may start one), never a loop of them.
        assert len(started) <= APPENDS, len(started)
        await asyncio.sleep(0.5)
        assert len(started) <= APPENDS, "senders kept starting after every append was answered"

        private_cluster.start()
        stored = []
        refused: list[StorageError] = []
        for k in range(SESSIONS):
            for _ in range(20):  # the pool's dead connections are replaced as they are met
                try:
                    stored += await store.append(f"s{k}", text_event("back", id=f"b{k}"),
                                                 expected_version=None)
                    break
                except StorageError as exc:
                    refused.append(exc)
                    await asyncio.sleep(0.1)
        assert len(stored) == SESSIONS
        assert all(exc.retryable for exc in refused)
    finally:
        await store.aclose()
