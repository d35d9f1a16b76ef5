"""Arguments are checked once, in the façade: the same answer for a bad argument on every
backend, and no driver exception ever escapes untranslated."""

from __future__ import annotations

import inspect
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from _evs_support import StoreFactory, delta_event, text_event

from eventstore import EventStore, EventStoreError, InvalidEventError, StoreUsageError

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

HUGE = 2**70

Call = Callable[[EventStore], Awaitable[Any]]


async def _first(iterator: Any) -> Any:
    async for item in iterator:
        return item
    return None


async def _populated(store: EventStore) -> None:
    await store.create_session(app_name="app", user_id="u", session_id="s", state={"k": 1})
    await store.append("s", [text_event(id="e2"), delta_event({"user:p": 2}, id="e3")],
                       expected_version=1)
    await store.save_artifact("s", "a.txt", b"x", mime_type="text/plain")


BAD_ARGUMENTS: list[Any] = [
    pytest.param(lambda s: s.read("s", limit=2.5), id="read-limit-float"),
    pytest.param(lambda s: s.read("s", limit=-1), id="read-limit-negative"),
    pytest.param(lambda s: s.read("s", after="3"), id="read-after-str"),
    pytest.param(lambda s: s.read("s", upto=True), id="read-upto-bool"),
    pytest.param(lambda s: s.read("s", backwards="yes"), id="read-backwards-str"),
    pytest.param(lambda s: s.read(5), id="read-session-id-int"),
    pytest.param(lambda s: s.list_sessions(after=5), id="list-after-int"),
    pytest.param(lambda s: s.list_sessions(limit="10"), id="list-limit-str"),
    pytest.param(lambda s: s.list_sessions(limit=HUGE), id="list-limit-huge"),
    pytest.param(lambda s: s.list_sessions(app_name=3), id="list-app-int"),
    pytest.param(lambda s: s.get_session("s", last=-1), id="get-last-negative"),
    pytest.param(lambda s: s.get_session("s", last=1.5), id="get-last-float"),
    pytest.param(lambda s: s.get_session("s", after="1"), id="get-after-str"),
    pytest.param(lambda s: s.get_session("s", user_id=7), id="get-user-int"),
    pytest.param(lambda s: s.session_info(None), id="info-session-id-none"),
    pytest.param(lambda s: s.version(b"s"), id="version-session-id-bytes"),
    pytest.param(lambda s: s.delete_session(1), id="delete-session-id-int"),
    pytest.param(lambda s: s.load_artifact("s", "a.txt", version=HUGE), id="load-version-huge"),
    pytest.param(lambda s: s.load_artifact("s", "a.txt", version=-1), id="load-version-negative"),
    pytest.param(lambda s: s.load_artifact("s", "a.txt", version="0"), id="load-version-str"),
    pytest.param(lambda s: s.save_artifact("s", "b", b"x", mime_type=None), id="save-mime-none"),
    pytest.param(lambda s: s.save_artifact("s", "b", b"x", mime_type=""), id="save-mime-empty"),
    pytest.param(lambda s: s.state("s", at="1"), id="state-at-str"),
    pytest.param(lambda s: s.state("s", at=1.0), id="state-at-float"),
    pytest.param(lambda s: s.state("s", at=HUGE), id="state-at-huge"),
    pytest.param(lambda s: s.session_state_fold("s", at="x"), id="fold-at-str"),
    pytest.param(lambda s: s.append("s", text_event(), expected_version=HUGE * 1.0),
                 id="append-expected-float"),
    pytest.param(lambda s: s.create_session(app_name="a", user_id="u", state=[("k", 1)]),
                 id="create-state-list"),
    pytest.param(lambda s: s.create_session(app_name=None, user_id="u"), id="create-app-none"),
    pytest.param(lambda s: _first(s.iter_backwards("s", page_size=0)), id="iter-page-zero"),
    pytest.param(lambda s: _first(s.iter_backwards("s", upto="2")), id="iter-upto-str"),
    pytest.param(lambda s: _first(s.subscribe("s", poll_interval=0)), id="subscribe-poll-zero"),
    pytest.param(lambda s: _first(s.subscribe("s", after="1")), id="subscribe-after-str"),
]


@pytest.mark.parametrize("call", BAD_ARGUMENTS)
async def test_arguments_bad_one_is_store_usage_error_on_every_backend(
    store: EventStore, call: Call
) -> None:
    await _populated(store)
    with pytest.raises(StoreUsageError):
        await call(store)


async def test_arguments_append_of_a_non_iterable_is_invalid_event(store: EventStore) -> None:
    await _populated(store)
    with pytest.raises(InvalidEventError, match="iterable of Events"):
        await store.append("s", 5, expected_version=None)  # type: ignore[arg-type]


async def test_arguments_huge_and_negative_bounds_are_clamped(store: EventStore) -> None:
    await _populated(store)
    every = await store.read("s")
    assert len(every) == 3
    assert await store.read("s", limit=HUGE) == every
    assert await store.read("s", upto=HUGE) == every
    assert await store.read("s", after=-HUGE) == every
    assert await store.read("s", after=HUGE) == []
    assert await store.read("s", upto=-HUGE) == []
    assert await store.read("s", backwards=True, limit=HUGE) == every[::-1]
    assert (await store.get_session("s", last=HUGE)).events == every
    assert (await store.get_session("s", after=HUGE)).events == []
    assert [e.seq for e in await store.read("s", after=1, upto=HUGE, limit=HUGE)] == [2, 3]


