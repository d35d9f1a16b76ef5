"""Two live resumers on one SQLite file, interleaved deterministically (one process, asyncio).

Each "process" is its own store object and Runner over the same file; the tools block on
``asyncio.Event``s so the test decides who writes when. The histories are the crash tests': a
process died right after the model's calls ``call-rate`` (idempotent) and ``call-charge`` (paid,
not idempotent) were appended, and two processes resume the session at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from eventstore import Content, Event, EventStore, FunctionCall, Part, open_store
from runtime import Agent, Runner, RunResult, ScriptedModel, ToolContext, function_tool
from runtime.replay import pending

AGENT = "payments"
RATE = FunctionCall(id="call-rate", name="lookup_rate", args={"currency": "EUR"})
CHARGE = FunctionCall(id="call-charge", name="charge_card", args={"amount": 300})


@dataclass
class Process:
    """One resuming process: its own store object, runner, tool gates and effect log."""

    name: str
    runner: Runner
    effects: list[str]
    rate_entered: asyncio.Event = field(default_factory=asyncio.Event)
    rate_release: asyncio.Event = field(default_factory=asyncio.Event)
    charge_entered: asyncio.Event = field(default_factory=asyncio.Event)
    charge_release: asyncio.Event = field(default_factory=asyncio.Event)


def _process(name: str, store: EventStore, effects: list[str]) -> Process:
    gates: dict[str, Process] = {}

    @function_tool(idempotent=True)
    async def lookup_rate(currency: str, tool_context: ToolContext) -> dict[str, Any]:
        """Look up an exchange rate (idempotent).

        Args:
            currency: ISO currency code.
        """
        me = gates["me"]
        me.rate_entered.set()
        await me.rate_release.wait()
        effects.append(f"{name} rate {tool_context.idempotency_key}")
        return {"currency": currency, "rate": 1.1, "by": name}

    @function_tool
    async def charge_card(amount: int, tool_context: ToolContext) -> dict[str, Any]:
        """Charge the card (not idempotent).

        Args:
            amount: Amount in cents.
        """
        me = gates["me"]
        me.charge_entered.set()
        await me.charge_release.wait()
        effects.append(f"{name} charge {tool_context.idempotency_key}")
        return {"charged": amount, "by": name}

    agent = Agent(
        name=AGENT,
        model=ScriptedModel(["Charged 3.00."] * 3),
        tools=[lookup_rate, charge_card],
    )
    runner = Runner(agent=agent, store=store, app_name="pay")
    me = Process(name=name, runner=runner, effects=effects)
    gates["me"] = me
    return me


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[EventStore, EventStore]]:
    db = tmp_path / "race.db"
    first = await open_store(db, auto_upgrade=True)
    second = await open_store(db, auto_upgrade=True)
    async with first, second:
        await first.create_session(app_name="pay", user_id="u", session_id="s")
        # a process died right after appending the model's function calls
        await first.append(
            "s",
            [
                Event(author="user", content=Content(role="user", parts=(Part(text="pay"),))),
                Event(
                    author=AGENT,
                    content=Content(
                        role="model", parts=(Part(function_call=RATE), Part(function_call=CHARGE))
                    ),
                    turn_complete=True,
                ),
            ],
            expected_version=0,
        )
        yield first, second


def _run(process: Process) -> asyncio.Task[RunResult]:
    return asyncio.create_task(process.runner.run(session_id="s", user_id="u"))


async def _answers(store: EventStore) -> list[tuple[str, str]]:
    events = (await store.get_session("s")).events
    return [(r.id, r.response.get("by", "?")) for e in events for r in e.function_responses()]


async def test_race_live_claim_reclaimed_by_idempotent_rerun_keeps_the_paid_answer(
    stores: tuple[EventStore, EventStore],
) -> None:
    """The reported race: B re-runs the idempotent call A claimed and answers it first.

    A claims both calls (seq 3) and is charging; B plans on seq 3, sees both started and
    unanswered, re-runs the idempotent ``call-rate`` (claim seq 4, answer seq 5) and pauses on
    ``call-charge`` (in doubt: A is still running it). A's answer append then conflicts (expected
    3, actual 5). The log after seq 3 holds B's claim and B's answer to ``call-rate`` — but nothing
    answers ``call-charge``, so A must append that answer at the head, and only that one.
    """
    effects: list[str] = []
    a, b = _process("A", stores[0], effects), _process("B", stores[1], effects)
    a.rate_release.set()
    b.rate_release.set()

    run_a = _run(a)
    await a.charge_entered.wait()  # A's claim is in the log; A is charging
    result_b = await _run(b)
    assert result_b.status == "paused_by_planner"
    assert "call-charge" in (result_b.pause_reason or "")
    assert [e.started_call_ids for e in result_b.events if e.started_call_ids] == [("call-rate",)]

    a.charge_release.set()
    result_a = await run_a
    # A's answer to call-rate was dropped (B answered first): A is stale and stops after
    # recording call-charge, the call nobody else answered; it never asks the model.
    assert result_a.status == "stale"
    assert "call-rate" in (result_a.pause_reason or "")
    assert not any(e.content and e.content.role == "model" for e in result_a.events)

    assert sorted(e.split()[:2] for e in effects) == [["A", "charge"], ["A", "rate"], ["B", "rate"]]
    assert sorted(await _answers(stores[0])) == [("call-charge", "A"), ("call-rate", "B")]
    events = (await stores[0].get_session("s")).events
    report = pending(events, idempotent_tools=("lookup_rate",))
    assert not report
    assert report.next_run.step == "calls_model"


async def test_race_idempotent_rerun_by_a_second_live_process_is_answered_once(
    stores: tuple[EventStore, EventStore],
) -> None:
    """Both processes run the idempotent call; the first answer wins, the second is dropped.

    A claims both calls (seq 3); B re-runs ``call-rate`` (claim seq 4) and blocks in it; A
    finishes and appends its answers after B's claim (seq 5); B finishes, its append conflicts,
    it re-reads, finds ``call-rate`` answered at seq 5 and appends nothing. B planned to pause on
    ``call-charge`` (in doubt when it planned), but A answered it meanwhile: B's pause reason is
    the log's at B's final version, not the stale one.
    """
    effects: list[str] = []
    a, b = _process("A", stores[0], effects), _process("B", stores[1], effects)
    a.rate_release.set()

    run_a = _run(a)
    await a.charge_entered.wait()
    run_b = _run(b)
    await b.rate_entered.wait()  # B's claim of call-rate is in the log

    a.charge_release.set()
    result_a = await run_a
    assert result_a.status == "completed"
    assert [(r.id, r.response["by"]) for e in result_a.events for r in e.function_responses()] == [
        ("call-rate", "A"),
        ("call-charge", "A"),
    ]

    b.rate_release.set()
    result_b = await run_b
    # B appended its claim and nothing else: its answer to call-rate would be a second one.
    assert [e.started_call_ids for e in result_b.events] == [("call-rate",)]
    assert result_b.status == "stale"
    assert result_b.pause_reason is not None
    assert "another writer answered call(s) call-rate first" in result_b.pause_reason
    assert "rerun_call" not in result_b.pause_reason  # call-charge is no longer in doubt
    assert sorted(e.split()[:2] for e in effects) == [["A", "charge"], ["A", "rate"], ["B", "rate"]]
    assert sorted(await _answers(stores[0])) == [("call-charge", "A"), ("call-rate", "A")]
    events = (await stores[0].get_session("s")).events
    assert not pending(events, idempotent_tools=("lookup_rate",))
