"""The hook points the replay processors use: resume planner, request processors, confirmations."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from eventstore import (
    REQUEST_CONFIRMATION_FUNCTION,
    Event,
    EventStore,
    FunctionCall,
    ToolConfirmation,
)
from runtime import (
    Agent,
    FunctionTool,
    InvocationContext,
    ModelRequest,
    ModelResponse,
    PlannedCall,
    ResumePlan,
    Runner,
    ScriptedModel,
    default_request_processors,
)

AGENT = "weather_agent"
ran: list[str] = []


def book_flight(city: str) -> dict[str, Any]:
    """Book a flight to a city."""
    ran.append(city)
    return {"booked": city}


BOOK = FunctionTool(book_flight, requires_confirmation=True)


class FixedPlanner:
    def __init__(self, plan: ResumePlan) -> None:
        self.plan_to_return = plan
        self.seen: list[list[Event]] = []

    async def plan(
        self, ctx: InvocationContext, events_newest_first: AsyncIterator[Event]
    ) -> ResumePlan:
        self.seen.append([e async for e in events_newest_first])
        return self.plan_to_return


async def test_confirmation_request_follows_the_error_response(store: EventStore) -> None:
    ran.clear()
    model = ScriptedModel(
        [
            ModelResponse.calling(
                FunctionCall(id="call-1", name="book_flight", args={"city": "Oslo"})
            )
        ]
    )
    runner = Runner(agent=Agent(name=AGENT, model=model, tools=[BOOK]), store=store, app_name="a")
    await runner.create_session(user_id="u", session_id="s")

    result = await runner.run(session_id="s", user_id="u", new_message="Book Oslo")

    assert result.status == "paused_for_confirmation"
    assert ran == []
    _user, _model, claim, response, request = result.events
    assert claim.started_call_ids == ("call-1",)
    (answer,) = response.function_responses()
    assert answer.response["error"]["kind"] == "confirmation_required"
    assert set(response.actions.requested_tool_confirmations) == {"call-1"}
    assert response.actions.skip_summarization
    (confirm,) = request.function_calls()
    assert request.author == AGENT
    assert request.content is not None
    assert request.content.role == "model"
    assert confirm.name == REQUEST_CONFIRMATION_FUNCTION
    assert confirm.id.startswith("confirm-")
    assert request.long_running_tool_ids == (confirm.id,)
    assert result.pending_call_ids == (confirm.id,)
    assert confirm.args["originalFunctionCall"] == {
        "id": "call-1",
        "name": "book_flight",
        "args": {"city": "Oslo"},
    }
    assert confirm.args["toolConfirmation"]["confirmed"] is False


async def test_planned_calls_run_through_claim_and_response_before_the_model(
    store: EventStore,
) -> None:
    ran.clear()
    model = ScriptedModel(["Booked."])
    planned = PlannedCall(
        call=FunctionCall(id="call-1", name="book_flight", args={"city": "Oslo"}),
        confirmation=ToolConfirmation(confirmed=True),
    )
    planner = FixedPlanner(ResumePlan(calls=(planned,)))
    runner = Runner(
        agent=Agent(name=AGENT, model=model, tools=[BOOK]),
        store=store,
        app_name="a",
        resume_planner=planner,
    )
    await runner.create_session(user_id="u", session_id="s")

    result = await runner.run(session_id="s", user_id="u", new_message="yes")

    assert ran == ["Oslo"]
    assert [e.seq for e in planner.seen[0]] == [1]
    user, claim, response, final = result.events
    assert user.text() == "yes"
    assert claim.started_call_ids == ("call-1",)
    assert [(r.id, r.response) for r in response.function_responses()] == [
        ("call-1", {"booked": "Oslo"})
    ]
    assert final.text() == "Booked."
    assert result.status == "completed"
    (request,) = model.requests
    assert request.contents[-1].parts[0].function_response is not None


async def test_rejected_planned_call_answers_with_a_rejection(store: EventStore) -> None:
    ran.clear()
    planned = PlannedCall(
        call=FunctionCall(id="call-1", name="book_flight", args={"city": "Oslo"}),
        confirmation=ToolConfirmation(confirmed=False),
    )
    runner = Runner(
        agent=Agent(name=AGENT, model=ScriptedModel(["Not booked."]), tools=[BOOK]),
        store=store,
        app_name="a",
        resume_planner=FixedPlanner(ResumePlan(calls=(planned,))),
    )
    await runner.create_session(user_id="u", session_id="s")
    result = await runner.run(session_id="s", user_id="u", new_message="no")
    assert ran == []
    (answer,) = result.events[2].function_responses()
    assert answer.response["error"]["kind"] == "confirmation_rejected"


async def test_planner_pause_stops_before_the_model(store: EventStore) -> None:
    model = ScriptedModel([])
    runner = Runner(
        agent=Agent(name=AGENT, model=model),
        store=store,
        app_name="a",
        resume_planner=FixedPlanner(ResumePlan(pause_reason="Call call-9 is in doubt.")),
    )
    await runner.create_session(user_id="u", session_id="s")
    result = await runner.run(session_id="s", user_id="u")
    assert result.status == "paused_by_planner"
    assert result.pause_reason == "Call call-9 is in doubt."
    assert result.events == ()
    assert model.requests == []


class Marker:
    async def process(self, ctx: InvocationContext, request: ModelRequest) -> None:
        request.instructions.append(f"{len(await ctx.events())} events, version {ctx.version}")


async def test_extra_request_processors_run_after_the_defaults(store: EventStore) -> None:
    model = ScriptedModel(["hi"])
    runner = Runner(
        agent=Agent(name=AGENT, model=model, instruction="Be brief."),
        store=store,
        app_name="a",
        request_processors=[*default_request_processors(), Marker()],
    )
    await runner.create_session(user_id="u", session_id="s")
    await runner.run(session_id="s", user_id="u", new_message="hello")
    assert model.requests[0].instructions == ["Be brief.", "1 events, version 1"]
