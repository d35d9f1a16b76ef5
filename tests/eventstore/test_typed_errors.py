"""Input no backend stores is refused before the backend, with the same typed error on every
backend (memory, SQLite, PostgreSQL), and nothing is written: lone surrogates in state values
and artifact names, NaN and inf in artifact metadata. A mapping given as an event's actions is
read as EventActions; a closed store's error is a RuntimeError too."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from _evs_support import delta_event

from eventstore import (
    Compaction,
    Content,
    Event,
    EventActions,
    EventStore,
    InvalidEventError,
    Part,
    StoreClosedError,
    StoreUsageError,
    ToolConfirmation,
)

APP, USER = "app", "u"
LONE = "\ud800"


async def _session(store: EventStore) -> str:
    await store.create_session(app_name=APP, user_id=USER, session_id="s")
    return "s"


@pytest.mark.parametrize("value", [
    pytest.param(LONE, id="the-value"),
    pytest.param({"deep": ["ok", f"a{LONE}b"]}, id="nested-in-the-value"),
    pytest.param({f"k{LONE}": 1}, id="a-key-inside-the-value"),
])
async def test_state_value_with_a_lone_surrogate_is_invalid_event_naming_the_key(
    store: EventStore, value: Any
) -> None:
    sid = await _session(store)
    with pytest.raises(InvalidEventError, match="lone surrogate") as caught:
        await store.append(sid, [delta_event({"ok": 1, "bad": value})], expected_version=0)
    assert caught.value.key == "bad"
    assert "state_delta['bad']" in str(caught.value)
    assert await store.version(sid) == 0


async def test_state_key_with_a_lone_surrogate_is_invalid_event(store: EventStore) -> None:
    sid = await _session(store)
    with pytest.raises(InvalidEventError, match="lone surrogate"):
        await store.append(sid, [delta_event({f"k{LONE}": 1})], expected_version=0)
    assert await store.version(sid) == 0


async def test_initial_state_with_a_lone_surrogate_is_invalid_event(store: EventStore) -> None:
    with pytest.raises(InvalidEventError, match="lone surrogate"):
        await store.create_session(app_name=APP, user_id=USER, session_id="s",
                                   state={"user:name": LONE})
    assert (await store.list_sessions(app_name=APP, user_id=USER)).sessions == []


async def test_artifact_name_with_a_lone_surrogate_is_refused_alike_everywhere(
    store: EventStore,
) -> None:
    sid = await _session(store)
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.save_artifact(sid, f"a{LONE}.txt", b"x", mime_type="text/plain"),
        lambda: store.save_artifact(sid, f"user:{LONE}", b"x", mime_type="text/plain"),
        lambda: store.save_artifact(None, LONE, b"x", mime_type="text/plain",
                                    app_name=APP, user_id=USER),
        lambda: store.load_artifact(sid, f"a{LONE}.txt"),
        lambda: store.artifact_versions(sid, f"a{LONE}.txt"),
        lambda: store.delete_artifact(sid, f"a{LONE}.txt"),
    ]
    for call in calls:
        with pytest.raises(StoreUsageError, match="lone surrogates"):
            await call()
    assert await store.list_artifacts(sid) == {}


@pytest.mark.parametrize("metadata", [
    pytest.param({"score": float("nan")}, id="nan"),
    pytest.param({"score": float("inf")}, id="inf"),
    pytest.param({"scores": [1.0, float("-inf")]}, id="nested-minus-inf"),
    pytest.param({"who": LONE}, id="lone-surrogate"),
    pytest.param({"big": 1 << 70}, id="int-past-64-bits"),
])
async def test_artifact_metadata_that_json_cannot_carry_is_refused(
    store: EventStore, metadata: dict[str, Any]
) -> None:
    sid = await _session(store)
    with pytest.raises(StoreUsageError, match=r"metadata\["):
        await store.save_artifact(sid, "a.txt", b"x", mime_type="text/plain", metadata=metadata)
    assert await store.list_artifacts(sid) == {}


async def test_artifact_metadata_of_json_values_reads_back_equal(store: EventStore) -> None:
    sid = await _session(store)
    metadata = {"score": 0.5, "tags": ["a", "é"], "n": None, "deep": {"x": 1}}
    await store.save_artifact(sid, "a.txt", b"x", mime_type="text/plain", metadata=metadata)
    assert (await store.load_artifact(sid, "a.txt")).metadata == metadata


async def test_event_actions_given_as_a_mapping_are_stored_as_event_actions(
    store: EventStore,
) -> None:
    sid = await _session(store)
    event = Event(author="agent", actions={
        "state_delta": {"k": 1},
        "state_deletions": ["gone"],
        "requested_tool_confirmations": {"c1": {"hint": "ok?", "payload": {"n": 2}}},
        "escalate": True,
    })
    assert event.actions == EventActions(
        state_delta={"k": 1}, state_deletions=("gone",),
        requested_tool_confirmations={"c1": ToolConfirmation(hint="ok?", payload={"n": 2})},
        escalate=True,
    )
    stored = await store.append(sid, [event], expected_version=0)
    assert [e.actions for e in await store.read(sid)] == [event.actions]
    assert stored[0].actions == event.actions
    assert await store.state(sid) == {"k": 1}
    again = dataclasses.replace(event, actions={"compaction": {
        "start_seq": 1, "end_seq": 1,
        "summary": {"role": "model", "parts": [{"text": "so far"}]},
    }})
    assert again.actions.compaction == Compaction(
        start_seq=1, end_seq=1, summary=Content(role="model", parts=(Part(text="so far"),)))


@pytest.mark.parametrize(("actions", "message"), [
    pytest.param({"state_detla": {"k": 1}}, "unknown fields 'state_detla'", id="unknown-field"),
    pytest.param({"state_delta": 3}, "state_delta", id="wrong-type"),
    pytest.param({"requested_tool_confirmations": {"c": {"confirmed": "maybe"}}},
                 "confirmed", id="wrong-nested-type"),
    pytest.param([("state_delta", {})], "not a list", id="not-a-mapping"),
])
def test_event_actions_that_are_not_event_actions_are_invalid_event(
    actions: Any, message: str
) -> None:
    with pytest.raises(InvalidEventError, match=message) as caught:
        Event(author="agent", id="e1", actions=actions)
    assert caught.value.event_id == "e1"


async def test_a_closed_store_raises_a_runtime_error_too(store: EventStore) -> None:
    await store.aclose()
    with pytest.raises(RuntimeError) as caught:
        await store.list_sessions()
    assert isinstance(caught.value, StoreClosedError)
