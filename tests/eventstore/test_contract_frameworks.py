"""The backend contract, part three: the store APIs framework adapters use (ADK, OpenAI Agents),
on every backend — reads bounded by timestamp, sessions by last update with state, shared state
without a session, artifacts addressed by (app, user, session or none) with metadata, delete."""

from __future__ import annotations

import gc

import orjson
import pytest
from _evs_support import StoreFactory, delta_event, text_event

from eventstore import (
    ArtifactNotFoundError,
    Event,
    EventActions,
    EventStore,
    SessionNotFoundError,
    StoreUsageError,
)
from eventstore._codec import encode_event
from eventstore._stored import encode_compact

APP = "app"


async def test_get_session_since_bounds_events_by_timestamp(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id="u", session_id="s")
    await store.append(
        "s", [text_event(f"m{i}", id=f"e{i}", timestamp=100.0 + i) for i in range(1, 7)],
        expected_version=0,
    )
    since = await store.get_session("s", since=103.0)
    assert [e.id for e in since.events] == ["e3", "e4", "e5", "e6"]
    assert [e.seq for e in since.events] == [3, 4, 5, 6]
    assert since.version == 6
    both = await store.get_session("s", since=103.0, last=2)
    assert [e.id for e in both.events] == ["e5", "e6"]
    assert (await store.get_session("s", since=103.0, last=0)).events == []
    # Asking for more of the newest than the bound keeps: all of those, not fewer.
    more = await store.get_session("s", since=105.0, last=3)
    assert [e.id for e in more.events] == ["e5", "e6"]
    assert [m["id"] for m in await store.read_mappings(
        "s", since=105.0, backwards=True, limit=3)] == ["e6", "e5"]
    assert (await store.get_session("s", since=1000.0)).events == []
    assert [e.id for e in (await store.get_session("s", since=0.0, after=4)).events] == [
        "e5", "e6"
    ]
    with pytest.raises(StoreUsageError, match="since"):
        await store.get_session("s", since=float("nan"))
    with pytest.raises(SessionNotFoundError):
        await store.get_session("nope", since=1.0)


async def test_get_session_since_follows_seq_not_clock(store: EventStore) -> None:
    # Timestamps need not grow with seq (events from several clocks): the bound filters, the
    # order stays the log's.
    await store.create_session(app_name=APP, user_id="u", session_id="s")
    stamps = [5.0, 1.0, 9.0, 3.0, 7.0]
    await store.append(
        "s", [text_event(id=f"e{i}", timestamp=t) for i, t in enumerate(stamps)],
        expected_version=0,
    )
    got = await store.get_session("s", since=4.0)
    assert [e.id for e in got.events] == ["e0", "e2", "e4"]
    assert [e.id for e in (await store.get_session("s", since=4.0, last=2)).events] == [
        "e2", "e4"
    ]


async def test_list_sessions_by_update_orders_and_folds_state(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id="bob", session_id="b1", created_at=10.0)
    await store.create_session(app_name=APP, user_id="amy", session_id="a1", created_at=20.0)
    await store.create_session(app_name=APP, user_id="amy", session_id="a2", created_at=5.0)
    await store.create_session(app_name="other", user_id="amy", session_id="o1")
    await store.append("b1", delta_event({"k": "b", "user:name": "Bob", "app:v": 1},
                                         timestamp=30.0), expected_version=0)
    await store.append("a2", delta_event({"k": "a2", "user:name": "Amy"}, timestamp=25.0),
                       expected_version=0)
    listed = await store.list_sessions_by_update(app_name=APP)
    # a1: created 20, no events; a2: updated 25; b1: updated 30.
    assert [s.id for s in listed] == ["a1", "a2", "b1"]
    assert [s.updated_at for s in listed] == [20.0, 25.0, 30.0]
    assert [s.events for s in listed] == [[], [], []]
    by_id = {s.id: s for s in listed}
    assert by_id["a1"].state == {"user:name": "Amy", "app:v": 1}
    assert by_id["a2"].state == {"k": "a2", "user:name": "Amy", "app:v": 1}
    assert by_id["b1"].state == {"k": "b", "user:name": "Bob", "app:v": 1}
    for session in listed:
        assert session.state == await store.state(session.id)
    mine = await store.list_sessions_by_update(app_name=APP, user_id="amy")
    assert [s.id for s in mine] == ["a1", "a2"]
    assert await store.list_sessions_by_update(app_name="none") == []


async def test_list_sessions_by_update_ties_break_by_user_then_id(store: EventStore) -> None:
    for sid, user in [("z", "u1"), ("y", "u2"), ("x", "u1")]:
        await store.create_session(app_name=APP, user_id=user, session_id=sid, created_at=1.0)
    assert [s.id for s in await store.list_sessions_by_update(app_name=APP)] == ["x", "z", "y"]


