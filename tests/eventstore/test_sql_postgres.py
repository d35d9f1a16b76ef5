"""PostgreSQL-specific behaviour: error translation, corrupt rows, NOTIFY wake-ups."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

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
from eventstore.backends.postgres.base import POLL_INTERVAL

# slow: among the slowest modules of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = [pytest.mark.postgres, pytest.mark.slow]


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


async def _fetch(url: str, sql: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(_dsn(url))
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


_LISTENERS_SQL = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
    "AND query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()"
)


async def test_sql_postgres_tail_survives_its_listen_connection_being_killed(
    empty_postgres_url: str, store: EventStore
) -> None:
    session = await store.create_session(app_name="a", user_id="u")
    writers = [await open_store(empty_postgres_url) for _ in range(4)]
    per_writer = 50
    total = len(writers) * per_writer
    seen: list[int | None] = []
    a_quarter_seen = asyncio.Event()

    async def tail() -> None:
        async for event in store.subscribe(session.id, poll_interval=0.2):
            seen.append(event.seq)
            if len(seen) == total // 4:
                a_quarter_seen.set()
            if len(seen) == total:
                return

    async def write(n: int, writer: EventStore) -> None:
        for i in range(per_writer):
            await writer.append(session.id, _text(f"{n}-{i}"), expected_version=None)
            await asyncio.sleep(0.01)

    try:
        tail_task = asyncio.create_task(tail())
        writing = [asyncio.create_task(write(n, w)) for n, w in enumerate(writers)]
        async with asyncio.timeout(30):
            await a_quarter_seen.wait()
            listeners = [r["pid"] for r in await _fetch(empty_postgres_url, _LISTENERS_SQL)]
            assert len(listeners) == 1  # the tail's store listens on one connection
            killed = await _fetch(
                empty_postgres_url, "SELECT pg_terminate_backend($1)", listeners[0]
            )
            assert killed[0][0] is True
            assert not all(t.done() for t in writing), "the writers finished before the kill"
            await asyncio.gather(*writing)
            await tail_task
        assert seen == list(range(1, total + 1))
        # The tail listens again, on a new connection.
        async with asyncio.timeout(10):
            while not (relisten := await _fetch(empty_postgres_url, _LISTENERS_SQL)):
                await store.backend.wait_for_events(session.id, after=total, max_wait=0.05)
        assert [r["pid"] for r in relisten] != listeners
    finally:
        for w in writers:
            await w.aclose()


async def test_sql_postgres_lists_a_page_of_100k_sessions_by_index(
    empty_postgres_url: str, store: EventStore
) -> None:
    from eventstore.backends.sql.base import SESSION_SQL as _SESSION_SQL

    await _sql(
        empty_postgres_url,
        "INSERT INTO evs_sessions (session_id, given_id, app_name, user_id, created_at) "
        "SELECT 's' || lpad(i::text, 6, '0'), 's' || lpad(i::text, 6, '0'), 'app' || (i % 3), "
        "'user' || (i % 50), 0 "
        "FROM generate_series(0, 99999) AS i",
    )
    await _sql(empty_postgres_url, "ANALYZE evs_sessions")
    after = "s050000"
    for app_name, user_id in [(None, None), ("app1", None), ("app1", "user7")]:
        page = await store.list_sessions(app_name=app_name, user_id=user_id, after=after,
                                         limit=100)
        expected = [
            f"s{i:06d}" for i in range(50_001, 100_000)
            if (app_name is None or f"app{i % 3}" == app_name)
            and (user_id is None or f"user{i % 50}" == user_id)
        ][:100]
        assert [s.id for s in page.sessions] == expected, (app_name, user_id)
        where, params = ["s.session_id > $1"], [after]
        for column, value in (("app_name", app_name), ("user_id", user_id)):
            if value is not None:
                params.append(value)
                where.append(f"s.{column} = ${len(params)}")
        plan = "\n".join(
            r[0] for r in await _fetch(
                empty_postgres_url,
                f"EXPLAIN {_SESSION_SQL} WHERE {' AND '.join(where)} "
                f"ORDER BY s.session_id LIMIT 101",
                *params,
            )
        )
        assert "Seq Scan on evs_sessions" not in plan, plan


async def test_sql_postgres_an_event_never_sees_a_change_committed_after_it(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared-state change whose commit is held back while another session appends: the
    other session's state at that event is the same before and after the change commits."""
    from eventstore import EventActions
    from eventstore.backends.postgres import append as _postgres_append

    for sid in ("a", "b"):
        await store.create_session(app_name="app", user_id="u", session_id=sid)
    inserted, release = asyncio.Event(), asyncio.Event()
    insert = _postgres_append.insert

    async def held_insert(conn: object, session_id: str, *args: Any, **kwargs: Any) -> object:
        rows = await insert(conn, session_id, *args, **kwargs)
        if session_id == "a":  # rows written with their positions; the commit waits
            inserted.set()
            await release.wait()
        return rows

    monkeypatch.setattr(_postgres_append, "insert", held_insert)
    change = Event(author="x", actions=EventActions(state_delta={"app:x": "late"}))
    held = asyncio.create_task(store.append("a", change, expected_version=0))
    await asyncio.wait_for(inserted.wait(), 30)
    for n in (1, 2):
        event = Event(author="y", actions=EventActions(state_delta={"k": n}))
        await store.append("b", event, expected_version=n - 1)
    before = await store.state("b", at=1)
    release.set()
    await held
    assert before == {"k": 1}
    assert await store.state("b", at=1) == before
    assert await store.state("b") == {"k": 2, "app:x": "late"}


async def test_sql_postgres_appends_work_when_the_server_defaults_to_repeatable_read(
    empty_postgres_url: str,
) -> None:
    name = empty_postgres_url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(_dsn(empty_postgres_url))
    try:
        await admin.execute(
            f"ALTER DATABASE \"{name}\" SET default_transaction_isolation = 'repeatable read'"
        )
    finally:
        await admin.close()
    from eventstore import EventActions

    store = await open_store(empty_postgres_url, auto_upgrade=True)
    try:
        sids = [f"s{n}" for n in range(8)]
        for sid in sids:
            await store.create_session(app_name="app", user_id="u", session_id=sid)
        for round_no in range(3):
            await asyncio.gather(*(
                store.append(sid, Event(author="a", actions=EventActions(
                    state_delta={"app:last": f"{sid}-{round_no}"})), expected_version=round_no)
                for sid in sids
            ))
        rows = [row for sid in sids for row in await store._backend.read(
            sid, after=None, upto=None, backwards=False, limit=None)]
        assert sorted(r.position for r in rows) == list(range(1, 25))
    finally:
        await store.aclose()
