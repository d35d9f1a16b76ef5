"""Helpers of the Pydantic AI door's tests: the order agent, a crash inside a tool, evs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, CallDeferred, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

ROOT = Path(__file__).resolve().parents[4]


class Crash(BaseException):
    """Stands for the process dying right there (nothing after it runs)."""


def returns(messages: list[ModelMessage]) -> dict[str, Any]:
    """Tool name → returned content, in the messages."""
    return {p.tool_name: p.content for m in messages for p in m.parts
            if isinstance(p, ToolReturnPart)}


def order_agent(*, ran: list[str], crash_in: set[str] | None = None,
                model_calls: list[int] | None = None) -> Agent[None, Any]:
    """lookup (idempotent by the wrapper), charge, ship (needs approval), then a text."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = returns(messages)
        if model_calls is not None:
            model_calls.append(len(done))
        if "lookup" not in done:
            return ModelResponse(parts=[ToolCallPart("lookup", {"item": "book"}, "c1")])
        if "charge" not in done:
            return ModelResponse(parts=[ToolCallPart("charge", {"amount": 12}, "c2")])
        if "ship" not in done:
            return ModelResponse(parts=[ToolCallPart("ship", {"item": "book"}, "c3")])
        return ModelResponse(parts=[TextPart(f"done: {done['ship']}")])

    agent: Agent[None, Any] = Agent(FunctionModel(model), name="shop",
                                    output_type=[str, DeferredToolRequests])

    def effect(name: str, value: Any) -> Any:
        ran.append(name)
        if crash_in and name in crash_in:
            crash_in.discard(name)
            raise Crash(name)
        return value

    @agent.tool_plain
    def lookup(item: str) -> dict[str, Any]:
        return effect("lookup", {"item": item, "price": 12})

    @agent.tool_plain
    def charge(amount: int) -> dict[str, Any]:
        return effect("charge", {"charged": amount})

    @agent.tool_plain(requires_approval=True)
    def ship(item: str) -> str:
        return effect("ship", f"shipped {item}")

    return agent


def deferring_agent(*, ran: list[str]) -> Agent[None, Any]:
    """``render`` (its body defers its result: ``CallDeferred``), then a text with the result."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = returns(messages)
        if not done:
            return ModelResponse(parts=[ToolCallPart("render", {"page": 1}, "r1")])
        return ModelResponse(parts=[TextPart(f"rendered: {done['render']}")])

    agent: Agent[None, Any] = Agent(FunctionModel(model), name="printer",
                                    output_type=[str, DeferredToolRequests])

    @agent.tool_plain
    def render(page: int) -> str:
        ran.append("render")
        raise CallDeferred

    return agent


def evs(*args: str, db: str) -> Any:
    """Run ``evs ARGS --db DB --json`` in another process, as a person would."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([str(Path(sys.executable).with_name("evs")), *args, "--db", db, "--json"],
                          capture_output=True, text=True, env=env, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


def pending(db: str, session: str) -> list[dict[str, Any]]:
    """The items ``evs pending SESSION`` lists."""
    items: list[dict[str, Any]] = evs("pending", session, db=db)["pending"]
    return items
