"""The backend contract, part one: sessions, appends and reads, on every backend (state,
artifacts, live tails and the lifecycle are in ``test_contract_state.py``)."""

from __future__ import annotations

import time

import pytest
from _evs_support import (
    call_event,
    delta_event,
    full_dump,
    response_event,
    text_event,
)

from eventstore import (
    ArtifactNotFoundError,
    ConcurrencyError,
    DuplicateEventError,
    Event,
    EventStore,
    InvalidEventError,
    SessionExistsError,
    SessionNotFoundError,
    SessionPage,
    StoreUsageError,
)

APP = "app"
USER = "alice"


async def _session_with(store: EventStore, n: int, *, sid: str = "s1") -> list[Event]:
    await store.create_session(app_name=APP, user_id=USER, session_id=sid)
    return await store.append(
        sid, [text_event(f"m{i}", id=f"e{i}") for i in range(1, n + 1)], expected_version=0
    )


def _seqs(events: list[Event]) -> list[int | None]:
    return [e.seq for e in events]


# -- sessions --------------------------------------------------------------------------------------


async def test_create_session_uses_given_id(store: EventStore) -> None:
    session = await store.create_session(app_name=APP, user_id=USER, session_id="given")
    assert (session.id, session.app_name, session.user_id) == ("given", APP, USER)
    assert session.version == 0
    assert session.events == []
    info = await store.session_info("given")
    assert (info.id, info.version, info.app_name, info.user_id) == ("given", 0, APP, USER)


async def test_create_session_generates_distinct_ids(store: EventStore) -> None:
    first = await store.create_session(app_name=APP, user_id=USER)
    second = await store.create_session(app_name=APP, user_id=USER)
    assert first.id
    assert second.id != first.id
    assert (await store.get_session(first.id)).id == first.id


async def test_create_session_duplicate_id_raises_and_keeps_original(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="dup", state={"k": 1})
    with pytest.raises(SessionExistsError) as info:
        await store.create_session(app_name=APP, user_id=USER, session_id="dup", state={"k": 2})
    assert info.value.session_id == "dup"
    assert "dup" in str(info.value)
    session = await store.get_session("dup")
    assert (session.app_name, session.user_id, session.state) == (APP, USER, {"k": 1})


async def test_create_session_initial_state_is_first_event(store: EventStore) -> None:
    session = await store.create_session(
        app_name=APP, user_id=USER, session_id="s", state={"a": 1, "temp:x": 2}
    )
    assert session.version == 1
    assert session.state == {"a": 1}
    stored = await store.get_session("s")
    assert stored.version == 1
    assert [e.actions.state_delta for e in stored.events] == [{"a": 1}]
    assert stored.events[0].author == "user"
    assert stored.events[0].seq == 1


async def test_create_session_only_temp_state_writes_no_event(store: EventStore) -> None:
    session = await store.create_session(
        app_name=APP, user_id=USER, session_id="s", state={"temp:x": 1}
    )
    assert session.version == 0
    assert await store.version("s") == 0


async def test_create_session_returns_shared_state_like_get_session(store: EventStore) -> None:
    await store.create_session(
        app_name=APP, user_id=USER, session_id="first", state={"app:theme": "dark", "user:n": 1}
    )
    created = await store.create_session(app_name=APP, user_id=USER, session_id="second")
    read = await store.get_session("second")
    assert read.state == {"app:theme": "dark", "user:n": 1}
    assert created.state == read.state


