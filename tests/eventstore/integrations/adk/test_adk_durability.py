"""``EventStoreDurabilityPlugin`` on ADK's own Runner (a resumable App), on memory, SQLite and
PostgreSQL: tools claimed before they run, no tool run twice after a crash (where ADK's Resume
runs an approved payment twice), calls in doubt answered by ``evs respond`` / ``evs rerun``
(the functions the commands call), ADK confirmations answered from outside, and a recorded
final answer never requested again."""

from __future__ import annotations

from typing import Any

from _extras import require_extra

adk = require_extra("google.adk", "adk")

import pytest  # noqa: E402
from _durable_shop import (  # noqa: E402
    AGENT,
    APP,
    FINAL,
    USER,
    Crash,
    World,
    build_runner,
    confirmation_ids,
    final_text,
    run,
)
from google.adk.errors import StaleSessionError  # noqa: E402
from google.genai import types  # noqa: E402

from eventstore import CallLedger, Event, EventStore, StoreUsageError  # noqa: E402
from eventstore.integrations.adk import (  # noqa: E402
    EventStoreDurabilityPlugin,
    EventStoreSessionService,
    ToolCallInDoubt,
)
from runtime.replay import (  # noqa: E402
    answer_confirmation,
    pending,
    rerun_call,
    submit_response,
)


async def _start(service: EventStoreSessionService, sid: str = "s") -> str:
    await service.create_session(app_name=APP, user_id=USER, session_id=sid)
    return sid


async def _log(store: EventStore, sid: str) -> list[Event]:
    return list(await store.read(sid, app_name=APP, user_id=USER))


async def _confirm(store: EventStore, service: EventStoreSessionService, sid: str) -> None:
    session = await service.get_session(app_name=APP, user_id=USER, session_id=sid)
    assert session is not None
    [cid] = confirmation_ids(session)
    await answer_confirmation(store, session_id=sid, confirmation_id=cid, confirmed=True,
                              app_name=APP, user_id=USER)


def _invocation(events: list[Event]) -> str:
    return next(e.invocation_id for e in events if e.author == "user")


def _call_id(events: list[Event], tool: str) -> str:
    return next(c.id for e in events for c in e.function_calls() if c.name == tool)


async def test_durability_claims_every_call_before_its_result_and_adk_sees_no_claim(
    store: EventStore,
) -> None:
    service, world = EventStoreSessionService(store), World()
    runner = build_runner(service, world)
    sid = await _start(service)
    await run(runner, sid, text="Buy the book.")
    events = await _log(store, sid)
    invocation = _invocation(events)
    report = pending(events, idempotent_tools=["lookup_price"])
    [asked] = report.confirmations
    assert (asked.call.name, asked.kind) == ("ship_order", "confirmation")

    await _confirm(store, service, sid)
    # ADK writes the request before the placeholder: the answer still reads as acted on next.
    [confirmed] = pending(await _log(store, sid), idempotent_tools=["lookup_price"]).unanswered
    assert (confirmed.call.name, confirmed.kind) == ("ship_order", "confirmed_not_run")
    await run(runner, sid, invocation_id=invocation)

    events = await _log(store, sid)
    for tool in ("lookup_price", "charge_card", "ship_order"):
        call_id = _call_id(events, tool)
        claimed = next(e.seq for e in events if call_id in e.started_call_ids)
        answered = next(e.seq for e in events for r in e.function_responses()
                        if r.id == call_id and "error" not in r.response)
        assert claimed < answered
        assert CallLedger.of(events).get(call_id).decision() == "settled"
    session = await service.get_session(app_name=APP, user_id=USER, session_id=sid)
    assert session is not None
    assert final_text(session) == FINAL
    assert all(e.content is not None or e.actions.end_of_agent for e in session.events)
    assert dict(world.runs) == {"lookup_price": 1, "charge_card": 1, "ship_order": 1}
    assert world.requests == [0, 1, 2, 3]


