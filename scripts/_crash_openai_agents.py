"""Crash-anywhere scenario of the OpenAI Agents SDK through ``EventStoreRunner``: the runtime's
scenario (``_crash_runtime.py``) through the SDK's own ``Agent``, ``function_tool`` and
``Model``. Run by ``scripts/crash_anywhere.py --framework openai-agents``.

An order agent: ``lookup_price`` (declared idempotent), ``charge_card`` (not idempotent) and
``ship_order`` (``needs_approval=True``: the run stops, the driver answers with ``evs confirm``
from another process), then a final answer. The fake model answers by the tool outputs the
request carries, so a resumed process asks for the same response number as the process it
replaces would have.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _crash_common as crash
from _crash_common import (
    install_crash_point,
    record_model_request,
    say_end,
    say_start,
)
from agents import Agent, Model, ModelResponse, Usage, function_tool, set_tracing_disabled
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from eventstore import SessionNotFoundError, open_store
from eventstore.integrations.openai_agents import (
    RUN_KEY,
    CallInDoubtError,
    EventStoreRunner,
    EventStoreSession,
)

APP, USER = "crash-shop", "ada"
TOOLS = ("lookup_price", "charge_card", "ship_order")
FINAL = "Ordered the book for 12; receipt r-12, tracking t-book."


lookup_price = function_tool(crash.lookup_price)
charge_card = function_tool(crash.charge_card)
ship_order = function_tool(crash.ship_order, needs_approval=True)


def _answered(items: Any) -> set[str]:
    if not isinstance(items, list):
        return set()
    names = {i.get("call_id"): i.get("name") for i in items
             if isinstance(i, dict) and i.get("type") == "function_call"}
    answered = (names.get(i.get("call_id")) for i in items
                if isinstance(i, dict) and i.get("type") == "function_call_output")
    return {name for name in answered if isinstance(name, str)}


def _call(name: str, args: str, turn: int) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", call_id=f"call_{turn}", name=name,
                                    arguments=args, id=f"fc_{turn}", status="completed")


class OrderModel(Model):
    """The fake model: the response number is the count of tools already answered."""

    async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                           **kwargs: Any) -> ModelResponse:
        turn = len(_answered(input))
        record_model_request(turn)
        if turn == 0:
            output: list[Any] = [_call("lookup_price", '{"item": "book"}', turn)]
        elif turn == 1:
            output = [_call("charge_card", '{"amount": 12}', turn)]
        elif turn == 2:
            output = [_call("ship_order", '{"item": "book"}', turn)]
        else:
            output = [ResponseOutputMessage(
                id="msg_3", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text=FINAL, annotations=[])])]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scenario does not stream")


async def recorded_turns(db: str, session_id: str) -> int:
    async with await open_store(db, auto_upgrade=True) as store:
        try:
            events = (await store.get_session(session_id, app_name=APP, user_id=USER)).events
        except SessionNotFoundError:
            return 0
    return sum(1 for e in events
               if isinstance(e.custom_metadata.get(RUN_KEY), dict)
               and "model" in e.custom_metadata[RUN_KEY])


async def has_run(db: str, session_id: str) -> bool:
    async with await open_store(db, auto_upgrade=True) as store:
        try:
            events = (await store.get_session(session_id, app_name=APP, user_id=USER)).events
        except SessionNotFoundError:
            return False
    return any(isinstance(e.custom_metadata.get(RUN_KEY), dict)
               and "start" in e.custom_metadata[RUN_KEY] for e in events)


def order_agent() -> Agent[Any]:
    """The scenario's agent: the three tools, the fake model."""
    return Agent(name="order_agent", model=OrderModel(),
                 tools=[lookup_price, charge_card, ship_order])


async def main(db: str, session_id: str, *,
               agent: Callable[[], Agent[Any]] = order_agent,
               turns: Callable[[str, str], Awaitable[int]] = recorded_turns) -> None:
    """One process of the scenario: ``agent()``'s run on the session, resumed from its log;
    ``turns`` counts the model responses the log holds."""
    set_tracing_disabled(True)
    recorded = await turns(db, session_id)
    say_start(recorded_model_turns=recorded)
    install_crash_point()
    session = EventStoreSession(session_id, db, app_name=APP, user_id=USER)
    try:
        # The first process asks; the next ones continue the run ("" resumes the newest run,
        # replaying it when it already completed), as the runtime's scenario runs with
        # new_message=None.
        ask = "Buy the book and ship it." if not await has_run(db, session_id) else ""
        result = await EventStoreRunner.run(agent(), ask, session=session,
                                            idempotent_tools={"lookup_price"})
    except CallInDoubtError:
        say_end(status="in_doubt")
        return
    finally:
        session.close()
    if result.interruptions:
        say_end(status="paused")
    else:
        say_end(status="done", output=str(result.final_output))


def cli(run: Callable[[str, str], Coroutine[Any, Any, None]]) -> None:
    """Run one process of a scenario from its command line (``--db``, ``--session``)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--session", required=True)
    options = parser.parse_args()
    asyncio.run(run(options.db, options.session))
    # The end is reported and the store closed: leave now, so that a random kill cannot land
    # in the interpreter's slow teardown and read as a run that died after its end.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    cli(main)
