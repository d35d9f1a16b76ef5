"""An ADK Runner drives a tool-calling agent (a scripted fake model) on our session service; the
history it writes is read by ``evs show``, ``evs pending`` and ``runtime.pending()``."""

from __future__ import annotations

from _extras import require_extra

adk = require_extra("google.adk", "adk")

import asyncio  # noqa: E402
from collections.abc import AsyncGenerator  # noqa: E402
from pathlib import Path  # noqa: E402

from _cli_support import invoke  # noqa: E402
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_request import LlmRequest  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.tools import LongRunningFunctionTool  # noqa: E402
from google.genai import types  # noqa: E402
from pydantic import Field  # noqa: E402

from eventstore import open_store  # noqa: E402
from eventstore.integrations.adk import (  # noqa: E402
    EventStoreArtifactService,
    EventStoreSessionService,
)
from runtime import pending  # noqa: E402


class ScriptedLlm(BaseLlm):
    """A fake model: returns the scripted responses in order, whatever the request."""

    model: str = "scripted"
    script: list[LlmResponse] = Field(default_factory=list)
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        yield self.script.pop(0)


def _call(name: str, **args: object) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[
        types.Part(function_call=types.FunctionCall(name=name, args=args))
    ]))


def _text(text: str) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


def get_weather(city: str) -> dict[str, object]:
    """Return the weather of a city."""
    return {"city": city, "temp_c": 22}


def ask_manager(question: str) -> None:
    """Ask a human; the answer arrives later (long-running, returns nothing now)."""
    return None


async def _run(db: Path) -> tuple[list[str], ScriptedLlm]:
    model = ScriptedLlm(script=[
        _call("get_weather", city="Paris"), _text("Paris: 22 C, sunny."),
        _call("ask_manager", question="Book the trip?"),
    ])
    agent = LlmAgent(name="weather_agent", model=model,
                     tools=[get_weather, LongRunningFunctionTool(ask_manager)])
    async with await open_store(db, auto_upgrade=True) as store:
        sessions = EventStoreSessionService(store)
        runner = Runner(agent=agent, app_name="trips", session_service=sessions,
                        artifact_service=EventStoreArtifactService(store))
        await sessions.create_session(app_name="trips", user_id="ada", session_id="trip-1",
                                      state={"user:units": "metric"})
        seen = []
        for message in ("Weather in Paris?", "Book it."):
            async for event in runner.run_async(
                user_id="ada", session_id="trip-1",
                new_message=types.Content(role="user", parts=[types.Part(text=message)]),
            ):
                seen.append(event.id)
        report = pending(await store.read("trip-1"))
        assert [p.call.name for p in report] == ["ask_manager"]
        reloaded = await sessions.get_session(app_name="trips", user_id="ada",
                                              session_id="trip-1")
        assert reloaded is not None
        assert [e.id for e in reloaded.events[1:3]] == seen[:2]
        assert reloaded.state == {"user:units": "metric"}
        return seen, model


def test_adk_runner_history_is_read_by_evs_and_pending(tmp_path: Path) -> None:
    db = tmp_path / "adk.db"
    seen, model = asyncio.run(_run(db))
    assert model.script == []
    # The second model call saw the tool's result: ADK rebuilt its request from our store.
    second = model.requests[1].contents
    assert any(
        p.function_response is not None and p.function_response.response == {
            "city": "Paris", "temp_c": 22}
        for c in second for p in (c.parts or [])
    )
    shown = invoke("show", "trip-1", "--db", str(db))
    assert shown.exit_code == 0, shown.output
    for expected in ('get_weather(city="Paris")', '"temp_c":22', "Paris: 22 C, sunny.",
                     'ask_manager(question="Book the trip?")', "long-running"):
        assert expected in shown.output
    waiting = invoke("pending", "trip-1", "--db", str(db))
    assert "ask_manager" in waiting.output
    assert "get_weather" not in waiting.output
    verified = invoke("verify", "--db", str(db))
    assert verified.exit_code == 0, verified.output
    assert len(seen) == 4  # call, response, answer; then the long-running call
