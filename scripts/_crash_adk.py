"""Crash-anywhere scenario of google-adk: the order agent of ``_crash_runtime.py`` through ADK's
own ``Runner`` on a resumable ``App``, with ``EventStoreSessionService`` and
``EventStoreDurabilityPlugin``. Run by ``scripts/crash_anywhere.py --framework adk``.

``lookup_price`` (idempotent: declared to the plugin), ``charge_card`` (not idempotent) and
``ship_order`` (ADK's ``require_confirmation=True``), then a final answer. The fake model is an
ADK ``BaseLlm`` that answers by the tool results the request carries, so a resumed process asks
for the same response number as the process it replaces would have.

A process starts the run with the user's message when the session holds none yet, and
otherwise resumes the invocation that message opened (``run_async(invocation_id=…)``, ADK's
Resume). It ends ``paused`` when the invocation waits for ADK's confirmation (the newest
confirmation request has no answer), ``in_doubt`` on ``ToolCallInDoubt``, ``done`` when the
agent gave its final answer.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import warnings
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from _crash_common import (
    call_key,
    install_crash_point,
    record_model_request,
    record_tool_run,
    say_end,
    say_start,
)

warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App, ResumabilityConfig  # noqa: E402
from google.adk.models import BaseLlm  # noqa: E402
from google.adk.models.llm_request import LlmRequest  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import Session  # noqa: E402
from google.adk.tools.function_tool import FunctionTool  # noqa: E402
from google.genai import types  # noqa: E402

from eventstore.integrations.adk import (  # noqa: E402
    EventStoreDurabilityPlugin,
    EventStoreSessionService,
    ToolCallInDoubt,
)

APP, USER, AGENT = "crash_shop", "ada", "order_agent"
TOOLS = ("lookup_price", "charge_card", "ship_order")
REQUEST_CONFIRMATION = "adk_request_confirmation"
ASKED = "This tool call requires confirmation, please approve or reject."


def lookup_price(item: str) -> dict[str, object]:
    """Look up an item's price (reading only: safe to run again)."""
    result = {"item": item, "price": 12}
    record_tool_run("lookup_price", call_key("lookup_price", {"item": item}), result)
    return result


def charge_card(amount: int) -> dict[str, object]:
    """Charge the customer's card (a second run would charge twice)."""
    result = {"charged": amount, "receipt": f"r-{amount}"}
    record_tool_run("charge_card", call_key("charge_card", {"amount": amount}), result)
    return result


def ship_order(item: str) -> dict[str, object]:
    """Ship the order (a human confirms it first)."""
    result: dict[str, object] = {"shipped": item, "tracking": f"t-{item}"}
    record_tool_run("ship_order", call_key("ship_order", {"item": item}), result)
    return result


def _answered(request: LlmRequest) -> set[str]:
    names: set[str] = set()
    for content in request.contents:
        for part in content.parts or ():
            response = part.function_response
            if response is None or response.name not in TOOLS:
                continue
            if (response.response or {}).get("error") == ASKED:
                continue
            names.add(response.name)
    return names


def _call(name: str, **args: Any) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=args))


class OrderModel(BaseLlm):
    """The fake model: the response number is the count of tools already answered."""

    model: str = "fake-order-model"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        turn = len(_answered(llm_request))
        record_model_request(turn)
        if turn == 0:
            part = _call("lookup_price", item="book")
        elif turn == 1:
            part = _call("charge_card", amount=12)
        elif turn == 2:
            part = _call("ship_order", item="book")
        else:
            part = types.Part(text="Ordered the book for 12; receipt r-12, tracking t-book.")
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def _is_model_turn(event: Any) -> bool:
    """A response of the model (a call of our tools or the answer), not a confirmation request."""
    if event.author != AGENT or event.content is None or event.content.role != "model":
        return False
    calls = event.get_function_calls()
    return not calls or any(call.name in TOOLS for call in calls)


def _invocation(session: Session) -> str | None:
    """The invocation the user's message opened (None before it is recorded)."""
    for event in session.events:
        if event.author == "user" and event.content and any(
                p.text for p in event.content.parts or ()):
            return event.invocation_id
    return None


def _status(session: Session) -> tuple[str, str | None]:
    """How the invocation stands once ``run_async`` returned."""
    answered = {r.id for e in session.events for r in e.get_function_responses()}
    for event in reversed(session.events):
        if not _is_model_turn(event):
            continue
        if not event.get_function_calls():
            parts = event.content.parts if event.content else None
            return "done", "".join(p.text or "" for p in parts or ())
        break
    for event in session.events:
        for call in event.get_function_calls():
            if call.name == REQUEST_CONFIRMATION and call.id not in answered:
                return "paused", None
    raise SystemExit("the invocation returned neither done nor paused")


async def main(db: str, session_id: str) -> None:
    install_crash_point()
    service = EventStoreSessionService(db)
    agent = LlmAgent(
        name=AGENT, model=OrderModel(), instruction="Sell books.",
        tools=[lookup_price, charge_card, FunctionTool(ship_order, require_confirmation=True)],
    )
    app = App(
        name=APP, root_agent=agent,
        plugins=[EventStoreDurabilityPlugin(service, idempotent_tools={"lookup_price"})],
        resumability_config=ResumabilityConfig(is_resumable=True),
    )
    runner = Runner(app=app, session_service=service)
    try:
        session = await service.get_session(app_name=APP, user_id=USER, session_id=session_id)
        events = session.events if session else []
        say_start(recorded_model_turns=sum(1 for e in events if _is_model_turn(e)))
        if session is None:
            session = await service.create_session(app_name=APP, user_id=USER,
                                                   session_id=session_id)
        invocation = _invocation(session)
        message = None if invocation else types.Content(
            role="user", parts=[types.Part(text="Buy the book and ship it.")])
        try:
            async for _ in runner.run_async(user_id=USER, session_id=session_id,
                                            invocation_id=invocation, new_message=message):
                pass
        except ToolCallInDoubt:
            say_end(status="in_doubt")
            return
        done = await service.get_session(app_name=APP, user_id=USER, session_id=session_id)
        assert done is not None
        status, output = _status(done)
        say_end(status=status, output=output)
    finally:
        await runner.close()
        await service.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--session", required=True)
    options = parser.parse_args()
    asyncio.run(main(options.db, options.session))
