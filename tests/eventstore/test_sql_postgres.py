"""PostgreSQL-specific behaviour: error translation, corrupt rows, NOTIFY wake-ups."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from eventstore import (
    Content,
    CorruptEventError,
    Event,
    EventStore,
    Part,
    StorageError,
    open_store,
)
from eventstore._postgres import POLL_INTERVAL

pytestmark = pytest.mark.postgres


def _text(text: str) -> Event:
    return Event(author="user", content=Content(role="user", parts=(Part(text=text),)))


def _dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


@pytest.fixture
async def store(empty_postgres_url: str) -> AsyncIterator[EventStore]:
    store = await open_store(empty_postgres_url, auto_upgrade=True)
    yield store
    await store.aclose()


async def _sql(url: str, sql: str, *args: object) -> None:
    conn = await asyncpg.connect(_dsn(url))
    try:
        await conn.execute(sql, *args)
    finally:
        await conn.close()


async def test_sql_postgres_dropped_table_is_a_storage_error(
    empty_postgres_url: str, store: EventStore
) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    await _sql(empty_postgres_url, "DROP TABLE evs_events")
    with pytest.raises(StorageError) as info:
        await store.read(session.id)
    assert isinstance(info.value.__cause__, asyncpg.PostgresError)
    with pytest.raises(StorageError):
        await store.append(session.id, _text("x"), expected_version=0)


async def test_sql_postgres_corrupt_payload_names_session_and_seq(
    empty_postgres_url: str, store: EventStore
) -> None:
    session = await store.create_session(app_name="a", user_id="u", session_id="s-corrupt")
    await store.append(session.id, [_text("one"), _text("two")], expected_version=0)
    await _sql(
        empty_postgres_url,
        "UPDATE evs_events SET payload = $1 WHERE session_id = $2 AND seq = 2",
        b"\x00not json",
        session.id,
    )
    with pytest.raises(CorruptEventError) as info:
        await store.read(session.id)
    assert (info.value.session_id, info.value.seq) == ("s-corrupt", 2)


async def test_sql_postgres_notify_wakes_a_waiter_in_another_store(
    empty_postgres_url: str, store: EventStore
) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    other = await open_store(empty_postgres_url)
    try:
        await store.backend.wait_for_events(session.id, after=0, max_wait=0.01)  # listener up

        async def append_later() -> None:
            await asyncio.sleep(0.05)
            await other.append(session.id, _text("from elsewhere"), expected_version=0)

        task = asyncio.create_task(append_later())
        started = time.perf_counter()
        await store.backend.wait_for_events(session.id, after=0, max_wait=10)
        assert time.perf_counter() - started < POLL_INTERVAL
        await task
    finally:
        await other.aclose()


async def test_sql_postgres_concurrent_appends_keep_seq_gap_free(
    empty_postgres_url: str, store: EventStore
) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    others = [await open_store(empty_postgres_url) for _ in range(3)]
    try:
        await asyncio.gather(*(
            s.append(session.id, [_text(f"{n}-{i}"), _text(f"{n}-{i}b")], expected_version=None)
            for n, s in enumerate(others) for i in range(10)
        ))
        seqs = [e.seq for e in await store.read(session.id)]
        assert seqs == list(range(1, 61))
    finally:
        for s in others:
            await s.aclose()
