"""The SQLite writer's head cache: groups of appends take the heads the writer kept from its
own committed transactions instead of reading them, and the cache never outlives a change it
did not make (another connection's commit, this store's own deletes, a failed group)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from _group_support import (
    backend_of,
    ev,
    open_sqlite,
    outcome,
    outcomes_while_locked,
    sessions,
    submitted,
    writer_held,
)

from eventstore import Event, EventStore, TamperedLogError, open_store
from eventstore.backends.sqlite.append import Head, HeadCache
from eventstore.commands._maintain import verify_session

Append = tuple[str, Event, int | None]


async def grouped(store: EventStore, *appends: Append) -> list[Any]:
    """Run the appends as one group (the writer held meanwhile); each one's result or error."""
    async with writer_held(store):
        tasks = await submitted(*(
            (lambda sid=sid, event=event, version=version:
             store.append(sid, event, expected_version=version))
            for sid, event, version in appends
        ))
    return [await outcome(t) for t in tasks]


async def statements_of(store: EventStore, appends: tuple[Append, ...]) -> list[str]:
    """The SQL the writer ran for one group of ``appends``."""
    driver = backend_of(store)._writer
    assert driver is not None
    seen: list[str] = []
    await driver.run(lambda conn: conn.set_trace_callback(seen.append))
    try:
        results = await grouped(store, *appends)
    finally:
        await driver.run(lambda conn: conn.set_trace_callback(None))
    assert not [r for r in results if isinstance(r, Exception)], results
    return seen


async def log_of(store: EventStore, session_id: str) -> list[tuple[int | None, str]]:
    return [(e.seq, e.id) for e in await store.read(session_id)]


def head_reads(statements: list[str]) -> list[str]:
    return [s for s in statements if "FROM evs_sessions s WHERE s.session_id IN" in s]


async def test_groups_take_kept_heads_instead_of_reading_them(tmp_path: Path) -> None:
    store = await open_sqlite(tmp_path / "h.db")
    try:
        await sessions(store, "s1", "s2")
        first = await statements_of(store, (("s1", ev("a1"), 0), ("s2", ev("b1"), 0)))
        assert len(head_reads(first)) == 1, "the first group reads both heads in one statement"
        second = await statements_of(store, (("s1", ev("a2"), 1), ("s2", ev("b2"), 1)))
        assert head_reads(second) == [], "the second group read heads the writer had kept"
        assert "PRAGMA data_version" in second
        assert await log_of(store, "s1") == [(1, "a1"), (2, "a2")]
        assert await log_of(store, "s2") == [(1, "b1"), (2, "b2")]
        for sid in ("s1", "s2"):
            assert await verify_session(store, sid) == []
    finally:
        await store.aclose()


async def test_another_connections_commit_drops_the_kept_heads(tmp_path: Path) -> None:
    # Another store on the file deletes s1 and creates it anew with one event of its own: the
    # kept head (seq 1 of the old session) matches the new session's seq, so only noticing
    # the other connection's commit keeps the next append off the old session's rows.
    path = tmp_path / "h.db"
    store = await open_sqlite(path)
    try:
        await sessions(store, "s1", "s2")
        await grouped(store, ("s1", ev("a1"), 0), ("s2", ev("b1"), 0))
        other = await open_store(f"sqlite+aiosqlite:///{path}")
        try:
            await other.delete_session("s1")
            await sessions(other, "s1")
            await other.append("s1", ev("new1"), expected_version=0)
        finally:
            await other.aclose()
        a2, b2 = await grouped(store, ("s1", ev("a2"), None), ("s2", ev("b2"), 1))
        assert [e.seq for e in a2] == [2]
        assert [e.seq for e in b2] == [2]
        assert await log_of(store, "s1") == [(1, "new1"), (2, "a2")]
        assert await verify_session(store, "s1") == []
    finally:
        await store.aclose()


