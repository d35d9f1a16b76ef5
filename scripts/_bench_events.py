"""The benchmarks' realistic agent events: model calls, tool responses, text turns.

An agent log alternates model turns that call tools with the tools' responses, which carry
nested results and state deltas, and now and then a text turn. ``realistic_event(i)`` cycles
through that mix (ADK-shaped: ids like ADK's, a function call with a few arguments, a response
with a nested result and a state delta); ``small_event(i)`` is the smallest realistic event (one
function call), the benchmark's earlier default.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from eventstore import Content, Event, EventActions, FunctionCall, FunctionResponse, Part

__all__ = ["adk_conversation_event", "compact_json", "realistic_event", "small_event"]

_CITIES = ("LIS", "NRT", "JFK", "CDG", "SFO", "GRU", "SYD", "FRA")


def small_event(i: int) -> Event:
    """A model turn calling one tool: the smallest realistic agent event."""
    return Event(
        author="planner",
        invocation_id="inv-7f3a9c",
        content=Content(role="model", parts=(Part(function_call=FunctionCall(
            id=f"call-{uuid.uuid4().hex[:12]}", name="lookup_order",
            args={"order_id": f"A-{i:06d}"})),)),
        turn_complete=True,
    )


def _call_id(i: int) -> str:
    return f"adk-{uuid.UUID(int=i * 7919 + 1).hex[:8]}-{i:06d}"


def realistic_event(i: int, *, invocation: str = "e-5c1f0a9d-41b2-4c55") -> Event:
    """Event ``i`` of a realistic log: ``i % 5`` in 0, 2 → a model turn calling a tool; 1, 3 →
    the tool's response with a nested result and a state delta; 4 → a text turn."""
    step = i % 5
    origin, dest = _CITIES[i % 8], _CITIES[(i + 3) % 8]
    if step in (0, 2):
        return Event(
            author="travel_agent",
            invocation_id=invocation,
            content=Content(role="model", parts=(Part(function_call=FunctionCall(
                id=_call_id(i), name="search_flights",
                args={"origin": origin, "destination": dest, "date": "2026-03-14",
                      "passengers": 1 + i % 3, "cabin": "economy"})),)),
        )
    if step in (1, 3):
        flights: list[dict[str, Any]] = [
            {"number": f"TP{100 + (i + k) % 900}", "departs": f"2026-03-14T{8 + k * 3:02d}:15",
             "stops": k, "price": {"amount": 612.5 + 40 * k, "currency": "EUR"}}
            for k in range(2)
        ]
        return Event(
            author="travel_agent",
            invocation_id=invocation,
            content=Content(role="user", parts=(Part(function_response=FunctionResponse(
                id=_call_id(i - 1), name="search_flights",
                response={"result": {"flights": flights, "currency": "EUR"}})),)),
            actions=EventActions(state_delta={
                "last_search": {"origin": origin, "destination": dest, "results": 2}}),
        )
    return Event(
        author="travel_agent",
        invocation_id=invocation,
        content=Content(role="model", parts=(Part(
            text=f"I found 2 flights from {origin} to {dest} on 14 March; the cheapest is "
            "612.50 EUR with no stops, departing at 08:15. Shall I hold a seat for you?"),)),
        turn_complete=True,
    )


_DATA = frozenset({"args", "response", "state_delta", "custom_metadata", "payload"})
"""Keys whose values are the application's own JSON: kept exactly as they are."""


def _is_default(value: Any) -> bool:
    return value is None or value is False or (type(value) in (list, dict, str) and not value)


def _without_defaults(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: v if k in _DATA else _without_defaults(v) for k, v in value.items()
                if not _is_default(v)}
    if isinstance(value, list):
        return [_without_defaults(v) for v in value]
    return value


def compact_json(event: Event) -> bytes:
    """The event's compact JSON: every field that holds a value, nothing at its default (what
    an application would write if it stored the event as plain JSON itself)."""
    raw = orjson.loads(orjson.dumps(event))
    raw.pop("seq", None)
    return orjson.dumps(_without_defaults(raw))


def adk_conversation_event(i: int, *, timestamp: float | None = None) -> Any:
    """The i-th event of an ADK agent conversation (a ``google.adk.events.Event``): a function
    call, its response and the model's answer, in turn; ``timestamp`` set when given. Imports
    google-adk only when called."""
    from google.adk.events import Event as AdkEvent
    from google.genai import types

    call_id = f"adk-call-{i // 3}"
    if i % 3 == 0:
        part = types.Part(function_call=types.FunctionCall(
            id=call_id, name="get_weather", args={"city": "Paris", "units": "metric"}))
        role = "model"
    elif i % 3 == 1:
        part = types.Part(function_response=types.FunctionResponse(
            id=call_id, name="get_weather",
            response={"city": "Paris", "temperature_c": 22, "condition": "sunny"}))
        role = "user"
    else:
        part = types.Part(text="It is 22 degrees and sunny in Paris today.")
        role = "model"
    event = AdkEvent(invocation_id=f"inv-{i // 3}", author="weather_agent",
                     content=types.Content(role=role, parts=[part]))
    if timestamp is not None:
        event.timestamp = timestamp
    return event
