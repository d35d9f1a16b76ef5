"""Parallel calls finish in any order; the merged response event is always the same."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventstore import EventActions, FunctionCall, ToolConfirmation, open_store
from runtime import (
    Agent,
    FunctionTool,
    InvocationContext,
    ScriptedModel,
    ToolContext,
    deep_merge,
    execute_calls,
)
from runtime._merge import merge_actions


def make_tool(finished: list[int], waits: dict[int, int]) -> FunctionTool:
    async def step(index: int, escalate: bool, tool_context: ToolContext) -> dict[str, Any]:
        """Yield to the loop ``waits[index]`` times, then write state and answer."""
        for _ in range(waits[index]):
            await asyncio.sleep(0)
        finished.append(index)
        tool_context.state["last"] = index
        tool_context.state["by_call"] = {f"k{index}": index}
        tool_context.actions.escalate = escalate
        return {"index": index}

    return FunctionTool(step)


async def run_step(order: list[int], escalate: list[bool], *, parallel: bool) -> tuple[Any, ...]:
    finished: list[int] = []
    # Call i finishes at rank order.index(i): completion order is exactly ``order``.
    waits = {i: 3 * order.index(i) for i in range(len(order))}
    tool = make_tool(finished, waits)
    async with await open_store("memory://") as store:
        await store.create_session(app_name="a", user_id="u", session_id="s")
        agent = Agent(name="agent", model=ScriptedModel([]), tools=[tool])
        ctx = InvocationContext(
            store=store, session_id="s", app_name="a", user_id="u", agent=agent, version=0
        )
        calls = [
            FunctionCall(id=f"call-{i}", name="step", args={"index": i, "escalate": escalate[i]})
            for i in range(len(order))
        ]
        result = await execute_calls(ctx, calls, parallel=parallel)
    if parallel:
        assert finished == order
    else:
        assert finished == sorted(order)
    response = result.events[1]
    assert response.author == "agent"
    return response.content, response.actions


@st.composite
def orders(draw: st.DrawFn) -> tuple[list[int], list[bool]]:
    n = draw(st.integers(min_value=1, max_value=6))
    order = draw(st.permutations(list(range(n))))
    escalate = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return list(order), escalate


@settings(max_examples=60, deadline=None)
@given(orders())
def test_merge_is_the_same_whatever_order_the_calls_finish_in(
    case: tuple[list[int], list[bool]],
) -> None:
    order, escalate = case
    parallel = asyncio.run(run_step(order, escalate, parallel=True))
    sequential = asyncio.run(run_step(order, escalate, parallel=False))
    assert parallel == sequential
    content, actions = parallel
    n = len(order)
    assert content is not None
    assert [p.function_response.id for p in content.parts if p.function_response] == [
        f"call-{i}" for i in range(n)
    ]
    assert actions.state_delta == {
        "last": n - 1,
        "by_call": {f"k{i}": i for i in range(n)},
    }
    assert actions.escalate == any(escalate)


@pytest.mark.parametrize(
    ("base", "update", "expected"),
    [
        pytest.param({"a": 1}, {"b": 2}, {"a": 1, "b": 2}, id="disjoint"),
        pytest.param({"a": {"x": 1}}, {"a": {"y": 2}}, {"a": {"x": 1, "y": 2}}, id="nested"),
        pytest.param({"a": {"x": 1}}, {"a": 3}, {"a": 3}, id="scalar-replaces-mapping"),
        pytest.param({"a": 1}, {"a": None}, {"a": None}, id="none-is-a-value"),
    ],
)
def test_deep_merge(base: dict[str, Any], update: dict[str, Any], expected: dict[str, Any]) -> None:
    assert deep_merge(base, update) == expected
    assert base == dict(base)


def test_merge_actions_ors_flags_and_unions_confirmations() -> None:
    merged = merge_actions(
        [
            EventActions(skip_summarization=True, artifact_delta={"a.txt": 0}),
            EventActions(
                escalate=True,
                requested_tool_confirmations={"c2": ToolConfirmation(hint="ok?")},
                artifact_delta={"a.txt": 1},
            ),
            EventActions(transfer_to_agent="other"),
        ]
    )
    assert merged.skip_summarization
    assert merged.escalate
    assert merged.artifact_delta == {"a.txt": 1}
    assert list(merged.requested_tool_confirmations) == ["c2"]
    assert merged.transfer_to_agent == "other"


@pytest.mark.parametrize(
    ("calls", "delta", "deletions"),
    [
        pytest.param([({"a": 1}, ()), ({}, ("a",))], {}, ("a",), id="later-deletion-wins"),
        pytest.param([({}, ("a",)), ({"a": 2}, ())], {"a": 2}, (), id="later-write-wins"),
        pytest.param([({"a": None}, ()), ({}, ("b",))], {"a": None}, ("b",),
                     id="none-and-a-deletion-stay-apart"),
    ],
)
def test_merge_actions_orders_writes_and_deletions(
    calls: list[tuple[dict[str, Any], tuple[str, ...]]], delta: dict[str, Any],
    deletions: tuple[str, ...],
) -> None:
    merged = merge_actions(
        [EventActions(state_delta=d, state_deletions=gone) for d, gone in calls]
    )
    assert merged.state_delta == delta
    assert merged.state_deletions == deletions
