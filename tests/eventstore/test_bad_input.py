"""Bad input: refused with the store's own errors, naming what is wrong, and changing nothing."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from _evs_support import StoreFactory, delta_event, full_dump, text_event

from eventstore import (
    Content,
    CorruptEventError,
    Event,
    EventStore,
    EventStoreError,
    FunctionCall,
    InvalidEventError,
    Part,
    StoreUsageError,
)

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

APP = "app"
USER = "u"
MIB = 1 << 20


async def _populated(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s", state={"k": 1})
    await store.append("s", [text_event(id="e2"), delta_event({"user:p": 2}, id="e3")],
                       expected_version=1)
    await store.save_artifact("s", "a.txt", b"x", mime_type="text/plain")


async def _corrupt(factory: StoreFactory, store: EventStore, sid: str, seq: int,
                   payload: bytes) -> None:
    """Overwrite a stored payload behind the store's back, as disk damage or a bad import would."""
    if factory.name == "memory":
        events = store.backend._sessions[sid].events  # type: ignore[attr-defined]
        events[seq - 1] = dataclasses.replace(events[seq - 1], payload=payload)
        return
    if factory.name == "sqlite":
        path = factory.url.split(":///", 1)[1]
        with sqlite3.connect(path) as conn:
            cursor = conn.execute(
                "UPDATE evs_events SET payload = ? WHERE session_id = ? AND seq = ?",
                (payload, sid, seq),
            )
            assert cursor.rowcount == 1
        conn.close()
        return
    import asyncpg

    conn = await asyncpg.connect(factory.url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        status = await conn.execute(
            "UPDATE evs_events SET payload = $1 WHERE session_id = $2 AND seq = $3",
            payload, sid, seq,
        )
        assert status == "UPDATE 1"
    finally:
        await conn.close()


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"\x00garbage\xff", id="not-json"),
        pytest.param(b'{"author": "a"}', id="truncated-object"),
        pytest.param(b"[]", id="json-array"),
    ],
)
async def test_corrupt_row_raises_corrupt_event_error_naming_session_and_seq(
    store_factory: StoreFactory, payload: bytes
) -> None:
    store = await store_factory()
    await _populated(store)
    await _corrupt(store_factory, store, "s", 2, payload)
    reads: list[Callable[[], Awaitable[Any]]] = [
        lambda: store.get_session("s"),
        lambda: store.read("s"),
        lambda: store.read("s", after=1, upto=2),
        lambda: store.read("s", backwards=True),
        lambda: store.read_mappings("s"),
        lambda: store.read_mappings("s", compact=True, backwards=True),
        lambda: store.read_converted("s", len, compact=True),
        lambda: store.state("s"),
        lambda: store.session_state_fold("s"),
    ]
    for read in reads:
        with pytest.raises(CorruptEventError) as info:
            await read()
        assert (info.value.session_id, info.value.seq) == ("s", 2)
        assert "'s'" in str(info.value)
        assert "Event 2" in str(info.value)
    # Rows around the damaged one stay readable: a reader can narrow down the damage.
    assert [e.seq for e in await store.read("s", after=2)] == [3]
    assert [e.seq for e in await store.read("s", upto=1)] == [1]


# -- refused events ------------------------------------------------------------------------------


def _bad_state(value: Any) -> Event:
    return delta_event({"fine": 1, "bad": value}, id="bad-event")


BAD_BATCHES = [
    pytest.param(lambda: [Event(author=5, id="bad-event")], "bad-event", None,  # type: ignore[arg-type]
                 id="author-not-str"),
    pytest.param(lambda: [Event(author="", id="bad-event")], "bad-event", None, id="author-empty"),
    pytest.param(lambda: [text_event(id="ok"), {"author": "a"}], None, None, id="dict-in-batch"),
    pytest.param(lambda: [text_event(id="ok"), "text"], None, None, id="str-in-batch"),
    pytest.param(lambda: [text_event(id="ok"), None], None, None, id="none-in-batch"),
    pytest.param(lambda: [Event(author="a", id="bad-event", partial=True)], "bad-event", None,
                 id="partial"),
    pytest.param(lambda: [_bad_state(float("nan"))], "bad-event", "bad", id="state-nan"),
    pytest.param(lambda: [_bad_state(float("inf"))], "bad-event", "bad", id="state-inf"),
    pytest.param(lambda: [_bad_state({1, 2})], "bad-event", "bad", id="state-set"),
    pytest.param(lambda: [_bad_state(object())], "bad-event", "bad", id="state-object"),
    pytest.param(lambda: [_bad_state({"n": {2: "x"}})], "bad-event", "bad",
                 id="state-nested-int-key"),
    pytest.param(lambda: [_bad_state([1, float("nan")])], "bad-event", "bad",
                 id="state-nan-in-list"),
    pytest.param(lambda: [_bad_state(1 << 64)], "bad-event", "bad", id="state-huge-int"),
    pytest.param(lambda: [_bad_state("x" * (MIB + 1))], "bad-event", "bad",
                 id="state-value-over-1-mib"),
    pytest.param(lambda: [_bad_state(["y" * 1000] * 1100)], "bad-event", "bad",
                 id="state-list-over-1-mib"),
    pytest.param(lambda: [delta_event({1: "x"}, id="bad-event")],  # type: ignore[dict-item]
                 "bad-event", None,
                 id="state-int-key"),
    pytest.param(lambda: [delta_event({"": "x"}, id="bad-event")], "bad-event", None,
                 id="state-empty-key"),
    pytest.param(lambda: [Event(author="a", id="bad-event",
                                custom_metadata={"x": float("nan")})], "bad-event", None,
                 id="metadata-nan"),
    pytest.param(lambda: [Event(author="a", id="bad-event", content=Content(role="model", parts=(
        Part(function_call=FunctionCall(id="c", name="f", args={"x": {1, 2}})),)))],
                 "bad-event", None, id="args-set"),
    pytest.param(lambda: [Event(author="a", id="bad-event", timestamp="now")],  # type: ignore[arg-type]
                 "bad-event", None, id="timestamp-str"),
    pytest.param(lambda: [Event(author="a", id="bad-event",
                                content=Content(role="robot"))],  # type: ignore[arg-type]
                 "bad-event", None, id="bad-role"),
]


