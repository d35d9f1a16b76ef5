"""``list_sessions_by_update`` folds each session's state from the rows' actions alone (no event
decoded): the state it lists equals ``state()`` for values, None, deletions, shared keys and
snapshots, on every backend."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventstore import Event, EventActions, EventStore

KEYS = st.sampled_from(["a", "b", "user:u", "app:x"])
DELTAS = st.lists(
    st.tuples(st.dictionaries(KEYS, st.one_of(st.none(), st.integers(0, 3))),
              st.lists(KEYS, max_size=2, unique=True)),
    max_size=8)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(logs=st.lists(DELTAS, min_size=1, max_size=4))
async def test_listed_state_equals_state(store: EventStore, logs: list[list[tuple[
        dict[str, int | None], list[str]]]]) -> None:
    for page in (await store.list_sessions(app_name="fold")).sessions:
        await store.delete_session(page.id)
    for n, log in enumerate(logs):
        sid = f"s{n}"
        await store.create_session(app_name="fold", user_id=f"u{n % 2}", session_id=sid)
        events = [Event(author="agent", actions=EventActions(
            state_delta=delta, state_deletions=tuple(k for k in gone if k not in delta)))
                  for delta, gone in log]
        if events:
            await store.append(sid, events, expected_version=0)
        if n == 0:
            await store.append(sid, Event(author="agent", actions=EventActions(
                state_delta={"a": 9})), expected_version=len(events))
    listed = {s.id: s.state for s in await store.list_sessions_by_update(app_name="fold")}
    assert listed == {f"s{n}": await store.state(f"s{n}") for n in range(len(logs))}
