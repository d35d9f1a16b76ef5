"""History → contents: late responses next to their calls, newest answer wins, plumbing hidden."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    Content,
    Event,
    EventActions,
    FunctionCall,
    FunctionResponse,
    Part,
)
from runtime import build_contents


def text(author: str, role: Any, value: str, **kw: Any) -> Event:
    return Event(author=author, content=Content(role=role, parts=(Part(text=value),)), **kw)


def calls(*items: FunctionCall, **kw: Any) -> Event:
    return Event(
        author="agent",
        content=Content(role="model", parts=tuple(Part(function_call=c) for c in items)),
        **kw,
    )


def responses(*items: FunctionResponse, author: str = "agent") -> Event:
    return Event(
        author=author,
        content=Content(role="user", parts=tuple(Part(function_response=r) for r in items)),
    )


def fc(cid: str, name: str = "tool") -> FunctionCall:
    return FunctionCall(id=cid, name=name, args={})


def fr(cid: str, value: Any, name: str = "tool") -> FunctionResponse:
    return FunctionResponse(id=cid, name=name, response={"v": value})


def test_late_response_moves_next_to_its_call_and_merges_with_the_others() -> None:
    history = [
        text("user", "user", "go"),
        calls(fc("a"), fc("b")),
        Event(author="agent", started_call_ids=("a", "b")),
        responses(fr("b", 2)),
        text("user", "user", "any news?"),
        text("agent", "model", "still waiting"),
        responses(fr("a", 1), author="user"),
    ]
    contents = build_contents(history)
    assert contents == [
        Content(role="user", parts=(Part(text="go"),)),
        Content(role="model", parts=(Part(function_call=fc("a")), Part(function_call=fc("b")))),
        Content(
            role="user",
            parts=(Part(function_response=fr("a", 1)), Part(function_response=fr("b", 2))),
        ),
        Content(role="user", parts=(Part(text="any news?"),)),
        Content(role="model", parts=(Part(text="still waiting"),)),
    ]


def test_confirmation_plumbing_is_hidden_and_the_confirmed_result_replaces_the_error() -> None:
    confirm = FunctionCall(id="confirm-1", name=REQUEST_CONFIRMATION_FUNCTION, args={})
    history = [
        text("user", "user", "book"),
        calls(fc("a", "book")),
        responses(FunctionResponse(id="a", name="book", response={"error": {"kind": "x"}})),
        calls(confirm, long_running_tool_ids=("confirm-1",)),
        responses(
            FunctionResponse(id="confirm-1", name=REQUEST_CONFIRMATION_FUNCTION, response={}),
            author="user",
        ),
        responses(FunctionResponse(id="a", name="book", response={"booked": True})),
    ]
    contents = build_contents(history)
    assert [c.role for c in contents] == ["user", "model", "user"]
    assert contents[2].parts == (
        Part(function_response=FunctionResponse(id="a", name="book", response={"booked": True})),
    )


def test_other_branches_partial_and_contentless_events_are_skipped() -> None:
    history = [
        text("user", "user", "root"),
        text("child", "model", "mine", branch="root.child"),
        text("sibling", "model", "not mine", branch="root.sibling"),
        text("agent", "model", "partial", partial=True),
        Event(author="agent", actions=EventActions(state_delta={"k": 1})),
    ]
    seen = build_contents(history, branch="root.child")
    assert [c.parts[0].text for c in seen] == ["root", "mine"]
    assert [c.parts[0].text for c in build_contents(history)] == ["root"]


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3)), max_size=12))
def test_every_response_follows_the_model_turn_that_called_it(
    plan: list[tuple[bool, int]],
) -> None:
    history: list[Event] = []
    issued: list[str] = []
    for n, (is_call, pick) in enumerate(plan):
        if is_call or not issued:
            cid = f"c{n}"
            issued.append(cid)
            history.append(calls(fc(cid)))
        else:
            cid = issued[pick % len(issued)]
            history.append(responses(fr(cid, n), author="user"))
    contents = build_contents(history)
    assert build_contents(history) == contents
    for i, content in enumerate(contents):
        for part in content.parts:
            if part.function_response is not None:
                previous = contents[i - 1]
                assert any(
                    p.function_call is not None and p.function_call.id == part.function_response.id
                    for p in previous.parts
                )
