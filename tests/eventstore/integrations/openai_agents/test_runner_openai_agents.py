"""``EventStoreRunner``: the SDK's run made durable on the session's log. An uninterrupted run
ends as ``Runner.run`` does; a run that died (simulated by a write that raises at a chosen
step) resumes from the log with no recorded model response asked for again and no tool run
twice; a call in doubt stops the run until ``submit_response`` / ``rerun_call`` decide (what
``evs respond`` / ``evs rerun`` call); approvals are confirmation requests answered from the
log or through the SDK's ``RunState``; guardrails and handoffs keep working."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _extras import require_extra

require_extra("agents", "openai-agents")

from _oai_order_agent import FINAL, OrderModel, Shop  # noqa: E402
from agents import (  # noqa: E402
    Agent,
    AgentsException,
    GuardrailFunctionOutput,
    InputGuardrailTripwireTriggered,
    Runner,
    input_guardrail,
    set_tracing_disabled,
)

from eventstore import open_store  # noqa: E402
from eventstore.integrations.openai_agents import (  # noqa: E402
    RUN_KEY,
    CallInDoubtError,
    EventStoreRunner,
    EventStoreSession,
)
from eventstore.integrations.openai_agents.durable import DurableRun  # noqa: E402
from runtime.replay import answer_confirmation, pending, rerun_call, submit_response  # noqa: E402

APP, USER, SID = "shop", "ada", "order-1"
ASK = "Buy the book and ship it."


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)


class Crash(Exception):
    """Stands for the process dying at a chosen write."""


def _crash_at(monkeypatch: pytest.MonkeyPatch, method: str, *, when: Any) -> None:
    original = getattr(DurableRun, method)

    async def crashing(self: DurableRun, *args: Any, **kwargs: Any) -> Any:
        if when(*args, **kwargs):
            monkeypatch.setattr(DurableRun, method, original)  # one crash, then a new process
            raise Crash(method)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(DurableRun, method, crashing)


def _session(url: str) -> EventStoreSession:
    return EventStoreSession(SID, url, app_name=APP, user_id=USER)


async def _events(url: str) -> list[Any]:
    async with await open_store(url) as store:
        return list((await store.get_session(SID, app_name=APP, user_id=USER)).events)


async def _confirm(url: str, *, confirmed: bool) -> None:
    async with await open_store(url) as store:
        report = pending((await store.get_session(SID, app_name=APP, user_id=USER)).events,
                         idempotent_tools=["lookup_price"])
        (item,) = report.confirmations
        assert item.call.name == "ship_order"
        assert item.confirmation_id is not None
        await answer_confirmation(store, session_id=SID, confirmation_id=item.confirmation_id,
                                  confirmed=confirmed, app_name=APP, user_id=USER)


async def _run(shop: Shop, model: OrderModel, url: str, input: Any = ASK,
               **options: Any) -> Any:
    session = _session(url)
    try:
        return await EventStoreRunner.run(shop.agent(model), input, session=session, **options)
    finally:
        session.close()


async def test_runner_ends_as_the_sdks_runner_does(sql_target: Any) -> None:
    plain_shop, model = Shop(), OrderModel()
    plain = await Runner.run(plain_shop.agent(model), ASK)
    state = plain.to_state()
    state.approve(state.get_interruptions()[0])
    expected = (await Runner.run(plain_shop.agent(model), state)).final_output

    shop, model = Shop(), OrderModel()
    first = await _run(shop, model, sql_target.url)
    assert [i.tool_name for i in first.interruptions] == ["ship_order"]
    await _confirm(sql_target.url, confirmed=True)
    done = await _run(shop, model, sql_target.url)
    assert done.final_output == expected == FINAL
    assert shop.runs == {"lookup_price": 1, "charge_card": 1, "ship_order": 1}
    assert all(n == 1 for n in model.requests.values()), model.requests
    events = await _events(sql_target.url)
    models = [e for e in events if "model" in e.custom_metadata.get(RUN_KEY, {})]
    assert len(models) == 4
    assert [c.name for e in models for c in e.function_calls()] == [
        "lookup_price", "charge_card", "ship_order"]
    assert sum(len(e.started_call_ids) for e in events) == 3
    report = pending(events, idempotent_tools=["lookup_price"])
    assert not report, report
    # The conversation is in the session for the next run, as with the SDK's sessions.
    session = _session(sql_target.url)
    items = await session.get_items()
    session.close()
    assert items[0]["content"] == ASK
    assert items[-1]["role"] == "assistant"


async def test_runner_resumes_with_no_model_response_asked_again(
        sql_target: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    shop, model = Shop(), OrderModel()
    _crash_at(monkeypatch, "record_model", when=lambda step, *a, **k: step == 2)
    with pytest.raises((Crash, AgentsException)):
        await _run(shop, model, sql_target.url)
    stopped = await _run(shop, model, sql_target.url)
    assert [i.tool_name for i in stopped.interruptions] == ["ship_order"]
    # Responses 0 and 1 were recorded: never asked again; 2 was lost in the crash.
    assert model.requests == {0: 1, 1: 1, 2: 2}
    assert shop.runs == {"lookup_price": 1, "charge_card": 1}


async def test_runner_stops_at_a_call_in_doubt_until_its_result_is_given(
        sql_target: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    shop, model = Shop(), OrderModel()
    _crash_at(monkeypatch, "record_output", when=lambda call_id, sdk, **k: k["tool"] ==
              "charge_card")
    with pytest.raises(AgentsException):  # the SDK wraps the tool's crash
        await _run(shop, model, sql_target.url, idempotent_tools={"lookup_price"})
    assert shop.runs["charge_card"] == 1
    with pytest.raises(CallInDoubtError) as doubt:
        await _run(shop, model, sql_target.url, idempotent_tools={"lookup_price"})
    assert doubt.value.tool == "charge_card"
    assert shop.runs["charge_card"] == 1
    report = pending(await _events(sql_target.url), idempotent_tools=["lookup_price"])
    assert [p.call.name for p in report.in_doubt] == ["charge_card"]
    async with await open_store(sql_target.url) as store:
        await submit_response(store, session_id=SID, call_id=doubt.value.function_call_id,
                              response={"charged": 12, "receipt": "r-12"}, app_name=APP,
                              user_id=USER)
    stopped = await _run(shop, model, sql_target.url, idempotent_tools={"lookup_price"})
    assert [i.tool_name for i in stopped.interruptions] == ["ship_order"]
    await _confirm(sql_target.url, confirmed=True)
    done = await _run(shop, model, sql_target.url, idempotent_tools={"lookup_price"})
    assert done.final_output == FINAL
    assert shop.runs == {"lookup_price": 1, "charge_card": 1, "ship_order": 1}
    assert all(n == 1 for n in model.requests.values()), model.requests


async def test_runner_runs_a_call_in_doubt_again_once_a_rerun_is_decided(
        sql_target: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    shop, model = Shop(), OrderModel()
    _crash_at(monkeypatch, "record_output", when=lambda call_id, sdk, **k: k["tool"] ==
              "charge_card")
    with pytest.raises(AgentsException):
        await _run(shop, model, sql_target.url)
    with pytest.raises(CallInDoubtError) as doubt:
        await _run(shop, model, sql_target.url)
    async with await open_store(sql_target.url) as store:
        await rerun_call(store, session_id=SID, call_id=doubt.value.function_call_id,
                         min_claim_age=None, app_name=APP, user_id=USER)
    stopped = await _run(shop, model, sql_target.url)
    assert stopped.interruptions
    assert shop.runs["charge_card"] == 2


async def test_runner_runs_an_idempotent_tool_again_after_a_crash(
        sql_target: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    shop, model = Shop(), OrderModel()
    _crash_at(monkeypatch, "record_output", when=lambda call_id, sdk, **k: k["tool"] ==
              "lookup_price")
    with pytest.raises(AgentsException):
        await _run(shop, model, sql_target.url, idempotent_tools={"lookup_price"})
    stopped = await _run(shop, model, sql_target.url, idempotent_tools={"lookup_price"})
    assert stopped.interruptions
    assert shop.runs == {"lookup_price": 2, "charge_card": 1}
    assert model.requests == {0: 1, 1: 1, 2: 1}


async def test_runner_gives_a_rejected_call_the_sdks_rejection(sql_target: Any) -> None:
    shop, model = Shop(), OrderModel()
    await _run(shop, model, sql_target.url)
    await _confirm(sql_target.url, confirmed=False)
    done = await _run(shop, model, sql_target.url)
    assert done.final_output == "Not shipped: Tool execution was not approved."
    assert "ship_order" not in shop.runs
    events = await _events(sql_target.url)
    rejected = [r.response for e in events for r in e.function_responses()
                if r.name == "ship_order" and "error" in r.response]
    assert rejected[-1]["error"]["kind"] == "confirmation_rejected"
    assert not pending(events, idempotent_tools=["lookup_price"])


async def test_runner_takes_the_sdks_run_state_and_records_its_decision(
        sql_target: Any) -> None:
    shop, model = Shop(), OrderModel()
    first = await _run(shop, model, sql_target.url)
    state = first.to_state()
    state.approve(state.get_interruptions()[0])
    done = await _run(shop, model, sql_target.url, input=state)
    assert done.final_output == FINAL
    assert shop.runs["ship_order"] == 1
    events = await _events(sql_target.url)
    answers = [r.response for e in events for r in e.function_responses()
               if r.name == "adk_request_confirmation"]
    assert answers == [{"confirmed": True, "payload": None}]
    # The stop's RunState is in the log and loads back.
    stops = [e.custom_metadata[RUN_KEY]["interrupt"] for e in events
             if "interrupt" in e.custom_metadata.get(RUN_KEY, {})]
    from agents import RunState

    loaded = await RunState.from_json(shop.agent(model), stops[0]["state"])
    assert [i.tool_name for i in loaded.get_interruptions()] == ["ship_order"]


def test_runner_run_sync_and_a_new_input_after_the_run(tmp_path: Any) -> None:
    url = str(tmp_path / "sync.db")
    shop, model = Shop(), OrderModel(plan=(("lookup_price", '{"item": "book"}'),),
                                     final="12.")
    session = _session(url)
    try:
        result = EventStoreRunner.run_sync(shop.agent(model), "Price?", session=session)
        assert result.final_output == "12."
        again = EventStoreRunner.run_sync(shop.agent(model), "Price?", session=session)
        # A new run on the history: the model sees the price already looked up.
        assert again.final_output == "12."
        assert shop.runs["lookup_price"] == 1
        roles = [i.get("role") or i.get("type") for i in asyncio.run(session.get_items())]
        assert roles == ["user", "function_call", "function_call_output", "assistant", "user",
                         "assistant"]
    finally:
        session.close()


async def test_runner_keeps_guardrails_and_handoffs(tmp_path: Any) -> None:
    url = str(tmp_path / "g.db")

    @input_guardrail
    async def no_refunds(ctx: Any, agent: Any, input: Any) -> GuardrailFunctionOutput:
        newest = input[-1] if isinstance(input, list) else input  # the history comes first
        return GuardrailFunctionOutput(output_info=None,
                                       tripwire_triggered="refund" in str(newest))

    shop, model = Shop(), OrderModel(plan=(("lookup_price", '{"item": "book"}'),),
                                     final="12.")
    seller = shop.agent(model)
    front = Agent(name="front", model=OrderModel(plan=(("transfer_to_order_agent", "{}"),),
                                                 final="unused"),
                  handoffs=[seller], input_guardrails=[no_refunds])
    session = _session(url)
    try:
        with pytest.raises(InputGuardrailTripwireTriggered):
            await EventStoreRunner.run(front, "A refund please.", session=session)
        result = await EventStoreRunner.run(front, "Price?", session=session)
        assert result.final_output == "12."
        assert result.last_agent.name == "order_agent"
    finally:
        session.close()
    events = await _events(url)
    ends = [e.custom_metadata[RUN_KEY]["end"] for e in events
            if "end" in e.custom_metadata.get(RUN_KEY, {})]
    assert ends == ["error", "completed"]
    authors = [e.author for e in events if "model" in e.custom_metadata.get(RUN_KEY, {})]
    assert authors[-2:] == ["front", "order_agent"]
    assert not pending(events, idempotent_tools=[])


async def test_runner_streams_and_resumes_a_streamed_run(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    url = str(tmp_path / "stream.db")
    plan = (("lookup_price", '{"item": "book"}'), ("charge_card", '{"amount": 12}'))
    shop, model = Shop(), OrderModel(plan=plan, final="Charged.")
    _crash_at(monkeypatch, "record_model", when=lambda step, *a, **k: step == 2)
    session = _session(url)
    try:
        crashed = EventStoreRunner.run_streamed(shop.agent(model), "Charge.", session=session)
        with pytest.raises((Crash, AgentsException)):
            async for _ in crashed.stream_events():
                pass
        result = EventStoreRunner.run_streamed(shop.agent(model), "Charge.", session=session)
        kinds = [event.type async for event in result.stream_events()]
    finally:
        session.close()
    assert "run_item_stream_event" in kinds
    assert result.final_output == "Charged."
    assert shop.runs == {"lookup_price": 1, "charge_card": 1}
    assert model.requests == {0: 1, 1: 1, 2: 2}
    ends = [e.custom_metadata[RUN_KEY]["end"] for e in await _events(url)
            if "end" in e.custom_metadata.get(RUN_KEY, {})]
    assert ends == ["completed"]


async def test_runner_replays_a_completed_run_for_an_empty_input(tmp_path: Any) -> None:
    url = str(tmp_path / "done.db")
    shop, model = Shop(), OrderModel(plan=(("lookup_price", '{"item": "book"}'),),
                                     final="12.")
    first = await _run(shop, model, url, input="Price?")
    again = await _run(shop, model, url, input="")  # e.g. a process that died after the end
    assert again.final_output == first.final_output == "12."
    assert shop.runs == {"lookup_price": 1}
    assert model.requests == {0: 1, 1: 1}
    starts = [e for e in await _events(url) if "start" in e.custom_metadata.get(RUN_KEY, {})]
    assert len(starts) == 1