async def test_get_session_returns_state_and_events(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    await store.append(
        "s", [text_event("hi", id="e1"), delta_event({"x": 1}, id="e2")], expected_version=0
    )
    session = await store.get_session("s", app_name=APP, user_id=USER)
    assert session.version == 2
    assert session.state == {"x": 1}
    assert [e.id for e in session.events] == ["e1", "e2"]
    assert _seqs(session.events) == [1, 2]
    assert session.events[0].text() == "hi"
    assert session.updated_at == session.events[-1].timestamp


@pytest.mark.parametrize(
    ("last", "after", "expected"),
    [
        pytest.param(2, None, [4, 5], id="last-2"),
        pytest.param(0, None, [], id="last-0"),
        pytest.param(10, None, [1, 2, 3, 4, 5], id="last-more-than-stored"),
        pytest.param(None, 3, [4, 5], id="after-3"),
        pytest.param(None, 5, [], id="after-head"),
        pytest.param(3, 3, [4, 5], id="last-3-after-3"),
        pytest.param(1, 2, [5], id="last-1-after-2"),
    ],
)
async def test_get_session_last_and_after_select_events(
    store: EventStore, last: int | None, after: int | None, expected: list[int]
) -> None:
    await _session_with(store, 5)
    session = await store.get_session("s1", last=last, after=after)
    assert _seqs(session.events) == expected
    assert session.version == 5


@pytest.mark.parametrize(
    ("app", "user"),
    [pytest.param("other", None, id="other-app"), pytest.param(None, "bob", id="other-user")],
)
async def test_get_session_of_other_app_or_user_is_not_found(
    store: EventStore, app: str | None, user: str | None
) -> None:
    await _session_with(store, 1)
    with pytest.raises(SessionNotFoundError) as info:
        await store.get_session("s1", app_name=app, user_id=user)
    assert info.value.session_id == "s1"


async def test_get_session_missing_raises(store: EventStore) -> None:
    with pytest.raises(SessionNotFoundError, match="nope"):
        await store.get_session("nope")
    with pytest.raises(SessionNotFoundError):
        await store.version("nope")


async def test_list_sessions_filters_by_app_and_user(store: EventStore) -> None:
    for sid, app, user in [("a1", "A", "u1"), ("a2", "A", "u2"), ("b1", "B", "u1")]:
        await store.create_session(app_name=app, user_id=user, session_id=sid)
    await store.append("a1", text_event(), expected_version=0)

    def ids(page: SessionPage) -> list[str]:
        return [s.id for s in page.sessions]

    assert ids(await store.list_sessions()) == ["a1", "a2", "b1"]
    assert ids(await store.list_sessions(app_name="A")) == ["a1", "a2"]
    assert ids(await store.list_sessions(user_id="u1")) == ["a1", "b1"]
    assert ids(await store.list_sessions(app_name="A", user_id="u2")) == ["a2"]
    assert ids(await store.list_sessions(app_name="C")) == []
    page = await store.list_sessions(app_name="A")
    assert [s.version for s in page.sessions] == [1, 0]
    assert page.next_cursor is None


async def test_list_sessions_paginates_with_cursor(store: EventStore) -> None:
    expected = [f"s{i:02d}" for i in range(7)]
    for sid in reversed(expected):
        await store.create_session(app_name=APP, user_id=USER, session_id=sid)
    await store.create_session(app_name="elsewhere", user_id=USER, session_id="s03x")
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await store.list_sessions(app_name=APP, after=cursor, limit=3)
        pages += 1
        assert len(page.sessions) <= 3
        seen.extend(s.id for s in page.sessions)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == expected
    assert pages == 3


async def test_list_sessions_newest_pages_by_update_with_filters(store: EventStore) -> None:
    # (id, app, user, timestamp of its one event): two share a timestamp, the greater id first.
    sessions = [("old", "A", "u1", 1000.0), ("Mid-X", "A", "u2", 2000.0),
                ("b", "A", "u1", 3000.0), ("a", "A", "u1", 3000.0),
                ("new-x", "A", "u1", 4000.0), ("other", "B", "u1", 5000.0)]
    for sid, app, user, stamp in sessions:
        await store.create_session(app_name=app, user_id=user, session_id=sid)
        await store.append(sid, text_event(timestamp=stamp), expected_version=0)

    async def walk(limit: int, **filters: object) -> list[list[str]]:
        pages: list[list[str]] = []
        cursor: str | None = None
        while True:
            page = await store.list_sessions_newest(after=cursor, limit=limit, **filters)
            pages.append([s.id for s in page.sessions])
            if page.next_cursor is None:
                return pages
            cursor = page.next_cursor

    assert await walk(2) == [["other", "new-x"], ["b", "a"], ["Mid-X", "old"]]
    assert await walk(10, app_name="A", user_id="u1") == [["new-x", "b", "a", "old"]]
    assert await walk(1, id_contains="-X") == [["new-x"], ["Mid-X"]]  # ASCII case ignored
    assert await walk(10, id_contains="x", updated_since=3000.0) == [["new-x"]]
    assert await walk(10, updated_since=4000.5) == [["other"]]
    assert await walk(10, app_name="C") == [[]]
    [first] = (await store.list_sessions_newest(limit=1)).sessions
    assert (first.id, first.version, first.updated_at) == ("other", 1, 5000.0)
    for bad in ("no-colon", "x:y"):
        with pytest.raises(StoreUsageError):
            await store.list_sessions_newest(after=bad)
    with pytest.raises(StoreUsageError):
        await store.list_sessions_newest(limit=0)


async def test_list_sessions_rejects_bad_limit(store: EventStore) -> None:
    with pytest.raises(StoreUsageError):
        await store.list_sessions(limit=0)


async def test_delete_session_removes_events_and_session_artifacts(store: EventStore) -> None:
    await _session_with(store, 3, sid="gone")
    await store.create_session(app_name=APP, user_id=USER, session_id="kept")
    await store.save_artifact("gone", "notes.txt", b"n", mime_type="text/plain")
    await store.save_artifact("gone", "user:profile", b"p", mime_type="text/plain")
    await store.delete_session("gone")

    with pytest.raises(SessionNotFoundError):
        await store.get_session("gone")
    with pytest.raises(SessionNotFoundError):
        await store.read("gone")
    assert [s.id for s in (await store.list_sessions()).sessions] == ["kept"]
    # The user-scoped artifact outlives the session that saved it.
    assert (await store.load_artifact("kept", "user:profile")).data == b"p"
    assert await store.list_artifacts("kept") == {"user:profile": [0]}
    # Re-creating the id starts from scratch: no old events, no old session artifacts.
    await store.create_session(app_name=APP, user_id=USER, session_id="gone")
    assert (await store.get_session("gone")).events == []
    with pytest.raises(ArtifactNotFoundError):
        await store.load_artifact("gone", "notes.txt")
    assert (await store.append("gone", text_event(id="e1"), expected_version=0))[0].seq == 1


async def test_delete_newest_session_then_create_keeps_sessions_apart(store: EventStore) -> None:
    # On SQL backends the new session may take the deleted one's internal key.
    await _session_with(store, 2, sid="first")
    await _session_with(store, 3, sid="newest")
    await store.delete_session("newest")
    await store.create_session(app_name=APP, user_id="other", session_id="next")
    await store.append("next", text_event("mine", id="n1"), expected_version=0)
    with pytest.raises(SessionNotFoundError):
        await store.read("newest")
    assert [e.id for e in await store.read("next")] == ["n1"]
    assert [e.id for e in await store.read("next", backwards=True)] == ["n1"]
    assert [e.id for e in await store.read("first")] == ["e1", "e2"]
    assert (await store.session_info("next")).version == 1


async def test_delete_session_missing_raises(store: EventStore) -> None:
    with pytest.raises(SessionNotFoundError):
        await store.delete_session("nope")


# -- append ----------------------------------------------------------------------------------------


async def test_append_batch_gets_consecutive_seqs(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    first = await store.append("s", [text_event(id="a"), text_event(id="b")], expected_version=0)
    second = await store.append("s", text_event(id="c"), expected_version=2)
    third = await store.append(
        "s", [text_event(id=f"d{i}") for i in range(4)], expected_version=3
    )
    assert _seqs(first) == [1, 2]
    assert _seqs(second) == [3]
    assert _seqs(third) == [4, 5, 6, 7]
    assert _seqs(await store.read("s")) == list(range(1, 8))
    assert await store.version("s") == 7


async def test_append_returns_events_equal_to_stored(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    appended = await store.append(
        "s", [call_event("c1"), response_event("c1"), text_event("done")], expected_version=0
    )
    assert await store.read("s") == appended


async def test_append_invalid_event_in_batch_writes_nothing(store: EventStore) -> None:
    await _session_with(store, 2)
    before = await full_dump(store)
    bad = delta_event({"k": float("nan")}, id="bad")
    with pytest.raises(InvalidEventError) as info:
        await store.append("s1", [text_event(id="ok1"), bad, text_event(id="ok2")],
                           expected_version=2)
    assert info.value.event_id == "bad"
    assert await full_dump(store) == before


async def test_append_conflict_writes_nothing_and_names_versions(store: EventStore) -> None:
    await _session_with(store, 3)
    before = await full_dump(store)
    with pytest.raises(ConcurrencyError) as info:
        await store.append("s1", [text_event(id="x1"), text_event(id="x2")], expected_version=1)
    error = info.value
    assert (error.session_id, error.expected_version, error.actual_version) == ("s1", 1, 3)
    assert "'s1'" in str(error)
    assert "version 3" in str(error)
    assert "version 1" in str(error)
    assert await full_dump(store) == before
    # An expected version from the future is a conflict too.
    with pytest.raises(ConcurrencyError) as info:
        await store.append("s1", text_event(id="x3"), expected_version=9)
    assert (info.value.expected_version, info.value.actual_version) == (9, 3)
    assert await full_dump(store) == before


async def test_append_without_expected_version_appends_at_head(store: EventStore) -> None:
    await _session_with(store, 2)
    appended = await store.append("s1", text_event(id="free"), expected_version=None)
    assert _seqs(appended) == [3]


async def test_append_retry_of_stored_batch_is_noop(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    batch = [text_event(id="a"), delta_event({"n": 1}, id="b")]
    first = await store.append("s", batch, expected_version=0)
    await store.append("s", text_event(id="c"), expected_version=2)
    before = await full_dump(store)
    # The retry carries the stale expected_version of the original attempt.
    again = await store.append("s", batch, expected_version=0)
    assert _seqs(again) == [1, 2]
    assert again == first
    # Events as the store returned them (seq set) are the same payload too.
    assert await store.append("s", first, expected_version=None) == first
    assert await store.append("s", first[1], expected_version=5) == [first[1]]
    assert await full_dump(store) == before


async def test_append_partial_overlap_raises_duplicate(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    stored = text_event(id="old")
    await store.append("s", stored, expected_version=0)
    before = await full_dump(store)
    with pytest.raises(DuplicateEventError) as info:
        await store.append("s", [stored, text_event(id="new")], expected_version=1)
    assert info.value.session_id == "s"
    assert info.value.event_id == "new"
    assert "'old'" in str(info.value)
    assert "'new'" in str(info.value)
    assert await full_dump(store) == before


async def test_append_same_id_other_payload_raises_duplicate(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    await store.append("s", text_event("original", id="e"), expected_version=0)
    before = await full_dump(store)
    with pytest.raises(DuplicateEventError) as info:
        await store.append("s", text_event("changed", id="e"), expected_version=1)
    assert (info.value.session_id, info.value.event_id) == ("s", "e")
    assert "'e'" in str(info.value)
    assert await full_dump(store) == before


async def test_append_same_id_twice_in_one_batch_raises(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    with pytest.raises(DuplicateEventError) as info:
        await store.append("s", [text_event(id="e"), text_event(id="e")], expected_version=0)
    assert info.value.event_id == "e"
    assert await store.version("s") == 0


async def test_append_event_ids_are_scoped_per_session(store: EventStore) -> None:
    for sid in ("s", "t"):
        await store.create_session(app_name=APP, user_id=USER, session_id=sid)
    event = text_event(id="shared-id")
    assert _seqs(await store.append("s", event, expected_version=0)) == [1]
    assert _seqs(await store.append("t", event, expected_version=0)) == [1]
    assert [e.id for e in await store.read("t")] == ["shared-id"]


async def test_append_to_missing_session_raises(store: EventStore) -> None:
    with pytest.raises(SessionNotFoundError) as info:
        await store.append("nope", text_event(), expected_version=0)
    assert info.value.session_id == "nope"
    assert (await store.list_sessions()).sessions == []


async def test_append_seq_is_gap_free_across_failures(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    version = 0
    for i in range(6):
        with pytest.raises(ConcurrencyError):
            await store.append("s", text_event(id=f"late{i}"), expected_version=version + 1)
        with pytest.raises(InvalidEventError):
            await store.append("s", [text_event(id=f"x{i}"), delta_event({"": 1})],
                               expected_version=version)
        stored = await store.append(
            "s", [text_event(id=f"ok{i}a"), text_event(id=f"ok{i}b")], expected_version=version
        )
        version = stored[-1].seq or 0
    assert _seqs(await store.read("s")) == list(range(1, 13))


# -- reads -----------------------------------------------------------------------------------------


async def test_read_backwards_pages_newest_first(store: EventStore) -> None:
    await _session_with(store, 7)
    assert _seqs(await store.read("s1", backwards=True)) == [7, 6, 5, 4, 3, 2, 1]
    pages: list[list[int | None]] = []
    upto: int | None = None
    while True:
        page = await store.read("s1", upto=upto, backwards=True, limit=3)
        if not page:
            break
        pages.append(_seqs(page))
        upto = (page[-1].seq or 0) - 1
    assert pages == [[7, 6, 5], [4, 3, 2], [1]]


async def test_iter_backwards_yields_newest_first_and_can_stop(store: EventStore) -> None:
    await _session_with(store, 7)
    all_seqs = [e.seq async for e in store.iter_backwards("s1", page_size=2)]
    assert all_seqs == [7, 6, 5, 4, 3, 2, 1]
    from_5 = [e.seq async for e in store.iter_backwards("s1", upto=5, page_size=3)]
    assert from_5 == [5, 4, 3, 2, 1]
    found = None
    async for event in store.iter_backwards("s1", page_size=2):
        if event.id == "e6":
            found = event
            break
    assert found is not None
    assert found.seq == 6


@pytest.mark.parametrize(
    ("after", "upto", "backwards", "limit", "expected"),
    [
        pytest.param(None, None, False, None, [1, 2, 3, 4, 5, 6], id="all"),
        pytest.param(2, None, False, None, [3, 4, 5, 6], id="after-2"),
        pytest.param(None, 4, False, None, [1, 2, 3, 4], id="upto-4"),
        pytest.param(2, 4, False, None, [3, 4], id="after-2-upto-4"),
        pytest.param(2, 5, True, None, [5, 4, 3], id="after-2-upto-5-backwards"),
        pytest.param(1, None, False, 2, [2, 3], id="after-1-limit-2"),
        pytest.param(1, 5, True, 2, [5, 4], id="window-backwards-limit"),
        pytest.param(4, 4, False, None, [], id="empty-window"),
        pytest.param(5, 2, False, None, [], id="inverted-window"),
        pytest.param(None, 100, False, None, [1, 2, 3, 4, 5, 6], id="upto-beyond-head"),
        pytest.param(6, None, False, None, [], id="after-head"),
        pytest.param(0, 0, False, None, [], id="upto-0"),
        pytest.param(None, None, False, 0, [], id="limit-0"),
        pytest.param(-1, None, False, None, [1, 2, 3, 4, 5, 6], id="negative-after"),
        pytest.param(-3, 2, True, None, [2, 1], id="negative-after-backwards"),
        pytest.param(None, -1, False, None, [], id="negative-upto"),
    ],
)
async def test_read_window(
    store: EventStore,
    after: int | None,
    upto: int | None,
    backwards: bool,
    limit: int | None,
    expected: list[int],
) -> None:
    await _session_with(store, 6)
    events = await store.read("s1", after=after, upto=upto, backwards=backwards, limit=limit)
    assert _seqs(events) == expected
    assert [e.id for e in events] == [f"e{s}" for s in expected]


async def test_read_negative_limit_is_usage_error(store: EventStore) -> None:
    await _session_with(store, 1)
    with pytest.raises(StoreUsageError):
        await store.read("s1", limit=-1)


# -- creation time ---------------------------------------------------------------------------------


async def test_create_session_keeps_given_created_at(store: EventStore) -> None:
    created = await store.create_session(app_name=APP, user_id=USER, session_id="old",
                                         created_at=1_000_000.5, state={"k": 1})
    assert (created.created_at, created.updated_at) == (1_000_000.5, 1_000_000.5)
    info = await store.session_info("old")
    assert (info.created_at, info.updated_at) == (1_000_000.5, 1_000_000.5)
    assert (await store.read("old"))[0].timestamp == 1_000_000.5
    assert (await store.list_sessions()).sessions[0].created_at == 1_000_000.5
    before = time.time()
    fresh = await store.create_session(app_name=APP, user_id=USER, session_id="new")
    assert before <= fresh.created_at <= time.time()
    assert (await store.session_info("new")).created_at == fresh.created_at


@pytest.mark.parametrize("created_at", [-1.0, float("nan"), float("inf"), "1", True])
async def test_create_session_refuses_bad_created_at(store: EventStore, created_at: object) -> None:
    with pytest.raises(StoreUsageError, match="created_at"):
        await store.create_session(app_name=APP, user_id=USER, session_id="x",
                                   created_at=created_at)  # type: ignore[arg-type]
    with pytest.raises(SessionNotFoundError):
        await store.session_info("x")