async def test_approved_payment_runs_twice_on_adks_resume_and_once_with_the_plugin(
    store: EventStore,
) -> None:
    """ADK's Resume is at least once: the payment, approved, crashes after charging; resuming
    charges again. With the plugin the call is in doubt and does not run again."""
    runs: dict[bool, int] = {}
    for durable in (False, True):
        service, world = EventStoreSessionService(store), World()
        sid = await _start(service, f"pay-{durable}")
        runner = build_runner(service, world, durable=durable, confirm_payment=True)
        await run(runner, sid, text="Buy the book.")
        await _confirm(store, service, sid)
        invocation = _invocation(await _log(store, sid))
        world.crash_after.add("charge_card")
        with pytest.raises(Crash):
            await run(runner, sid, invocation_id=invocation)
        resumed = build_runner(EventStoreSessionService(store), world, durable=durable,
                               confirm_payment=True)
        if durable:
            with pytest.raises(ToolCallInDoubt) as raised:
                await run(resumed, sid, invocation_id=invocation)
            assert raised.value.tool == "charge_card"
            assert raised.value.invocation_id == invocation
        else:
            await run(resumed, sid, invocation_id=invocation)
        runs[durable] = world.runs["charge_card"]
    assert runs == {False: 2, True: 1}


async def _crashed_in_charge(store: EventStore, world: World) -> tuple[str, str, str]:
    """A run whose process died right after ``charge_card``'s effect: (session, invocation,
    the call in doubt)."""
    service = EventStoreSessionService(store)
    sid = await _start(service)
    world.crash_after.add("charge_card")
    with pytest.raises(Crash):
        await run(build_runner(service, world), sid, text="Buy the book.")
    events = await _log(store, sid)
    return sid, _invocation(events), _call_id(events, "charge_card")


async def test_call_in_doubt_is_pending_and_evs_respond_records_its_result(
    store: EventStore,
) -> None:
    world = World()
    sid, invocation, call_id = await _crashed_in_charge(store, world)
    for _ in range(2):  # every resume stops there again until someone decides
        with pytest.raises(ToolCallInDoubt):
            await run(build_runner(EventStoreSessionService(store), world), sid,
                      invocation_id=invocation)
    events = await _log(store, sid)
    [doubt] = pending(events, idempotent_tools=["lookup_price"]).in_doubt
    assert (doubt.call.id, doubt.kind) == (call_id, "in_doubt")
    assert not any(r.id == call_id for e in events for r in e.function_responses())

    answer = await submit_response(store, session_id=sid, call_id=call_id,
                                   response={"charged": 12, "receipt": "r-12"},
                                   app_name=APP, user_id=USER)
    assert answer.invocation_id == invocation  # what ADK's Resume reads
    service = EventStoreSessionService(store)
    runner = build_runner(service, world)
    await run(runner, sid, invocation_id=invocation)
    await _confirm(store, service, sid)
    await run(runner, sid, invocation_id=invocation)
    session = await service.get_session(app_name=APP, user_id=USER, session_id=sid)
    assert session is not None
    assert final_text(session) == FINAL
    assert world.runs["charge_card"] == 1
    assert world.requests == [0, 1, 2, 3]


async def test_evs_rerun_allows_exactly_one_more_run(store: EventStore) -> None:
    world = World()
    sid, invocation, call_id = await _crashed_in_charge(store, world)
    await rerun_call(store, session_id=sid, call_id=call_id, app_name=APP, user_id=USER)
    service = EventStoreSessionService(store)
    runner = build_runner(service, world)
    await run(runner, sid, invocation_id=invocation)
    assert world.runs["charge_card"] == 2
    await _confirm(store, service, sid)
    await run(runner, sid, invocation_id=invocation)
    session = await service.get_session(app_name=APP, user_id=USER, session_id=sid)
    assert session is not None
    assert final_text(session) == FINAL
    assert world.runs["charge_card"] == 2
    events = await _log(store, sid)
    assert sum(call_id in e.started_call_ids for e in events) == 2


async def test_idempotent_tool_runs_again_after_a_crash_without_a_decision(
    store: EventStore,
) -> None:
    service, world = EventStoreSessionService(store), World()
    sid = await _start(service)
    world.crash_after.add("lookup_price")
    with pytest.raises(Crash):
        await run(build_runner(service, world), sid, text="Buy the book.")
    invocation = _invocation(await _log(store, sid))
    runner = build_runner(EventStoreSessionService(store), world)
    await run(runner, sid, invocation_id=invocation)
    assert world.runs["lookup_price"] == 2
    assert world.runs["charge_card"] == 1
    assert world.requests == [0, 1, 2]  # the recorded first response is not asked for again