async def test_list_sessions_by_update_state_equals_full_replay_past_snapshots(
    store_factory: StoreFactory,
) -> None:
    store = await store_factory(snapshot_interval=3)
    for sid in ("s1", "s2"):
        await store.create_session(app_name=APP, user_id="u", session_id=sid)
        for i in range(8):
            await store.append(sid, delta_event({f"{sid}-{i % 3}": i}), expected_version=None)
        await store.state(sid)  # leaves a snapshot behind on the way
        await store.append(sid, delta_event({"after": sid, "s1-0": None}),
                           expected_version=None)
    listed = await store.list_sessions_by_update(app_name=APP)
    for session in listed:
        assert session.state == await store.session_state_fold(session.id)
    await store.rebuild_snapshots()
    assert [s.state for s in await store.list_sessions_by_update(app_name=APP)] == [
        s.state for s in listed
    ]


async def test_shared_state_reads_user_and_app_keys_without_a_session(
    store: EventStore,
) -> None:
    assert await store.shared_state(app_name=APP, user_id="amy") == {}
    await store.create_session(app_name=APP, user_id="amy", session_id="a")
    await store.create_session(app_name=APP, user_id="bob", session_id="b")
    await store.append("a", delta_event({"user:x": 1, "app:y": 2, "s": 3}), expected_version=0)
    await store.append("b", delta_event({"user:x": 9, "user:none": None, "user:gone": 5}),
                       expected_version=0)
    await store.append("b", Event(author="agent", actions=EventActions(
        state_deletions=("user:gone",))), expected_version=1)
    assert await store.shared_state(app_name=APP, user_id="amy") == {"user:x": 1, "app:y": 2}
    # None is a value (as in ADK); a deletion removes the key.
    assert await store.shared_state(app_name=APP, user_id="bob") == {
        "user:x": 9, "user:none": None, "app:y": 2,
    }
    assert await store.shared_state(app_name=APP) == {"app:y": 2}
    with pytest.raises(StoreUsageError, match="app_name"):
        await store.shared_state(app_name="")


async def test_deleting_a_session_keeps_the_shared_state_it_wrote(store: EventStore) -> None:
    # user:/app: state is its scope's own stream: a deleted session's deltas stay, as in ADK's
    # own services.
    await store.create_session(app_name=APP, user_id="amy", session_id="a")
    await store.create_session(app_name=APP, user_id="amy", session_id="keep")
    await store.append("a", delta_event({"user:x": 1, "app:y": 2}), expected_version=0)
    await store.append("keep", delta_event({"user:z": 3}), expected_version=0)
    await store.delete_session("a")
    assert await store.shared_state(app_name=APP, user_id="amy") == {
        "user:x": 1, "app:y": 2, "user:z": 3}


async def test_user_artifacts_without_a_session_version_metadata_delete(
    store: EventStore,
) -> None:
    scope = {"app_name": APP, "user_id": "amy"}
    assert await store.save_artifact(None, "cv.pdf", b"v0", mime_type="application/pdf",
                                     metadata={"pages": 1}, **scope) == 0
    assert await store.save_artifact(None, "cv.pdf", b"v1", mime_type="application/pdf",
                                     **scope) == 1
    latest = await store.load_artifact(None, "cv.pdf", **scope)
    assert (latest.version, latest.data, latest.metadata) == (1, b"v1", {})
    first = await store.load_artifact(None, "cv.pdf", version=0, **scope)
    assert (first.data, first.metadata) == (b"v0", {"pages": 1})
    versions = await store.artifact_versions(None, "cv.pdf", **scope)
    assert [(v.version, v.mime_type, v.metadata) for v in versions] == [
        (0, "application/pdf", {"pages": 1}), (1, "application/pdf", {})
    ]
    # Visible from any session of the user, as the user's artifacts.
    await store.create_session(app_name=APP, user_id="amy", session_id="s")
    assert await store.list_artifacts("s") == {"cv.pdf": [0, 1]}
    assert await store.list_artifacts(None, **scope) == {"cv.pdf": [0, 1]}
    assert await store.list_artifacts(None, app_name=APP, user_id="bob") == {}
    assert await store.delete_artifact(None, "cv.pdf", **scope) == 2
    assert await store.delete_artifact(None, "cv.pdf", **scope) == 0
    assert await store.artifact_versions(None, "cv.pdf", **scope) == []
    with pytest.raises(ArtifactNotFoundError, match="user's artifacts"):
        await store.load_artifact(None, "cv.pdf", **scope)
    assert await store.save_artifact(None, "cv.pdf", b"again", mime_type="text/plain",
                                     **scope) == 0


async def test_session_artifacts_addressed_by_app_user_session(store: EventStore) -> None:
    # No stored session is needed when app and user are named (what framework services do).
    scope = {"app_name": APP, "user_id": "amy"}
    await store.save_artifact("ext", "a.txt", b"1", mime_type="text/plain", **scope)
    await store.save_artifact("ext", "user:shared.txt", b"2", mime_type="text/plain", **scope)
    await store.save_artifact("other", "b.txt", b"3", mime_type="text/plain", **scope)
    assert await store.list_artifacts("ext", **scope) == {"a.txt": [0], "user:shared.txt": [0]}
    assert await store.list_artifacts(None, **scope) == {"user:shared.txt": [0]}
    assert (await store.load_artifact("other", "user:shared.txt", **scope)).data == b"2"
    assert await store.delete_artifact("ext", "a.txt", **scope) == 1
    assert await store.list_artifacts("ext", **scope) == {"user:shared.txt": [0]}
    assert await store.list_artifacts("other", **scope) == {"b.txt": [0], "user:shared.txt": [0]}


