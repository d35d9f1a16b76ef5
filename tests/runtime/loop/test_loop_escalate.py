"""A tool that sets ``escalate`` ends the current invocation with status and reason (seed 004)."""

from __future__ import annotations

from eventstore import EventStore, FunctionCall
from runtime import Agent, ModelResponse, Runner, ScriptedModel, ToolContext, function_tool
from runtime.replay import pending


@function_tool
def hand_over(reason: str, tool_context: ToolContext) -> dict[str, str]:
    """Give the task back to the parent agent."""
    tool_context.actions.escalate = True
    tool_context.state["handed_over"] = True
    return {"reason": reason}


@function_tool
def lookup(city: str) -> dict[str, object]:
    """Look a city up."""
    return {"city": city}


async def test_loop_escalate_ends_the_invocation_after_the_step(store: EventStore) -> None:
    model = ScriptedModel(
        [
            ModelResponse.calling(
                FunctionCall(id="c1", name="lookup", args={"city": "Oslo"}),
                FunctionCall(id="c2", name="hand_over", args={"reason": "needs a human"}),
            ),
            "never asked",
        ]
    )
    runner = Runner(
        agent=Agent(name="a", model=model, tools=[lookup, hand_over]), store=store, app_name="app"
    )
    await runner.create_session(user_id="u", session_id="s")

    result = await runner.run(session_id="s", user_id="u", new_message="go")

    assert result.status == "escalated"
    assert result.pause_reason is not None
    assert "tool 'hand_over' (call c2): needs a human" in result.pause_reason
    assert "lookup" not in result.pause_reason
    assert model.remaining == 1
    stored = await store.read("s")
    assert len(stored) == 4  # user, turn, claim, responses: both answered before stopping
    assert [r.id for r in stored[3].function_responses()] == ["c1", "c2"]
    assert stored[3].actions.escalate
    assert await store.state("s") == {"handed_over": True}

    # a run with nothing new does not undo the escalation nor call the model
    again = await runner.run(session_id="s", user_id="u")
    assert again.status == "escalated"
    assert again.events == ()
    assert again.pause_reason is not None
    assert "needs a human" in again.pause_reason
    # pending() reads the same head rule: the next run ends escalated, without a model call
    report = pending(await store.read("s"), idempotent_tools=[])
    assert report.next_run.step == "escalated"
    assert report.next_run.reason.startswith(again.pause_reason)
    assert model.remaining == 1

    # a new user message goes on with the model
    model_2 = ScriptedModel(["Back again."])
    runner_2 = Runner(
        agent=Agent(name="a", model=model_2, tools=[lookup, hand_over]),
        store=store,
        app_name="app",
    )
    resumed = await runner_2.run(session_id="s", user_id="u", new_message="continue")
    assert (resumed.status, resumed.final_text) == ("completed", "Back again.")
