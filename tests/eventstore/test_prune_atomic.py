"""A prune killed with SIGKILL at random moments (SQLite and PostgreSQL) leaves every session
either intact — all its events — or deleted with its complete archive on disk, one that reads
back to exactly the events it had; never a deleted session without its archive."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest
from _evs_support import BackendTarget, call_event, delta_event, kill_after_ready, response_event

from eventstore import Event, EventStore
from eventstore._archive import archive_name
from eventstore._exchange import parse_export

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("_prune_child.py")
SESSIONS = 400
KILLS = 6


async def _populate(store: EventStore) -> dict[str, list[Event]]:
    logs: dict[str, list[Event]] = {}
    for n in range(SESSIONS):
        sid = f"s{n:04d}"
        await store.create_session(app_name="app", user_id=f"u{n % 7}", session_id=sid)
        batch = [call_event(f"c{n}"), response_event(f"c{n}"),
                 delta_event({"n": n, "note": "x" * (n % 50)})] * 3
        batch = [Event(author=e.author, content=e.content, actions=e.actions,
                       invocation_id=e.invocation_id) for e in batch]  # distinct ids
        logs[sid] = await store.append(sid, batch, expected_version=0)
    return logs


async def _settled(url: str) -> None:
    """Wait until the killed child's work has ended on the server: on PostgreSQL a COMMIT it
    sent before the kill may still be running (SQLite has nothing in flight after a kill)."""
    if not url.startswith("postgresql"):
        return
    import asyncpg  # PostgreSQL targets only

    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://", 1))
    try:
        for _ in range(200):
            busy = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction', "
                "'idle in transaction (aborted)')")
            if busy == 0:
                return
            await asyncio.sleep(0.05)
        raise AssertionError("the killed child's transaction never ended on the server")
    finally:
        await conn.close()


async def _check(store: EventStore, logs: dict[str, list[Event]], archive: Path) -> int:
    """Assert the invariant for every session; return how many are gone."""
    present = {s.id for s in (await store.list_sessions(limit=10_000)).sessions}
    gone = 0
    for sid, events in logs.items():
        if sid in present:
            assert await store.read(sid) == events, sid
            continue
        gone += 1
        path = archive / "app" / f"{archive_name(sid)}.jsonl"
        assert path.exists(), f"session {sid} was deleted without its archive"
        parsed = parse_export(path.read_bytes().splitlines())
        assert parsed.session_id == sid
        assert [e.id for e in parsed.events] == [e.id for e in events]
        assert [e.actions for e in parsed.events] == [e.actions for e in events]
        assert [e.content for e in parsed.events] == [e.content for e in events]
    return gone


def test_prune_killed_leaves_each_session_intact_or_archived(sql_target: BackendTarget,
                                                            tmp_path: Path) -> None:
    async def main() -> None:
        store = await sql_target.open()
        archive = tmp_path / "archive"
        try:
            logs = await _populate(store)
            rng = random.Random(29)
            history = []
            for _ in range(KILLS):
                out = await kill_after_ready([str(CHILD), sql_target.url, str(archive)],
                                             rng.uniform(0.1, 1.2), expect_killed=False)
                await _settled(sql_target.url)
                history.append((out.split(), await _check(store, logs, archive)))
            assert any(0 < gone < SESSIONS for _, gone in history), history  # killed mid-way
            report = await store.prune(older_than=86_400, archive=archive,
                                       now=time.time() + 10 * 86_400)  # what the kills left
            assert {s.outcome for s in report.sessions} <= {"deleted"}
            assert await _check(store, logs, archive) == SESSIONS
        finally:
            await store.aclose()

    asyncio.run(main())
