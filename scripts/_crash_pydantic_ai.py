"""Crash-anywhere scenario of pydantic-ai through ``EventStoreAgent``: the runtime's order agent
(``scripts/_crash_runtime.py``) through pydantic-ai's own API. Run by
``scripts/crash_anywhere.py --framework pydantic-ai``.

``lookup_price`` (declared idempotent on the wrapper), ``charge_card`` (not idempotent) and
``ship_order`` (``requires_approval=True``: the run ends with ``DeferredToolRequests`` and
``evs confirm`` answers it), then a final answer. The ``FunctionModel`` answers by the tool
results the request carries, so a resumed process asks for the same response number as the
process it replaces would have.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _crash_common import (
    call_key,
    install_crash_point,
    record_model_request,
    record_tool_run,
    say_end,
    say_start,
)
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from eventstore import SessionNotFoundError, open_store
from eventstore.integrations.pydantic_ai import IN_DOUBT_KEY, MESSAGE_KEY, EventStoreAgent

APP, USER = "crash-shop", "ada"
TOOLS = ("lookup_price", "charge_card", "ship_order")
PROMPT = "Buy the book and ship it."


def _answered(messages: list[ModelMessage]) -> set[str]:
    return {
        part.tool_name
        for message in messages
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.tool_name in TOOLS
    }


def order_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The fake model: the response number is the count of tools already answered."""
    turn = len(_answered(messages))
    record_model_request(turn)
    if turn == 0:
        return ModelResponse(parts=[ToolCallPart("lookup_price", {"item": "book"}, "c-lookup")])
    if turn == 1:
        return ModelResponse(parts=[ToolCallPart("charge_card", {"amount": 12}, "c-charge")])
    if turn == 2:
        return ModelResponse(parts=[ToolCallPart("ship_order", {"item": "book"}, "c-ship")])
    return ModelResponse(
        parts=[TextPart("Ordered the book for 12; receipt r-12, tracking t-book.")])


def build_agent(store: object) -> EventStoreAgent:
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        FunctionModel(order_model), name="order_agent", output_type=[str, DeferredToolRequests]
    )

    @agent.tool_plain
    def lookup_price(item: str) -> dict[str, object]:
        """Look up an item's price (reading only: safe to run again)."""
        result = {"item": item, "price": 12}
        record_tool_run("lookup_price", call_key("lookup_price", {"item": item}), result)
        return result

    @agent.tool_plain
    def charge_card(amount: int) -> dict[str, object]:
        """Charge the customer's card (a second run would charge twice)."""
        result = {"charged": amount, "receipt": f"r-{amount}"}
        record_tool_run("charge_card", call_key("charge_card", {"amount": amount}), result)
        return result

    @agent.tool_plain(requires_approval=True)
    def ship_order(item: str) -> dict[str, object]:
        """Ship the order (a human approves it first)."""
        result: dict[str, object] = {"shipped": item, "tracking": f"t-{item}"}
        record_tool_run("ship_order", call_key("ship_order", {"item": item}), result)
        return result

    return EventStoreAgent(agent, store=store, app_name=APP, user_id=USER,  # type: ignore[arg-type]
                           idempotent_tools=["lookup_price"])


async def main(db: str, session_id: str) -> None:
    install_crash_point()
    async with await open_store(db, auto_upgrade=True) as store:
        try:
            existing = await store.get_session(session_id, app_name=APP, user_id=USER)
        except SessionNotFoundError:
            existing = None
        events = existing.events if existing else []
        turns = sum(1 for e in events if MESSAGE_KEY in e.custom_metadata
                    and e.content is not None and e.content.role == "model")
        say_start(recorded_model_turns=turns)
        started = any(MESSAGE_KEY in e.custom_metadata for e in events)
        agent = build_agent(store)
        result = await agent.run(None if started else PROMPT, session_id=session_id)
    output = result.output
    if isinstance(output, DeferredToolRequests):
        in_doubt = any(meta.get(IN_DOUBT_KEY) for meta in output.metadata.values())
        say_end(status="in_doubt" if in_doubt else "paused")
    else:
        say_end(status="done", output=output)
    # Exit at once: the run is over, and a kill the driver aims at a random moment must not
    # land between the end line and a slow interpreter teardown.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--session", required=True)
    options = parser.parse_args()
    asyncio.run(main(options.db, options.session))
