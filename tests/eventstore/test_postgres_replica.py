"""Reads from a hot standby (``open_store(url, read_urls=[...])``) on a private primary and
asynchronous standby (``_pg_cluster.replication``).

The standby's WAL receiver is paused (SIGSTOP) to make its lag certain: a reader store then
sees the standby's older copy (its reads do go there), the writer store still reads its own
writes (on the primary), a live tail on the reader receives the events once the standby
replays them (the wake-up comes from the primary's NOTIFY), and a standby that is down sends
reads to the primary.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import orjson
import pytest
from _evs_support import text_event
from _pg_cluster import Replication, replication
from typer.testing import CliRunner

from eventstore import open_store
from runtime.cli import app

__all__ = ["replication"]

pytestmark = pytest.mark.slow


@contextmanager
def _lagging(pair: Replication) -> Iterator[None]:
    """The standby receives nothing while inside (its WAL receiver stopped)."""
    receiver = int(pair.standby.sql("SELECT pid FROM pg_stat_wal_receiver"))
    os.kill(receiver, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(receiver, signal.SIGCONT)


def _evs_sessions(url: str, read_db: str | None) -> list[str]:
    """The session ids ``evs [--read-db READ_DB] sessions --db URL`` lists (in-process)."""
    args = ["--read-db", read_db] if read_db else []
    done = CliRunner().invoke(app, [*args, "sessions", "--db", url, "--json", "--sort", "id"],
                              catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return [s["id"] for s in orjson.loads(done.stdout)["sessions"]]


def test_replica_reads_stale_on_standby_own_writes_on_primary(
    replication: Callable[..., Replication],
) -> None:
    pair = replication(synchronous=False)
    standby = pair.standby.url

    async def main() -> None:
        writer = await open_store(pair.url, auto_upgrade=True, read_urls=[standby])
        reader = await open_store(pair.url, read_urls=[standby])
        try:
            await writer.create_session(app_name="a", user_id="u", session_id="old")
            await writer.append("old", text_event("one", id="o1"), expected_version=None)
            for _ in range(100):  # until the standby replayed it
                if (await reader.list_sessions()).sessions:
                    break
                await asyncio.sleep(0.05)
            with _lagging(pair):
                await writer.create_session(app_name="a", user_id="u", session_id="new")
                await writer.append("new", text_event("hi", id="n1"), expected_version=None)
                await writer.append("old", text_event("two", id="o2"), expected_version=None)
                # The writer reads its own writes (on the primary) …
                assert [e.id for e in await writer.read("old")] == ["o1", "o2"]
                assert [e.id for e in await writer.read("new")] == ["n1"]
                # … the reader the standby's copy, which has not replayed them.
                assert [s.id for s in (await reader.list_sessions()).sessions] == ["old"]
                assert [e.id for e in await reader.read("old")] == ["o1"]
                # evs --read-db reads there too; without it, the primary.
                assert await asyncio.to_thread(_evs_sessions, pair.url, standby) == ["old"]
                assert await asyncio.to_thread(_evs_sessions, pair.url, None) == ["new", "old"]

                tail: list[str] = []

                async def follow() -> None:
                    async for event in reader.subscribe("old", after=1, poll_interval=0.2):
                        tail.append(event.id)
                        if len(tail) == 2:
                            return

                following = asyncio.create_task(follow())
                await writer.append("old", text_event("three", id="o3"),
                                    expected_version=None)
                await asyncio.sleep(1.0)
                assert tail == [], "the tail read the primary, not the standby"
            await asyncio.wait_for(following, timeout=30)
            assert tail == ["o2", "o3"]
            assert [s.id for s in (await reader.list_sessions()).sessions] == ["new", "old"]
        finally:
            await reader.aclose()
            await writer.aclose()

    asyncio.run(main())


def test_replica_down_reads_go_to_the_primary(
    replication: Callable[..., Replication],
) -> None:
    pair = replication(synchronous=False)
    standby = pair.standby.url

    async def main() -> None:
        async with await open_store(pair.url, auto_upgrade=True) as writer:
            await writer.create_session(app_name="a", user_id="u", session_id="s")
        pair.standby.stop()
        async with await open_store(pair.url, read_urls=[standby]) as reader:
            for _ in range(3):
                assert [s.id for s in (await reader.list_sessions()).sessions] == ["s"]

    asyncio.run(main())
