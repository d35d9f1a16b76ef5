"""Typed safe calls (never raise for tool errors) and the tool registry (seed 002)."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from eventstore import EventStore
from runtime import (
    Agent,
    ModelResponse,
    Runner,
    SafeTool,
    ScriptedModel,
    TerminationTool,
    ToolContext,
    ToolDefinitionError,
    ToolFailure,
    ToolNotFoundError,
    ToolRegistry,
    ToolSuccess,
    ToolValidationRefused,
    function_tool,
)
from runtime.tools import NO_RESPONSE, RESULT_NOT_DECODED


class Weather(BaseModel):
    city: str
    temperature_c: int


@function_tool
def get_weather(city: str, tool_context: ToolContext) -> Weather:
    """Return the weather."""
    if city == "Atlantis":
        raise ToolValidationRefused("No such city.")
    if city == "Nowhere":
        raise RuntimeError("backend down")
    tool_context.state["last_city"] = city
    return Weather(city=city, temperature_c=22)


@function_tool
def count(n: int) -> int:
    """Count."""
    return n + 1


@function_tool(is_long_running=True)
def later(job: str) -> None:
    """Start a job; the answer comes later."""


async def test_safe_call_returns_the_decoded_result_and_actions() -> None:
    outcome = await SafeTool(get_weather, Weather).call({"city": "Oslo"})
    assert isinstance(outcome, ToolSuccess)
    assert outcome.ok
    assert outcome.value == Weather(city="Oslo", temperature_c=22)
    assert outcome.actions.state_delta == {"last_city": "Oslo"}
    wrapped = await SafeTool(count, int).call({"n": 1})
    assert isinstance(wrapped, ToolSuccess)
    assert wrapped.value == 2
    assert wrapped.response == {"result": 2}


@pytest.mark.parametrize(
    ("tool", "args", "kind", "fragment"),
    [
        pytest.param(
            get_weather, {"city": "Atlantis"}, "validation_refused", "No such", id="refused"
        ),
        pytest.param(
            get_weather, {"city": "Nowhere"}, "execution_failed", "backend down", id="raised"
        ),
        pytest.param(get_weather, {}, "invalid_arguments", "city", id="bad-args"),
        pytest.param(later, {"job": "j"}, NO_RESPONSE, "deferred", id="deferred"),
    ],
)
async def test_safe_call_returns_a_typed_failure_and_never_raises(
    tool: object, args: dict[str, object], kind: str, fragment: str
) -> None:
    outcome = await SafeTool(tool, Weather).call(args)  # type: ignore[arg-type]
    assert isinstance(outcome, ToolFailure)
    assert not outcome.ok
    assert outcome.kind == kind
    assert fragment in outcome.message


async def test_safe_call_result_of_the_wrong_type_is_a_failure() -> None:
    outcome = await SafeTool(count, Weather).call({"n": 1})
    assert isinstance(outcome, ToolFailure)
    assert outcome.kind == RESULT_NOT_DECODED
    assert outcome.response == {"result": 2}


async def test_safe_call_runs_callbacks_and_propagates_cancellation() -> None:
    from runtime.tools import ToolCallbacks

    replaced = SafeTool(
        count, int, callbacks=ToolCallbacks(before=(lambda tool, args, ctx: {"result": 41},))
    )
    outcome = await replaced.call({"n": 1})
    assert isinstance(outcome, ToolSuccess)
    assert outcome.value == 41

    @function_tool
    async def slow() -> int:
        """Sleeps."""
        await asyncio.sleep(10)
        return 1

    task = asyncio.ensure_future(SafeTool(slow, int).call({}))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_registry_looks_up_by_name_and_type() -> None:
    terminate = TerminationTool()
    registry = ToolRegistry([get_weather, count, terminate])
    assert registry.names == ["get_weather", "count", "__terminate__"]
    assert registry.get("count") is count
    assert "count" in registry
    assert len(registry) == 3
    assert registry.get_or_none("nope") is None
    with pytest.raises(ToolNotFoundError, match="available tools: __terminate__, count"):
        registry.get("nope")
    assert registry.get_by_type(TerminationTool) is terminate
    with pytest.raises(ToolNotFoundError):
        ToolRegistry([count]).get_by_type(TerminationTool)
    with pytest.raises(ToolDefinitionError, match="2 tools of type FunctionTool"):
        ToolRegistry([count, get_weather]).get_by_type(type(count))


def test_registry_merge_refuses_a_duplicate_name_naming_both_sources() -> None:
    first = ToolRegistry([get_weather], source="weather module")
    second = ToolRegistry([count], source="math module")
    merged = first + second
    assert merged.names == ["get_weather", "count"]
    assert first.names == ["get_weather"]
    assert merged.source_of("count") == "math module"
    with pytest.raises(ToolDefinitionError, match=r"defined twice: by weather module and by other"):
        merged.merge(ToolRegistry([get_weather], source="other"))
    with pytest.raises(ToolDefinitionError, match="defined twice"):
        Agent(name="a", model=ScriptedModel([]), tools=[count, count])


async def test_registry_safe_lookup_calls_by_name() -> None:
    registry = ToolRegistry([count])
    outcome = await registry.safe("count", int).call({"n": 4})
    assert isinstance(outcome, ToolSuccess)
    assert outcome.value == 5


async def test_agent_uses_a_registry_in_the_loop(tmp_path: object) -> None:
    from pathlib import Path

    from eventstore import open_store

    registry = ToolRegistry([count], source="math") + ToolRegistry([get_weather], source="weather")
    model = ScriptedModel([ModelResponse.calling(("count", {"n": 1})), "2."])
    agent = Agent(name="a", model=model, tools=registry)
    assert agent.registry is registry
    assert agent.tools == (count, get_weather)
    store: EventStore
    async with await open_store(Path(str(tmp_path)) / "r.db", auto_upgrade=True) as store:
        runner = Runner(agent=agent, store=store, app_name="app")
        await runner.create_session(user_id="u", session_id="s")
        result = await runner.run(session_id="s", user_id="u", new_message="go")
        assert result.final_text == "2."
        (answer,) = (await store.read("s"))[3].function_responses()
        assert answer.response == {"result": 2}
    assert [d.name for d in model.requests[0].declarations] == ["count", "get_weather"]
