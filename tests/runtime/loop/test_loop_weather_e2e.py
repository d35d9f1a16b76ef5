"""End to end: a weather agent calls two tools in parallel, one fails, then it answers."""

from __future__ import annotations

import os
import socket
from typing import Any

from eventstore import Content, EventStore, FunctionCall, Part
from runtime import (
    Agent,
    ModelResponse,
    Runner,
    ScriptedModel,
    ToolContext,
    function_tool,
    idempotency_key,
)

AGENT = "weather_agent"


@function_tool
def get_weather(city: str, tool_context: ToolContext) -> dict[str, Any]:
    """Return the weather of a city.

    Args:
        city: The city name.
    """
    if city == "Atlantis":
        raise ConnectionError("the weather service has no station in Atlantis")
    tool_context.state["last_city"] = city
    return {"city": city, "temperature_c": 22, "condition": "sunny"}


def weather_runner(store: EventStore) -> tuple[Runner, ScriptedModel]:
    model = ScriptedModel(
        [
            ModelResponse(
                function_calls=(
                    FunctionCall(id="call-paris", name="get_weather", args={"city": "Paris"}),
                    FunctionCall(id="call-atl", name="get_weather", args={"city": "Atlantis"}),
                )
            ),
            "Paris is sunny at 22°C; I could not get the weather for Atlantis.",
        ]
    )
    agent = Agent(
        name=AGENT, model=model, instruction="You report the weather.", tools=[get_weather]
    )
    return Runner(agent=agent, store=store, app_name="weather"), model


async def test_weather_agent_history_is_exactly_the_expected_events(store: EventStore) -> None:
    runner, model = weather_runner(store)
    await runner.create_session(user_id="u1", session_id="s1")

    result = await runner.run(
        session_id="s1", user_id="u1", new_message="Weather in Paris and Atlantis?"
    )

    assert result.status == "completed"
    assert result.final_text == "Paris is sunny at 22°C; I could not get the weather for Atlantis."
    history = (await store.get_session("s1")).events
    assert [e.seq for e in history] == [1, 2, 3, 4, 5]
    assert list(result.events) == history
    assert {e.invocation_id for e in history} == {result.invocation_id}
    assert all(e.branch is None for e in history)
    user, model_turn, claim, responses, final = history

    assert (user.author, user.content) == (
        "user",
        Content(role="user", parts=(Part(text="Weather in Paris and Atlantis?"),)),
    )

    assert model_turn.author == AGENT
    assert model_turn.content is not None
    assert model_turn.content.role == "model"
    assert [(c.id, c.name, c.args) for c in model_turn.function_calls()] == [
        ("call-paris", "get_weather", {"city": "Paris"}),
        ("call-atl", "get_weather", {"city": "Atlantis"}),
    ]
    assert model_turn.long_running_tool_ids == ()
    assert model_turn.turn_complete

    assert claim.author == AGENT
    assert claim.content is None
    assert claim.started_call_ids == ("call-paris", "call-atl")
    claimed_by = claim.custom_metadata["claimed_by"]
    assert claim.custom_metadata == {
        "idempotency_keys": {
            "call-paris": idempotency_key("s1", "call-paris"),
            "call-atl": idempotency_key("s1", "call-atl"),
        },
        "claimed_by": {
            "invocation_id": claim.invocation_id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "at": claimed_by["at"],
        },
    }
    assert abs(claimed_by["at"] - claim.timestamp) < 5

    assert responses.author == AGENT
    assert responses.content is not None
    assert responses.content.role == "user"
    assert [(r.id, r.name, r.response) for r in responses.function_responses()] == [
        ("call-paris", "get_weather", {"city": "Paris", "temperature_c": 22, "condition": "sunny"}),
        (
            "call-atl",
            "get_weather",
            {
                "error": {
                    "kind": "execution_failed",
                    "tool": "get_weather",
                    "message": "Tool 'get_weather' failed: ConnectionError: the weather "
                    "service has no station in Atlantis",
                }
            },
        ),
    ]
    assert responses.actions.state_delta == {"last_city": "Paris"}
    assert not responses.actions.skip_summarization

    assert final.author == AGENT
    assert final.content == Content(
        role="model",
        parts=(Part(text="Paris is sunny at 22°C; I could not get the weather for Atlantis."),),
    )
    assert final.is_final_response()
    assert await store.state("s1") == {"last_city": "Paris"}

    # The second request carried the whole exchange, rebuilt from the log.
    first, second = model.requests
    assert first.instructions == second.instructions == ["You report the weather."]
    assert [d.name for d in second.declarations] == ["get_weather"]
    assert [c.role for c in second.contents] == ["user", "model", "user"]
    assert second.contents[2] == responses.content
