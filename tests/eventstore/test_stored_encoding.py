"""The stored encoding (schema version 2): compact, deterministic, lossless; version-1 rows
(the full event JSON) keep loading; a retry is judged on the envelope as well as the payload."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import orjson
import pytest
from _evs_support import StoreFactory, events
from hypothesis import given, settings

from eventstore import (
    CorruptEventError,
    DuplicateEventError,
    Event,
    EventStore,
    StoredEvent,
    open_store,
)
from eventstore._codec import encode_event
from eventstore._stored import (
    STORED_SCHEMA_VERSION,
    compact_mapping,
    decode_compact,
    encode_compact,
)
from eventstore.backends.protocol import NewEvent, new_event, written


def _decoded(event: Event, payload: bytes, seq: int = 3) -> Event:
    return decode_compact(payload, event_id=event.id, author=event.author,
                          invocation_id=event.invocation_id, timestamp=event.timestamp, seq=seq)


@settings(max_examples=150, deadline=None)
@given(events)
def test_stored_encoding_round_trips_any_event_deterministically(event: Event) -> None:
    payload = encode_compact(event)
    decoded = _decoded(event, payload)
    assert decoded == dataclasses.replace(event, seq=3)
    assert encode_compact(decoded) == payload
    # the same event rebuilt from its event JSON (other dict insertion order) encodes the same
    again = EventStore.decode(StoredEvent(
        session_id="s", seq=1, position=0, event_id=event.id, kind="message",
        invocation_id=event.invocation_id, author=event.author, timestamp=event.timestamp,
        shared_state=False, schema_version=1, payload=encode_event(event)))
    assert encode_compact(again) == payload
    assert len(payload) < len(encode_event(event))


@settings(max_examples=150, deadline=None)
@given(events)
def test_stored_encoding_expands_to_the_event_json_mapping(event: Event) -> None:
    # read_mappings (the framework adapters' fast path) sees what the event JSON holds
    expected = {**orjson.loads(encode_event(event)), "seq": 7}
    assert compact_mapping(encode_compact(event), event_id=event.id, author=event.author,
                           invocation_id=event.invocation_id, timestamp=event.timestamp,
                           seq=7) == expected


def test_stored_encoding_omits_defaults_and_the_envelope() -> None:
    assert encode_compact(Event(author="agent", invocation_id="inv", timestamp=5.0)) == b"{}"
    payload = orjson.loads(encode_compact(Event(author="a", turn_complete=True,
                                                custom_metadata={"k": False})))
    assert payload == {"t": True, "m": {"k": False}}  # the application's own values are kept


@pytest.mark.parametrize("payload", [
    pytest.param(b'{"author": "a"}', id="unknown-key"),
    pytest.param(b"[]", id="array"),
    pytest.param(b'{"c": {"r": "m", "p": [{"fc": ["id"]}]}}', id="short-call"),
    pytest.param(b'{"c": {"r": "x", "p": []}}', id="unknown-role"),
])
def test_stored_encoding_garbage_is_a_corrupt_event(payload: bytes) -> None:
    stored = StoredEvent(
        session_id="s", seq=4, position=0, event_id="e", kind="message", invocation_id="",
        author="a", timestamp=0.0, shared_state=False, schema_version=STORED_SCHEMA_VERSION,
        payload=payload,
    )
    with pytest.raises(CorruptEventError):
        EventStore.decode(stored)


async def test_stored_retry_with_another_envelope_is_a_duplicate(
    store_factory: StoreFactory,
) -> None:
    store = await store_factory()
    await store.create_session(app_name="app", user_id="u", session_id="s")
    event = Event(author="agent", id="e1", invocation_id="inv", timestamp=10.0)
    await store.append("s", event, expected_version=0)
    assert [e.seq for e in await store.append("s", event, expected_version=0)] == [1]
    for other in (dataclasses.replace(event, timestamp=11.0),
                  dataclasses.replace(event, author="someone"),
                  dataclasses.replace(event, invocation_id="inv2")):
        with pytest.raises(DuplicateEventError):
            await store.append("s", other, expected_version=None)
    assert [e.id for e in await store.read("s")] == ["e1"]


async def test_stored_version_1_rows_keep_loading(tmp_path: Path) -> None:
    # Rows are rewritten by hand on the SQLite file (the PostgreSQL decode path is the same code).
    path = str(tmp_path / "v1.db")
    store = await open_store(path, auto_upgrade=True)
    await store.create_session(app_name="app", user_id="u", session_id="s")
    old = [Event(author="agent", id=f"e{i}", custom_metadata={"i": i}) for i in range(3)]
    stored = await store.append("s", old, expected_version=0)
    await store.aclose()
    conn = sqlite3.connect(path)
    with conn:  # as the code before schema version 2 stored them: the full event JSON
        for event in old:
            conn.execute("UPDATE evs_events SET schema_version = 1, payload = ? "
                         "WHERE event_id = ?", (encode_event(event), event.id))
    conn.close()
    store = await open_store(path)
    assert await store.read("s") == stored
    # Mappings of old rows are upcast too; a converting read sees the same mappings.
    mappings = await store.read_mappings("s", compact=True)
    assert [m["m"] for m in mappings] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert await store.read_converted("s", lambda m: m["m"]["i"], compact=True) == [0, 1, 2]
    new = await store.append("s", Event(author="agent", id="e3"), expected_version=3)
    assert [e.seq for e in await store.read("s")] == [1, 2, 3, 4]
    assert (await store.read("s"))[3] == new[0]
    await store.aclose()


@pytest.mark.parametrize("signed", [False, True])
def test_stored_encoding_written_envelope_sets_every_field(signed: bool) -> None:
    """``written`` fills the envelope in without the dataclass ``__init__``: it must give what
    the keyword construction gives, every field included (a field added later and left out
    would be unset and fail here)."""
    _, new = EventStore._prepare(Event(author="agent", id="e1", invocation_id="inv"))
    chain, signature = bytes(range(32)), (b"s" * 32 if signed else None)
    got = written("s1", new, seq=3, position=7, chain_hash=chain, signature=signature)
    expected = StoredEvent(
        session_id="s1", seq=3, position=7, event_id="e1", kind=new.kind, invocation_id="inv",
        author="agent", timestamp=new.timestamp, shared_state=new.shared_state,
        schema_version=new.schema_version, payload=new.payload, chain_hash=chain,
        signature=signature,
    )
    assert got == expected
    for field in dataclasses.fields(StoredEvent):
        assert getattr(got, field.name) == getattr(expected, field.name), field.name


def test_new_event_fills_in_what_the_keyword_construction_does() -> None:
    """``new_event`` fills the fields in without the dataclass ``__init__``: every field must be
    set as the keyword construction sets it (a field added later and left out fails here)."""
    values = {"event_id": "e1", "kind": "message", "invocation_id": "inv", "author": "agent",
              "timestamp": 12.5, "shared_state": True, "schema_version": 2, "payload": b"{}",
              "app_delta": b'{"sd":{"app:a":1}}', "user_delta": None}
    got = new_event(*values.values())
    expected = NewEvent(**values)  # type: ignore[arg-type]
    assert got == expected
    assert [f.name for f in dataclasses.fields(NewEvent)] == list(values)
    for field in dataclasses.fields(NewEvent):
        assert getattr(got, field.name) == getattr(expected, field.name), field.name
