"""Crash-anywhere scenario of our own runtime (``runtime.Runner``): the reference the framework
scenarios are held to. Run by ``scripts/crash_anywhere.py --framework runtime``.

An order agent: ``lookup_price`` (idempotent), ``charge_card`` (not idempotent: a second run
would charge twice) and ``ship_order`` (needs a human's confirmation), then a final answer. The
fake model answers by the tool results the request already carries, so a resumed process asks
for the same response number as the process it replaces would have.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _crash_common as crash

from eventstore import Content, Event, Part, SessionNotFoundError, open_store
from runtime import Agent, ModelRequest, ModelResponse, Runner, function_tool

APP, USER = "crash-shop", "ada"
TOOLS = (
    function_tool(idempotent=True)(crash.lookup_price),
    function_tool(crash.charge_card),
    function_tool(requires_confirmation=True)(crash.ship_order),
)


def _answered(request: ModelRequest) -> set[str]:
    names: set[str] = set()
    for content in request.contents:
        for part in content.parts:
            response = part.function_response
            if response is None or response.name not in crash.ORDER_TOOLS:
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
        crash.record_model_request(turn)
        if turn < len(crash.ORDER_CALLS):
            return ModelResponse.calling(crash.ORDER_CALLS[turn])
        return ModelResponse(text=crash.ORDER_ANSWER)


async def main(db: str, session_id: str) -> None:
    crash.install_crash_point()
    agent = Agent(name="order_agent", model=OrderModel(), tools=TOOLS)
    async with await open_store(db, auto_upgrade=True) as store:
        try:
            existing = await store.get_session(session_id, app_name=APP, user_id=USER)
        except SessionNotFoundError:
            existing = None
        events = existing.events if existing else ()
        crash.say_start(recorded_model_turns=sum(1 for e in events if _is_model_turn(e)))
        if existing is None:
            await store.create_session(
                app_name=APP,
                user_id=USER,
                session_id=session_id,
                events=[_user(crash.ORDER_PROMPT)],
            )
        runner = Runner(agent=agent, store=store, app_name=APP)
        result = await runner.run(session_id=session_id, user_id=USER, new_message=None)
        if result.status == "completed":
            crash.say_end(status="done", output=result.final_text)
        elif result.status == "paused_for_confirmation":
            crash.say_end(status="paused")
        else:
            crash.say_end(status="in_doubt")


def _user(text: str) -> Event:
    return Event(author="user", content=Content(role="user", parts=(Part(text=text),)))


def _is_model_turn(event: Event) -> bool:
    """A response of the model (a call of our tools or the answer), not a confirmation request."""
    if event.author != "order_agent" or event.content is None or event.content.role != "model":
        return False
    calls = [p.function_call for p in event.content.parts if p.function_call is not None]
    return not calls or any(call.name in crash.ORDER_TOOLS for call in calls)


if __name__ == "__main__":
    options = crash.scenario_options()
    asyncio.run(main(options.db, options.session))
