"""The scenarios of pydantic-ai's durable-execution tests (``tests/test_dbos.py``,
``test_temporal.py``, ``test_prefect.py``), re-expressed against ``EventStoreAgent``: the same
agents, tools, deferrals and assertions, with the wrapper swapped and the workflow engine gone.

The upstream tests drive OpenAI through recorded HTTP cassettes; here each scenario's model is a
``FunctionModel`` that answers what the cassette answered, so the scenarios run offline. Each
scenario is ``async def scenario(wrap)`` where ``wrap(agent)`` returns the agent wrapped on the
backend under test; it raises AssertionError on a difference. ``SCENARIOS`` maps an upstream
test name to the scenario that expresses it (see ``scripts/run_pydantic_ai_durable_tests.py``).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_ai import (
    Agent,
    ApprovalRequired,
    CallDeferred,
    DeferredToolRequests,
    DeferredToolResults,
    ExternalToolset,
    FunctionToolset,
    ModelRetry,
    RunContext,
)
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import (
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelResponse,
    PartStartEvent,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition

Wrap = Callable[[Agent[Any, Any]], Any]
Scenario = Callable[[Wrap], Awaitable[None]]
MCP_SERVER = Path(__file__).resolve().parent.parent / "tests" / "runtime" / "mcp" / "_mcp_server.py"


def _sid() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def _returns(messages: list[ModelMessage]) -> dict[str, Any]:
    return {p.tool_name: p.content for m in messages for p in m.parts
            if isinstance(p, ToolReturnPart)}


def scripted(script: Callable[[list[ModelMessage], AgentInfo], ModelResponse]) -> FunctionModel:
    """A FunctionModel that answers ``script`` both plainly and streamed."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        response = script(messages, info)
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                yield part.content
            elif isinstance(part, ToolCallPart):
                yield {index: DeltaToolCall(name=part.tool_name, json_args=part.args_as_json_str(),
                                            tool_call_id=part.tool_call_id)}

    return FunctionModel(script, stream_function=stream)


# --- simple agent: run, run_sync, run_stream, run_stream_events, iter --------------------------

def _capital(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("The capital of Mexico is Mexico City.")])


async def simple_run(wrap: Wrap) -> None:
    agent = wrap(Agent(scripted(_capital), name="simple_agent"))
    result = await agent.run("What is the capital of Mexico?", session_id=_sid())
    assert result.output == "The capital of Mexico is Mexico City."


async def simple_run_sync(wrap: Wrap) -> None:
    import asyncio

    agent = wrap(Agent(scripted(_capital), name="simple_agent"))
    sid = _sid()
    result = await asyncio.to_thread(agent.run_sync, "What is the capital of Mexico?",
                                     session_id=sid)
    assert result.output == "The capital of Mexico is Mexico City."


async def simple_run_stream(wrap: Wrap) -> None:
    agent = wrap(Agent(scripted(_capital), name="simple_agent"))
    async with agent.run_stream("What is the capital of Mexico?", session_id=_sid()) as result:
        chunks = [c async for c in result.stream_text(debounce_by=None)]
    assert chunks[-1] == "The capital of Mexico is Mexico City."


async def simple_run_stream_events(wrap: Wrap) -> None:
    agent = wrap(Agent(scripted(_capital), name="simple_agent"))
    async with agent.run_stream_events("What is the capital of Mexico?",
                                       session_id=_sid()) as stream:
        events = [e async for e in stream]
    assert events[-1].result.output == "The capital of Mexico is Mexico City."


async def simple_iter(wrap: Wrap) -> None:
    agent = wrap(Agent(scripted(_capital), name="simple_agent"))
    async with agent.iter("What is the capital of Mexico?", session_id=_sid()) as run:
        nodes = [type(n).__name__ async for n in run]
    assert nodes == ["UserPromptNode", "ModelRequestNode", "CallToolsNode", "End"]
    assert run.result is not None
    assert run.result.output == "The capital of Mexico is Mexico City."


