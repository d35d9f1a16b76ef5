"""Listing sessions with their state (``list_sessions_by_update``) through the head-state cache
(``evs_head_states``): the state listed always equals ``state()`` — the fold of the log — after
appends, deletes and re-creations, ``user:``/``app:`` changes made by other sessions, forks,
compaction, prune and ``rebuild_snapshots``; a second listing reads no event of a session that
did not move; a keyed store ignores a head state it did not sign. On every backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from _evs_support import StoreFactory, delta_event, text_event
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventstore import Event, EventActions, EventStore
from eventstore.backends.protocol import HeadState

APP = "heads"
KEY = b"k" * 32


async def _check(store: EventStore) -> dict[str, dict[str, Any]]:
    listed = {s.id: s.state for s in await store.list_sessions_by_update(app_name=APP)}
    assert listed == {sid: await store.state(sid, app_name=APP, user_id=user)
                      for sid, user in [(s.id, s.user_id) for s in
                                        await store.list_sessions_by_update(app_name=APP)]}
    return listed


def _count_event_reads(store: EventStore) -> list[int]:
    """Wrap the backend's ``read_many``: the list receives the number of rows each call read."""
    backend: Any = store.backend
    original = backend.read_many
    counts: list[int] = []

    async def read_many(after: Any) -> Any:
        found = await original(after)
        counts.append(sum(len(v) for v in found.values()))
        return found

    backend.read_many = read_many
    return counts


async def test_listing_follows_every_change(store_factory: StoreFactory, tmp_path: Path) -> None:
    store = await store_factory()
    await store.create_session(app_name=APP, user_id="u", session_id="a",
                               events=[delta_event({"k": 1, "user:p": 1}), text_event("hi")])
    await store.create_session(app_name=APP, user_id="u", session_id="b",
                               events=[delta_event({"k": 2, "app:x": 1})])
    await store.create_session(app_name=APP, user_id="v", session_id="c")
    assert (await _check(store))["a"] == {"k": 1, "user:p": 1, "app:x": 1}
    # Appends after the listing saved the head states.
    await store.append("a", Event(author="agent", actions=EventActions(
        state_delta={"n": None}, state_deletions=("k",))), expected_version=2)
    await store.append("c", delta_event({"c": 3}), expected_version=0)
    listed = await _check(store)
    assert listed["a"] == {"n": None, "user:p": 1, "app:x": 1}
    assert listed["c"]["c"] == 3
    # Shared state changed by another session, then that session deleted: the scope keeps it.
    await store.append("b", delta_event({"user:p": 7, "app:x": 2}), expected_version=1)
    await store.delete_session("b")
    assert (await _check(store))["a"] == {"n": None, "user:p": 7, "app:x": 2}
    # Deleted and made again under the same id, with as many events: the old head is not used.
    await store.delete_session("a")
    await store.create_session(app_name=APP, user_id="u", session_id="a",
                               events=[delta_event({"z": 1}), delta_event({"z": 2}),
                                       delta_event({"y": 0})])
    assert (await _check(store))["a"] == {"z": 2, "y": 0, "user:p": 7, "app:x": 2}
    # A fork at an earlier seq, then compaction of the origin.
    await store.fork("a", at=1, new_session_id="f")
    await store.append("f", delta_event({"f": 1}), expected_version=1)
    assert (await _check(store))["f"] == {"z": 1, "f": 1, "user:p": 7, "app:x": 2}
    await store.compact("a", upto=2, summary="so far")
    await _check(store)
    # The caches dropped: the listing folds the log again.
    await store.rebuild_snapshots()
    assert await _check(store) == {
        "a": {"z": 2, "y": 0, "user:p": 7, "app:x": 2},
        "c": {"c": 3, "app:x": 2},
        "f": {"z": 1, "f": 1, "user:p": 7, "app:x": 2}}
    # Prune every session (the clock moved on); the scopes keep their state.
    report = await store.prune(older_than=1, archive=tmp_path / "archive", app_name=APP,
                               now=1e12)
    assert len(report.deleted) == 3
    assert await _check(store) == {}
    await store.create_session(app_name=APP, user_id="u", session_id="a",
                               events=[delta_event({"k": 0})])
    assert await _check(store) == {"a": {"k": 0, "user:p": 7, "app:x": 2}}


