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
