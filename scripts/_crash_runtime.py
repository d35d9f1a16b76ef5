"""Crash-anywhere scenario of our own runtime (``runtime.Runner``): the reference the framework
scenarios are held to. Run by ``scripts/crash_anywhere.py --framework runtime``.

An order agent: ``lookup_price`` (idempotent), ``charge_card`` (not idempotent: a second run
would charge twice) and ``ship_order`` (needs a human's confirmation), then a final answer. The
fake model answers by the tool results the request already carries, so a resumed process asks
for the same response number as the process it replaces would have.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _crash_common import (
    call_key,
    install_crash_point,
    record_model_request,
    record_tool_run,
    say_end,
    say_start,
)

from eventstore import Content, Event, Part, SessionNotFoundError, open_store
from runtime import Agent, ModelRequest, ModelResponse, Runner, function_tool

APP, USER = "crash-shop", "ada"
TOOLS = ("lookup_price", "charge_card", "ship_order")


@function_tool(idempotent=True)
def lookup_price(item: str) -> dict[str, object]:
    """Look up an item's price (reading only: safe to run again)."""
    result = {"item": item, "price": 12}
    record_tool_run("lookup_price", call_key("lookup_price", {"item": item}), result)
    return result


@function_tool
def charge_card(amount: int) -> dict[str, object]:
    """Charge the customer's card (a second run would charge twice)."""
    result = {"charged": amount, "receipt": f"r-{amount}"}
    record_tool_run("charge_card", call_key("charge_card", {"amount": amount}), result)
    return result


@function_tool(requires_confirmation=True)
def ship_order(item: str) -> dict[str, object]:
    """Ship the order (a human confirms it first)."""
    result: dict[str, object] = {"shipped": item, "tracking": f"t-{item}"}
    record_tool_run("ship_order", call_key("ship_order", {"item": item}), result)
    return result


def _answered(request: ModelRequest) -> set[str]:
    names: set[str] = set()
    for content in request.contents:
        for part in content.parts:
            response = part.function_response
            if response is None or response.name not in TOOLS:
                continue
            error = response.response.get("error") if isinstance(response.response, dict) else None
            if isinstance(error, dict) and error.get("kind") == "confirmation_required":
                continue
            names.add(response.name)
    return names


class OrderModel:
    """The fake model: the response number is the count of tools already answered."""

    async def generate(self, request: ModelRequest) -> ModelResponse:
        turn = len(_answered(request))
        record_model_request(turn)
        if turn == 0:
            return ModelResponse.calling(("lookup_price", {"item": "book"}))
        if turn == 1:
            return ModelResponse.calling(("charge_card", {"amount": 12}))
        if turn == 2:
            return ModelResponse.calling(("ship_order", {"item": "book"}))
        return ModelResponse(text="Ordered the book for 12; receipt r-12, tracking t-book.")


async def main(db: str, session_id: str) -> None:
    install_crash_point()
    agent = Agent(
        name="order_agent", model=OrderModel(), tools=(lookup_price, charge_card, ship_order)
    )
    async with await open_store(db, auto_upgrade=True) as store:
        try:
            existing = await store.get_session(session_id, app_name=APP, user_id=USER)
        except SessionNotFoundError:
            existing = None
        events = existing.events if existing else ()
        say_start(recorded_model_turns=sum(1 for e in events if _is_model_turn(e)))
        if existing is None:
            await store.create_session(
                app_name=APP,
                user_id=USER,
                session_id=session_id,
                events=[_user("Buy the book and ship it.")],
            )
        runner = Runner(agent=agent, store=store, app_name=APP)
        result = await runner.run(session_id=session_id, user_id=USER, new_message=None)
        if result.status == "completed":
            say_end(status="done", output=result.final_text)
        elif result.status == "paused_for_confirmation":
            say_end(status="paused")
        else:
            say_end(status="in_doubt")


def _user(text: str) -> Event:
    return Event(author="user", content=Content(role="user", parts=(Part(text=text),)))


def _is_model_turn(event: Event) -> bool:
    """A response of the model (a call of our tools or the answer), not a confirmation request."""
    if event.author != "order_agent" or event.content is None or event.content.role != "model":
        return False
    calls = [p.function_call for p in event.content.parts if p.function_call is not None]
    return not calls or any(call.name in TOOLS for call in calls)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--session", required=True)
    options = parser.parse_args()
    asyncio.run(main(options.db, options.session))