async def test_tail_removed_behind_the_writers_back_is_refused_after_caching(
    tmp_path: Path,
) -> None:
    path = tmp_path / "h.db"
    store = await open_sqlite(path)
    try:
        await sessions(store, "s1", "s2")
        await grouped(store, ("s1", ev("a1"), 0), ("s2", ev("b1"), 0))
        await grouped(store, ("s1", ev("a2"), 1), ("s2", ev("b2"), 1))
        raw = sqlite3.connect(path, isolation_level=None)
        try:
            raw.execute("DELETE FROM evs_events WHERE session_id = 's1' AND seq = 2")
        finally:
            raw.close()
        tampered, b3 = await grouped(store, ("s1", ev("a3"), None), ("s2", ev("b3"), 2))
        assert isinstance(tampered, TamperedLogError), tampered
        assert [e.seq for e in b3] == [3]
        assert await log_of(store, "s1") == [(1, "a1")]
    finally:
        await store.aclose()


async def test_own_delete_and_recreate_drop_the_kept_heads(tmp_path: Path) -> None:
    # This connection's own commits do not move PRAGMA data_version: the delete must clear
    # the cache itself, or an append at head would follow the deleted session's head.
    store = await open_sqlite(tmp_path / "h.db")
    try:
        await sessions(store, "s1", "s2")
        await grouped(store, ("s1", ev("a1"), 0), ("s2", ev("b1"), 0))
        await grouped(store, ("s1", ev("a2"), 1), ("s2", ev("b2"), 1))
        await store.delete_session("s1")
        await sessions(store, "s1")
        again, b3 = await grouped(store, ("s1", ev("again1"), None), ("s2", ev("b3"), 2))
        assert [e.seq for e in again] == [1]
        assert [e.seq for e in b3] == [3]
        assert await log_of(store, "s1") == [(1, "again1")]
        assert await verify_session(store, "s1") == []
    finally:
        await store.aclose()


async def test_a_failed_group_clears_the_kept_heads(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    store = await open_sqlite(path)
    try:
        await sessions(store, "s1", "s2")
        await grouped(store, ("s1", ev("a1"), 0), ("s2", ev("b1"), 0))
        heads = backend_of(store)._heads
        assert len(heads) == 2
        failed = await outcomes_while_locked(
            store, path,
            lambda: store.append("s1", ev("a2"), expected_version=1),
            lambda: store.append("s2", ev("b2"), expected_version=1),
        )
        assert all("locked" in str(f) for f in failed), failed
        assert len(heads) == 0
        a2, b2 = await grouped(store, ("s1", ev("a2"), 1), ("s2", ev("b2"), 1))
        assert [e.seq for e in a2] == [2]
        assert [e.seq for e in b2] == [2]
        for sid in ("s1", "s2"):
            assert await verify_session(store, sid) == []
    finally:
        await store.aclose()


def test_head_cache_keeps_the_most_recently_appended_sessions() -> None:
    cache = HeadCache(limit=2)
    heads = [Head(("app", "u", n, None, 0, 0, None)) for n in (1, 2, 3)]
    cache.put("s1", heads[0], 5)
    cache.put("s2", heads[1], 6)
    cache.put("s1", heads[0], 7)  # s1 appended again: s2 is now the oldest
    cache.put("s3", heads[2], 8)
    assert len(cache) == 2
    assert cache.get("s2") is None
    kept = cache.get("s1")
    assert kept is heads[0]
    assert kept.clock == 8, "a kept head carries its app's newest position"
    cache.clear()
    assert len(cache) == 0
    assert cache.get("s3") is None


def test_head_cache_starts_over_past_its_limit_of_apps() -> None:
    cache = HeadCache(limit=2)
    for n, app in enumerate(("a1", "a2", "a3"), 1):
        cache.put(f"s{n}", Head((app, "u", n, None, 0, 0, None)), n)
    assert len(cache) == 0, "three apps' positions kept with a limit of two"
    assert cache.get("s1") is None