async def test_recorded_result_is_returned_without_running_the_tool(store: EventStore) -> None:
    """A call whose result the log holds never runs again, even when ADK asks to run it."""
    service, world = EventStoreSessionService(store), World()
    sid = await _start(service)
    await run(build_runner(service, world), sid, text="Buy the book.")
    session = await service.get_session(app_name=APP, user_id=USER, session_id=sid)
    assert session is not None
    plugin = EventStoreDurabilityPlugin(service)
    call_id = _call_id(await _log(store, sid), "charge_card")

    class Context:
        function_call_id = call_id
        tool_confirmation = None
        invocation_id = "inv"
        agent_name = AGENT
        branch = None

    Context.session = session  # type: ignore[attr-defined]

    class Tool:
        name = "charge_card"

        async def check_require_confirmation(self, args: Any, context: Any) -> bool:
            return False

    result = await plugin.before_tool_callback(
        tool=Tool(), tool_args={"amount": 12}, tool_context=Context())  # type: ignore[arg-type]
    assert result == {"charged": 12, "receipt": "r-12"}
    assert world.runs["charge_card"] == 1


async def test_a_second_process_cannot_claim_a_call_the_first_claimed(store: EventStore) -> None:
    service = EventStoreSessionService(store)
    sid = await _start(service)
    first = await service.get_session(app_name=APP, user_id=USER, session_id=sid)
    second = await service.get_session(app_name=APP, user_id=USER, session_id=sid)
    assert first is not None
    assert second is not None
    await service.append_claim(first, call_ids=["c1"], author=AGENT, invocation_id="i")
    with pytest.raises(StaleSessionError):
        await service.append_claim(second, call_ids=["c1"], author=AGENT, invocation_id="i")
    assert [e.started_call_ids for e in await _log(store, sid)] == [("c1",)]


async def test_recorded_final_answer_is_not_requested_again(store: EventStore) -> None:
    """The process died after ADK recorded the final answer, before the invocation ended."""
    service, world = EventStoreSessionService(store), World()
    sid = await _start(service)
    runner = build_runner(service, world)
    await run(runner, sid, text="Buy the book.")
    await _confirm(store, service, sid)
    invocation = _invocation(await _log(store, sid))
    async for event in runner.run_async(user_id=USER, session_id=sid,
                                        invocation_id=invocation):
        if event.content and any(p.text for p in event.content.parts or ()):
            break  # stop right after the final answer was appended
    assert world.requests == [0, 1, 2, 3]
    await run(build_runner(EventStoreSessionService(store), world), sid,
              invocation_id=invocation)
    assert world.requests == [0, 1, 2, 3]
    session = await service.get_session(app_name=APP, user_id=USER, session_id=sid)
    assert session is not None
    assert final_text(session) == FINAL


def test_plugin_needs_our_session_service() -> None:
    from google.adk.sessions import InMemorySessionService

    with pytest.raises(StoreUsageError, match="EventStoreSessionService"):
        EventStoreDurabilityPlugin(InMemorySessionService())  # type: ignore[arg-type]


def _scripted(name: str, tools: list[Any], service: EventStoreSessionService) -> Any:
    """A runner whose model calls the first tool once, then answers with the result it got."""
    import warnings

    from google.adk.agents import LlmAgent
    from google.adk.apps import App, ResumabilityConfig
    from google.adk.models import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import Runner
    from google.genai import types

    tool_name = getattr(tools[0], "name", getattr(tools[0], "__name__", ""))

    class Model(BaseLlm):
        model: str = "fake"

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            results = [p.function_response.response for c in llm_request.contents
                       for p in c.parts or () if p.function_response
                       and p.function_response.name == tool_name]
            done = [r for r in results if "error" not in r and r.get("status") != "waiting"]
            part = (types.Part(text=f"done: {done[-1]}") if done else types.Part(
                function_call=types.FunctionCall(name=tool_name, args={"amount": 5})))
            yield LlmResponse(content=types.Content(role="model", parts=[part]))

    agent = LlmAgent(name=name, model=Model(), tools=tools)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        app = App(name=APP, root_agent=agent, plugins=[EventStoreDurabilityPlugin(service)],
                  resumability_config=ResumabilityConfig(is_resumable=True))
    return Runner(app=app, session_service=service)


async def test_tool_asking_confirmation_itself_runs_once_when_confirmed(
    store: EventStore,
) -> None:
    """A tool that calls ``request_confirmation`` ran (claimed) until it asked; the confirmed
    run after the answer is not a repeat, and it runs once."""
    from google.adk.tools.tool_context import ToolContext

    refunds: list[int] = []

    def refund(amount: int, tool_context: ToolContext) -> dict[str, Any]:
        """Refund, once a human agrees."""
        if not tool_context.tool_confirmation:
            tool_context.request_confirmation(hint="Refund 5?")
            return {"status": "waiting"}
        refunds.append(amount)
        return {"refunded": amount}

    service = EventStoreSessionService(store)
    sid = await _start(service)
    runner = _scripted(AGENT, [refund], service)
    await run(runner, sid, text="Refund me.")
    events = await _log(store, sid)
    [asked] = pending(events, idempotent_tools=[]).confirmations
    assert (asked.call.name, asked.hint) == ("refund", "Refund 5?")
    await _confirm(store, service, sid)
    await run(runner, sid, invocation_id=_invocation(events))
    session = await service.get_session(app_name=APP, user_id=USER, session_id=sid)
    assert session is not None
    assert final_text(session) == "done: {'refunded': 5}"
    assert refunds == [5]


