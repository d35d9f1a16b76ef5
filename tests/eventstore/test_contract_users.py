"""The backend contract for session ids per (app, user) (memory, SQLite, PostgreSQL): two users
may each have a session ``default``; a fully addressed call reaches the right one; an
unaddressed id several hold is refused with the choices; a unique one works unaddressed."""

from __future__ import annotations

import pytest
from _evs_support import StoreFactory, delta_event, text_event

from eventstore import (
    AmbiguousSessionError,
    Artifact,
    EventStore,
    SessionExistsError,
    SessionNotFoundError,
    StoreUsageError,
)

APP = "app"


async def _two_defaults(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id="alice", session_id="default",
                               state={"who": "alice"})
    await store.create_session(app_name=APP, user_id="bob", session_id="default",
                               state={"who": "bob"})


async def test_users_each_have_a_session_with_the_same_id(store: EventStore) -> None:
    await _two_defaults(store)
    alice = await store.get_session("default", app_name=APP, user_id="alice")
    bob = await store.get_session("default", app_name=APP, user_id="bob")
    assert (alice.id, alice.user_id, alice.state) == ("default", "alice", {"who": "alice"})
    assert (bob.id, bob.user_id, bob.state) == ("default", "bob", {"who": "bob"})
    listed = (await store.list_sessions(app_name=APP)).sessions
    assert sorted((s.id, s.user_id) for s in listed) == [("default", "alice"), ("default", "bob")]
    by_update = await store.list_sessions_by_update(app_name=APP)
    assert sorted((s.id, s.state["who"]) for s in by_update) == [
        ("default", "alice"), ("default", "bob")]


async def test_same_user_same_id_still_refused(store: EventStore) -> None:
    await _two_defaults(store)
    with pytest.raises(SessionExistsError) as info:
        await store.create_session(app_name=APP, user_id="bob", session_id="default")
    assert info.value.session_id == "default"
    # Another app's user of the same name is another owner.
    other = await store.create_session(app_name="other", user_id="bob", session_id="default")
    assert (other.app_name, other.id) == ("other", "default")


async def test_unaddressed_shared_id_is_ambiguous_and_lists_choices(store: EventStore) -> None:
    await _two_defaults(store)
    for call in (
        store.get_session("default"),
        store.read("default"),
        store.state("default"),
        store.version("default"),
        store.session_info("default"),
        store.append("default", text_event("x"), expected_version=None),
        store.delete_session("default"),
        store.read_mappings("default"),
        store.fork("default", at=1),
    ):
        with pytest.raises(AmbiguousSessionError) as info:
            await call
        assert isinstance(info.value, StoreUsageError)
        assert info.value.session_id == "default"
        assert info.value.choices == [(APP, "alice"), (APP, "bob")]
        assert "'alice'" in str(info.value)
        assert "'bob'" in str(info.value)
    # Naming only the user is enough when it picks one.
    assert (await store.get_session("default", user_id="bob")).state == {"who": "bob"}
    # Nothing was written by the refused calls.
    for user in ("alice", "bob"):
        assert await store.version("default", app_name=APP, user_id=user) == 1


async def test_addressed_appends_reads_and_deletes_stay_apart(store: EventStore) -> None:
    await _two_defaults(store)
    await store.append("default", [text_event("hi bob"), delta_event({"k": "b"})],
                       expected_version=1, app_name=APP, user_id="bob")
    await store.append("default", text_event("hi alice"), expected_version=1, app_name=APP,
                       user_id="alice")
    bob = await store.read("default", app_name=APP, user_id="bob")
    alice = await store.read("default", app_name=APP, user_id="alice")
    assert [e.seq for e in bob] == [1, 2, 3]
    assert [e.seq for e in alice] == [1, 2]
    assert bob[1].content is not None
    assert bob[1].content.parts[0].text == "hi bob"
    assert alice[1].content is not None
    assert alice[1].content.parts[0].text == "hi alice"
    assert (await store.state("default", app_name=APP, user_id="bob"))["k"] == "b"
    assert "k" not in await store.state("default", app_name=APP, user_id="alice")
    mappings = await store.read_mappings("default", app_name=APP, user_id="alice")
    assert len(mappings) == 2
    await store.delete_session("default", app_name=APP, user_id="bob")
    with pytest.raises(SessionNotFoundError):
        await store.get_session("default", app_name=APP, user_id="bob")
    # Now unique again: the unaddressed id works as it always did.
    assert (await store.get_session("default")).user_id == "alice"
    await store.append("default", text_event("again"), expected_version=2)
    assert await store.version("default") == 3