# -- a store whose tables vanished: every method raises the store's error, caused by the driver's


def _method_calls() -> dict[str, Call]:
    return {
        "create_session": lambda s: s.create_session(app_name="app", user_id="u"),
        "get_session": lambda s: s.get_session("s"),
        "session_info": lambda s: s.session_info("s"),
        "list_sessions": lambda s: s.list_sessions(),
        "delete_session": lambda s: s.delete_session("s"),
        "append": lambda s: s.append("s", text_event(), expected_version=None),
        "read": lambda s: s.read("s"),
        "iter_backwards": lambda s: _first(s.iter_backwards("s")),
        "version": lambda s: s.version("s"),
        "subscribe": lambda s: _first(s.subscribe("s")),
        "state": lambda s: s.state("s"),
        "session_state_fold": lambda s: s.session_state_fold("s"),
        "rebuild_snapshots": lambda s: s.rebuild_snapshots(),
        "save_artifact": lambda s: s.save_artifact("s", "b", b"x", mime_type="text/plain"),
        "load_artifact": lambda s: s.load_artifact("s", "a.txt"),
        "list_artifacts": lambda s: s.list_artifacts("s"),
        "read_mappings": lambda s: s.read_mappings("s", since=0.0),
        "read_converted": lambda s: s.read_converted("s", len),
        "list_sessions_by_update": lambda s: s.list_sessions_by_update(app_name="app"),
        "list_sessions_newest": lambda s: s.list_sessions_newest(id_contains="s",
                                                                 updated_since=0.0),
        "shared_state": lambda s: s.shared_state(app_name="app", user_id="u"),
        "artifact_versions": lambda s: s.artifact_versions(
            None, "a.txt", app_name="app", user_id="u"
        ),
        "delete_artifact": lambda s: s.delete_artifact(None, "a.txt", app_name="app",
                                                       user_id="u"),
        "fork": lambda s: s.fork("s", at=1),
        "fork_links": lambda s: s.fork_links("s"),
        "load_cache": lambda s: s.load_cache("s", "items"),
        "save_cache": lambda s: s.save_cache("s", "items", 1, b"[]"),
        "prune": lambda s: s.prune(older_than=1, archive=None),
        "prune_by_policy": lambda s: s.prune_by_policy(archive=None),
        "set_retention": lambda s: s.set_retention(app_name="app", older_than=1),
        "retention_policies": lambda s: s.retention_policies(),
        "clear_retention": lambda s: s.clear_retention(),
        "compact": lambda s: s.compact("s", upto=1, summary="the start"),
        "read_compacted": lambda s: s.read_compacted("s"),
        "session_key": lambda s: s.session_key("s"),
        "import_session": lambda s: s.import_session(
            app_name="app", user_id="u", session_id="imported", created_at=None,
            pages=lambda: None),
        # Reads only on a keyed store (an unkeyed one has nothing to check): opened keyed below.
        "untrusted": lambda s: s.untrusted("s"),
    }


def test_arguments_dropped_table_calls_cover_every_method() -> None:
    public = {
        name for name, member in inspect.getmembers(EventStore)
        if not name.startswith("_") and (
            inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member)
        )
    }
    assert public - {"aclose"} == set(_method_calls())


_TABLES = ["evs_session_caches", "evs_shared_snapshots", "evs_snapshots", "evs_artifacts",
           "evs_events", "evs_sessions", "evs_retention_policies"]


async def _rename_tables(factory: StoreFactory, *, away: bool) -> type[BaseException]:
    """Make the tables vanish behind the store's back (renamed, so the test database can be
    put back for the next test)."""
    renames = [(t, f"{t}_gone") if away else (f"{t}_gone", t) for t in _TABLES]
    if factory.name == "sqlite":
        conn = sqlite3.connect(factory.url.split(":///", 1)[1])
        try:
            for old, new in renames:
                conn.execute(f"ALTER TABLE {old} RENAME TO {new}")
            conn.commit()
        finally:
            conn.close()
        return sqlite3.Error
    import asyncpg

    pg = await asyncpg.connect(factory.url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        for old, new in renames:
            await pg.execute(f"ALTER TABLE {old} RENAME TO {new}")
    finally:
        await pg.close()
    return asyncpg.PostgresError


@pytest.mark.parametrize("method", sorted(_method_calls()))
async def test_arguments_dropped_tables_raise_store_error_caused_by_the_driver(
    sql_factory: StoreFactory, method: str
) -> None:
    store = await sql_factory(signing_key=b"key" if method == "untrusted" else None)
    await _populated(store)
    driver_error = await _rename_tables(sql_factory, away=True)
    try:
        with pytest.raises(EventStoreError) as info:
            await _method_calls()[method](store)
        assert isinstance(info.value.__cause__, driver_error), repr(info.value.__cause__)
    finally:
        await _rename_tables(sql_factory, away=False)
