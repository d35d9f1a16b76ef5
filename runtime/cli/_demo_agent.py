"""The demo's agent: tools, the scripted model (with a ``load_artifacts`` step) and the runner."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventstore import REQUEST_CONFIRMATION_FUNCTION, Event, EventStore, FunctionCall
from runtime import (
    Agent,
    ConfirmationRequired,
    LoadArtifactsProcessor,
    LoadArtifactsTool,
    Model,
    ModelRequest,
    ModelResponse,
    ReplayResumePlanner,
    Runner,
    ScriptedModel,
    ScriptStep,
    ToolContext,
    default_request_processors,
    function_tool,
)
from runtime.tools import is_idempotent

__all__ = [
    "AGENT",
    "INSTRUCTION",
    "REPORT",
    "demo_agent",
    "demo_idempotent_tools",
    "demo_runner",
    "model_turns",
    "script",
]

AGENT = "weather_agent"
"""Name (and event author) of the demo agent."""

REPORT = "paris-forecast.md"
"""The artifact the paid forecast saves and the model later loads."""

INSTRUCTION = f"""You are a weather assistant. Use the tools, in this order:
1. Call get_weather once for every city the user names, all in the same turn (parallel calls).
   A lookup may fail with an error: do not retry it; mention it in your answer.
2. Call paid_forecast for the first city with days=7. A human must approve it first; if it is
   rejected, go on without it.
3. Call long_range_outlook for that city and wait for its result.
4. When the forecast saved its report ({REPORT}), call load_artifacts with that name to read it.
5. Finally answer in a few sentences, quoting one line of the report."""
"""The demo agent's instruction: leads a real model through the protocol the script follows."""


@function_tool(idempotent=True)
def get_weather(city: str, tool_context: ToolContext) -> dict[str, Any]:
    """Return the current weather of a city.

    Args:
        city: The city name.
    """
    if city == "Atlantis":
        raise LookupError(f"the weather service has no station in {city}")
    tool_context.state["last_city"] = city
    return {"city": city, "temperature_c": 22, "condition": "sunny"}


@function_tool
async def paid_forecast(city: str, days: int, tool_context: ToolContext) -> dict[str, Any]:
    """Return a detailed forecast (a paid lookup: a human confirms it first).

    Args:
        city: The city name.
        days: How many days ahead.
    """
    if tool_context.tool_confirmation is None:
        raise ConfirmationRequired(
            f"The detailed {days}-day forecast for {city} costs $0.05. Approve?",
            payload={"cost_usd": 0.05},
        )
    report = f"# {city}, {days} days\n\nDry all week; highs of 24°C.\n".encode()
    version = await tool_context.save_artifact(REPORT, report, mime_type="text/markdown")
    tool_context.state["forecast_cost_usd"] = 0.05
    return {"city": city, "days": days, "report": REPORT, "report_version": version}


@function_tool(is_long_running=True)
def long_range_outlook(city: str) -> None:
    """Start a long-range outlook; its result is submitted later.

    Args:
        city: The city name.
    """
    return None


def _final_answer(request: ModelRequest) -> ModelResponse:
    """The last turn: says what the paid forecast gave (or that it was declined, or failed) and
    quotes the report when ``load_artifacts`` put it into this request."""
    texts = [p.text for c in request.contents for p in c.parts if p.text]
    report = next((t for t in texts if t.startswith(f"Artifact {REPORT}")), None)
    quoted = (" The report I loaded says: " + report.splitlines()[-1].strip()) if report else ""
    forecast = next((p.function_response.response for c in reversed(request.contents)
                     for p in c.parts if p.function_response is not None
                     and p.function_response.id == "call-forecast"), None)
    error = forecast.get("error") if isinstance(forecast, dict) else None
    if isinstance(error, dict) and error.get("kind") == "confirmation_rejected":
        week = "you declined the paid 7-day forecast, so I have no forecast for the week"
    elif error is not None or forecast is None:
        week = "I could not get the 7-day forecast"
    else:
        week = "the 7-day forecast stays dry with highs of 24°C"
    return ModelResponse(
        text=f"Paris: 22°C and sunny now; {week}, and the 30-day outlook is warmer than usual. "
        f"Atlantis has no weather station, so I could not get its weather.{quoted}"
    )


def script() -> list[ScriptStep]:
    """The model's turns, in order."""
    steps: list[ScriptStep] = [
        ModelResponse(text="Checking both cities at once.", function_calls=(
            FunctionCall(id="call-paris", name="get_weather", args={"city": "Paris"}),
            FunctionCall(id="call-atlantis", name="get_weather", args={"city": "Atlantis"}),
        )),
        ModelResponse(function_calls=(
            FunctionCall(id="call-forecast", name="paid_forecast",
                         args={"city": "Paris", "days": 7}),
        )),
        ModelResponse(function_calls=(
            FunctionCall(id="call-outlook", name="long_range_outlook", args={"city": "Paris"}),
        )),
        ModelResponse(function_calls=(
            FunctionCall(id="call-load", name="load_artifacts",
                         args={"artifact_names": [REPORT]}),
        )),
        _final_answer,
    ]
    return steps


def model_turns(events: Sequence[Event]) -> int:
    """How many scripted model turns the log already holds (confirmation requests excluded)."""
    return sum(
        1
        for e in events
        if e.author == AGENT
        and e.content is not None
        and e.content.role == "model"
        and not any(c.name == REQUEST_CONFIRMATION_FUNCTION for c in e.function_calls())
    )


def _demo_tools() -> list[Any]:
    return [get_weather, paid_forecast, long_range_outlook, LoadArtifactsTool()]


def demo_idempotent_tools() -> list[str]:
    """The demo agent's idempotent tools (its tool knowledge, for ``evs pending``)."""
    return sorted(tool.name for tool in _demo_tools() if is_idempotent(tool))


def demo_agent(model: Model) -> Agent:
    """Return the demo agent (its tools and ``INSTRUCTION``) on ``model``."""
    return Agent(name=AGENT, model=model, tools=_demo_tools(), instruction=INSTRUCTION)


def demo_runner(
    store: EventStore, events: Sequence[Event], *, app_name: str, model: Model | None = None
) -> Runner:
    """Return a runner for the demo agent on ``model``; by default a scripted model that
    continues the script where the log stands, so any process can resume a demo session."""
    processors: list[Any] = [*default_request_processors(), LoadArtifactsProcessor()]
    if model is None:
        model = ScriptedModel(script()[model_turns(events):])
    return Runner(agent=demo_agent(model), store=store, app_name=app_name,
                  request_processors=processors, resume_planner=ReplayResumePlanner())
