"""AgentTool: child session linked to the call, shared data, isolated control, confirmations."""

from __future__ import annotations

from typing import Any

from eventstore import EventStore, FunctionCall
from runtime import (
    PARENT_LINK_KEY,
    Agent,
    AgentTool,
    ModelResponse,
    ReplayResumePlanner,
    Runner,
    ScriptedModel,
    ToolContext,
    child_session_id,
    function_tool,
)


def _call(call_id: str, name: str, **args: Any) -> ModelResponse:
    return ModelResponse(function_calls=(FunctionCall(id=call_id, name=name, args=args),))


def _parent(store: EventStore, child: Agent, *script: Any) -> Runner:
    agent = Agent(
        name="planner", model=ScriptedModel(list(script)), tools=[AgentTool(child, store=store)]
    )
    return Runner(agent=agent, store=store, app_name="trip", resume_planner=ReplayResumePlanner())


async def test_agent_tool_child_session_shares_data_but_not_control(store: EventStore) -> None:
    seen: dict[str, Any] = {}

    @function_tool
    def look(tool_context: ToolContext) -> dict[str, Any]:
        """Read the shared state and try to take over the parent's control flow."""
        seen.update(dict(tool_context.state))
        tool_context.actions.escalate = True
        tool_context.actions.transfer_to_agent = "somebody_else"
        tool_context.state["child_note"] = "kept in the child"
        return {"ok": True}

    child = Agent(
        name="weather_helper",
        model=ScriptedModel([_call("c-look", "look"), "never asked: the escalation ends it"]),
        tools=[look],
    )
    runner = _parent(store, child, _call("p-1", "weather_helper", request="Tokyo?"), "Done.")
    await runner.create_session(
        user_id="u",
        session_id="trip-1",
        state={"units": "metric", "_secret": 1, "user:name": "Ann"},
    )
    result = await runner.run(session_id="trip-1", user_id="u", new_message="Plan my trip")

    assert result.status == "completed"
    (response,) = result.events[3].function_responses()
    assert response.response["result"] == ""  # the child's escalation ended its invocation
    assert "tool 'look'" in response.response["escalated"]
    assert not result.events[3].actions.escalate
    assert result.events[3].actions.transfer_to_agent is None
    assert "child_note" not in await store.state("trip-1")
    assert seen["units"] == "metric"
    assert seen["user:name"] == "Ann"  # user scope is shared by the store itself
    assert "_secret" not in seen

    child_id = child_session_id("trip-1", "p-1")
    events = (await store.get_session(child_id)).events
    link = next(e.custom_metadata[PARENT_LINK_KEY] for e in events if e.custom_metadata)
    assert link["session_id"] == "trip-1"
    assert link["function_call_id"] == "p-1"
    assert (await store.state(child_id))["child_note"] == "kept in the child"


async def test_agent_tool_passes_the_invocation_metadata_to_the_child(store: EventStore) -> None:
    seen: list[dict[str, Any]] = []

    @function_tool
    def look(tool_context: ToolContext) -> dict[str, Any]:
        """Record the side channel the child's call sees."""
        seen.append(dict(tool_context.metadata))
        return {"ok": True}

    child = Agent(
        name="weather_helper",
        model=ScriptedModel([_call("c-look", "look"), "Sunny."]),
        tools=[look],
    )
    runner = _parent(store, child, _call("p-1", "weather_helper", request="Tokyo?"), "Done.")
    await runner.create_session(user_id="u", session_id="trip-1")
    result = await runner.run(
        session_id="trip-1", user_id="u", new_message="Plan", metadata={"trace_id": "t-42"}
    )

    assert result.status == "completed"
    assert seen == [{"trace_id": "t-42"}]
    child_events = (await store.get_session(child_session_id("trip-1", "p-1"))).events
    assert all("t-42" not in repr(e) for e in child_events)