async def test_artifact_scope_and_metadata_misuse(store: EventStore) -> None:
    with pytest.raises(StoreUsageError, match="scope"):
        await store.save_artifact(None, "a", b"", mime_type="text/plain")
    with pytest.raises(StoreUsageError, match="together"):
        await store.load_artifact("s", "a", app_name=APP)
    with pytest.raises(StoreUsageError, match="JSON"):
        await store.save_artifact(None, "a", b"", mime_type="t", app_name=APP, user_id="u",
                                  metadata={"x": object()})
    with pytest.raises(StoreUsageError, match="filenames"):
        await store.delete_artifact(None, "", app_name=APP, user_id="u")
    assert await store.list_artifacts(None, app_name=APP, user_id="u") == {}


async def test_read_mappings_equal_read_as_plain_json(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id="u", session_id="s")
    await store.append(
        "s", [text_event(f"m{i}", id=f"e{i}", timestamp=10.0 + i) for i in range(1, 6)],
        expected_version=0,
    )
    events = await store.read("s")
    mappings = await store.read_mappings("s")
    assert [m["seq"] for m in mappings] == [1, 2, 3, 4, 5]
    assert mappings == [{**orjson.loads(encode_event(e)), "seq": e.seq} for e in events]
    assert [m["id"] for m in await store.read_mappings("s", backwards=True, limit=2)] == [
        "e5", "e4"
    ]
    assert [m["id"] for m in await store.read_mappings("s", since=13.0)] == ["e3", "e4", "e5"]
    assert [m["id"] for m in await store.read_mappings("s", since=12.0, backwards=True,
                                                       limit=2)] == ["e5", "e4"]
    assert [m["id"] for m in await store.read_mappings("s", since=12.0, limit=2)] == [
        "e2", "e3"
    ]
    assert [m["id"] for m in await store.read_mappings("s", since=12.0, after=3, upto=4,
                                                       backwards=True, limit=5)] == ["e4"]
    with pytest.raises(SessionNotFoundError):
        await store.read_mappings("nope")


async def test_read_mappings_compact_is_the_stored_encoding_with_the_envelope(
    store: EventStore,
) -> None:
    await store.create_session(app_name=APP, user_id="u", session_id="s")
    await store.append(
        "s", [text_event(f"m{i}", id=f"e{i}", timestamp=10.0 + i) for i in range(1, 4)],
        expected_version=0,
    )
    events = await store.read("s")
    compact = await store.read_mappings("s", compact=True)
    assert compact == [
        {**orjson.loads(encode_compact(e)), "id": e.id, "author": e.author,
         "invocation_id": e.invocation_id, "timestamp": e.timestamp, "seq": e.seq}
        for e in events
    ]
    assert compact[0]["c"]["p"] == [{"t": "m1"}]
    assert [m["seq"] for m in await store.read_mappings("s", since=12.0, backwards=True,
                                                       compact=True)] == [3, 2]
    with pytest.raises(StoreUsageError, match="compact"):
        await store.read_mappings("s", compact=1)


async def test_read_converted_is_read_mappings_with_each_mapping_converted(
    store: EventStore,
) -> None:
    await store.create_session(app_name=APP, user_id="u", session_id="s")
    # More events than the decoder's threshold for pausing the cyclic GC (256).
    await store.append(
        "s", [text_event(f"m{i}", id=f"e{i}", timestamp=10.0 + i) for i in range(1, 301)],
        expected_version=0,
    )

    def convert(mapping: dict[str, object]) -> tuple[object, object]:
        return mapping["seq"], mapping["id"]

    for options in ({}, {"compact": True}, {"backwards": True, "limit": 5},
                    {"since": 250.0, "compact": True}, {"since": 12.0, "backwards": True,
                                                        "limit": 3},
                    {"after": 10, "upto": 20}):
        expected = [convert(m) for m in await store.read_mappings("s", **options)]
        assert await store.read_converted("s", convert, **options) == expected
    assert len(await store.read_converted("s", convert)) == 300
    assert gc.isenabled()


async def test_read_converted_lets_what_convert_raises_through_unchanged(
    store: EventStore,
) -> None:
    await store.create_session(app_name=APP, user_id="u", session_id="s")
    await store.append("s", [text_event(f"m{i}", id=f"e{i}") for i in range(300)],
                       expected_version=0)

    class Refused(ValueError):
        pass

    def convert(mapping: dict[str, object]) -> object:
        if mapping["seq"] == 280:
            raise Refused("not this one")
        return mapping["seq"]

    # A ValueError of the caller's is not taken for a corrupt payload.
    with pytest.raises(Refused, match="not this one"):
        await store.read_converted("s", convert)
    assert gc.isenabled()  # the paused collector is running again after the error
    with pytest.raises(StoreUsageError, match="convert must be callable"):
        await store.read_converted("s", "seq")
    with pytest.raises(SessionNotFoundError):
        await store.read_converted("nope", convert)
