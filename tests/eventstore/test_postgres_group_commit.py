"""Group commit on PostgreSQL: one-statement appends waiting together commit in one transaction,
each with its own outcome; a group that fails as a whole is run again call by call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from eventstore import (
    ConcurrencyError,
    DuplicateEventError,
    Event,
    EventStore,
    StorageError,
    open_store,
)


def ev(event_id: str, text: str = "x") -> Event:
    return Event(author="a", id=event_id, custom_metadata={"text": text})


def dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[EventStore]:
    opened = await open_store(postgres_url)
    try:
        yield opened
    finally:
        await opened.aclose()


async def transactions_of(url: str, session_ids: list[str]) -> dict[str, set[int]]:
    """The ids of the transactions that wrote each session's events."""
    conn = await asyncpg.connect(dsn(url))
    try:
        rows = await conn.fetch(
            "SELECT session_id, xmin::text::bigint FROM evs_events "
            "WHERE session_id = ANY($1::varchar[])", session_ids)
    finally:
        await conn.close()
    found: dict[str, set[int]] = {sid: set() for sid in session_ids}
    for sid, xid in rows:
        found[sid].add(xid)
    return found


async def test_appends_of_many_sessions_share_commits_and_keep_their_logs(
    store: EventStore, postgres_url: str
) -> None:
    sids = [(await store.create_session(app_name="app", user_id="u")).id for _ in range(40)]

    async def writer(sid: str) -> None:
        for version in range(5):
            await store.append(sid, ev(f"{sid}-{version}"), expected_version=version)

    await asyncio.gather(*(writer(sid) for sid in sids))
    for sid in sids:
        events = await store.read(sid)
        assert [e.id for e in events] == [f"{sid}-{v}" for v in range(5)]
        assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    xids = await transactions_of(postgres_url, sids)
    commits = set().union(*xids.values())
    # 200 appends, each its own transaction without grouping.
    assert len(commits) < 200


async def test_calls_of_one_session_waiting_together_keep_their_order(
    store: EventStore,
) -> None:
    """More calls wait than one group carries, each session's calls submitted at once (not
    awaited one by one) and interleaved with other sessions': a session's calls go into one
    group, so its log holds them in submission order."""
    sids = [(await store.create_session(app_name="app", user_id="u")).id for _ in range(12)]
    calls = [store.append(sid, ev(f"{sid}-{n}"), expected_version=None)
             for n in range(4) for sid in sids]
    await asyncio.gather(*calls)
    for sid in sids:
        assert [e.id for e in await store.read(sid)] == [f"{sid}-{n}" for n in range(4)]


async def test_a_group_gives_each_caller_its_own_outcome(
    store: EventStore, postgres_url: str
) -> None:
    conflict = (await store.create_session(app_name="app", user_id="u")).id
    retry = (await store.create_session(app_name="app", user_id="u")).id
    duplicate = (await store.create_session(app_name="app", user_id="u")).id
    plain = [(await store.create_session(app_name="app", user_id="u")).id for _ in range(8)]
    first = ev("first")
    for sid in (conflict, retry, duplicate):
        await store.append(sid, first, expected_version=0)

    results = await asyncio.gather(
        store.append(conflict, ev("late"), expected_version=0),
        store.append(retry, first, expected_version=0),
        store.append(duplicate, ev("first", text="other"), expected_version=None),
        *(store.append(sid, ev("one"), expected_version=0) for sid in plain),
        return_exceptions=True,
    )
    assert isinstance(results[0], ConcurrencyError)
    assert results[0].actual_version == 1
    retried = results[1]
    assert not isinstance(retried, BaseException)
    assert [e.seq for e in retried] == [1]
    assert isinstance(results[2], DuplicateEventError)
    for sid, result in zip(plain, results[3:], strict=True):
        assert not isinstance(result, BaseException), result
        assert [e.id for e in await store.read(sid)] == ["one"]
    for sid in (conflict, retry, duplicate):
        assert [e.id for e in await store.read(sid)] == ["first"]
    xids = await transactions_of(postgres_url, plain)
    assert len(set().union(*xids.values())) < len(plain)


async def test_a_failing_group_is_run_again_call_by_call(
    store: EventStore, postgres_url: str
) -> None:
    sids = [(await store.create_session(app_name="app", user_id="u")).id for _ in range(8)]
    poisoned = sids[3]
    conn = await asyncpg.connect(dsn(postgres_url))
    await conn.execute(f"""
        CREATE FUNCTION evs_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.session_id = '{poisoned}' THEN RAISE EXCEPTION 'refused by the test'; END IF;
          RETURN NEW;
        END $$;
        CREATE TRIGGER evs_test_refuse BEFORE INSERT ON evs_events
          FOR EACH ROW EXECUTE FUNCTION evs_test_refuse();
    """)
    try:
        results = await asyncio.gather(
            *(store.append(sid, ev("one"), expected_version=0) for sid in sids),
            return_exceptions=True,
        )
    finally:
        await conn.execute("DROP TRIGGER evs_test_refuse ON evs_events; "
                           "DROP FUNCTION evs_test_refuse()")
        await conn.close()
    for sid, result in zip(sids, results, strict=True):
        if sid == poisoned:
            assert isinstance(result, StorageError)
            assert "refused by the test" in str(result)
            assert await store.read(sid) == []
        else:
            assert not isinstance(result, BaseException), result
            assert [e.id for e in await store.read(sid)] == ["one"]
    # The poisoned session still takes appends afterwards.
    await store.append(poisoned, ev("two"), expected_version=0)
    assert [e.seq for e in await store.read(poisoned)] == [1]
