"""Crash-anywhere scenario of the OpenAI Agents SDK with an agent as a tool: the order agent's
tools of ``_crash_openai_agents.py``, with ``charge_card`` and ``ship_order`` (which needs
approval) moved into a nested agent, ``fulfiller``, that the order agent calls as a tool
(``Agent.as_tool``). ``EventStoreRunner`` records the nested run in a child session linked to
the call; the approval inside it stops the whole run, and the driver answers it through
``evs pending`` / ``evs confirm`` on the parent session. Run by
``scripts/crash_anywhere.py --framework openai-agents-as-tool``.

Model responses are numbered across both agents in the order an uninterrupted run asks for
them (the order agent's first two, the fulfiller's three, the order agent's last), from the
request's contents; ``recorded_turns`` counts the model responses of both sessions' logs.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _crash_common import record_model_request
from _crash_openai_agents import (
    APP,
    FINAL,
    USER,
    _answered,
    _call,
    charge_card,
    cli,
    lookup_price,
    main,
    ship_order,
)
from agents import Agent, Model, ModelResponse, Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from eventstore import SessionNotFoundError, child_session_id, open_store
from eventstore.integrations.openai_agents import RUN_KEY

NESTED_FINAL = "Charged 12 (receipt r-12) and shipped the book (tracking t-book)."


def _message(text: str, turn: int) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{turn}", type="message", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


class OrderModel(Model):
    """The order agent's fake model: responses 0, 1 and 5 of the run."""

    async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                           **kwargs: Any) -> ModelResponse:
        answered = len(_answered(input))
        record_model_request((0, 1, 5)[min(answered, 2)])
        if answered == 0:
            output: list[Any] = [_call("lookup_price", '{"item": "book"}', 0)]
        elif answered == 1:
            output = [_call("fulfil", '{"input": "Charge 12 and ship the book."}', 1)]
        else:
            output = [_message(FINAL, 2)]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scenario does not stream")


class FulfilModel(Model):
    """The fulfiller's fake model: responses 2, 3 and 4 of the run."""

    async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                           **kwargs: Any) -> ModelResponse:
        answered = len(_answered(input))
        record_model_request(2 + min(answered, 2))
        if answered == 0:
            output: list[Any] = [_call("charge_card", '{"amount": 12}', 0)]
        elif answered == 1:
            output = [_call("ship_order", '{"item": "book"}', 1)]
        else:
            output = [_message(NESTED_FINAL, 2)]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scenario does not stream")


async def recorded_turns(db: str, session_id: str) -> int:
    """Model responses recorded in the session's log and its agent tool calls' children."""
    async with await open_store(db, auto_upgrade=True) as store:
        total = 0
        sessions = [session_id]
        while sessions:
            current = sessions.pop()
            try:
                events = (await store.get_session(current, app_name=APP, user_id=USER)).events
            except SessionNotFoundError:
                continue
            total += sum(1 for e in events if isinstance(e.custom_metadata.get(RUN_KEY), dict)
                         and "model" in e.custom_metadata[RUN_KEY])
            sessions += [child_session_id(current, c.id) for e in events
                         for c in e.function_calls() if c.name == "fulfil"]
    return total


def as_tool_agent() -> Agent[Any]:
    """The order agent with ``fulfil``, the fulfiller as a tool."""
    fulfiller = Agent(name="fulfiller", model=FulfilModel(), tools=[charge_card, ship_order])
    return Agent(name="order_agent", model=OrderModel(), tools=[
        lookup_price, fulfiller.as_tool("fulfil", "Charge the card and ship the order.")])


if __name__ == "__main__":
    cli(functools.partial(main, agent=as_tool_agent, turns=recorded_turns))
