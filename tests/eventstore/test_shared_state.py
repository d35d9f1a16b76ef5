"""``user:``/``app:`` state through its snapshots: the cached answer is always the full fold of
the scope's stream, which deleting a session leaves as it was."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from _evs_support import BackendTarget, StoreFactory, delta_event
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventstore import EventStore, fold_state
from eventstore._state import session_part, shared_part

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

SESSIONS = [("s0", "u0"), ("s1", "u0"), ("s2", "u1"), ("s3", "u1")]

ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.integers(0, len(SESSIONS) - 1),
            st.dictionaries(
                st.sampled_from(["a", "user:p", "user:q", "app:x", "app:y"]),
                st.none() | st.integers(0, 9),
                min_size=1,
                max_size=3,
            ),
        ),
        st.tuples(st.just("read"), st.integers(0, len(SESSIONS) - 1), st.just({})),
        st.tuples(st.just("delete"), st.integers(0, len(SESSIONS) - 1), st.just({})),
    ),
    max_size=40,
)

_run_ids = itertools.count()


def _expected(
    log: list[tuple[str, dict[str, Any]]], sid: str, user: str, upto: int | None = None
) -> dict[str, Any]:
    """The reference: a fold of the model's log (``upto`` = index in the global log)."""
    users = dict(SESSIONS)
    window = log if upto is None else log[: upto + 1]
    state = fold_state(session_part(d) for s, d in window if s == sid)
    state.update(fold_state(shared_part(d, user=False) for _, d in window))
    state.update(fold_state(shared_part(d, user=True) for s, d in window if users[s] == user))
    return state


async def _check_run(store: EventStore, steps: list[tuple[str, int, dict[str, Any]]]) -> None:
    run = next(_run_ids)
    app = f"app-{run}"
    ids = {name: f"{name}-{run}" for name, _ in SESSIONS}
    for name, user in SESSIONS:
        await store.create_session(app_name=app, user_id=user, session_id=ids[name])
    # (session, delta) of every event appended, in order: a deleted session's shared deltas stay
    log: list[tuple[str, dict[str, Any]]] = []
    where: dict[tuple[str, int], int] = {}  # (session, seq) -> index in the global log
    deleted: set[str] = set()
    for op, index, delta in steps:
        name, user = SESSIONS[index]
        if name in deleted:
            continue
        if op == "append":
            [event] = await store.append(ids[name], delta_event(delta), expected_version=None)
            assert event.seq is not None
            where[(name, event.seq)] = len(log)
            log.append((name, delta))
        elif op == "read":
            assert await store.state(ids[name]) == _expected(log, name, user)
        else:
            await store.delete_session(ids[name])
            deleted.add(name)
    for name, user in SESSIONS:
        if name in deleted:
            continue
        version = await store.version(ids[name])
        assert await store.state(ids[name]) == _expected(log, name, user)
        for seq in range(1, version):  # at the newest seq, state is the state at head
            assert await store.state(ids[name], at=seq) == _expected(
                log, name, user, upto=where[(name, seq)]
            ), f"{name} at seq {seq}"


@pytest.mark.parametrize("interval", [pytest.param(1, id="every-event"),
                                      pytest.param(3, id="every-3")])
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=ops)
def test_shared_state_cached_equals_full_fold(
    backend_target: BackendTarget, interval: int, steps: list[tuple[str, int, dict[str, Any]]]
) -> None:
    async def main() -> None:
        store = await backend_target.open(snapshot_interval=interval)
        try:
            await _check_run(store, steps)
        finally:
            await store.aclose()

    asyncio.run(main())


async def test_shared_state_1000_events_same_with_and_without_snapshots(
    store_factory: StoreFactory,
) -> None:
    cached = await store_factory(snapshot_interval=50)
    sessions = [(f"s{i}", f"u{i % 3}") for i in range(6)]
    for sid, user in sessions:
        await cached.create_session(app_name="app", user_id=user, session_id=sid)
    for i in range(1_050):
        sid, _ = sessions[i % len(sessions)]
        delta = {f"user:k{i % 7}": i, f"app:k{i % 5}": i if i % 11 else None, "own": i}
        await cached.append(sid, delta_event(delta, id=f"e{i}"), expected_version=None)
        if i % 97 == 0:
            await cached.state(sid)  # snapshots are taken on the way
    heads = {sid: await cached.state(sid) for sid, _ in sessions}
    past = {sid: await cached.state(sid, at=60) for sid, _ in sessions}
    newest = await cached.backend.load_shared_snapshot(
        app_name="app", user_id=None, upto_position=None
    )
    assert newest is not None
    assert newest.count > 1_000 - 50  # the last read folded fewer than 50 events
    await cached.rebuild_snapshots()
    assert await cached.backend.load_shared_snapshot(
        app_name="app", user_id="u1", upto_position=None
    ) is None
    for sid, _ in sessions:
        assert await cached.state(sid) == heads[sid]
        assert await cached.state(sid, at=60) == past[sid]
    await cached.rebuild_snapshots()
    uncached = EventStore(cached.backend, snapshot_interval=10**9)  # never saves a snapshot
    for sid, _ in sessions:
        assert await uncached.state(sid) == heads[sid]
        assert await uncached.state(sid, at=60) == past[sid]


