"""Limits checked once, before any backend: the same typed error on memory, SQLite and
PostgreSQL, and nothing stored changed.

Each case here once behaved differently per backend (SQLite stored a 10,000-character event id
that PostgreSQL refused with a StorageError; ``expected_version=2**70`` was a ConcurrencyError
on SQLite and a StorageError on PostgreSQL; a lone surrogate reached the driver) or raised a
bare Python error while the message was being built (an integer past 4,300 digits).
"""

from __future__ import annotations

import pytest
from _evs_support import full_dump, text_event

from eventstore import (
    Event,
    EventStore,
    InvalidEventError,
    SessionNotFoundError,
    StoreUsageError,
)

APP = "app"
USER = "u"
LONG = "x" * 10_000


async def _one_event_session(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    await store.append("s", text_event("hello", id="e1"), expected_version=0)


@pytest.mark.parametrize(
    ("event", "named"),
    [
        pytest.param(Event(author="a", id=LONG), "id has 10000 characters", id="long-id"),
        pytest.param(Event(author=LONG, id="e2"), "author has 10000 characters", id="long-author"),
        pytest.param(
            Event(author="a", id="e2", invocation_id=LONG),
            "invocation_id has 10000 characters",
            id="long-invocation",
        ),
        pytest.param(Event(author="a\ud800", id="e2"), "author", id="surrogate-author"),
        pytest.param(Event(author="a", id="e\udfff"), "lone surrogate", id="surrogate-id"),
        pytest.param(
            Event(author="a", id="e2", invocation_id="\ud83d"), "invocation_id",
            id="surrogate-invocation",
        ),
    ],
)
async def test_envelope_strings_are_refused_alike(
    store: EventStore, event: Event, named: str
) -> None:
    await _one_event_session(store)
    before = await full_dump(store)
    with pytest.raises(InvalidEventError, match=named):
        await store.append("s", event, expected_version=1)
    assert await full_dump(store) == before


async def test_an_id_of_the_largest_stored_length_is_kept(store: EventStore) -> None:
    await _one_event_session(store)
    [stored] = await store.append(
        "s", Event(author="b" * 255, id="i" * 255, invocation_id="v" * 255), expected_version=1
    )
    [read] = await store.read("s", after=1)
    assert (read.id, read.author, read.invocation_id) == ("i" * 255, "b" * 255, "v" * 255)
    assert read == stored


@pytest.mark.parametrize("version", [2**31, 2**70, -1])
async def test_expected_version_outside_a_seq_is_a_usage_error(
    store: EventStore, version: int
) -> None:
    await _one_event_session(store)
    before = await full_dump(store)
    with pytest.raises(StoreUsageError, match="expected_version must be an int between 0 and"):
        await store.append("s", text_event("x", id="e2"), expected_version=version)
    assert await full_dump(store) == before


async def test_a_huge_integer_is_refused_with_a_typed_error(store: EventStore) -> None:
    await _one_event_session(store)
    huge = 10**5000
    with pytest.raises(InvalidEventError, match="integer of about 5,001 digits"):
        await store.append(
            "s", Event(author="a", id="e2", custom_metadata={"n": huge}), expected_version=1
        )
    with pytest.raises(StoreUsageError, match="integer of about 5,001 digits"):
        await store.append("s", text_event("x", id="e3"), expected_version=huge)
    with pytest.raises(InvalidEventError, match="non-string key <an integer of about"):
        await store.append(
            "s", Event(author="a", id="e4", custom_metadata={"m": {huge: 1}}), expected_version=1
        )


async def test_surrogate_session_ids(store: EventStore) -> None:
    await _one_event_session(store)
    with pytest.raises(StoreUsageError, match="lone surrogates"):
        await store.create_session(app_name=APP, user_id=USER, session_id="s\ud800")
    with pytest.raises(StoreUsageError, match="lone surrogates"):
        await store.create_session(app_name="a\udc00", user_id=USER)
    with pytest.raises(SessionNotFoundError):
        await store.session_info("s\ud800")
    with pytest.raises(SessionNotFoundError):
        await store.append("s\ud800", text_event("x", id="e2"), expected_version=1)
    with pytest.raises(SessionNotFoundError):
        await store.read("s\ud800")
    assert [e.id for e in await store.read("s")] == ["e1"]
