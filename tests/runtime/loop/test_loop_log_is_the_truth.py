"""Nothing the loop decides is kept outside the log: a new runner on a new store object builds
exactly the request the first runner sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from _loop_support import BACKENDS, open_backend

from eventstore import EventStore, FunctionCall
from runtime import (
    Agent,
    InvocationContext,
    ModelRequest,
    ModelResponse,
    Runner,
    ScriptedModel,
    ToolContext,
    function_tool,
)


@function_tool
def get_weather(city: str, tool_context: ToolContext) -> dict[str, object]:
    """Return the weather of a city."""
    tool_context.state["last_city"] = city
    return {"city": city, "condition": "sunny"}


def instruction(readonly: object) -> str:
    state = getattr(readonly, "state", {})
    return f"Last city: {state.get('last_city', 'none')}."


def runner_on(store: EventStore, model: ScriptedModel) -> Runner:
    agent = Agent(name="weather_agent", model=model, instruction=instruction, tools=[get_weather])
    return Runner(agent=agent, store=store, app_name="weather")


def comparable(request: ModelRequest) -> tuple[object, ...]:
    return (
        request.instructions,
        request.contents,
        request.declarations,
        list(request.tools_by_name),
        request.native_tools,
    )


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_new_runner_and_store_build_the_same_requests(backend: str, tmp_path: Path) -> None:
    first_model = ScriptedModel(
        [
            ModelResponse.calling(
                FunctionCall(id="c1", name="get_weather", args={"city": "Oslo"}),
                FunctionCall(id="c2", name="get_weather", args={"city": "Rome"}),
            ),
            "Both sunny.",
        ]
    )
    first_store = await open_backend(backend, tmp_path)
    first = runner_on(first_store, first_model)
    await first.create_session(user_id="u", session_id="s")
    result = await first.run(session_id="s", user_id="u", new_message="Oslo and Rome?")
    versions_before_model_calls = [1, 4]  # after the user message; after the responses
    assert [e.seq for e in result.events] == [1, 2, 3, 4, 5]

    # Same store object for memory (nothing persists elsewhere); a new one on the same file else.
    second_store = first_store if backend == "memory" else await open_backend(backend, tmp_path)
    second = runner_on(second_store, ScriptedModel([]))
    for sent, version in zip(first_model.requests, versions_before_model_calls, strict=True):
        ctx = InvocationContext(
            store=second_store,
            session_id="s",
            app_name="weather",
            user_id="u",
            agent=second.agent,
            version=version,
        )
        assert comparable(await second.build_request(ctx)) == comparable(sent)

    # And the next request after the final answer is the same from either runner.
    ctx_first = await first.new_context(session_id="s", user_id="u")
    ctx_second = await second.new_context(session_id="s", user_id="u")
    assert comparable(await first.build_request(ctx_first)) == comparable(
        await second.build_request(ctx_second)
    )
    if second_store is not first_store:
        await second_store.aclose()
    await first_store.aclose()
