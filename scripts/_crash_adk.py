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

import asyncio
import sys
import warnings
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

import _crash_common as crash

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
REQUEST_CONFIRMATION = "adk_request_confirmation"
ASKED = "This tool call requires confirmation, please approve or reject."


def _answered(request: LlmRequest) -> set[str]:
    names: set[str] = set()
    for content in request.contents:
        for part in content.parts or ():
            response = part.function_response
            if response is None or response.name not in crash.ORDER_TOOLS:
                continue
            if (response.response or {}).get("error") == ASKED:
                continue
            names.add(response.name)
    return names


class OrderModel(BaseLlm):
    """The fake model: the response number is the count of tools already answered."""

    model: str = "fake-order-model"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        turn = len(_answered(llm_request))
        crash.record_model_request(turn)
        if turn < len(crash.ORDER_CALLS):
            name, args = crash.ORDER_CALLS[turn]
            part = types.Part(function_call=types.FunctionCall(name=name, args=args))
        else:
            part = types.Part(text=crash.ORDER_ANSWER)
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def _is_model_turn(event: Any) -> bool:
    """A response of the model (a call of our tools or the answer), not a confirmation request."""
    if event.author != AGENT or event.content is None or event.content.role != "model":
        return False
    calls = event.get_function_calls()
    return not calls or any(call.name in crash.ORDER_TOOLS for call in calls)


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
    crash.install_crash_point()
    service = EventStoreSessionService(db)
    agent = LlmAgent(
        name=AGENT, model=OrderModel(), instruction="Sell books.",
        tools=[crash.lookup_price, crash.charge_card,
               FunctionTool(crash.ship_order, require_confirmation=True)],
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
        crash.say_start(recorded_model_turns=sum(1 for e in events if _is_model_turn(e)))
        if session is None:
            session = await service.create_session(app_name=APP, user_id=USER,
                                                   session_id=session_id)
        invocation = _invocation(session)
        message = None if invocation else types.Content(
            role="user", parts=[types.Part(text=crash.ORDER_PROMPT)])
        try:
            async for _ in runner.run_async(user_id=USER, session_id=session_id,
                                            invocation_id=invocation, new_message=message):
                pass
        except ToolCallInDoubt:
            crash.say_end(status="in_doubt")
            return
        done = await service.get_session(app_name=APP, user_id=USER, session_id=session_id)
        assert done is not None
        status, output = _status(done)
        crash.say_end(status=status, output=output)
    finally:
        await runner.close()
        await service.close()


if __name__ == "__main__":
    options = crash.scenario_options()
    asyncio.run(main(options.db, options.session))
