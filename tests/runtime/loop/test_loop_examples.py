"""The example tool adds few-shot examples chosen per request by a provider (seed 000)."""

from __future__ import annotations

from eventstore import EventStore
from runtime import (
    Agent,
    Example,
    ExampleCall,
    ExampleTool,
    ModelResponse,
    Runner,
    ScriptedModel,
    function_tool,
)

WEATHER = Example(
    input="Weather in Rome?",
    calls=[ExampleCall(name="get_weather", args={"city": "Rome"}, response={"c": 25})],
    answer="Rome: 25°C.",
)
GREETING = Example(input="Hi!", answer="Hello! Ask me about the weather.")
asked: list[str] = []


async def pick(query: str) -> list[Example]:
    asked.append(query)
    return [WEATHER] if "weather" in query.lower() else [GREETING]


@function_tool
def get_weather(city: str) -> dict[str, object]:
    """Return the weather."""
    return {"c": 22}


async def test_loop_examples_are_chosen_per_request_and_never_stored(store: EventStore) -> None:
    asked.clear()
    model = ScriptedModel(
        [ModelResponse.calling(("get_weather", {"city": "Oslo"})), "Oslo: 22°C.", "Hello!"]
    )
    agent = Agent(
        name="a", model=model, instruction="Be brief.", tools=[get_weather, ExampleTool(pick)]
    )
    runner = Runner(agent=agent, store=store, app_name="app")
    await runner.create_session(user_id="u", session_id="s")

    await runner.run(session_id="s", user_id="u", new_message="Weather in Oslo?")
    await runner.run(session_id="s", user_id="u", new_message="Hi there")

    first, second, third = model.requests
    assert first.instructions[0] == "Be brief."
    assert 'get_weather({"city":"Rome"})' in first.instructions[1]
    assert '[get_weather answers]\n{"c":25}' in first.instructions[1]
    assert "Rome: 25°C." in first.instructions[1]
    # the second request of the first invocation still keys on the newest user *text*
    assert second.instructions == first.instructions
    assert "Hello! Ask me about the weather." in third.instructions[1]
    assert "Rome" not in third.instructions[1]
    assert asked == ["Weather in Oslo?", "Weather in Oslo?", "Hi there"]
    # the example tool is never declared, and nothing of the examples is in the log
    assert [d.name for d in first.declarations] == ["get_weather"]
    stored = await store.read("s")
    assert all("Rome" not in (e.text() or "") for e in stored)
    assert all("example" not in str(e.custom_metadata) for e in stored)
    assert [e.text() for e in stored if e.author == "user" and e.text()] == [
        "Weather in Oslo?",
        "Hi there",
    ]


async def test_static_examples_and_replay_determinism(store: EventStore) -> None:
    tool = ExampleTool([GREETING])
    agent = Agent(name="a", model=ScriptedModel(["Hello!"]), tools=[tool])
    runner = Runner(agent=agent, store=store, app_name="app")
    await runner.create_session(user_id="u", session_id="s")
    await runner.run(session_id="s", user_id="u", new_message="Hi")
    ctx = await runner.new_context(session_id="s", user_id="u")
    once = await runner.build_request(ctx)
    twice = await runner.build_request(ctx)
    assert once.instructions == twice.instructions
    assert "EXAMPLE 1:\n[user]\nHi!\n[model]\nHello! Ask me" in once.instructions[0]
