"""Failover under load: writers append through a multi-host URL while the primary's postmaster
is SIGKILLed and the standby promoted (``_pg_cluster.replication``), both directions.

With a synchronous standby no acknowledged append is lost, none is stored twice, no seq is
skipped and every chain verifies; every failure a writer meets is a retryable StorageError,
answered within the documented bound, and a retry with the same event id is stored once
whether or not the first attempt committed. The store finds the new primary by itself.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from _evs_support import text_event
from _pg_cluster import Replication, replication

from eventstore import EventStore, StorageError, open_store
from eventstore.backends.postgres.base import CONNECT_TIMEOUT
from eventstore.commands import verify_session
from eventstore.commands._heads import ExpectedHead, check_heads

__all__ = ["replication"]

pytestmark = pytest.mark.slow

WRITERS = 6
FAILURE_BOUND = CONNECT_TIMEOUT + 5
"""How long an append may take to fail (docs/operations.md: the connect timeout, plus the
moment the server's backends take to notice their postmaster died)."""


LAG_WINDOW = 3.0
"""Seconds before a crash within which a lost event must have been acknowledged."""


@dataclass(kw_only=True)
class Writers:
    """Writers appending to a session each, retrying each event (same id) until stored."""

    store: EventStore
    acknowledged: dict[str, list[str]] = field(default_factory=dict)
    heads: dict[str, tuple[int, str]] = field(default_factory=dict)
    """Each session's newest acknowledged (seq, event id)."""
    acked_at: dict[str, float] = field(default_factory=dict)
    errors: list[StorageError] = field(default_factory=list)
    slowest_failure: float = 0.0
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def write(self, session_id: str) -> None:
        done = self.acknowledged.setdefault(session_id, [])
        n = 0
        while not self.stop.is_set():
            event_id = f"{session_id}-{n}"
            # The same event each try (its timestamp included): a retry re-sends it.
            event = text_event(f"message {n}", id=event_id)
            while True:
                began = time.monotonic()
                try:
                    stored = await self.store.append(session_id, event, expected_version=None)
                except StorageError as exc:
                    self.slowest_failure = max(self.slowest_failure, time.monotonic() - began)
                    self.errors.append(exc)
                    await asyncio.sleep(0.05)
                    continue
                assert [e.id for e in stored] == [event_id]
                done.append(event_id)
                self.heads[session_id] = (stored[0].seq, event_id)
                self.acked_at[event_id] = time.monotonic()
                break
            n += 1


async def _under_load(pair: Replication, steps: list[Callable[[Writers], None]]) -> Writers:
    store = await open_store(pair.url, auto_upgrade=True)
    writers = Writers(store=store)
    sessions = [f"w{i}" for i in range(WRITERS)]
    try:
        for sid in sessions:
            await store.create_session(app_name="app", user_id="u", session_id=sid)
        tasks = [asyncio.create_task(writers.write(sid)) for sid in sessions]
        for step in steps:
            before = sum(map(len, writers.acknowledged.values()))
            await asyncio.sleep(0.5)
            await asyncio.to_thread(step, writers)
            # The writers got through: the store reached the new primary by itself.
            deadline = time.monotonic() + 60
            while sum(map(len, writers.acknowledged.values())) < before + 2 * WRITERS:
                assert time.monotonic() < deadline, "no appends after the failover"
                await asyncio.sleep(0.1)
        writers.stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
    finally:
        await store.aclose()
    return writers


async def _check_log(url: str, writers: Writers) -> dict[str, list[str]]:
    """No event is stored twice, seqs run 1, 2, 3 … without a gap, the chains verify, and the
    acknowledged events kept are in the order they were acknowledged. Returns the acknowledged
    ids lost, per session (none: empty)."""
    lost: dict[str, list[str]] = {}
    async with await open_store(url) as store:
        for sid, acked in writers.acknowledged.items():
            events = await store.read(sid)
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            ids = [e.id for e in events]
            assert len(ids) == len(set(ids)), f"an event of {sid} is stored twice"
            kept = set(ids)
            assert [i for i in ids if i in set(acked)] == [i for i in acked if i in kept]
            if missing := [i for i in acked if i not in kept]:
                lost[sid] = missing
            assert await verify_session(store, sid) == []
    return lost


def test_failover_synchronous_loses_no_acknowledged_append(
    replication: Callable[..., Replication],
) -> None:
    pair = replication(synchronous=True)
    rebuilt: list[str] = []
    steps: list[Callable[[Writers], None]] = [
        lambda _: pair.fail_over(),
        lambda _: rebuilt.append(pair.rebuild_standby()),  # node 0 → 1, rewound
        lambda _: pair.fail_over(),
        lambda _: rebuilt.append(pair.rebuild_standby(rewind=False)),  # and back
    ]
    writers = asyncio.run(_under_load(pair, steps))
    assert pair.primary is pair.nodes[0]
    assert rebuilt == ["pg_rewind", "base backup"], pair.rewind_errors
    assert writers.errors, "no append met the failovers"
    assert all(exc.retryable for exc in writers.errors), writers.errors
    assert writers.slowest_failure < FAILURE_BOUND, writers.slowest_failure
    assert asyncio.run(_check_log(pair.url, writers)) == {}


def _outrun_standby(pair: Replication, writers: Writers, *, timeout: float = 60.0) -> None:
    """With the standby's WAL receiver stopped, make sure the primary commits what the standby
    will never get: the WAL already sent waits in the replication connection's socket buffers
    and is read after SIGCONT, so a fixed pause loses nothing when the writers are slow (a
    loaded machine). Fill those buffers with WAL of a scratch table until the sender is
    blocked (the primary's WAL runs ahead of what it has sent), then wait for appends
    acknowledged after that."""
    pair.primary.sql("CREATE TABLE IF NOT EXISTS outrun_fill (b text)")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pair.primary.sql(
            "INSERT INTO outrun_fill SELECT (SELECT string_agg(md5(random()::text), '') "
            "FROM generate_series(1, 30)) FROM generate_series(1, 5000)")
        sent = pair.primary.sql("SELECT max(sent_lsn) FROM pg_stat_replication")
        time.sleep(0.3)
        unsent = pair.primary.sql(
            "SELECT coalesce(max(pg_current_wal_lsn() - sent_lsn), 0) FROM pg_stat_replication "
            f"HAVING max(sent_lsn) = '{sent}'::pg_lsn") if sent else ""
        if unsent and float(unsent) > 1024 * 1024:
            break  # the sender has sent nothing more for a while, with WAL left to send
    before = dict(writers.heads)
    while time.monotonic() < deadline:
        if sum(1 for sid, head in list(writers.heads.items()) if before.get(sid) != head) >= 3:
            return
        time.sleep(0.05)


def test_failover_asynchronous_loss_is_what_verify_reports(
    replication: Callable[..., Replication],
) -> None:
    """The standby's WAL receiver is paused (SIGSTOP) before the primary dies, so the commits
    of that moment are lost for sure; the heads the writers saw acknowledged when it died,
    checked by ``evs verify --expect-heads``, name exactly the sessions that lost events."""
    pair = replication(synchronous=False)
    seen: list[ExpectedHead] = []
    crashes: list[float] = []

    def crash(writers: Writers, *, behind: bool) -> None:
        receiver = int(pair.standby.sql("SELECT pid FROM pg_stat_wal_receiver"))
        if behind:
            os.kill(receiver, signal.SIGSTOP)
        try:
            if behind:
                _outrun_standby(pair, writers)
            pair.primary.kill()
            crashes.append(time.monotonic())
            seen.extend(ExpectedHead(session_id=sid, seq=seq, event_id=eid)
                        for sid, (seq, eid) in list(writers.heads.items()))
        finally:
            if behind:
                os.kill(receiver, signal.SIGCONT)
        pair.standby.promote()
        pair.primary_index = 1 - pair.primary_index

    steps: list[Callable[[Writers], None]] = [
        lambda w: crash(w, behind=True), lambda _: pair.rebuild_standby(),
        lambda w: crash(w, behind=False), lambda _: pair.rebuild_standby(),  # and back
    ]
    writers = asyncio.run(_under_load(pair, steps))
    assert all(exc.retryable for exc in writers.errors), writers.errors
    lost = asyncio.run(_check_log(pair.url, writers))
    assert lost, "the paused standby lost nothing: the test did not test"

    async def reported() -> set[str]:
        async with await open_store(pair.url) as store:
            return {f.session_id for f in await check_heads(store, seen)}

    assert asyncio.run(reported()) == set(lost)
    # What was lost was acknowledged just before a crash (within the standby's lag: the
    # half second its receiver was paused, and the moment the writers take to notice).
    for missing in lost.values():
        for event_id in missing:
            acked = writers.acked_at[event_id]
            assert any(0 <= at - acked < LAG_WINDOW for at in crashes), event_id
