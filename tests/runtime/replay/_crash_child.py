"""A child process for the crash tests: runs the payments agent on a SQLite file.

Usage: python _crash_child.py DB EFFECTS MODE   (MODE: crash | resume)
Prints one JSON line with the run result; exits 3 when it lost a race (SessionConflictError).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from eventstore import FunctionCall, open_store
from runtime import (
    Agent,
    ModelResponse,
    Runner,
    ScriptedModel,
    SessionConflictError,
    ToolContext,
    function_tool,
)
from runtime.replay import ReplayResumePlanner

DB, EFFECTS, MODE = sys.argv[1], Path(sys.argv[2]), sys.argv[3]


def record(line: str) -> None:
    fd = os.open(EFFECTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def effects() -> list[str]:
    return EFFECTS.read_text().splitlines() if EFFECTS.exists() else []


@function_tool(idempotent=True)
def lookup_rate(currency: str, tool_context: ToolContext) -> dict[str, Any]:
    """Look up an exchange rate (idempotent: deduplicated by its idempotency key).

    Args:
        currency: ISO currency code.
    """
    key = tool_context.idempotency_key
    record(f"attempt lookup_rate {key}")
    if f"effect lookup_rate {key}" not in effects():
        record(f"effect lookup_rate {key}")
    return {"currency": currency, "rate": 1.1}


@function_tool
def charge_card(amount: int, tool_context: ToolContext) -> dict[str, Any]:
    """Charge the card (not idempotent).

    Args:
        amount: Amount in cents.
    """
    record(f"effect charge_card {tool_context.idempotency_key}")
    if MODE == "crash":
        time.sleep(3600)  # the parent kills us here, before any response is appended
    return {"charged": amount}


def runner(store: Any) -> Runner:
    calls = (
        FunctionCall(id="call-rate", name="lookup_rate", args={"currency": "EUR"}),
        FunctionCall(id="call-charge", name="charge_card", args={"amount": 300}),
    )
    script: list[Any] = ["Charged 3.00." for _ in range(3)]
    if MODE == "crash":
        script.insert(0, ModelResponse(function_calls=calls))
    agent = Agent(name="payments", model=ScriptedModel(script), tools=[lookup_rate, charge_card])
    return Runner(agent=agent, store=store, app_name="pay", resume_planner=ReplayResumePlanner())


def wait_for_go() -> None:
    go = Path(str(EFFECTS) + ".go")
    while MODE == "resume" and not go.exists():
        time.sleep(0.005)


async def main() -> int:
    async with await open_store(DB, auto_upgrade=True) as store:
        try:
            result = await runner(store).run(
                session_id="s",
                user_id="u",
                new_message="charge 3 EUR" if MODE == "crash" else None,
            )
        except SessionConflictError:
            print(json.dumps({"status": "lost_race"}))
            return 3
        print(json.dumps({"status": result.status, "reason": result.pause_reason}))
        return 0


if __name__ == "__main__":
    wait_for_go()
    sys.exit(asyncio.run(main()))