@pytest.mark.parametrize(("batch", "event_id", "key"), BAD_BATCHES)
async def test_append_refuses_bad_events_and_changes_nothing(
    store: EventStore, batch: Callable[[], list[Any]], event_id: str | None, key: str | None
) -> None:
    await _populated(store)
    before = await full_dump(store)
    with pytest.raises(InvalidEventError) as info:
        await store.append("s", [text_event(id="first-ok"), *batch()], expected_version=3)
    if event_id is not None:
        assert info.value.event_id == event_id
        assert repr(event_id) in str(info.value)
    if key is not None:
        assert info.value.key == key
        assert repr(key) in str(info.value)
    assert await full_dump(store) == before


async def test_append_refuses_empty_batch(store: EventStore) -> None:
    await _populated(store)
    with pytest.raises(InvalidEventError, match="at least one"):
        await store.append("s", [], expected_version=3)
    assert await store.version("s") == 3


async def test_state_value_of_exactly_1_mib_is_accepted(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    value = "x" * (MIB - 2)  # the encoded JSON string adds two quotes
    await store.append("s", delta_event({"big": value}), expected_version=0)
    assert (await store.state("s"))["big"] == value


@pytest.mark.parametrize(
    "expected_version",
    [
        pytest.param(-1, id="negative"),
        pytest.param("3", id="str"),
        pytest.param(3.0, id="float"),
    ],
)
async def test_append_refuses_bad_expected_version(store: EventStore,
                                                   expected_version: Any) -> None:
    await _populated(store)
    before = await full_dump(store)
    with pytest.raises(StoreUsageError, match="expected_version"):
        await store.append("s", text_event(), expected_version=expected_version)
    assert await full_dump(store) == before


@pytest.mark.parametrize(
    "state",
    [
        pytest.param({"a": float("nan")}, id="nan"),
        pytest.param({"a": {1, 2}}, id="set"),
        pytest.param({2: "x"}, id="int-key"),
        pytest.param({"a": "x" * (MIB + 10)}, id="oversized"),
    ],
)
async def test_create_session_refuses_bad_state_and_creates_nothing(
    store: EventStore, state: dict[Any, Any]
) -> None:
    await _populated(store)
    before = await full_dump(store)
    with pytest.raises(InvalidEventError):
        await store.create_session(app_name=APP, user_id=USER, session_id="new", state=state)
    assert await full_dump(store) == before


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"app_name": "", "user_id": USER}, id="empty-app"),
        pytest.param({"app_name": APP, "user_id": None}, id="none-user"),
        pytest.param({"app_name": APP, "user_id": USER, "session_id": ""}, id="empty-session-id"),
        pytest.param({"app_name": APP, "user_id": USER, "session_id": "x" * 256},
                     id="session-id-too-long"),
        pytest.param({"app_name": APP, "user_id": USER, "session_id": 7}, id="int-session-id"),
    ],
)
async def test_create_session_refuses_bad_identity(store: EventStore,
                                                   kwargs: dict[str, Any]) -> None:
    await _populated(store)
    before = await full_dump(store)
    with pytest.raises(StoreUsageError):
        await store.create_session(**kwargs)
    assert await full_dump(store) == before


@pytest.mark.parametrize(
    ("filename", "data"),
    [
        pytest.param("", b"x", id="empty-filename"),
        pytest.param("f.txt", "text", id="str-data"),
        pytest.param(None, b"x", id="none-filename"),
        pytest.param("f" * 513, b"x", id="filename-too-long"),
    ],
)
async def test_save_artifact_refuses_bad_input(store: EventStore, filename: Any,
                                               data: Any) -> None:
    await _populated(store)
    before = await full_dump(store)
    with pytest.raises(StoreUsageError):
        await store.save_artifact("s", filename, data, mime_type="text/plain")
    assert await full_dump(store) == before


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(text_event(id="i" * 300), id="long-event-id"),
        pytest.param(text_event(id="nul\x00id"), id="nul-in-event-id"),
        pytest.param(Event(author="a" * 300, id="long-author"), id="long-author"),
        pytest.param(Event(author="nul\x00author", id="nul-author"), id="nul-in-author"),
        pytest.param(Event(author="a", id="long-inv", invocation_id="v" * 1000),
                     id="long-invocation-id"),
        pytest.param(text_event("nul\x00text", id="nul-text"), id="nul-in-text"),
        pytest.param(text_event("\ud800", id="lone-surrogate"), id="lone-surrogate"),
    ],
)
async def test_odd_values_round_trip_or_raise_store_errors(store: EventStore,
                                                           event: Event) -> None:
    """Whatever the database's column types, a driver exception never escapes."""
    await _populated(store)
    before = await full_dump(store)
    try:
        stored = await store.append("s", event, expected_version=3)
    except EventStoreError:
        assert await full_dump(store) == before
        return
    assert await store.read("s", after=3) == stored
