"""End to end: a paid weather lookup needs confirmation; another process answers; it runs once."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from eventstore import REQUEST_CONFIRMATION_FUNCTION, FunctionCall, event_kind, open_store
from runtime import Agent, ModelResponse, Runner, ScriptedModel, ToolContext, function_tool
from runtime.replay import ReplayResumePlanner, pending, plan_resume

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
ANSWER = """
import asyncio, sys
from eventstore import open_store
from runtime.replay import answer_confirmation

async def main():
    async with await open_store(sys.argv[1], auto_upgrade=True) as store:
        await answer_confirmation(store, session_id="s", confirmation_id=sys.argv[2],
                                  confirmed=True, payload={"max_cents": 5})

asyncio.run(main())
"""


async def test_weather_e2e_confirmation_answered_by_another_process(tmp_path: Path) -> None:
    db = tmp_path / "weather.db"
    executions: list[dict[str, Any]] = []

    @function_tool(requires_confirmation=lambda args: args["city"] != "Home")
    def paid_weather(city: str, tool_context: ToolContext) -> dict[str, Any]:
        """Weather from a paid service (1 cent per lookup).

        Args:
            city: The city name.
        """
        confirmation = tool_context.tool_confirmation
        executions.append({"city": city, "payload": confirmation and confirmation.payload})
        tool_context.state["last_city"] = city
        return {"city": city, "temperature_c": 22, "condition": "sunny"}

    model = ScriptedModel(
        [
            ModelResponse(
                function_calls=(
                    FunctionCall(id="call-weather-1", name="paid_weather", args={"city": "Tokyo"}),
                )
            ),
            "Tokyo: 22°C and sunny.",
        ]
    )
    agent = Agent(name="weather_agent", model=model, tools=[paid_weather])

    async with await open_store(db, auto_upgrade=True) as store:
        runner = Runner(
            agent=agent, store=store, app_name="weather", resume_planner=ReplayResumePlanner()
        )
        await runner.create_session(user_id="u", session_id="s")
        first = await runner.run(session_id="s", user_id="u", new_message="Weather in Tokyo?")
        assert first.status == "paused_for_confirmation"
        (confirmation_id,) = first.pending_call_ids
        assert executions == []

    answered = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        ANSWER,
        str(db),
        confirmation_id,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(answered.communicate(), timeout=60)
    assert answered.returncode == 0, stderr.decode()

    async with await open_store(db, auto_upgrade=True) as store:
        runner = Runner(
            agent=agent, store=store, app_name="weather", resume_planner=ReplayResumePlanner()
        )
        second = await runner.run(session_id="s", user_id="u")
        assert second.status == "completed"
        assert second.final_text == "Tokyo: 22°C and sunny."
        history = (await store.get_session("s")).events

    assert executions == [{"city": "Tokyo", "payload": {"max_cents": 5}}]
    assert [(e.author, event_kind(e)) for e in history] == [
        ("user", "message"),
        ("weather_agent", "function_call"),
        ("weather_agent", "execution_started"),
        ("weather_agent", "function_response"),
        ("weather_agent", "confirmation_request"),
        ("user", "confirmation_answer"),
        ("weather_agent", "execution_started"),
        ("weather_agent", "function_response"),
        ("weather_agent", "message"),
    ]
    assert len(history) == 9  # nothing else: no duplicate claim, response or model turn
    assert [e.seq for e in history] == list(range(1, 10))
    assert history[-1].text() == "Tokyo: 22°C and sunny."
    request = history[4].function_calls()[0]
    assert request.name == REQUEST_CONFIRMATION_FUNCTION
    assert request.args["originalFunctionCall"] == {
        "id": "call-weather-1",
        "name": "paid_weather",
        "args": {"city": "Tokyo"},
    }
    assert history[3].function_responses()[0].response["error"]["kind"] == ("confirmation_required")
    assert history[6].started_call_ids == ("call-weather-1",)
    assert history[7].function_responses()[0].response == {
        "city": "Tokyo",
        "temperature_c": 22,
        "condition": "sunny",
    }
    assert history[7].actions.state_delta == {"last_city": "Tokyo"}
    assert not pending(history)
    assert plan_resume(reversed(history), agent_name="weather_agent").execute == ()
