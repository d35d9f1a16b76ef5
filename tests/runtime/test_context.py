"""ToolContext: actions, state view, artifacts, confirmation, idempotency key."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventstore import Compaction, Content, EventActions, Part, ToolConfirmation, apply_delta
from runtime import (
    ArtifactService,
    InMemoryArtifactService,
    ReadonlyContext,
    StateView,
    ToolActions,
    ToolContext,
    ToolContextError,
    idempotency_key,
)


def _ctx(**kwargs: object) -> ToolContext:
    options: dict[str, object] = {
        "function_call_id": "call-1",
        "invocation_id": "inv",
        "agent_name": "agent",
        "session_id": "s1",
    }
    options.update(kwargs)
    return ToolContext(**options)  # type: ignore[arg-type]


def test_state_view_overlays_own_delta_and_records_writes() -> None:
    head = {"a": 1, "b": 2}
    ctx = _ctx(state=head)
    ctx.state["a"] = 10
    ctx.state["c"] = 3
    del ctx.state["b"]
    assert dict(ctx.state) == {"a": 10, "c": 3}
    assert "b" not in ctx.state
    assert len(ctx.state) == 2
    assert ctx.actions.state_delta == {"a": 10, "c": 3}
    assert ctx.actions.state_deletions == ("b",)
    assert head == {"a": 1, "b": 2}
    with pytest.raises(KeyError):
        ctx.state["b"]
    with pytest.raises(KeyError):
        del ctx.state["missing"]


_DELETE = object()


@given(
    st.dictionaries(st.sampled_from("abcd"), st.none() | st.integers()),
    st.lists(st.tuples(st.sampled_from("abcd"),
                       st.none() | st.integers() | st.just(_DELETE))),
)
def test_state_view_equals_head_with_its_changes_applied(
    head: dict[str, int | None], writes: list[tuple[str, object]]
) -> None:
    """Writes (None a value like any other) and deletions read back at once, and the recorded
    changes folded onto the head give what the view shows."""
    actions = ToolActions()
    view = StateView(head, actions)
    expected: dict[str, object] = dict(head)
    for key, value in writes:
        if value is _DELETE:
            if key in view:
                del view[key]
            else:
                with pytest.raises(KeyError):
                    del view[key]
            expected.pop(key, None)
        else:
            view[key] = value
            expected[key] = value
        assert (key in view) == (key in expected)
    assert dict(view) == expected
    assert head == dict(head)  # untouched
    frozen = actions.to_event_actions()
    assert not set(frozen.state_delta) & set(frozen.state_deletions)
    folded: dict[str, object] = dict(head)
    apply_delta(folded, frozen.state_delta, deleted=frozen.state_deletions)
    assert folded == expected


def test_tool_actions_to_event_actions_is_a_snapshot() -> None:
    actions = ToolActions()
    actions.state_delta["k"] = 1
    actions.artifact_delta["f.txt"] = 0
    actions.skip_summarization = True
    frozen = actions.to_event_actions()
    actions.state_delta["k"] = 2
    assert frozen == EventActions(
        state_delta={"k": 1}, artifact_delta={"f.txt": 0}, skip_summarization=True
    )


def test_idempotency_key_is_stable_and_distinct() -> None:
    key = idempotency_key("s1", "call-1")
    assert key == idempotency_key("s1", "call-1")
    assert len(key) == 32
    assert int(key, 16) >= 0
    assert key != idempotency_key("s1", "call-2")
    assert idempotency_key("a|b", "c") != idempotency_key("a", "b|c")
    assert _ctx().idempotency_key == key


async def test_tool_context_artifacts_record_delta() -> None:
    service = InMemoryArtifactService()
    assert isinstance(service, ArtifactService)
    ctx = _ctx(artifacts=service)
    assert await ctx.save_artifact("report.txt", b"v0", mime_type="text/plain") == 0
    assert await ctx.save_artifact("report.txt", b"v1") == 1
    assert ctx.actions.artifact_delta == {"report.txt": 1}
    assert await ctx.load_artifact("report.txt") == b"v1"
    assert await ctx.load_artifact("report.txt", version=0) == b"v0"
    assert await ctx.load_artifact("report.txt", version=5) is None
    assert await ctx.load_artifact("missing") is None
    assert await ctx.list_artifacts() == ["report.txt"]


async def test_tool_context_without_artifact_service_raises() -> None:
    with pytest.raises(ToolContextError, match=r"No artifact service.*'call-1'"):
        await _ctx().load_artifact("x")


def test_tool_context_request_confirmation_records_request() -> None:
    ctx = _ctx()
    confirmation = ctx.request_confirmation(hint="Sure?", payload={"n": 1})
    assert confirmation == ToolConfirmation(hint="Sure?", payload={"n": 1})
    assert ctx.actions.requested_tool_confirmations == {"call-1": confirmation}
    assert ctx.actions.skip_summarization


def test_tool_context_for_preprocessing_has_empty_call_id() -> None:
    readonly = ReadonlyContext(invocation_id="inv", agent_name="a", session_id="s", state={"x": 1})
    ctx = ToolContext.for_preprocessing(readonly)
    assert ctx.function_call_id == ""
    assert ctx.state["x"] == 1
    with pytest.raises(ToolContextError, match="preprocessing"):
        ctx.request_confirmation(hint="no call here")


async def test_tool_context_cancellation_and_metadata() -> None:
    event = asyncio.Event()
    ctx = _ctx(cancel_event=event)
    assert not ctx.cancelled
    ctx.metadata["trace_id"] = "t-1"
    event.set()
    assert ctx.cancelled
    assert ctx.metadata == {"trace_id": "t-1"}
    assert ctx.actions.to_event_actions().is_empty()


def test_tool_actions_mirror_event_actions_field_for_field() -> None:
    import dataclasses

    from runtime._context import _check_mirrors

    assert [f.name for f in dataclasses.fields(ToolActions)] == [
        f.name for f in dataclasses.fields(EventActions)
    ]
    assert ToolActions().to_event_actions() == EventActions()
    full = EventActions(
        state_delta={"k": 1},
        state_deletions=("gone",),
        artifact_delta={"f": 2},
        requested_tool_confirmations={"c": ToolConfirmation(hint="ok?")},
        skip_summarization=True,
        escalate=True,
        transfer_to_agent="other",
        compaction=Compaction(start_seq=1, end_seq=2, summary=Content(
            role="user", parts=(Part(text="so far"),))),
    )
    assert all(getattr(full, f.name) for f in dataclasses.fields(EventActions))  # none default
    copied = ToolActions.from_event_actions(full)
    assert copied.to_event_actions() == full
    copied.state_delta["k"] = 9
    assert full.state_delta == {"k": 1}

    @dataclasses.dataclass(kw_only=True)
    class Drifted(ToolActions):
        new_flag: bool = False

    with pytest.raises(TypeError, match=r"extra \['new_flag'\]"):
        _check_mirrors(Drifted, EventActions)
