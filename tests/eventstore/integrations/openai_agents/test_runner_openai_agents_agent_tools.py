"""``EventStoreRunner`` with an agent as a tool (``Agent.as_tool``): the nested run is a durable
run in a child session linked to the parent's call (found as the runtime's ``AgentTool``
children are), recorded and resumed as the parent's run is; an approval inside it stops the
whole run, is listed on the parent session by ``session_pending`` (what ``evs pending``
reads) and answered through the parent (what ``evs confirm PARENT ID`` calls), and the next
run continues it: approved runs once, rejected gets the SDK's rejection."""

from __future__ import annotations

from typing import Any

import pytest
from _extras import require_extra

require_extra("agents", "openai-agents")

from _oai_order_agent import OrderModel, Shop  # noqa: E402
from agents import Agent, AgentsException, Runner, set_tracing_disabled  # noqa: E402

from eventstore import PARENT_LINK_KEY, child_session_id, open_store  # noqa: E402
from eventstore.integrations.openai_agents import (  # noqa: E402
    RUN_KEY,
    CallInDoubtError,
    EventStoreRunner,
    EventStoreSession,
)
from eventstore.integrations.openai_agents.durable import DurableRun  # noqa: E402
from runtime.replay import answer_confirmation, session_pending  # noqa: E402
from runtime.replay._children import linked_child  # noqa: E402

APP, USER, SID = "shop", "ada", "lead-1"
ASK = "Buy the book and ship it."
INNER_PLAN = (("charge_card", '{"amount": 12}'), ("ship_order", '{"item": "book"}'))
INNER_FINAL = "Charged 12 and shipped the book."
LEAD_PLAN = (("lookup_price", '{"item": "book"}'),
             ("fulfil", '{"input": "Charge 12 and ship the book."}'))
LEAD_FINAL = "All done."


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)


class Crash(BaseException):
    """Stands for the process dying at a chosen write (not an ``Exception``: the SDK's agent
    tool would make one the tool's output, and a dead process has none)."""


class Team:
    """A lead agent (``lookup_price``, then the agent tool ``fulfil``) and the fulfiller it
    runs as a tool (``charge_card``, then ``ship_order``, which needs approval)."""

    def __init__(self) -> None:
        self.shop = Shop()
        self.lead_model = OrderModel(plan=LEAD_PLAN, final=LEAD_FINAL)
        self.inner_model = OrderModel(plan=INNER_PLAN, final=INNER_FINAL)

    def agent(self) -> Agent[Any]:
        lookup, charge, ship = self.shop.tools
        fulfiller = Agent(name="fulfiller", model=self.inner_model, tools=[charge, ship])
        return Agent(name="lead", model=self.lead_model, tools=[
            lookup, fulfiller.as_tool("fulfil", "Charge the card and ship the order.")])


def _crash_at(monkeypatch: pytest.MonkeyPatch, method: str, *, when: Any) -> None:
    original = getattr(DurableRun, method)

    async def crashing(self: DurableRun, *args: Any, **kwargs: Any) -> Any:
        if when(self, *args, **kwargs):
            monkeypatch.setattr(DurableRun, method, original)  # one crash, then a new process
            raise Crash(method)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(DurableRun, method, crashing)


async def _run(team: Team, url: str, input: Any = ASK, **options: Any) -> Any:
    session = EventStoreSession(SID, url, app_name=APP, user_id=USER)
    try:
        return await EventStoreRunner.run(team.agent(), input, session=session, **options)
    finally:
        session.close()


async def _child(url: str) -> tuple[str, list[Any]]:
    """The child session of the lead's ``fulfil`` call, and its events."""
    async with await open_store(url) as store:
        events = (await store.get_session(SID, app_name=APP, user_id=USER)).events
        (call,) = [c for e in events for c in e.function_calls() if c.name == "fulfil"]
        child = await linked_child(store, SID, call.id, app_name=APP, user_id=USER)
        assert child == child_session_id(SID, call.id)
        return child, list((await store.get_session(child, app_name=APP, user_id=USER)).events)


async def _confirm(url: str, *, confirmed: bool) -> str:
    """Answer the one confirmation ``session_pending`` lists on the lead's session, through
    the lead's id (as ``evs confirm lead-1 ID`` does); return the session it lives in."""
    async with await open_store(url) as store:
        report = await session_pending(store, SID, idempotent_tools=["lookup_price"],
                                       app_name=APP, user_id=USER)
        (item,) = report.confirmations
        assert item.call.name == "ship_order"
        assert item.confirmation_id is not None
        assert item.session_id is not None
        await answer_confirmation(store, session_id=SID, confirmation_id=item.confirmation_id,
                                  confirmed=confirmed, app_name=APP, user_id=USER)
        return item.session_id


def _model_steps(events: list[Any]) -> list[Any]:
    return [e for e in events if "model" in e.custom_metadata.get(RUN_KEY, {})]