async def test_wrong_owner_is_not_found(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id="alice", session_id="s")
    with pytest.raises(SessionNotFoundError) as info:
        await store.get_session("s", app_name=APP, user_id="mallory")
    assert "mallory" in str(info.value)
    with pytest.raises(SessionNotFoundError):
        await store.append("s", text_event(), expected_version=None, app_name="x",
                           user_id="alice")
    with pytest.raises(SessionNotFoundError):
        await store.delete_session("s", app_name=APP, user_id="mallory")
    assert await store.version("s") == 0


async def test_recreated_after_delete_by_another_user(store: EventStore) -> None:
    """A second user's session made while the first holds the id, then the first deleted and
    made again: every session keeps its own events."""
    await _two_defaults(store)
    await store.delete_session("default", app_name=APP, user_id="alice")
    await store.create_session(app_name=APP, user_id="carol", session_id="default")
    await store.create_session(app_name=APP, user_id="alice", session_id="default")
    await store.append("default", text_event("c"), expected_version=0, app_name=APP,
                       user_id="carol")
    assert await store.version("default", app_name=APP, user_id="alice") == 0
    assert await store.version("default", app_name=APP, user_id="bob") == 1
    assert await store.version("default", app_name=APP, user_id="carol") == 1


async def test_a_second_store_resolves_without_the_first_ones_memory(
    store_factory: StoreFactory,
) -> None:
    first = await store_factory()
    await _two_defaults(first)
    second = first if first.url == "memory://" else await store_factory()
    await second.append("default", text_event("x"), expected_version=1, app_name=APP,
                        user_id="bob")
    assert await first.version("default", app_name=APP, user_id="bob") == 2
    assert await first.version("default", app_name=APP, user_id="alice") == 1


async def test_fork_of_shared_id_stays_with_its_user(store: EventStore) -> None:
    await _two_defaults(store)
    fork = await store.fork("default", at=1, new_session_id="copy", app_name=APP,
                            user_id="bob")
    assert (fork.app_name, fork.user_id, fork.id, fork.state) == (
        APP, "bob", "copy", {"who": "bob"})
    # alice may fork her own "default" into a "copy" of her own.
    mine = await store.fork("default", at=1, new_session_id="copy", app_name=APP,
                            user_id="alice")
    assert mine.state == {"who": "alice"}
    with pytest.raises(SessionExistsError):
        await store.fork("default", at=1, new_session_id="copy", app_name=APP,
                         user_id="alice")
    links = await store.fork_links("copy", app_name=APP, user_id="bob")
    assert links.origin is not None
    assert (links.origin.session_id, links.origin.origin_session_id) == ("copy", "default")
    assert (links.origin.app_name, links.origin.user_id) == (APP, "bob")
    assert links.origin_exists
    origin_links = await store.fork_links("default", app_name=APP, user_id="bob")
    assert [f.session_id for f in origin_links.forks] == ["copy"]


async def test_session_artifacts_follow_the_id_the_app_gave(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id="alice", session_id="default")
    await store.create_session(
        app_name=APP, user_id="bob", session_id="default",
        artifacts=[Artifact(filename="a.txt", data=b"bob", mime_type="text/plain", version=0,
                            created_at=1.0)],
    )
    found = await store.load_artifact("default", "a.txt", app_name=APP, user_id="bob")
    assert found.data == b"bob"
    assert await store.list_artifacts("default", app_name=APP, user_id="alice") == {}
    await store.delete_session("default", app_name=APP, user_id="bob")
    assert await store.list_artifacts("default", app_name=APP, user_id="bob") == {}


async def test_caches_are_per_session(store: EventStore) -> None:
    await _two_defaults(store)
    await store.save_cache("default", "c", 1, b"bob", app_name=APP, user_id="bob")
    assert await store.load_cache("default", "c", app_name=APP, user_id="alice") is None
    assert await store.load_cache("default", "c", app_name=APP, user_id="bob") == (1, b"bob")


async def test_listing_pages_through_shared_ids(store: EventStore) -> None:
    for user in ("u1", "u2", "u3"):
        for sid in ("a", "b"):
            await store.create_session(app_name=APP, user_id=user, session_id=sid)
    seen: list[tuple[str, str]] = []
    cursor = None
    while True:
        page = await store.list_sessions(after=cursor, limit=2)
        seen += [(s.id, s.user_id) for s in page.sessions]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert sorted(seen) == sorted((sid, user) for user in ("u1", "u2", "u3")
                                  for sid in ("a", "b"))