async def runtime_event_stream_handler(wrap: Wrap) -> None:
    async def hello(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield "Hello"
        yield " world"

    seen: list[str] = []

    async def handler(ctx: RunContext[Any], stream: Any) -> None:
        async for event in stream:
            seen.append(type(event).__name__)

    agent = wrap(Agent(FunctionModel(stream_function=hello), name="runtime_handler_stream_agent"))
    result = await agent.run("Hi", session_id=_sid(), event_stream_handler=handler)
    assert result.output == "Hello world"
    assert "PartStartEvent" in seen
    assert "PartDeltaEvent" in seen


async def run_with_model(wrap: Wrap) -> None:
    agent = wrap(Agent(scripted(_capital), name="simple_agent"))
    result = await agent.run("Hi", session_id=_sid(), model=TestModel(custom_output_text="x"))
    assert result.output == "x"


async def run_with_toolsets(wrap: Wrap) -> None:
    toolset = FunctionToolset[None]()

    @toolset.tool_plain
    def ping() -> str:
        return "pong"

    agent = wrap(Agent(TestModel(), name="toolsets_agent"))
    result = await agent.run("Hi", session_id=_sid(), toolsets=[toolset])
    assert _returns(result.all_messages()) == {"ping": "pong"}


async def run_with_runtime_external_toolset(wrap: Wrap) -> None:
    external = ExternalToolset([ToolDefinition(name="external", parameters_json_schema={
        "type": "object", "properties": {}})])
    agent = wrap(Agent(TestModel(), name="ext_agent", output_type=[str, DeferredToolRequests]))
    result = await agent.run("Hi", session_id=_sid(), toolsets=[external])
    assert isinstance(result.output, DeferredToolRequests)
    assert [c.tool_name for c in result.output.calls] == ["external"]


# --- the complex agent: deps, function toolset, MCP, external toolset, structured output ------

class Deps(BaseModel):
    country: str


@dataclass
class Answer:
    label: str
    answer: str


@dataclass
class Response:
    answers: list[Answer]


def _complex(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    done = _returns(messages)
    if "get_country" not in done:
        return ModelResponse(parts=[ToolCallPart("get_country", {}, "k1"),
                                    ToolCallPart("lookup", {"key": "product"}, "k2")])
    if "get_weather" not in done:
        return ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Mexico City"}, "k3")])
    return ModelResponse(parts=[ToolCallPart("final_result", {"answers": [
        {"label": "Capital of the country", "answer": "Mexico City"},
        {"label": "Weather in the capital", "answer": done["get_weather"].capitalize()},
        {"label": "Product name", "answer": str(done["lookup"])},
    ]}, "k4")])


def complex_agent() -> Agent[Deps, Response]:
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    async def get_country(ctx: RunContext[Deps]) -> str:
        return ctx.deps.country

    def get_weather(city: str) -> str:
        return "sunny" if city == "Mexico City" else "unknown"

    counter = Path(f"/tmp/pai-mcp-{uuid.uuid4().hex[:8]}.txt")
    mcp = MCPToolset(StdioTransport(command=sys.executable,
                                    args=[str(MCP_SERVER), "--counter", str(counter)]), id="mcp")
    return Agent(
        scripted(_complex), deps_type=Deps, output_type=Response, name="complex_agent",
        toolsets=[FunctionToolset[Deps](tools=[get_country], id="country"), mcp,
                  ExternalToolset(tool_defs=[ToolDefinition(name="external")], id="external")],
        tools=[get_weather],
    )


async def complex_run(wrap: Wrap) -> None:
    seen: list[type] = []

    async def handler(ctx: RunContext[Any], stream: Any) -> None:
        async for event in stream:
            seen.append(type(event))

    agent = wrap(complex_agent())
    result = await agent.run("Tell me: the capital of the country; the weather there; the "
                             "product name", deps=Deps(country="Mexico"), session_id=_sid(),
                             event_stream_handler=handler)
    assert [a.label for a in result.output.answers] == [
        "Capital of the country", "Weather in the capital", "Product name"]
    assert result.output.answers[1].answer == "Sunny"
    for kind in (PartStartEvent, FunctionToolCallEvent, FunctionToolResultEvent):
        assert kind in seen, kind


async def complex_run_sequential(wrap: Wrap) -> None:
    agent = wrap(complex_agent())
    with agent.parallel_tool_call_execution_mode("sequential"):
        result = await agent.run("Tell me", deps=Deps(country="Mexico"), session_id=_sid())
    assert result.output.answers[0].answer == "Mexico City"


# --- deferred tools (human in the loop), model retry, tool failed, settings, deps -------------

def _hitl(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    done = _returns(messages)
    if not done:
        return ModelResponse(parts=[ToolCallPart("delete_file", {"path": ".env"}, "h1"),
                                    ToolCallPart("create_file", {"path": "test.txt"}, "h2")])
    return ModelResponse(parts=[TextPart(
        "The file `.env` has been deleted and `test.txt` has been created successfully.")])


def hitl_agent() -> Agent[None, Any]:
    agent: Agent[None, Any] = Agent(
        scripted(_hitl), name="hitl_agent", output_type=[str, DeferredToolRequests],
        instructions="Just call tools without asking for confirmation.")

    @agent.tool
    def create_file(ctx: RunContext, path: str) -> None:
        raise CallDeferred

    @agent.tool
    def delete_file(ctx: RunContext, path: str) -> bool:
        if not ctx.tool_call_approved:
            raise ApprovalRequired
        return True

    return agent


async def hitl_tool(wrap: Wrap) -> None:
    agent = wrap(hitl_agent())
    sid = _sid()
    results: DeferredToolResults | None = None
    result = await agent.run("Delete the file `.env` and create `test.txt`", session_id=sid)
    for _ in range(4):
        if not isinstance(result.output, DeferredToolRequests):
            break
        results = DeferredToolResults()
        for call in result.output.approvals:
            results.approvals[call.tool_call_id] = True
        for call in result.output.calls:
            results.calls[call.tool_call_id] = "Success"
        result = await agent.run(session_id=sid, deferred_tool_results=results)
    assert result.output == ("The file `.env` has been deleted and `test.txt` has been "
                             "created successfully.")
    assert _returns(result.all_messages()) == {"delete_file": True, "create_file": "Success"}


def _retry(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    retried = any(isinstance(p, ToolReturnPart) and p.outcome == "retried"
                  for m in messages for p in m.parts)
    done = _returns(messages)
    if not retried:
        return ModelResponse(parts=[ToolCallPart("get_weather_in_city", {"city": "CDMX"}, "r1")])
    if done.get("get_weather_in_city") != "sunny":
        return ModelResponse(parts=[ToolCallPart("get_weather_in_city",
                                                 {"city": "Mexico City"}, "r2")])
    return ModelResponse(parts=[TextPart("The weather in Mexico City is currently sunny.")])


async def model_retry(wrap: Wrap) -> None:
    agent: Agent[None, str] = Agent(scripted(_retry), name="model_retry_agent")

    @agent.tool_plain
    def get_weather_in_city(city: str) -> str:
        if city != "Mexico City":
            raise ModelRetry("Did you mean Mexico City?")
        return "sunny"

    result = await wrap(agent).run("What is the weather in CDMX?", session_id=_sid())
    assert result.output == "The weather in Mexico City is currently sunny."


async def tool_failed(wrap: Wrap) -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if _returns(messages):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("failing_tool", {}, "f1")])

    agent: Agent[None, str] = Agent(scripted(model), name="tool_failed_agent")

    @agent.tool_plain
    def failing_tool() -> str:
        raise ToolFailed("Disk full")

    result = await wrap(agent).run("Call the failing tool", session_id=_sid())
    parts = [(p.tool_name, p.content, p.outcome) for m in result.all_messages()
             for p in m.parts if isinstance(p, ToolReturnPart)]
    assert parts == [("failing_tool", "Disk full", "failed")]


async def custom_model_settings(wrap: Wrap) -> None:
    def settings(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(str(info.model_settings))])

    agent = Agent(FunctionModel(settings, settings=ModelSettings(max_tokens=123)),
                  name="settings_agent")
    result = await wrap(agent).run("Give me those settings", session_id=_sid())
    assert result.output == "{'max_tokens': 123}"


async def unserializable_deps(wrap: Wrap) -> None:
    class Unserializable:
        lock = __import__("threading").Lock()

    agent: Agent[Any, str] = Agent(TestModel(), name="deps_agent", deps_type=Unserializable)

    @agent.tool
    def uses_deps(ctx: RunContext[Any]) -> str:
        return type(ctx.deps).__name__

    result = await wrap(agent).run("Hi", deps=Unserializable(), session_id=_sid())
    assert result.output == '{"uses_deps":"Unserializable"}'


async def output_retry(wrap: Wrap) -> None:
    class Order(BaseModel):
        price: int

    agent: Agent[None, Order] = Agent(TestModel(custom_output_args={"price": 1}),
                                      name="output_agent", output_type=Order)
    tries: list[int] = []

    @agent.output_validator
    def check(order: Order) -> Order:
        tries.append(order.price)
        if len(tries) < 2:
            raise ModelRetry("try again")
        return order

    result = await wrap(agent).run("Order", session_id=_sid())
    assert result.output == Order(price=1)
    assert len(tries) == 2


async def multiple_agents(wrap: Wrap) -> None:
    one = wrap(Agent(TestModel(custom_output_text="one"), name="a1"))
    two = wrap(Agent(TestModel(custom_output_text="two"), name="a2"))
    assert (await one.run("x", session_id=_sid())).output == "one"
    assert (await two.run("x", session_id=_sid())).output == "two"


async def dynamic_toolset(wrap: Wrap) -> None:
    agent: Agent[dict[str, bool], str] = Agent(TestModel(), name="dynamic_agent",
                                               deps_type=dict)

    @agent.toolset
    def pick(ctx: RunContext[dict[str, bool]]) -> FunctionToolset[Any]:
        toolset = FunctionToolset[Any]()

        @toolset.tool_plain
        def weather() -> str:
            return "raining"

        return toolset

    result = await wrap(agent).run("Toggle", deps={}, session_id=_sid())
    assert result.output == '{"weather":"raining"}'


SCENARIOS: dict[str, Scenario] = {
    # test_dbos.py
    "test_dbos.py::test_simple_agent_run_in_workflow": simple_run,
    "test_dbos.py::test_complex_agent_run_in_workflow": complex_run,
    "test_dbos.py::test_complex_agent_run_sequential_tool": complex_run_sequential,
    "test_dbos.py::test_dbos_agent_run_in_workflow_with_runtime_event_stream_handler":
        runtime_event_stream_handler,
    "test_dbos.py::test_multiple_agents": multiple_agents,
    "test_dbos.py::test_dbos_agent_run": simple_run,
    "test_dbos.py::test_dbos_agent_run_sync": simple_run_sync,
    "test_dbos.py::test_dbos_agent_run_stream": simple_run_stream,
    "test_dbos.py::test_dbos_agent_run_stream_events": simple_run_stream_events,
    "test_dbos.py::test_dbos_agent_iter": simple_iter,
    "test_dbos.py::test_dbos_agent_run_sync_in_workflow": simple_run_sync,
    "test_dbos.py::test_dbos_agent_run_stream_in_workflow": simple_run_stream,
    "test_dbos.py::test_dbos_agent_run_stream_events_in_workflow": simple_run_stream_events,
    "test_dbos.py::test_dbos_agent_iter_in_workflow": simple_iter,
    "test_dbos.py::test_dbos_agent_run_in_workflow_with_event_stream_handler":
        runtime_event_stream_handler,
    "test_dbos.py::test_dbos_agent_run_in_workflow_with_model": run_with_model,
    "test_dbos.py::test_dbos_agent_run_in_workflow_with_toolsets": run_with_toolsets,
    "test_dbos.py::test_dbos_agent_run_in_workflow_with_runtime_external_toolset":
        run_with_runtime_external_toolset,
    "test_dbos.py::test_dbos_agent_run_in_workflow_with_runtime_function_toolset":
        run_with_toolsets,
    "test_dbos.py::test_dbos_agent_with_unserializable_deps_type": unserializable_deps,
    "test_dbos.py::test_dynamic_toolset": dynamic_toolset,
    "test_dbos.py::test_dbos_agent_with_hitl_tool": hitl_tool,
    "test_dbos.py::test_dbos_agent_with_hitl_tool_sync": hitl_tool,
    "test_dbos.py::test_dbos_agent_with_model_retry": model_retry,
    "test_dbos.py::test_dbos_agent_with_tool_failed": tool_failed,
    "test_dbos.py::test_custom_model_settings": custom_model_settings,
    # test_temporal.py
    "test_temporal.py::test_simple_agent_run_in_workflow": simple_run,
    "test_temporal.py::test_complex_agent_run_in_workflow": complex_run,
    "test_temporal.py::test_multiple_agents": multiple_agents,
    "test_temporal.py::test_temporal_agent_run": simple_run,
    "test_temporal.py::test_temporal_agent_run_sync": simple_run_sync,
    "test_temporal.py::test_temporal_agent_run_stream": simple_run_stream,
    "test_temporal.py::test_temporal_agent_run_stream_events": simple_run_stream_events,
    "test_temporal.py::test_temporal_agent_iter": simple_iter,
    "test_temporal.py::test_temporal_agent_with_hitl_tool": hitl_tool,
    "test_temporal.py::test_temporal_agent_with_model_retry": model_retry,
    "test_temporal.py::test_custom_model_settings": custom_model_settings,
    "test_temporal.py::test_temporal_agent_with_unserializable_deps_type": unserializable_deps,
    "test_temporal.py::test_complex_agent_run": complex_run,
    "test_temporal.py::test_dynamic_toolset_in_workflow": dynamic_toolset,
    "test_temporal.py::test_dynamic_toolset_outside_workflow": dynamic_toolset,
    "test_temporal.py::test_temporal_agent_run_sync_in_workflow": simple_run_sync,
    "test_temporal.py::test_temporal_agent_run_stream_in_workflow": simple_run_stream,
    "test_temporal.py::test_temporal_agent_run_stream_events_in_workflow":
        simple_run_stream_events,
    "test_temporal.py::test_temporal_agent_iter_in_workflow": simple_iter,
    "test_temporal.py::test_temporal_agent_run_in_workflow_with_event_stream_handler":
        runtime_event_stream_handler,
    "test_temporal.py::test_temporal_agent_run_in_workflow_with_model": run_with_model,
    "test_temporal.py::test_temporal_agent_run_in_workflow_with_executing_toolsets":
        run_with_toolsets,
    "test_temporal.py::test_temporal_agent_run_in_workflow_with_runtime_external_toolset":
        run_with_runtime_external_toolset,
    "test_temporal.py::test_temporal_agent_with_tool_failed": tool_failed,
    # test_prefect.py
    "test_prefect.py::test_simple_agent_run_in_flow": simple_run,
    "test_prefect.py::test_complex_agent_run_in_flow": complex_run,
    "test_prefect.py::test_multiple_agents": multiple_agents,
    "test_prefect.py::test_prefect_agent_run": simple_run,
    "test_prefect.py::test_prefect_agent_run_sync": simple_run_sync,
    "test_prefect.py::test_prefect_agent_run_stream": simple_run_stream,
    "test_prefect.py::test_prefect_agent_run_stream_events": simple_run_stream_events,
    "test_prefect.py::test_prefect_agent_iter": simple_iter,
    "test_prefect.py::test_prefect_agent_with_hitl_tool": hitl_tool,
    "test_prefect.py::test_prefect_agent_with_model_retry": model_retry,
    "test_prefect.py::test_custom_model_settings": custom_model_settings,
    "test_prefect.py::test_prefect_agent_with_unserializable_deps_type": unserializable_deps,
    "test_prefect.py::test_prefect_agent_run_in_flow_with_runtime_event_stream_handler":
        runtime_event_stream_handler,
    "test_prefect.py::test_run_sync_in_flow": simple_run_sync,
    "test_prefect.py::test_run_stream_in_flow": simple_run_stream,
    "test_prefect.py::test_run_stream_events_in_flow": simple_run_stream_events,
    "test_prefect.py::test_iter_in_flow": simple_iter,
    "test_prefect.py::test_prefect_agent_run_with_model": run_with_model,
    "test_prefect.py::test_prefect_agent_run_with_runtime_external_toolset":
        run_with_runtime_external_toolset,
    "test_prefect.py::test_prefect_agent_with_hitl_tool_sync": hitl_tool,
    "test_prefect.py::test_prefect_agent_with_tool_failed": tool_failed,
    "test_prefect.py::test_dynamic_toolset": dynamic_toolset,
    "test_prefect.py::test_flow_retry_replays_tool_result": model_retry,
}
"""Upstream test (``file::name``) → the scenario that expresses it here."""
