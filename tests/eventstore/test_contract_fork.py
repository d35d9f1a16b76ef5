"""The backend contract for ``EventStore.fork``: a new session made of another's log up to a seq
(memory, SQLite, PostgreSQL): copies, artifacts, shared state, refusals, links, deletion."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from _evs_support import (
    BackendTarget,
    call_event,
    delta_event,
    full_dump,
    response_event,
    text_event,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    Content,
    Event,
    EventActions,
    EventStore,
    ForkPointError,
    FunctionCall,
    FunctionResponse,
    Part,
    SessionExistsError,
    SessionNotFoundError,
    StoreUsageError,
)
from eventstore._state import session_part

APP = "app"
USER = "alice"


async def _raw(store: EventStore, session_id: str) -> list[Any]:
    return await store.backend.read(session_id, after=None, upto=None, backwards=False,
                                    limit=None)


async def _origin(store: EventStore, session_id: str = "o") -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id=session_id)
    await store.append(session_id, [
        text_event("hi", id="e1"),
        delta_event({"a": 1, "user:u": 1, "app:x": 1}, id="e2"),
        call_event("c1"),
        Event(author="agent", started_call_ids=("c1",)),
        response_event("c1"),
        delta_event({"a": 2, "user:u": 2}, id="e6"),
    ], expected_version=0)


async def test_fork_copies_events_and_records_the_link(store: EventStore) -> None:
    await _origin(store)
    before = await _raw(store, "o")
    fork = await store.fork("o", at=5, new_session_id="f")
    assert (fork.id, fork.app_name, fork.user_id, fork.version) == ("f", APP, USER, 5)
    origin_events = await store.read("o")
    assert fork.events == origin_events[:5]
    assert await store.read("f") == origin_events[:5]
    copies = await _raw(store, "f")
    for copy, row in zip(copies, before[:5], strict=True):
        assert (copy.event_id, copy.seq, copy.kind, copy.author, copy.timestamp, copy.payload,
                copy.schema_version, copy.invocation_id, copy.position) == (
            row.event_id, row.seq, row.kind, row.author, row.timestamp, row.payload,
            row.schema_version, row.invocation_id, row.position)
        assert copy.session_id == "f"
        assert not copy.shared_state
    assert await _raw(store, "o") == before
    links = await store.fork_links("f")
    assert links.origin is not None
    assert links.origin_exists
    assert (links.origin.origin_session_id, links.origin.origin_seq) == ("o", 5)
    assert links.forks == []
    origin_links = await store.fork_links("o")
    assert origin_links.origin is None
    assert [(f.session_id, f.origin_seq) for f in origin_links.forks] == [("f", 5)]


async def test_fork_generates_an_id_and_forks_can_be_forked(store: EventStore) -> None:
    await _origin(store)
    fork = await store.fork("o", at=2)
    assert len(fork.id) == 32
    assert fork.id != "o"
    again = await store.fork(fork.id, at=1, new_session_id="g")
    assert [e.id for e in again.events] == ["e1"]
    assert [f.session_id for f in (await store.fork_links(fork.id)).forks] == ["g"]


async def test_fork_state_is_the_origins_at_each_copied_seq(store: EventStore) -> None:
    await _origin(store)
    fork = await store.fork("o", at=5, new_session_id="f")
    for k in range(1, 5):
        assert await store.state("f", at=k) == await store.state("o", at=k), k
    # At head: the origin's own state at seq 5, with the shared state as it is now (user:u
    # became 2 at the origin's seq 6: user: state is the user's, not the session's).
    assert session_part(fork.state) == session_part(await store.state("o", at=5))
    assert fork.state == {"a": 1, "user:u": 2, "app:x": 1}


async def test_fork_does_not_apply_shared_deltas_again(store: EventStore) -> None:
    await _origin(store)
    await store.create_session(app_name=APP, user_id=USER, session_id="other")
    shared_before = await store.shared_state(app_name=APP, user_id=USER)
    other_before = await store.state("other")
    await store.fork("o", at=2, new_session_id="f")
    # The copy of e2 (user:u = 1) does not set user:u back to 1 for anyone.
    assert await store.shared_state(app_name=APP, user_id=USER) == shared_before
    assert await store.state("other") == other_before == {"user:u": 2, "app:x": 1}
    assert (await store.state("f"))["user:u"] == 2
    # The fork's own shared-state changes count as any session's.
    await store.append("f", delta_event({"user:u": 3}), expected_version=2)
    assert (await store.state("other"))["user:u"] == 3


async def test_fork_refuses_a_seq_inside_a_step_naming_the_nearest(store: EventStore) -> None:
    await _origin(store)
    before = await full_dump(store)
    for at in (3, 4):  # after the model's call (3), after its claim (4): no response yet
        with pytest.raises(ForkPointError) as raised:
            await store.fork("o", at=at, new_session_id="f")
        refused = raised.value
        assert (refused.reason, refused.seq, refused.before, refused.after) == (
            "inside_step", at, 2, 5)
        assert "'c1'" in str(raised.value)
        assert "2 (before)" in str(raised.value)
        assert "5 (after)" in str(raised.value)
    assert await full_dump(store) == before


async def test_fork_inside_a_step_at_head_names_no_later_seq(store: EventStore) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="o",
                               events=[call_event("c1")])
    with pytest.raises(ForkPointError) as raised:
        await store.fork("o", at=1)
    assert (raised.value.before, raised.value.after) == (None, None)
    assert "no seq of it is at a step boundary yet" in str(raised.value)


def _confirmation_log() -> list[Event]:
    """docs/protocol.md §2 to §6: a paid call waiting for a confirmation, then answered."""
    call = FunctionCall(id="c1", name="pay", args={"amount": 5})
    request = FunctionCall(id="confirm-1", name=REQUEST_CONFIRMATION_FUNCTION, args={
        "originalFunctionCall": {"id": "c1", "name": "pay", "args": {"amount": 5}},
        "toolConfirmation": {"hint": "pay?", "confirmed": False}})
    placeholder = FunctionResponse(id="c1", name="pay", response={
        "error": {"kind": "confirmation_required", "tool": "pay", "message": "confirm"}})
    answer = FunctionResponse(id="confirm-1", name=REQUEST_CONFIRMATION_FUNCTION,
                              response={"confirmed": True})
    done = FunctionResponse(id="c1", name="pay", response={"result": "paid"})

    def event(author: str, role: str, part: Part, **fields: Any) -> Event:
        return Event(author=author, content=Content(role=role, parts=(part,)),  # type: ignore[arg-type]
                     **fields)

    return [
        text_event("pay 5", id="m1"),                                            # 1
        event("agent", "model", Part(function_call=call)),                        # 2
        event("agent", "user", Part(function_response=placeholder)),              # 3
        event("agent", "model", Part(function_call=request),
              long_running_tool_ids=("confirm-1",)),                              # 4 (pause)
        event("user", "user", Part(function_response=answer)),                    # 5
        Event(author="agent", started_call_ids=("c1",)),                          # 6
        event("agent", "user", Part(function_response=done)),                     # 7
    ]


async def test_fork_at_a_confirmation_pause_is_allowed_not_before_or_after(
    store: EventStore,
) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="o",
                               events=_confirmation_log())
    fork = await store.fork("o", at=4, new_session_id="f")
    assert fork.version == 4
    for at, before, after in ((2, 1, 4), (3, 1, 4), (5, 4, 7), (6, 4, 7)):
        with pytest.raises(ForkPointError) as raised:
            await store.fork("o", at=at)
        assert (raised.value.before, raised.value.after) == (before, after), at
    assert (await store.fork("o", at=7)).version == 7


async def test_fork_errors_name_what_was_wrong_and_write_nothing(store: EventStore) -> None:
    await _origin(store)
    await store.create_session(app_name=APP, user_id=USER, session_id="taken")
    await store.create_session(app_name=APP, user_id=USER, session_id="empty")
    before = await full_dump(store)
    with pytest.raises(SessionNotFoundError) as raised:
        await store.fork("nope", at=1)
    assert raised.value.session_id == "nope"
    for at in (0, 7, -1):
        with pytest.raises(ForkPointError) as raised:
            await store.fork("o", at=at)
        assert raised.value.reason == "out_of_range"
        assert "1..6" in str(raised.value)
    with pytest.raises(ForkPointError) as raised:
        await store.fork("empty", at=1)
    assert "has no events" in str(raised.value)
    with pytest.raises(SessionExistsError) as raised:
        await store.fork("o", at=2, new_session_id="taken")
    assert raised.value.session_id == "taken"
    for bad in ("", "x\0y", 5):
        with pytest.raises(StoreUsageError):
            await store.fork("o", at=2, new_session_id=bad)  # type: ignore[arg-type]
    with pytest.raises(StoreUsageError):
        await store.fork("o", at="2")  # type: ignore[arg-type]
    assert await full_dump(store) == before


async def test_fork_copies_artifacts_up_to_the_versions_referenced_by_then(
    store: EventStore,
) -> None:
    await store.create_session(app_name=APP, user_id=USER, session_id="o")
    for version in range(3):
        saved = await store.save_artifact("o", "report.txt", f"v{version}".encode(),
                                          mime_type="text/plain", metadata={"n": version})
        assert saved == version
        await store.append("o", Event(author="agent", actions=EventActions(
            artifact_delta={"report.txt": version})), expected_version=None)
    await store.save_artifact("o", "report.txt", b"v3", mime_type="text/plain")  # unreferenced
    await store.save_artifact("o", "user:avatar.png", b"u0", mime_type="image/png")
    await store.append("o", Event(author="agent", actions=EventActions(
        artifact_delta={"user:avatar.png": 0})), expected_version=None)
    await store.fork("o", at=2, new_session_id="f2")
    await store.fork("o", at=4, new_session_id="f4")
    assert (await store.list_artifacts("f2")) == {"report.txt": [0, 1], "user:avatar.png": [0]}
    assert (await store.list_artifacts("f4"))["report.txt"] == [0, 1, 2]
    loaded = await store.load_artifact("f4", "report.txt", version=2)
    original = await store.load_artifact("o", "report.txt", version=2)
    assert loaded == original
    assert loaded.metadata == {"n": 2}
    assert (await store.list_artifacts("o"))["report.txt"] == [0, 1, 2, 3]
    # The fork's own saves number on from what it holds, without touching the origin's.
    assert await store.save_artifact("f2", "report.txt", b"mine", mime_type="text/plain") == 2
    assert (await store.load_artifact("o", "report.txt", version=2)).data == b"v2"


async def test_fork_survives_deleting_its_origin(store: EventStore) -> None:
    await _origin(store)
    await store.save_artifact("o", "a.txt", b"a", mime_type="text/plain")
    await store.append("o", Event(author="agent", actions=EventActions(
        artifact_delta={"a.txt": 0})), expected_version=6)
    fork = await store.fork("o", at=7, new_session_id="f")
    await store.delete_session("o")
    assert await store.read("f") == fork.events
    assert (await store.load_artifact("f", "a.txt")).data == b"a"
    links = await store.fork_links("f")
    assert links.origin is not None
    assert links.origin.origin_session_id == "o"
    assert not links.origin_exists
    # The origin's user:/app: deltas stay in their scopes' streams, as for any deleted session,
    # counted once: the fork's copies never were part of them.
    shared = await store.shared_state(app_name=APP, user_id=USER)
    assert shared == {"app:x": 1, "user:u": 2}
    assert await store.state("f") == {**session_part(await store.state("f")), **shared}
    assert session_part(await store.state("f")) == {"a": 2}


async def test_deleting_a_fork_removes_its_link_only(store: EventStore) -> None:
    await _origin(store)
    before = await _raw(store, "o")
    await store.fork("o", at=2, new_session_id="f")
    await store.delete_session("f")
    assert (await store.fork_links("o")).forks == []
    assert await _raw(store, "o") == before
    with pytest.raises(SessionNotFoundError):
        await store.fork_links("f")


# -- the property -----------------------------------------------------------------------------

_KEYS = st.sampled_from(["a", "b", "user:u", "user:v", "app:x"])
_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("delta"), st.dictionaries(_KEYS, st.integers(0, 9) | st.none(),
                                                    min_size=1, max_size=3)),
        st.tuples(st.just("text"), st.text(max_size=5)),
        st.tuples(st.just("call"), st.just({})),
        st.tuples(st.just("artifact"), st.sampled_from(["f.txt", "g.bin"]).map(
            lambda name: {"name": name})),
        st.tuples(st.just("other"), st.dictionaries(_KEYS, st.integers(0, 9), min_size=1,
                                                    max_size=2)),
    ),
    min_size=1, max_size=14,
)


async def _build(store: EventStore, steps: list[tuple[str, dict[str, Any] | str]]) -> list[int]:
    """Write the steps into session "o" (and "other", for shared state); return the seqs a
    fork may start at."""
    await store.create_session(app_name=APP, user_id=USER, session_id="o")
    await store.create_session(app_name=APP, user_id=USER, session_id="other")
    valid: list[int] = []
    for n, (kind, value) in enumerate(steps):
        if kind == "delta":
            assert isinstance(value, dict)
            batch = [delta_event(value)]
        elif kind == "text":
            assert isinstance(value, str)
            batch = [text_event(value)]
        elif kind == "call":
            batch = [call_event(f"c{n}"), Event(author="agent", started_call_ids=(f"c{n}",)),
                     response_event(f"c{n}")]
        elif kind == "artifact":
            assert isinstance(value, dict)
            version = await store.save_artifact("o", value["name"], f"{n}".encode(),
                                                mime_type="text/plain")
            batch = [Event(author="agent", actions=EventActions(
                artifact_delta={value["name"]: version}))]
        else:
            assert isinstance(value, dict)
            await store.append("other", delta_event(value), expected_version=None)
            continue
        stored = await store.append("o", batch, expected_version=None)
        valid.append(stored[-1].seq or 0)
    return valid


async def _check_property(store: EventStore, steps: list[tuple[str, Any]], pick: int) -> None:
    valid = await _build(store, steps)
    if not valid:
        return
    at = valid[pick % len(valid)]
    origin_rows = await _raw(store, "o")
    origin_artifacts = await store.list_artifacts("o")
    shared = await store.shared_state(app_name=APP, user_id=USER)
    other = await store.state("other")
    origin_at = await store.state("o", at=at)
    fork = await store.fork("o", at=at, new_session_id="f")
    assert fork.events == (await store.read("o"))[:at]
    assert await store.read("f") == fork.events
    assert fork.state == await store.state("f")
    # The fork's state at head is the origin's at seq, but for user:/app: keys, which are the
    # user's and app's as they are now (equal to the origin's at seq when none changed since).
    assert fork.state == {**session_part(origin_at), **shared}
    if {k: v for k, v in origin_at.items() if ":" in k} == shared:
        assert fork.state == origin_at
    for k in range(1, at):
        assert await store.state("f", at=k) == await store.state("o", at=k), k
    referenced: dict[str, int] = {}
    for event in fork.events:
        for name, version in event.actions.artifact_delta.items():
            referenced[name] = max(version, referenced.get(name, 0))
    assert await store.list_artifacts("f") == {
        name: list(range(version + 1)) for name, version in sorted(referenced.items())
    }
    # Nothing of the origin, the other session or the shared state changed.
    assert await _raw(store, "o") == origin_rows
    assert await store.list_artifacts("o") == origin_artifacts
    assert await store.shared_state(app_name=APP, user_id=USER) == shared
    assert await store.state("other") == other


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_STEPS, pick=st.integers(0, 100))
def test_fork_property_state_events_and_origin_untouched(
    backend_target: BackendTarget, steps: list[tuple[str, Any]], pick: int
) -> None:
    async def main() -> None:
        store = await backend_target.open()
        try:
            for sid in ("o", "other", "f"):
                with contextlib.suppress(SessionNotFoundError):
                    await store.delete_session(sid)
            await _check_property(store, steps, pick)
        finally:
            await store.aclose()

    asyncio.run(main())