async def test_long_running_call_is_answered_by_evs_respond(store: EventStore) -> None:
    from google.adk.tools.long_running_tool import LongRunningFunctionTool

    started: list[int] = []

    def approve_refund(amount: int) -> None:
        """Ask a manager; the answer comes later."""
        started.append(amount)

    service = EventStoreSessionService(store)
    sid = await _start(service)
    runner = _scripted(AGENT, [LongRunningFunctionTool(approve_refund)], service)
    await run(runner, sid, text="Refund me.")
    events = await _log(store, sid)
    [waiting] = pending(events, idempotent_tools=[]).long_running
    answer = await submit_response(store, session_id=sid, call_id=waiting.call.id,
                                   response={"approved": True}, app_name=APP, user_id=USER)
    assert answer.invocation_id == _invocation(events)
    await run(runner, sid, invocation_id=_invocation(events))
    session = await service.get_session(app_name=APP, user_id=USER, session_id=sid)
    assert session is not None
    assert final_text(session) == "done: {'approved': True}"
    assert started == [5]


@pytest.mark.parametrize("response", [
    pytest.param({"error": "This tool call requires confirmation, please approve or reject."},
                 id="adk-gate"),
    pytest.param({"status": "waiting"}, id="tool-asked-itself"),
])
def test_adk_confirmation_placeholder_is_stored_as_the_protocols_and_reads_back_exactly(
    response: dict[str, Any],
) -> None:
    from google.adk.events import Event as AdkEvent
    from google.adk.events import EventActions
    from google.adk.tools.tool_confirmation import ToolConfirmation
    from google.genai import types

    from eventstore import is_placeholder_response
    from eventstore.integrations.adk import from_adk_event, to_adk_events

    event = AdkEvent(
        author=AGENT, invocation_id="inv",
        content=types.Content(role="user", parts=[types.Part(
            function_response=types.FunctionResponse(id="c1", name="ship", response=response))]),
        actions=EventActions(requested_tool_confirmations={"c1": ToolConfirmation(hint="ok?")}),
    )
    stored = from_adk_event(event)
    [native] = stored.function_responses()
    assert is_placeholder_response(native.response)
    assert CallLedger.of([stored]).get("c1").decision() == "waits_for_confirmation"
    mapping = {**_mapping_of(stored)}
    [back] = to_adk_events([mapping])
    assert back.model_dump(exclude_none=True) == event.model_dump(exclude_none=True)


def _mapping_of(event: Event) -> dict[str, Any]:
    """The stored mapping of ``event`` (what ``EventStore.read_mappings`` gives)."""
    import dataclasses

    raw = dataclasses.asdict(event)
    raw["content"] = raw["content"] and {"role": raw["content"]["role"],
                                         "parts": list(raw["content"]["parts"])}
    return raw


async def test_confirmation_request_whose_placeholder_a_crash_left_out_is_pending(
    store: EventStore,
) -> None:
    """Killed between ADK's confirmation request and its placeholder: the resumed invocation
    restores the placeholder, and the call is listed as waiting for its confirmation."""
    service, world = EventStoreSessionService(store), World()
    sid = await _start(service)
    runner = build_runner(service, world)
    message = types.Content(role="user", parts=[types.Part(text="Buy the book.")])
    async for event in runner.run_async(user_id=USER, session_id=sid, new_message=message):
        if any(c.name == "adk_request_confirmation" for c in event.get_function_calls()):
            break  # the process dies right after the request was appended
    events = await _log(store, sid)
    assert not pending(events, idempotent_tools=["lookup_price"]).confirmations
    await run(build_runner(EventStoreSessionService(store), world), sid,
              invocation_id=_invocation(events))
    [asked] = pending(await _log(store, sid), idempotent_tools=["lookup_price"]).confirmations
    assert asked.call.name == "ship_order"
    await _confirm(store, service, sid)
    await run(build_runner(EventStoreSessionService(store), world), sid,
              invocation_id=_invocation(events))
    assert world.runs["ship_order"] == 1
