"""The termination tool ends the invocation with its argument as the final result (seed 002)."""

from __future__ import annotations

import pytest

from eventstore import EventStore, FunctionCall
from runtime import Agent, ModelResponse, Runner, ScriptedModel, TerminationTool, function_tool
from runtime.tools import TERMINATE_TOOL_NAME

ran: list[str] = []


@function_tool
def lookup(city: str) -> dict[str, object]:
    """Look a city up."""
    ran.append(city)
    return {"city": city, "temperature_c": 22}


@pytest.mark.parametrize(
    ("argument", "final_text"),
    [
        pytest.param("Oslo: 22°C.", "Oslo: 22°C.", id="text"),
        pytest.param({"city": "Oslo", "c": 22}, '{"c":22,"city":"Oslo"}', id="object"),
    ],
)
async def test_loop_terminate_ends_the_invocation_with_its_argument(
    store: EventStore, argument: object, final_text: str
) -> None:
    schema = {"type": "object"} if isinstance(argument, dict) else None
    model = ScriptedModel(
        [
            ModelResponse.calling(FunctionCall(id="c1", name="lookup", args={"city": "Oslo"})),
            ModelResponse.calling(
                FunctionCall(id="t1", name=TERMINATE_TOOL_NAME, args={"result": argument})
            ),
            "never asked",
        ]
    )
    agent = Agent(name="a", model=model, tools=[lookup, TerminationTool(result_schema=schema)])
    runner = Runner(agent=agent, store=store, app_name="app")
    await runner.create_session(user_id="u", session_id="s")

    result = await runner.run(session_id="s", user_id="u", new_message="weather?")

    assert result.status == "completed"
    assert result.final_text == final_text
    assert model.remaining == 1  # no model call after the termination
    stored = await store.read("s")
    # user, turn, claim, response, turn(terminate), claim, terminate response, final text
    assert len(stored) == 8
    (answer,) = stored[6].function_responses()
    assert (answer.id, answer.name, answer.response) == (
        "t1",
        "__terminate__",
        {"result": argument},
    )
    assert stored[6].actions.skip_summarization
    assert stored[7].content is not None
    assert stored[7].content.role == "model"
    assert stored[7].text() == final_text
    assert stored[7].turn_complete
    # a fresh run with nothing new sees the session as complete, without a model call
    again = await runner.run(session_id="s", user_id="u")
    assert (again.status, again.final_text, again.events) == ("completed", final_text, ())


async def test_loop_terminate_without_result_is_an_error_the_model_sees(
    store: EventStore,
) -> None:
    model = ScriptedModel(
        [
            ModelResponse.calling(FunctionCall(id="t1", name=TERMINATE_TOOL_NAME, args={})),
            "Sorry.",
        ]
    )
    runner = Runner(
        agent=Agent(name="a", model=model, tools=[TerminationTool()]), store=store, app_name="app"
    )
    await runner.create_session(user_id="u", session_id="s")
    result = await runner.run(session_id="s", user_id="u", new_message="go")
    assert result.final_text == "Sorry."
    (answer,) = (await store.read("s"))[3].function_responses()
    assert answer.response["error"]["kind"] == "invalid_arguments"
    assert [d.name for d in model.requests[0].declarations] == ["__terminate__"]