async def test_shared_state_outlives_the_session_that_wrote_it(
    store_factory: StoreFactory,
) -> None:
    """A user's preferences and the app's settings belong to their scope: deleting the chat
    that set them leaves them, through snapshots and without, and for a new session too."""
    store = await store_factory(snapshot_interval=2)
    for sid in ("keep", "gone"):
        await store.create_session(app_name="app", user_id="u", session_id=sid)
    await store.append("keep", delta_event({"app:x": 1, "user:y": 1}), expected_version=0)
    for i in range(5):
        await store.append("gone", delta_event({"app:x": 10 + i, "user:z": i, "own": i}),
                           expected_version=None)
    assert await store.state("keep") == {"app:x": 14, "user:y": 1, "user:z": 4}
    await store.delete_session("gone")
    assert await store.state("keep") == {"app:x": 14, "user:y": 1, "user:z": 4}
    assert await store.shared_state(app_name="app", user_id="u") == {
        "app:x": 14, "user:y": 1, "user:z": 4}
    await store.rebuild_snapshots()
    assert await store.state("keep") == {"app:x": 14, "user:y": 1, "user:z": 4}
    await store.create_session(app_name="app", user_id="u", session_id="new")
    assert await store.state("new") == {"app:x": 14, "user:y": 1, "user:z": 4}
    await store.create_session(app_name="app", user_id="other", session_id="theirs")
    assert await store.state("theirs") == {"app:x": 14}


async def test_shared_state_past_folds_stay_put_after_deleting_the_newest_changes(
    store_factory: StoreFactory,
) -> None:
    """Deleting the session that made an app's newest shared-state change changes no fold:
    the state at an old seq still holds it, and a change made afterwards never shows up in
    the state of an event written before it."""
    store = await store_factory()
    for sid in ("s1", "s2", "s3"):
        await store.create_session(app_name="app", user_id="u", session_id=sid)
    await store.append("s1", delta_event({"app:x": "old"}), expected_version=0)
    await store.append("s2", delta_event({"k": 1}), expected_version=0)
    await store.append("s2", delta_event({"k": 2}), expected_version=1)
    assert await store.state("s2", at=1) == {"k": 1, "app:x": "old"}
    await store.delete_session("s1")
    assert await store.state("s2", at=1) == {"k": 1, "app:x": "old"}
    await store.append("s3", delta_event({"app:x": "later"}), expected_version=0)
    assert await store.state("s2", at=1) == {"k": 1, "app:x": "old"}
    assert await store.state("s2") == {"k": 2, "app:x": "later"}


async def test_shared_state_snapshot_racing_a_delete_and_new_changes_stays_right(
    store_factory: StoreFactory,
) -> None:
    """Between a fold's read and its snapshot save, the session holding the newest change is
    deleted and a new change is made: the saved fold is still right (entries are never
    removed), and the next read folds the new change on top of it."""
    store = await store_factory(snapshot_interval=2)
    for sid in ("s1", "s2", "s3"):
        await store.create_session(app_name="app", user_id="u", session_id=sid)
    await store.append("s1", delta_event({"app:x": 1}), expected_version=0)
    await store.append("s2", delta_event({"app:x": 2}), expected_version=0)
    await store.append("s1", delta_event({"k": 1}), expected_version=1)
    backend = store._backend
    save = backend.save_shared_snapshot
    raced = False

    async def racing_save(**kwargs: Any) -> None:
        nonlocal raced
        if not raced:  # another writer, between the fold's read and its save
            raced = True
            await store.delete_session("s2")
            await store.append("s3", delta_event({"app:x": 3}), expected_version=0)
        await save(**kwargs)

    backend.save_shared_snapshot = racing_save  # type: ignore[method-assign]
    try:
        assert await store.state("s1") == {"k": 1, "app:x": 2}  # the fold read before the race
    finally:
        backend.save_shared_snapshot = save  # type: ignore[method-assign]
    assert raced
    assert await store.state("s3") == {"app:x": 3}
    assert await store.state("s1") == {"k": 1, "app:x": 3}
    await store.rebuild_snapshots()
    assert await store.state("s1") == {"k": 1, "app:x": 3}
