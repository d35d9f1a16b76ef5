"""A fork killed with SIGKILL at random moments leaves the whole fork or nothing (SQLite and
PostgreSQL): every fork session that exists has all its events, its artifacts and its link, and
every link names a session that exists."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from _evs_support import (
    BackendTarget,
    call_event,
    delta_event,
    kill_after_ready,
    response_event,
)

from eventstore import Event, EventActions, EventStore

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("_fork_child.py")
EVENTS = 6_000
KILLS = 6


async def _origin(store: EventStore) -> None:
    await store.create_session(app_name="app", user_id="u", session_id="o")
    for lo in range(0, EVENTS, 500):
        batch: list[Event] = []
        for i in range(lo, lo + 500, 4):
            batch += [call_event(f"c{i}"), response_event(f"c{i}"),
                      delta_event({"n": i, "user:last": i}),
                      Event(author="agent", actions=EventActions(artifact_delta={"a.txt": 0}))]
        await store.append("o", batch, expected_version=lo)
    await store.save_artifact("o", "a.txt", b"a", mime_type="text/plain")


async def _kill_once(url: str, delay: float) -> list[str]:
    out = await kill_after_ready([str(CHILD), url, "o", str(EVENTS)], delay,
                                 expect_killed=False)
    return out.split()


async def _check(store: EventStore, acked: set[str]) -> int:
    page = await store.list_sessions(limit=1000)
    forks = [s for s in page.sessions if s.id.startswith("fork-")]
    assert acked <= {s.id for s in forks}
    origin_links = await store.fork_links("o")
    assert {f.session_id for f in origin_links.forks} == {s.id for s in forks}
    for info in forks:
        assert info.version == EVENTS, info.id
        assert (await store.list_artifacts(info.id)) == {"a.txt": [0]}
        link = (await store.fork_links(info.id)).origin
        assert link is not None
        assert (link.origin_session_id, link.origin_seq) == ("o", EVENTS)
        await store.delete_session(info.id)  # the next child starts at fork-0 again
    return len(forks)


def test_fork_killed_leaves_all_or_nothing(sql_target: BackendTarget) -> None:
    async def main() -> None:
        store = await sql_target.open()
        try:
            await _origin(store)
            rng = random.Random(14)
            made = 0
            for _ in range(KILLS):
                acked = await _kill_once(sql_target.url, rng.uniform(0.2, 2.5))
                made += await _check(store, set(acked))
            assert made > 0
        finally:
            await store.aclose()

    asyncio.run(main())
