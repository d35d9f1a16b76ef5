"""AgentTool at the boundary: every child pause interrupts the parent call, each child item is
answered on its own, the child starts atomically, cancellation is scoped, schemas, results."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pydantic
import pytest

from eventstore import EventStore, FunctionCall, open_store
from runtime import (
    PARENT_LINK_KEY,
    Agent,
    AgentTool,
    ModelResponse,
    ReplayResumePlanner,
    Runner,
    ScriptedModel,
    ToolContext,
    answer_confirmation,
    child_session_id,
    function_tool,
    pending,
    rerun_call,
    session_pending,
    submit_response,
)


def _calls(*calls: tuple[str, str, dict[str, Any]]) -> ModelResponse:
    return ModelResponse(
        function_calls=tuple(FunctionCall(id=i, name=n, args=a) for i, n, a in calls)
    )


def _parent(store: EventStore, tool: AgentTool, *script: Any) -> Runner:
    agent = Agent(name="planner", model=ScriptedModel(list(script)), tools=[tool])
    return Runner(agent=agent, store=store, app_name="trip", resume_planner=ReplayResumePlanner())


def _booker(store: EventStore, booked: list[str], *script: Any, **options: Any) -> AgentTool:
    @function_tool(requires_confirmation=True)
    def book(city: str) -> dict[str, Any]:
        """Book a hotel (costs money).

        Args:
            city: Where.
        """
        booked.append(city)
        return {"booked": city}

    @function_tool(is_long_running=True)
    def order_visa(country: str) -> None:
        """Order a visa; it arrives later.

        Args:
            country: Where.
        """

    @function_tool
    def charge(amount: int) -> dict[str, Any]:
        """Charge a card (not idempotent).

        Args:
            amount: How much.
        """
        booked.append(f"charged {amount}")
        return {"charged": amount}

    child = Agent(
        name="booker", model=ScriptedModel(list(script)), tools=[book, order_visa, charge]
    )
    return AgentTool(child, store=store, **options)


async def test_agent_tool_each_child_confirmation_is_answered_on_its_own(
    store: EventStore,
) -> None:
    booked: list[str] = []
    tool = _booker(
        store,
        booked,
        _calls(("c-kyoto", "book", {"city": "Kyoto"}), ("c-osaka", "book", {"city": "Osaka"})),
        "Booked Kyoto only.",
    )
    runner = _parent(store, tool, _calls(("p-1", "booker", {"request": "Book both"})), "Done.")
    await runner.create_session(user_id="u", session_id="trip")
    first = await runner.run(session_id="trip", user_id="u", new_message="Book")
    assert not [r for e in first.events for r in e.function_responses() if r.id == "p-1"]
    child = child_session_id("trip", "p-1")
    items = pending(await store.read(child), idempotent_tools=()).confirmations
    assert [i.call.args["city"] for i in items] == ["Kyoto", "Osaka"]
    # The parent's caller sees the child's confirmations as the parent's pause.
    assert first.status == "paused_for_confirmation"
    assert first.pending_call_ids == tuple(i.confirmation_id for i in items)

    # Answered through the parent session, one by one: the answers land in the child.
    kyoto, osaka = first.pending_call_ids
    yes = await answer_confirmation(store, session_id="trip", confirmation_id=kyoto, confirmed=True)
    no = await answer_confirmation(store, session_id="trip", confirmation_id=osaka, confirmed=False)
    assert {yes.seq, no.seq} <= {e.seq for e in await store.read(child)}
    assert booked == []

    second = await runner.run(session_id="trip", user_id="u")
    assert second.status == "completed"
    assert booked == ["Kyoto"]
    responses = [(r.id, r.response) for e in second.events for r in e.function_responses()]
    assert responses == [("p-1", {"result": "Booked Kyoto only."})]
    child_responses = {r.id: r.response for e in await store.read(child)
                       for r in e.function_responses()}
    assert child_responses["c-osaka"]["error"]["kind"] == "confirmation_rejected"


async def test_agent_tool_child_long_running_result_resumes_child_then_parent(
    store: EventStore,
) -> None:
    tool = _booker(store, [], _calls(("c-visa", "order_visa", {"country": "JP"})), "Visa ready.")
    runner = _parent(store, tool, _calls(("p-1", "booker", {"request": "Visa"})), "All set.")
    await runner.create_session(user_id="u", session_id="trip")
    first = await runner.run(session_id="trip", user_id="u", new_message="Visa please")
    assert first.status == "paused_long_running"
    event = await submit_response(
        store, session_id="trip", call_id="c-visa", response={"visa": "ok"}
    )
    assert event.seq in {e.seq for e in await store.read(child_session_id("trip", "p-1"))}
    second = await runner.run(session_id="trip", user_id="u")
    assert second.status == "completed"
    assert second.final_text == "All set."
    assert [(r.id, r.response) for e in second.events for r in e.function_responses()] == [
        ("p-1", {"result": "Visa ready."})
    ]


async def test_agent_tool_child_call_in_doubt_pauses_the_parent_until_decided(
    store: EventStore,
) -> None:
    booked: list[str] = []
    tool = _booker(store, booked, "Charged.")
    child = child_session_id("trip", "p-1")
    runner = _parent(store, tool, _calls(("p-1", "booker", {"request": "Charge 5"})), "Paid.")
    await runner.create_session(user_id="u", session_id="trip")
    # The child crashed mid-charge in an earlier process: started, never answered.
    ctx = await runner.new_context(session_id="trip", user_id="u")
    await ctx.append(ctx.new_event(content=_calls(("p-1", "booker", {"request": "x"})).content()))
    await ctx.append(ctx.new_event(started_call_ids=("p-1",)))
    await store.create_session(app_name="trip", user_id="u", session_id=child)
    child_runner = Runner(agent=tool.agent, store=store, app_name="trip")
    cctx = await child_runner.new_context(session_id=child, user_id="u")
    link = {PARENT_LINK_KEY: {"session_id": "trip", "function_call_id": "p-1"}}
    await cctx.append(
        cctx.new_event(author="user", custom_metadata=link),
        cctx.new_event(content=_calls(("c-pay", "charge", {"amount": 5})).content()),
        cctx.new_event(started_call_ids=("c-pay",)),
    )
    paused = await runner.run(session_id="trip", user_id="u")
    assert paused.status == "paused_long_running"
    assert booked == []
    await rerun_call(store, session_id="trip", call_id="c-pay")
    done = await runner.run(session_id="trip", user_id="u")
    assert done.status == "completed"
    assert booked == ["charged 5"]


async def test_agent_tool_child_started_atomically_resumes_with_its_request(
    store: EventStore,
) -> None:
    seen: list[str] = []

    class Echo:
        async def generate(self, request: Any) -> ModelResponse:
            seen.extend(p.text for c in request.contents for p in c.parts if p.text)
            return ModelResponse(text="echoed")

    tool = AgentTool(Agent(name="echo", model=Echo()), store=store)
    runner = _parent(store, tool, _calls(("p-1", "echo", {"request": "Say hi"})), "Done.")
    await runner.create_session(user_id="u", session_id="trip")
    # A crash right after the child session was created, before its link and request.
    await store.create_session(app_name="trip", user_id="u", session_id="trip/p-1")
    result = await runner.run(session_id="trip", user_id="u", new_message="go")
    assert result.status == "completed"
    assert seen == ["Say hi"]
    first, message = (await store.read("trip/p-1"))[:2]
    assert first.custom_metadata[PARENT_LINK_KEY]["function_call_id"] == "p-1"
    assert message.text() == "Say hi"


async def test_agent_tool_skip_summarization_shows_the_childs_result(store: EventStore) -> None:
    @function_tool
    def quote(city: str, tool_context: ToolContext) -> dict[str, Any]:
        """Quote a price and hand it straight to the user.

        Args:
            city: Where.
        """
        tool_context.actions.skip_summarization = True
        return {"price": 120, "city": city}

    child = Agent(name="quoter", model=ScriptedModel([_calls(("c-q", "quote", {"city": "Nara"}))]),
                  tools=[quote])
    tool = AgentTool(child, store=store)
    runner = _parent(store, tool, _calls(("p-1", "quoter", {"request": "Price?"})), "120 it is.")
    await runner.create_session(user_id="u", session_id="trip")
    result = await runner.run(session_id="trip", user_id="u", new_message="go")
    responses = [(r.id, r.response) for e in result.events for r in e.function_responses()]
    assert responses == [("p-1", {"price": 120, "city": "Nara"})]


@pytest.mark.parametrize(
    ("child_skips", "expected"),
    [
        pytest.param(False, "Nara: 120 a night.", id="child-answers-text"),
        pytest.param(True, '{"city":"Nara","price":120}', id="child-tool-skips-too"),
    ],
)
async def test_agent_tool_skip_summarization_ends_the_parent_with_the_childs_result(
    store: EventStore, child_skips: bool, expected: str
) -> None:
    @function_tool
    def quote(city: str, tool_context: ToolContext) -> dict[str, Any]:
        """Quote a price.

        Args:
            city: Where.
        """
        tool_context.actions.skip_summarization = child_skips
        return {"price": 120, "city": city}

    script: list[Any] = [_calls(("c-q", "quote", {"city": "Nara"}))]
    if not child_skips:
        script.append("Nara: 120 a night.")
    child = Agent(name="quoter", model=ScriptedModel(script), tools=[quote])
    tool = AgentTool(child, store=store, skip_summarization=True)
    # No second parent model turn is scripted: the parent must not call its model again.
    runner = _parent(store, tool, _calls(("p-1", "quoter", {"request": "Price?"})))
    await runner.create_session(user_id="u", session_id="trip")
    result = await runner.run(session_id="trip", user_id="u", new_message="go")
    assert result.status == "completed"
    assert result.final_text == expected
    assert result.events[-1].text() == expected
    again = await runner.run(session_id="trip", user_id="u")
    assert (again.status, again.final_text, again.events) == ("completed", expected, ())


async def test_agent_tool_skip_summarization_after_a_child_confirmation(
    store: EventStore,
) -> None:
    booked: list[str] = []
    tool = _booker(store, booked, _calls(("c-kyoto", "book", {"city": "Kyoto"})),
                   "Booked Kyoto.", skip_summarization=True)
    runner = _parent(store, tool, _calls(("p-1", "booker", {"request": "Book"})))
    await runner.create_session(user_id="u", session_id="trip")
    await runner.run(session_id="trip", user_id="u", new_message="Book")
    [item] = pending(await store.read(child_session_id("trip", "p-1"))).confirmations
    await answer_confirmation(store, session_id="trip", confirmation_id=item.confirmation_id or "",
                              confirmed=True)
    done = await runner.run(session_id="trip", user_id="u")
    assert (done.status, done.final_text, booked) == ("completed", "Booked Kyoto.", ["Kyoto"])


class Trip(pydantic.BaseModel):
    city: str
    nights: int


class Plan(pydantic.BaseModel):
    hotel: str
    total: int


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param('{"hotel": "Ryokan", "total": 300}', {"result": {"hotel": "Ryokan",
                                                                       "total": 300}}, id="fits"),
        pytest.param("no idea", "execution_failed", id="does-not-fit"),
    ],
)
async def test_agent_tool_input_and_output_schema(
    store: EventStore, answer: str, expected: Any
) -> None:
    seen: list[str] = []

    class Planner:
        async def generate(self, request: Any) -> ModelResponse:
            seen.extend(p.text for c in request.contents for p in c.parts if p.text)
            return ModelResponse(text=answer)

    tool = AgentTool(Agent(name="trip_planner", model=Planner()), store=store,
                     input_schema=Trip, output_schema=Plan)
    assert set(tool.declaration().parameters.properties) == {"city", "nights"}
    runner = _parent(
        store, tool, _calls(("p-1", "trip_planner", {"city": "Kyoto", "nights": 3})), "Ok."
    )
    await runner.create_session(user_id="u", session_id="trip")
    result = await runner.run(session_id="trip", user_id="u", new_message="go")
    assert Trip.model_validate_json(seen[0]) == Trip(city="Kyoto", nights=3)
    [response] = [r.response for e in result.events for r in e.function_responses()]
    if expected == "execution_failed":
        assert response["error"]["kind"] == "execution_failed"
        assert "output schema" in response["error"]["message"]
    else:
        assert response == expected


@pytest.mark.parametrize("propagate", [False, True])
async def test_agent_tool_cancellation_is_scoped_at_the_boundary(
    store: EventStore, propagate: bool
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()
    finished: list[bool] = []

    @function_tool
    async def survey(tool_context: ToolContext) -> dict[str, Any]:
        """A slow step."""
        entered.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            finished.append(False)
            raise
        finished.append(True)
        return {"done": True}

    child = Agent(name="surveyor", model=ScriptedModel([_calls(("c-s", "survey", {})), "Done."]),
                  tools=[survey])
    tool = AgentTool(child, store=store, propagate_cancellation=propagate)
    runner = _parent(store, tool, _calls(("p-1", "surveyor", {"request": "Survey"})), "Ok.")
    await runner.create_session(user_id="u", session_id="trip")
    task = asyncio.create_task(runner.run(session_id="trip", user_id="u", new_message="go"))
    await entered.wait()
    task.cancel()
    await asyncio.sleep(0.05)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    child_events = await store.read("trip/p-1")
    answered = [r.id for e in child_events for r in e.function_responses()]
    if propagate:
        assert finished == [False]
        assert answered == []
    else:
        # The child's step completed and was logged; the child stopped before its next model call.
        assert finished == [True]
        assert answered == ["c-s"]
        assert child_events[-1].function_responses()


def _confirming_booker(store: EventStore, booked: list[str], *script: Any) -> AgentTool:
    @function_tool(requires_confirmation=True)
    def book(city: str) -> dict[str, Any]:
        """Book a hotel (costs money).

        Args:
            city: Where.
        """
        booked.append(city)
        return {"booked": city}

    return AgentTool(Agent(name="booker", model=ScriptedModel(list(script)), tools=[book]),
                     store=store)


async def test_agent_tool_child_confirmation_is_the_parents_pause_across_processes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "trip.db"
    booked: list[str] = []
    async with await open_store(path, auto_upgrade=True) as store:
        tool = _confirming_booker(store, booked, _calls(("c-1", "book", {"city": "Kyoto"})))
        runner = _parent(store, tool, _calls(("p-1", "booker", {"request": "Kyoto"})))
        await runner.create_session(user_id="u", session_id="trip")
        first = await runner.run(session_id="trip", user_id="u", new_message="Book Kyoto")
        [cid] = first.pending_call_ids
        assert first.status == "paused_for_confirmation"
        assert cid.startswith("confirm-")
        assert "through this session" in (first.pause_reason or "")

        # The parent's report lists the child's confirmation like one of its own.
        report = await session_pending(store, "trip", idempotent_tools=())
        [item] = report.confirmations
        assert (item.kind, item.confirmation_id, item.session_id) == (
            "confirmation", cid, child_session_id("trip", "p-1"))
        assert (item.call.name, item.call.args, item.agent) == ("book", {"city": "Kyoto"},
                                                                "booker")
        assert item.hint
        assert list(report) == [item]  # the open call itself is no item: its child's are
        assert (report.next_run.executes, report.next_run.step) == (("p-1",), "waits")
        assert cid in report.next_run.reason
        # ... and the runner agrees: without an answer it pauses the same way.
        again = await runner.run(session_id="trip", user_id="u")
        assert (again.status, again.pending_call_ids) == ("paused_for_confirmation", (cid,))

    # Another process, with nothing but the database, answers through the parent's id ...
    async with await open_store(path) as store:
        await answer_confirmation(store, session_id="trip", confirmation_id=cid, confirmed=True)
        report = await session_pending(store, "trip", idempotent_tools=())
        [owed] = report.unanswered
        assert (owed.kind, owed.call.id, owed.session_id) == ("confirmed_not_run", "c-1",
                                                              "trip/p-1")
        assert report.next_run.step == "calls_model"
    assert booked == []

    # ... and a third resumes the parent: the child's original call runs once.
    async with await open_store(path) as store:
        tool = _confirming_booker(store, booked, "Booked Kyoto.")
        runner = _parent(store, tool, "Done.")
        done = await runner.run(session_id="trip", user_id="u")
        assert (done.status, done.final_text) == ("completed", "Done.")
        after = await runner.run(session_id="trip", user_id="u")
        assert after.status == "completed"
        assert not await session_pending(store, "trip", idempotent_tools=())
    assert booked == ["Kyoto"]


async def test_agent_tool_session_pending_without_tool_knowledge_knows_the_agent_tool(
    store: EventStore,
) -> None:
    tool = _confirming_booker(store, [], _calls(("c-1", "book", {"city": "Kyoto"})))
    runner = _parent(store, tool, _calls(("p-1", "booker", {"request": "Kyoto"})))
    await runner.create_session(user_id="u", session_id="trip")
    await runner.run(session_id="trip", user_id="u", new_message="Book Kyoto")
    own = pending(await store.read("trip"))  # alone, the parent's log cannot tell
    assert own.next_run.step == "unknown"
    report = await session_pending(store, "trip")
    assert [i.kind for i in report] == ["confirmation"]
    assert report.next_run.step == "waits"


async def test_agent_tool_grandchild_confirmation_pauses_the_root_for_it(
    store: EventStore,
) -> None:
    booked: list[str] = []
    booker = _confirming_booker(store, booked, _calls(("c-1", "book", {"city": "Nara"})),
                                "Booked Nara.")
    middle = AgentTool(
        Agent(name="organizer",
              model=ScriptedModel([_calls(("m-1", "booker", {"request": "Nara"})), "Organized."]),
              tools=[booker]),
        store=store,
    )
    runner = _parent(store, middle, _calls(("p-1", "organizer", {"request": "Trip"})), "Done.")
    await runner.create_session(user_id="u", session_id="trip")
    first = await runner.run(session_id="trip", user_id="u", new_message="go")
    [cid] = first.pending_call_ids
    assert first.status == "paused_for_confirmation"
    [item] = (await session_pending(store, "trip")).confirmations
    grandchild = child_session_id(child_session_id("trip", "p-1"), "m-1")
    assert (item.confirmation_id, item.session_id, item.call.name) == (cid, grandchild, "book")
    await answer_confirmation(store, session_id="trip", confirmation_id=cid, confirmed=True)
    done = await runner.run(session_id="trip", user_id="u")
    assert (done.status, done.final_text, booked) == ("completed", "Done.", ["Nara"])


@pytest.mark.parametrize(
    ("first", "second", "booked_cities"),
    [
        pytest.param(True, True, ["Kyoto", "Osaka"], id="approve-then-approve"),
        pytest.param(False, True, ["Osaka"], id="reject-then-approve"),
        pytest.param(True, False, ["Kyoto"], id="approve-then-reject"),
    ],
)
async def test_agent_tool_child_confirmations_answered_one_run_apart_each_stay_pending(
    store: EventStore, first: bool, second: bool, booked_cities: list[str]
) -> None:
    booked: list[str] = []
    tool = _booker(
        store,
        booked,
        _calls(("c-kyoto", "book", {"city": "Kyoto"}), ("c-osaka", "book", {"city": "Osaka"})),
        "Booked what you allowed.",
    )
    runner = _parent(store, tool, _calls(("p-1", "booker", {"request": "Book both"})), "Done.")
    await runner.create_session(user_id="u", session_id="trip")
    paused = await runner.run(session_id="trip", user_id="u", new_message="Book")
    kyoto, osaka = paused.pending_call_ids

    await answer_confirmation(store, session_id="trip", confirmation_id=kyoto, confirmed=first)
    again = await runner.run(session_id="trip", user_id="u")
    # The child acted on the answer it got and did not complete past the open confirmation.
    assert (again.status, again.pending_call_ids) == ("paused_for_confirmation", (osaka,))
    assert booked == (["Kyoto"] if first else [])
    report = await session_pending(store, "trip")
    child = child_session_id("trip", "p-1")
    assert [(i.kind, i.confirmation_id, i.session_id) for i in report] == [
        ("confirmation", osaka, child)]
    assert report.next_run.step == "waits"
    assert [(i.kind, i.confirmation_id) for i in pending(await store.read(child))] == [
        ("confirmation", osaka)]

    await answer_confirmation(store, session_id="trip", confirmation_id=osaka, confirmed=second)
    done = await runner.run(session_id="trip", user_id="u")
    assert (done.status, done.final_text) == ("completed", "Done.")
    assert booked == booked_cities
    assert not await session_pending(store, "trip")
    answers = {r.id: r.response for e in await store.read(child) for r in e.function_responses()
               if r.id in ("c-kyoto", "c-osaka")}
    assert {cid: "error" not in answer for cid, answer in answers.items()} == {
        "c-kyoto": first, "c-osaka": second}
    parent_answer = [r.response for e in await store.read("trip") for r in e.function_responses()
                     if r.id == "p-1"]
    assert parent_answer == [{"result": "Booked what you allowed."}]


async def test_agent_tool_child_long_running_results_submitted_apart_each_stay_pending(
    store: EventStore,
) -> None:
    tool = _booker(
        store,
        [],
        _calls(("c-jp", "order_visa", {"country": "JP"}),
               ("c-fr", "order_visa", {"country": "FR"})),
        "Both visas ready.",
    )
    runner = _parent(store, tool, _calls(("p-1", "booker", {"request": "Two visas"})), "Done.")
    await runner.create_session(user_id="u", session_id="trip")
    paused = await runner.run(session_id="trip", user_id="u", new_message="Visas")
    assert (paused.status, paused.pending_call_ids) == ("paused_long_running", ("p-1",))
    child = child_session_id("trip", "p-1")

    await submit_response(store, session_id="trip", call_id="c-jp", response={"visa": "JP"})
    again = await runner.run(session_id="trip", user_id="u")
    # The child got one of its two results: it does not complete past the other one.
    assert (again.status, again.pending_call_ids) == ("paused_long_running", ("p-1",))
    assert tool.agent.model.remaining == 1  # type: ignore[attr-defined]
    assert not [r for e in await store.read("trip") for r in e.function_responses()
                if r.id == "p-1"]
    report = await session_pending(store, "trip")
    assert [(i.kind, i.call.id, i.session_id) for i in report] == [
        ("long_running", "c-fr", child)]
    assert report.next_run.step == "waits"
    assert [(i.kind, i.call.id) for i in pending(await store.read(child))] == [
        ("long_running", "c-fr")]

    await submit_response(store, session_id="trip", call_id="c-fr", response={"visa": "FR"})
    done = await runner.run(session_id="trip", user_id="u")
    assert (done.status, done.final_text) == ("completed", "Done.")
    assert not await session_pending(store, "trip")
    parent_answer = [r.response for e in await store.read("trip") for r in e.function_responses()
                     if r.id == "p-1"]
    assert parent_answer == [{"result": "Both visas ready."}]
