"""The order agent the durability tests run through ADK's Runner: a fake ``BaseLlm`` that answers
by the tool results its request carries, tools that count their runs, a resumable App with the
plugin (or without it, to show what ADK's own Resume does)."""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import AsyncGenerator, Collection
from dataclasses import dataclass, field
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.plugins import BasePlugin
from google.adk.runners import Runner
from google.adk.sessions import Session
from google.adk.tools import FunctionTool
from google.genai import types

from eventstore.integrations.adk import EventStoreDurabilityPlugin, EventStoreSessionService

APP, USER, AGENT = "shop", "ada", "order_agent"
TOOLS = ("lookup_price", "charge_card", "ship_order")
ASKED = "This tool call requires confirmation, please approve or reject."
FINAL = "Ordered the book for 12; receipt r-12, tracking t-book."


class Crash(BaseException):
    """Raised by a tool after its effect: the process "dies" before ADK records the result."""


@dataclass
class World:
    """What happened outside the log: tool effects and model requests, by name / turn."""

    runs: Counter[str] = field(default_factory=Counter)
    requests: list[int] = field(default_factory=list)
    crash_after: set[str] = field(default_factory=set)
    """Tools whose next run crashes right after its effect."""

    def effect(self, tool: str, result: dict[str, Any]) -> dict[str, Any]:
        self.runs[tool] += 1
        if tool in self.crash_after:
            self.crash_after.discard(tool)
            raise Crash(tool)
        return result


def _answered(request: LlmRequest) -> set[str]:
    names = set()
    for content in request.contents:
        for part in content.parts or ():
            response = part.function_response
            if response is not None and response.name in TOOLS and (
                    response.response or {}).get("error") != ASKED:
                names.add(response.name)
    return names


def _call(name: str, **args: Any) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=args))


def build_runner(
    service: EventStoreSessionService,
    world: World,
    *,
    durable: bool = True,
    idempotent: Collection[str] = ("lookup_price",),
    confirm_payment: bool = False,
) -> Runner:
    """The order agent on ``service``: with the plugin (``durable``) or on ADK's Resume alone;
    ``confirm_payment`` makes ``charge_card`` need a confirmation too."""

    class OrderModel(BaseLlm):
        model: str = "fake"

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            turn = len(_answered(llm_request))
            world.requests.append(turn)
            part = (_call("lookup_price", item="book") if turn == 0
                    else _call("charge_card", amount=12) if turn == 1
                    else _call("ship_order", item="book") if turn == 2
                    else types.Part(text=FINAL))
            yield LlmResponse(content=types.Content(role="model", parts=[part]))

    def lookup_price(item: str) -> dict[str, Any]:
        """Look up a price."""
        return world.effect("lookup_price", {"item": item, "price": 12})

    def charge_card(amount: int) -> dict[str, Any]:
        """Charge the card."""
        return world.effect("charge_card", {"charged": amount, "receipt": f"r-{amount}"})

    def ship_order(item: str) -> dict[str, Any]:
        """Ship the order."""
        return world.effect("ship_order", {"shipped": item, "tracking": f"t-{item}"})

    agent = LlmAgent(name=AGENT, model=OrderModel(), instruction="Sell books.", tools=[
        lookup_price,
        FunctionTool(charge_card, require_confirmation=confirm_payment),
        FunctionTool(ship_order, require_confirmation=True),
    ])
    plugins: list[BasePlugin] = (
        [EventStoreDurabilityPlugin(service, idempotent_tools=idempotent)] if durable else [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ADK marks resumability experimental
        app = App(name=APP, root_agent=agent, plugins=plugins,
                  resumability_config=ResumabilityConfig(is_resumable=True))
    return Runner(app=app, session_service=service)


async def run(runner: Runner, session_id: str, *, invocation_id: str | None = None,
              text: str | None = None, message: types.Content | None = None) -> list[Any]:
    """One ``run_async`` (a new message or a resume); its events."""
    if text is not None:
        message = types.Content(role="user", parts=[types.Part(text=text)])
    return [event async for event in runner.run_async(
        user_id=USER, session_id=session_id, invocation_id=invocation_id, new_message=message)]


def confirmation_ids(session: Session) -> list[str]:
    """The ids of the session's confirmation requests nothing answered yet."""
    answered = {r.id for e in session.events for r in e.get_function_responses()}
    return [c.id for e in session.events for c in e.get_function_calls()
            if c.name == "adk_request_confirmation" and c.id not in answered]


def final_text(session: Session) -> str | None:
    """The agent's newest answer (text without calls), if it gave one."""
    for event in reversed(session.events):
        if event.author == AGENT and event.content and event.content.role == "model":
            if event.get_function_calls():
                return None
            return "".join(p.text or "" for p in event.content.parts)
    return None