async def test_second_listing_reads_no_events(store: EventStore) -> None:
    for n in range(20):
        await store.create_session(app_name=APP, user_id=f"u{n % 3}", session_id=f"s{n}",
                                   events=[delta_event({"i": n}), text_event("t"),
                                           delta_event({"user:seen": n})])
    counts = _count_event_reads(store)
    first = await _check(store)
    assert counts[0] == 60
    counts.clear()
    assert await _check(store) == first
    assert counts == []  # every session's own state came from its head state
    await store.append("s3", delta_event({"i": -1}), expected_version=3)
    assert (await _check(store))["s3"]["i"] == -1
    assert counts == [1]  # only the new event was read


async def test_keyed_store_ignores_an_unsigned_head_state(store_factory: StoreFactory) -> None:
    store = await store_factory(signing_key=KEY)
    await store.create_session(app_name=APP, user_id="u", session_id="s",
                               events=[delta_event({"k": 1})])
    await _check(store)
    last = (await store.backend.read("s", after=None, upto=None, backwards=True, limit=1))[0]
    assert last.chain_hash is not None
    # Written behind the store's back, for the right event but without the key's MAC.
    await store.backend.save_head_states({"s": HeadState(
        seq=1, chain_hash=last.chain_hash, state=orjson.dumps({"k": "forged"}))})
    counts = _count_event_reads(store)
    assert (await _check(store))["s"] == {"k": 1}
    assert counts == [1]  # the forged row was not used: the log was folded, and signed again
    counts.clear()
    assert (await _check(store))["s"] == {"k": 1}
    assert counts == []  # the store's own signed row is used


async def test_unkeyed_store_ignores_a_head_state_of_another_event(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id="u", session_id="s",
                               events=[delta_event({"k": 1})])
    await store.backend.save_head_states({"s": HeadState(
        seq=1, chain_hash=b"\0" * 32, state=orjson.dumps({"k": "forged"}))})
    assert await store.backend.load_head_states(["s"]) == {}
    assert (await _check(store))["s"] == {"k": 1}


OPS = st.lists(st.tuples(st.sampled_from(["append", "shared", "delete", "list", "fork"]),
                         st.integers(0, 2), st.integers(0, 3)), min_size=1, max_size=12)


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
async def test_listing_equals_fold_after_any_operations(
        store: EventStore, ops: list[tuple[str, int, int]]) -> None:
    for page in (await store.list_sessions(app_name=APP)).sessions:
        await store.delete_session(page.id, app_name=APP, user_id=page.user_id)
    forks = 0
    for op, n, value in ops:
        sid = f"s{n}"
        try:
            info = await store.session_info(sid, app_name=APP, user_id="u")
        except Exception:
            await store.create_session(app_name=APP, user_id="u", session_id=sid)
            info = await store.session_info(sid, app_name=APP, user_id="u")
        if op == "append":
            await store.append(sid, Event(author="agent", actions=EventActions(
                state_delta={"k": value}, state_deletions=("d",) if value == 0 else ())),
                expected_version=info.version)
        elif op == "shared":
            await store.append(sid, delta_event({"user:u": value, "app:a": value, "d": 1}),
                               expected_version=info.version)
        elif op == "delete":
            await store.delete_session(sid, app_name=APP, user_id="u")
        elif op == "fork" and info.version:
            forks += 1
            await store.fork(sid, at=max(1, min(value, info.version)), new_session_id=f"f{forks}",
                             app_name=APP, user_id="u")
        else:
            await _check(store)
    await _check(store)


async def test_verify_reports_a_head_state_that_is_not_the_fold(store: EventStore) -> None:
    from eventstore.commands._maintain import verify_session

    await store.create_session(app_name=APP, user_id="u", session_id="s",
                               events=[delta_event({"k": 1}), delta_event({"k": 2})])
    await _check(store)
    assert await verify_session(store, "s") == []
    last = (await store.backend.read("s", after=None, upto=None, backwards=True, limit=1))[0]
    assert last.chain_hash is not None
    await store.backend.save_head_states({"s": HeadState(
        seq=2, chain_hash=last.chain_hash, state=orjson.dumps({"k": "stale"}))})
    [finding] = await verify_session(store, "s")
    assert (finding.code, finding.seq) == ("snapshot_mismatch", 2)
    await store.rebuild_snapshots()  # the way out: the next listing folds the log again
    assert await verify_session(store, "s") == []
    assert (await _check(store))["s"] == {"k": 2}
