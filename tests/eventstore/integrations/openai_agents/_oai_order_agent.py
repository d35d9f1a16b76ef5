"""The order agent the durable runner's tests drive: a scripted model (answers by the tool
outputs its request carries, counting its requests), ``lookup_price``, ``charge_card`` and
``ship_order`` (``needs_approval``), each counting its runs."""

from __future__ import annotations

from collections import Counter
from typing import Any

from agents import Agent, Model, ModelResponse, Usage, function_tool
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

FINAL = "Ordered the book for 12; receipt r-12, tracking t-book."
PLAN = (("lookup_price", '{"item": "book"}'), ("charge_card", '{"amount": 12}'),
        ("ship_order", '{"item": "book"}'))


def answered(items: Any) -> list[str]:
    """The tools whose outputs ``items`` (a model request's input) carry, in order."""
    if not isinstance(items, list):
        return []
    names = {i.get("call_id"): i.get("name") for i in items
             if isinstance(i, dict) and i.get("type") == "function_call"}
    return [names[i["call_id"]] for i in items if isinstance(i, dict)
            and i.get("type") == "function_call_output" and i.get("call_id") in names]


class OrderModel(Model):
    """Calls the tools of ``plan`` one per response, then answers ``final`` (with the outputs
    it saw, so a rejection shows in the answer)."""

    def __init__(self, plan: tuple[tuple[str, str], ...] = PLAN, final: str = FINAL) -> None:
        self.plan = plan
        self.final = final
        self.requests: Counter[int] = Counter()

    async def stream_response(self, system_instructions: Any, input: Any, *args: Any,
                              **kwargs: Any) -> Any:
        """The same response, streamed as the one ``response.completed`` event."""
        from openai.types.responses import Response, ResponseCompletedEvent

        done = await self.get_response(system_instructions, input)
        yield ResponseCompletedEvent(type="response.completed", sequence_number=0,
                                     response=Response(
            id="resp", created_at=0.0, model="fake", object="response", output=done.output,
            parallel_tool_calls=False, tool_choice="auto", tools=[]))

    async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                           **kwargs: Any) -> ModelResponse:
        turn = len(answered(input))
        self.requests[turn] += 1
        if turn < len(self.plan):
            name, arguments = self.plan[turn]
            output: list[Any] = [ResponseFunctionToolCall(
                type="function_call", call_id=f"call_{turn}", name=name, arguments=arguments,
                id=f"fc_{turn}", status="completed")]
        else:
            last = [i for i in input if isinstance(i, dict)
                    and i.get("type") == "function_call_output"][-1]
            text = self.final if "not approved" not in str(last.get("output")) else \
                f"Not shipped: {last.get('output')}"
            output = [ResponseOutputMessage(
                id=f"msg_{turn}", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text=text, annotations=[])])]
        return ModelResponse(output=output, usage=Usage(), response_id=None)


class Shop:
    """The tools, counting each real run of their bodies."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()

        @function_tool
        def lookup_price(item: str) -> dict[str, object]:
            """Look up a price."""
            self.runs["lookup_price"] += 1
            return {"item": item, "price": 12}

        @function_tool
        def charge_card(amount: int) -> dict[str, object]:
            """Charge the card."""
            self.runs["charge_card"] += 1
            return {"charged": amount, "receipt": f"r-{amount}"}

        @function_tool(needs_approval=True)
        def ship_order(item: str) -> dict[str, object]:
            """Ship the order."""
            self.runs["ship_order"] += 1
            return {"shipped": item, "tracking": f"t-{item}"}

        self.tools = [lookup_price, charge_card, ship_order]

    def agent(self, model: Model) -> Agent[Any]:
        return Agent(name="order_agent", model=model, tools=list(self.tools))
