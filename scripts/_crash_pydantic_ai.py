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

import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _crash_common as crash
from pydantic_ai import Agent, DeferredToolRequests, Tool
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from eventstore import SessionNotFoundError, open_store
from eventstore.integrations.pydantic_ai import IN_DOUBT_KEY, MESSAGE_KEY, EventStoreAgent

APP, USER = "crash-shop", "ada"


def _answered(messages: list[ModelMessage]) -> set[str]:
    return {
        part.tool_name
        for message in messages
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.tool_name in crash.ORDER_TOOLS
    }


def order_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The fake model: the response number is the count of tools already answered."""
    turn = len(_answered(messages))
    crash.record_model_request(turn)
    if turn < len(crash.ORDER_CALLS):
        name, args = crash.ORDER_CALLS[turn]
        return ModelResponse(parts=[ToolCallPart(name, args, f"c-{name}")])
    return ModelResponse(parts=[TextPart(crash.ORDER_ANSWER)])


def build_agent(store: object) -> EventStoreAgent:
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        FunctionModel(order_model), name="order_agent", output_type=[str, DeferredToolRequests],
        tools=[Tool(crash.lookup_price), Tool(crash.charge_card),
               Tool(crash.ship_order, requires_approval=True)],
    )
    return EventStoreAgent(agent, store=store, app_name=APP, user_id=USER,  # type: ignore[arg-type]
                           idempotent_tools=["lookup_price"])


async def main(db: str, session_id: str) -> None:
    crash.install_crash_point()
    async with await open_store(db, auto_upgrade=True) as store:
        try:
            existing = await store.get_session(session_id, app_name=APP, user_id=USER)
        except SessionNotFoundError:
            existing = None
        events = existing.events if existing else []
        turns = sum(1 for e in events if MESSAGE_KEY in e.custom_metadata
                    and e.content is not None and e.content.role == "model")
        crash.say_start(recorded_model_turns=turns)
        started = any(MESSAGE_KEY in e.custom_metadata for e in events)
        agent = build_agent(store)
        result = await agent.run(None if started else crash.ORDER_PROMPT, session_id=session_id)
    output = result.output
    if isinstance(output, DeferredToolRequests):
        in_doubt = any(meta.get(IN_DOUBT_KEY) for meta in output.metadata.values())
        crash.say_end(status="in_doubt" if in_doubt else "paused")
    else:
        crash.say_end(status="done", output=output)
    # Exit at once: the run is over, and a kill the driver aims at a random moment must not
    # land between the end line and a slow interpreter teardown.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    options = crash.scenario_options()
    asyncio.run(main(options.db, options.session))