async def test_agent_tool_runs_in_a_child_session_linked_to_the_call(sql_target: Any) -> None:
    plain = Team()
    first = await Runner.run(plain.agent(), ASK)
    state = first.to_state()
    state.approve(state.get_interruptions()[0])
    expected = (await Runner.run(plain.agent(), state)).final_output

    team = Team()
    stopped = await _run(team, sql_target.url)
    assert [i.tool_name for i in stopped.interruptions] == ["ship_order"]
    await _confirm(sql_target.url, confirmed=True)
    done = await _run(team, sql_target.url)
    assert done.final_output == expected == LEAD_FINAL
    assert team.shop.runs == {"lookup_price": 1, "charge_card": 1, "ship_order": 1}
    assert all(n == 1 for n in team.lead_model.requests.values()), team.lead_model.requests
    assert all(n == 1 for n in team.inner_model.requests.values()), team.inner_model.requests

    child, events = await _child(sql_target.url)
    link = events[0].custom_metadata[PARENT_LINK_KEY]
    assert link["session_id"] == SID
    assert link["agent"] == "lead"
    assert [c.name for e in _model_steps(events) for c in e.function_calls()] == [
        "charge_card", "ship_order"]
    assert sum(len(e.started_call_ids) for e in events) == 2
    async with await open_store(sql_target.url) as store:
        lead = (await store.get_session(SID, app_name=APP, user_id=USER)).events
        report = await session_pending(store, SID, idempotent_tools=["lookup_price"],
                                       app_name=APP, user_id=USER)
    assert not report, report
    # The lead's log holds its own steps and the agent tool's output: the child's answer.
    outputs = [r.response for e in lead for r in e.function_responses() if r.name == "fulfil"]
    assert outputs == [{"output": INNER_FINAL}]
    assert not any(c.name in ("charge_card", "ship_order")
                   for e in lead for c in e.function_calls())
    assert child != SID


async def test_agent_tool_approval_rejected_gets_the_sdks_rejection(sql_target: Any) -> None:
    team = Team()
    await _run(team, sql_target.url)
    where = await _confirm(sql_target.url, confirmed=False)
    done = await _run(team, sql_target.url)
    assert "ship_order" not in team.shop.runs
    assert "not approved" in done.final_output
    child, events = await _child(sql_target.url)
    assert where == child
    rejected = [r.response for e in events for r in e.function_responses()
                if r.name == "ship_order" and "error" in r.response]
    assert rejected[-1]["error"]["kind"] == "confirmation_rejected"


async def test_agent_tool_approval_through_the_sdks_run_state(sql_target: Any) -> None:
    team = Team()
    first = await _run(team, sql_target.url)
    state = first.to_state()
    state.approve(state.get_interruptions()[0])
    done = await _run(team, sql_target.url, input=state)
    assert done.final_output == LEAD_FINAL
    assert team.shop.runs == {"lookup_price": 1, "charge_card": 1, "ship_order": 1}
    _, events = await _child(sql_target.url)
    answers = [r.response for e in events for r in e.function_responses()
               if r.name == "adk_request_confirmation"]
    assert answers == [{"confirmed": True, "payload": None}]


async def test_agent_tool_resumes_its_child_after_a_crash_inside_it(
        sql_target: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    team = Team()
    # The process dies as the nested run records its second model response.
    _crash_at(monkeypatch, "record_model", when=
              lambda run, step, *a, **k: run.session.session_id != SID and step == 1)
    with pytest.raises((Crash, AgentsException)):
        await _run(team, sql_target.url)
    assert team.shop.runs == {"lookup_price": 1, "charge_card": 1}
    stopped = await _run(team, sql_target.url)
    assert [i.tool_name for i in stopped.interruptions] == ["ship_order"]
    await _confirm(sql_target.url, confirmed=True)
    done = await _run(team, sql_target.url)
    assert done.final_output == LEAD_FINAL
    assert team.shop.runs == {"lookup_price": 1, "charge_card": 1, "ship_order": 1}
    # Recorded responses are never asked again; the one lost in the crash is.
    assert team.lead_model.requests == {0: 1, 1: 1, 2: 1}
    assert team.inner_model.requests == {0: 1, 1: 2, 2: 1}


async def test_agent_tool_child_call_in_doubt_stops_the_parent(
        sql_target: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    team = Team()
    _crash_at(monkeypatch, "record_output", when=lambda run, call_id, sdk, **k: k["tool"] ==
              "charge_card")
    with pytest.raises((Crash, AgentsException)):
        await _run(team, sql_target.url)
    with pytest.raises(CallInDoubtError) as doubt:
        await _run(team, sql_target.url)
    assert doubt.value.tool == "charge_card"
    child, _ = await _child(sql_target.url)
    assert doubt.value.session_id == child
    assert team.shop.runs["charge_card"] == 1
    async with await open_store(sql_target.url) as store:
        report = await session_pending(store, SID, idempotent_tools=["lookup_price"],
                                       app_name=APP, user_id=USER)
        lead = (await store.get_session(SID, app_name=APP, user_id=USER)).events
    assert [(p.call.name, p.session_id) for p in report.in_doubt] == [("charge_card", child)]
    # The lead's agent tool call got no output: it continues once the child can.
    assert not [r for e in lead for r in e.function_responses() if r.name == "fulfil"]
