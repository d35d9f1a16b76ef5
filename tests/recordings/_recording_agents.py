"""The agents that produced the frozen recordings, so that tests can replay them.

The demo's sessions come from ``evs demo`` (``runtime.cli._demo_agent``); the agent-as-tool
sessions come from the trip agents below. Each factory returns a fresh agent (its scripted model
starts at the first turn; ``replay_recording`` replaces the model anyway).
"""

from __future__ import annotations

from typing import Any

from eventstore import EventStore, FunctionCall
from runtime import (
    Agent,
    AgentTool,
    LoadArtifactsProcessor,
    LoadArtifactsTool,
    ModelResponse,
    ScriptedModel,
    ToolContext,
    default_request_processors,
    function_tool,
)
from runtime.cli._demo_agent import AGENT as DEMO_AGENT
from runtime.cli._demo_agent import get_weather, long_range_outlook, paid_forecast, script

TRIP_APP = "trip"
"""App of the agent-as-tool recordings."""

TRIP_USER = "ann"
"""User of the agent-as-tool recordings."""


def demo_agent() -> Agent:
    """The demo's weather agent (``evs demo``), with its scripted model."""
    tools: list[Any] = [get_weather, paid_forecast, long_range_outlook, LoadArtifactsTool()]
    return Agent(name=DEMO_AGENT, model=ScriptedModel(script()), tools=tools,
                 instruction="You are a weather assistant. Use the tools.")


def demo_processors() -> list[Any]:
    """The demo runner's request processors (``load_artifacts`` included)."""
    return [*default_request_processors(), LoadArtifactsProcessor()]


def _call(call_id: str, name: str, **args: Any) -> ModelResponse:
    return ModelResponse(function_calls=(FunctionCall(id=call_id, name=name, args=args),))


@function_tool
def book_hotel(city: str, nights: int, tool_context: ToolContext) -> dict[str, Any]:
    """Book a hotel.

    Args:
        city: Where.
        nights: How many nights.
    """
    tool_context.state["booked_city"] = city
    return {"booked": city, "nights": nights, "reference": f"H-{city.upper()}-{nights}"}


def booker_agent() -> Agent:
    """The child agent: books a hotel."""
    return Agent(
        name="booker",
        model=ScriptedModel([_call("c-book", "book_hotel", city="Kyoto", nights=3),
                             "Booked 3 nights in Kyoto (H-KYOTO-3)."]),
        tools=[book_hotel],
    )


def planner_agent(store: EventStore) -> Agent:
    """The parent agent: hands the booking to ``booker`` through an AgentTool on ``store``."""
    return Agent(
        name="planner",
        model=ScriptedModel([_call("p-book", "booker", request="Book Kyoto for 3 nights"),
                             "All set: Kyoto, 3 nights."]),
        tools=[AgentTool(booker_agent(), store=store)],
    )
