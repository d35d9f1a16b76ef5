"""``evs show`` of sessions the framework integrations wrote: what a person wants to read, not
the integrations' own records (ADK's ``_adk`` extension field) nor an empty tool name (OpenAI
Agents' ``function_call_output`` carries only the call id)."""

from __future__ import annotations

from pathlib import Path

import orjson
from _cli_support import AGENT, call, invoke, make_session

from eventstore import Content, Event, EventActions, FunctionResponse, Part


def test_show_hides_adk_extension_records_and_names_the_answered_tool(db: Path) -> None:
    make_session(str(db), [
        # What the ADK session service writes for create_session(state=…).
        Event(author="user", actions=EventActions(state_delta={"city": "Paris"}),
              custom_metadata={"_adk": {"create": True, "event": {"set": {"x": 1}}},
                               "trace": "t-1"}),
        Event(author=AGENT, content=Content(role="model", parts=(
            call("call_1", "get_weather", city="Paris"),))),
        # What the OpenAI Agents session writes for a function_call_output item.
        Event(author=AGENT, content=Content(role="user", parts=(Part(
            function_response=FunctionResponse(id="call_1", name="",
                                               response={"temp_c": 21})),))),
    ])
    result = invoke("show", "s1", "--db", str(db))
    assert result.exit_code == 0, result.stderr
    assert "_adk" not in result.stdout
    assert '"create"' not in result.stdout
    assert 'trace "t-1"' in result.stdout  # other metadata is still shown
    assert 'state city = "Paris"' in result.stdout
    assert "← get_weather [call_1] (call #2)" in result.stdout
    assert "←  [call_1]" not in result.stdout
    # The JSON keeps what is stored.
    shown = orjson.loads(invoke("show", "s1", "--db", str(db), "--json").stdout)
    assert shown["events"][2]["responses"][0]["name"] == ""


def test_show_reads_framework_records_as_calls_outputs_and_text(db: Path) -> None:
    # What an OpenAI Agents durable run (EventStoreRunner) and a pydantic-ai run keep beside
    # the protocol's events: the SDK's session items, the run's start and end, a pydantic-ai
    # request whose tool return is already the call's response.
    run = "run-1"
    make_session(str(db), [
        Event(author="user", custom_metadata={"openai_agents_run": {
            "run": run, "start": {"agent": AGENT, "input": "Weather in Paris?"}}}),
        Event(author=AGENT, content=Content(role="model", parts=(
            call("call_0@e1", "get_weather", city="Paris"),))),
        Event(author=AGENT, content=Content(role="user", parts=(Part(
            function_response=FunctionResponse(id="call_0@e1", name="get_weather",
                                               response={"output": {"temp_c": 21}})),))),
        Event(author="assistant", custom_metadata={
            "openai_agents": {"item": {"type": "function_call", "call_id": "call_0",
                                       "name": "get_weather",
                                       "arguments": '{"city": "Paris"}'}},
            "openai_agents_run": {"run": run, "item": 1}}),
        Event(author="user", custom_metadata={
            "openai_agents": {"item": {"type": "function_call_output", "call_id": "call_0",
                                       "output": "{'temp_c': 21}"}},
            "openai_agents_run": {"run": run, "item": 2}}),
        Event(author="user", custom_metadata={"pydantic_ai_message": {"kind": "request", "parts": [
            {"part_kind": "tool-return", "tool_name": "get_weather", "tool_call_id": "call_0@e1",
             "content": {"temp_c": 21}}]}}),
        Event(author="assistant", custom_metadata={
            "openai_agents": {"item": {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": "21 °C in Paris."}]}},
            "openai_agents_run": {"run": run, "item": 3}}),
        Event(author="user", custom_metadata={"openai_agents_run": {"run": run,
                                                                    "end": "completed"}}),
    ])
    result = invoke("show", "s1", "--db", str(db))
    assert result.exit_code == 0, result.stderr
    shown = result.stdout
    assert "openai_agents" not in shown
    assert "pydantic_ai_message" not in shown
    assert "run run-1 started: agent weather_agent, input “Weather in Paris?”" in shown
    assert '→ get_weather(city="Paris")  [call_0]  the framework\'s copy of call #2' in shown
    assert "← get_weather [call_0] (call #2) {'temp_c': 21}" in shown
    assert '← get_weather [call_0@e1] (call #2) {"temp_c":21}' in shown
    assert "“21 °C in Paris.”" in shown
    assert "run run-1 ended: completed" in shown
    assert shown.count("session item") == 3
    # The JSON says the same, beside what is stored.
    events = orjson.loads(invoke("show", "s1", "--db", str(db), "--json").stdout)["events"]
    assert events[3]["record_kind"] == "session item"
    assert events[3]["records"] == [{"shape": "call", "value": {"city": "Paris"},
                                     "name": "get_weather", "call_id": "call_0",
                                     "call_seq": 2, "error": False}]
    assert events[1]["records"] == []
