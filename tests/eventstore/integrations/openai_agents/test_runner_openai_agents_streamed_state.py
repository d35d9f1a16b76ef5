"""``EventStoreRunner.run_streamed`` given a ``RunState``, as ``Runner.run_streamed`` takes one:
a run stopped for approvals continues streamed from the state (its decisions recorded in the
log first), each tool runs once and no recorded model response is asked for again; with an
agent tool, a streamed continuation cancelled while the nested model works can be continued
again from the same state, and the approved nested tool still ran once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _extras import require_extra

require_extra("agents", "openai-agents")

from _oai_order_agent import FINAL, OrderModel, Shop  # noqa: E402
from agents import (  # noqa: E402
    Agent,
    Model,
    ModelResponse,
    RunResultStreaming,
    function_tool,
    set_tracing_disabled,
)
from agents.stream_events import RunItemStreamEvent  # noqa: E402

from eventstore import open_store  # noqa: E402
from eventstore.integrations.openai_agents import (  # noqa: E402
    RUN_KEY,
    EventStoreRunner,
    EventStoreSession,
)

APP, USER, SID = "shop", "ada", "stream-state-1"
ASK = "Buy the book and ship it."


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)


def _session(url: str) -> EventStoreSession:
    return EventStoreSession(SID, url, app_name=APP, user_id=USER)


async def _streamed(agent: Agent[Any], input: Any, session: EventStoreSession
                    ) -> tuple[RunResultStreaming, list[Any]]:
    result = EventStoreRunner.run_streamed(agent, input, session=session)
    events = [event async for event in result.stream_events()]
    return result, events


async def test_run_streamed_continues_a_run_state_stopped_for_approval(
        sql_target: Any) -> None:
    shop, model = Shop(), OrderModel()
    agent = shop.agent(model)
    session = _session(sql_target.url)
    try:
        stopped, _ = await _streamed(agent, ASK, session)
        assert [i.tool_name for i in stopped.interruptions] == ["ship_order"]
        state = stopped.to_state()
        state.approve(state.get_interruptions()[0])
        result = EventStoreRunner.run_streamed(agent, state, session=session)
        # Handed back at once, before the state is loaded: not complete, the caller's agent.
        assert result.is_complete is False
        assert result.current_agent is agent
        events = [event async for event in result.stream_events()]
    finally:
        session.close()
    assert result.is_complete is True
    assert result.final_output == FINAL
    assert result.last_agent is agent
    items = [e.item for e in events if isinstance(e, RunItemStreamEvent)]
    assert items
    assert all(i.agent is agent for i in items)
    assert shop.runs == {"lookup_price": 1, "charge_card": 1, "ship_order": 1}
    assert all(n == 1 for n in model.requests.values()), model.requests
    async with await open_store(sql_target.url) as store:
        log = (await store.get_session(SID, app_name=APP, user_id=USER)).events
    answers = [r.response for e in log for r in e.function_responses()
               if r.name == "adk_request_confirmation"]
    assert answers == [{"confirmed": True, "payload": None}]
    ends = [e.custom_metadata[RUN_KEY]["end"] for e in log
            if "end" in e.custom_metadata.get(RUN_KEY, {})]
    assert ends == ["completed"]


async def test_run_streamed_state_with_a_rejection_gives_the_sdks_rejection(
        tmp_path: Any) -> None:
    shop, model = Shop(), OrderModel()
    session = _session(str(tmp_path / "reject.db"))
    try:
        stopped, _ = await _streamed(shop.agent(model), ASK, session)
        state = stopped.to_state()
        state.reject(state.get_interruptions()[0])
        result, _ = await _streamed(shop.agent(model), state, session)
    finally:
        session.close()
    assert result.final_output == "Not shipped: Tool execution was not approved."
    assert "ship_order" not in shop.runs


class _BlockingInner(Model):
    """The nested agent's model: asks for ``sensitive``, then answers; its second request
    waits for ``release`` (the outer run is cancelled while it waits)."""

    def __init__(self) -> None:
        from agents.testing.model import assistant_message, function_call

        self.calls = 0
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()
        self._replies = [[function_call("sensitive", "{}", call_id="inner_call")],
                         [assistant_message("inner done")]]

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        from agents import Usage

        self.calls += 1
        if self.calls == 2:
            self.waiting.set()
            await self.release.wait()
        output = self._replies[min(self.calls - 1, 1)]
        return ModelResponse(output=list(output), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the agent tool's nested run is not streamed")


async def test_cancelled_streamed_continuation_of_an_agent_tool_continues_again(
        tmp_path: Any) -> None:
    ran: list[str] = []

    @function_tool(needs_approval=True, failure_error_function=None)
    async def sensitive() -> str:
        ran.append("ran")
        return "inner value"

    inner_model = _BlockingInner()
    inner = Agent(name="inner", model=inner_model, tools=[sensitive])
    outer_model = OrderModel(plan=(("delegate", '{"input": "hi"}'),), final="outer done")
    outer = Agent(name="outer", model=outer_model,
                  tools=[inner.as_tool(tool_name="delegate", tool_description="Delegate")])
    session = _session(str(tmp_path / "cancel.db"))
    try:
        stopped, _ = await _streamed(outer, "go", session)
        state = stopped.to_state()
        state.approve(stopped.interruptions[0])
        task = asyncio.create_task(_streamed(outer, state, session))
        await asyncio.wait_for(inner_model.waiting.wait(), 30)
        assert ran == ["ran"]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        inner_model.release.set()
        result, _ = await asyncio.wait_for(_streamed(outer, state, session), 30)
    finally:
        session.close()
    assert result.final_output == "outer done"
    assert ran == ["ran"]  # approved once, run once, though the first continuation was cancelled
    assert inner_model.calls == 3


class Crash(BaseException):
    """Stands for the process dying at a chosen write."""


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_a_finished_runs_state_continues_as_the_sdks_runner_does(
        tmp_path: Any, streamed: bool) -> None:
    """Before, ours replayed the finished run's result for its state."""
    from agents import Runner
    from agents.testing.model import ScriptedModel, assistant_message

    def agent() -> Agent[Any]:
        return Agent(name="once", model=ScriptedModel(steps=[[assistant_message("first")]]))

    handlers = {"max_turns": lambda data: "more turns needed"}
    plain = await Runner.run(agent(), "Hi.", max_turns=1)
    expected = (await Runner.run(agent(), plain.to_state(), error_handlers=handlers)).final_output
    assert expected == "more turns needed"

    url = str(tmp_path / "finished.db")
    session = _session(url)
    try:
        first = await EventStoreRunner.run(agent(), "Hi.", session=session, max_turns=1)
        assert first.final_output == "first"
        if streamed:
            again = EventStoreRunner.run_streamed(agent(), first.to_state(), session=session,
                                                  error_handlers=handlers)
            async for _ in again.stream_events():
                pass
        else:
            again = await EventStoreRunner.run(agent(), first.to_state(), session=session,
                                               error_handlers=handlers)
    finally:
        session.close()
    assert again.final_output == expected
    async with await open_store(url) as store:
        log = (await store.get_session(SID, app_name=APP, user_id=USER)).events
    meanings = [e.custom_metadata[RUN_KEY] for e in log if RUN_KEY in e.custom_metadata]
    starts = [m["start"]["input"] for m in meanings if "start" in m]
    assert starts[0] == "Hi."
    assert set(starts[1]) == {"run_state"}
    assert [m["end"] for m in meanings if "end" in m] == ["completed", "completed"]


async def test_the_sdks_run_state_continues_durably_after_a_crash(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A state the SDK's own ``Runner`` stopped (nothing of it in the log) continues as a run
    of ours: after a crash before the final answer is recorded, the same state again does not
    run the approved tool twice."""
    from agents import Runner

    from eventstore.integrations.openai_agents.durable import DurableRun

    shop, model = Shop(), OrderModel()
    stopped = await Runner.run(shop.agent(model), ASK)
    state_json = stopped.to_state().to_json()

    async def approved() -> Any:
        from agents import RunState

        state = await RunState.from_json(shop.agent(model), state_json)
        state.approve(state.get_interruptions()[0])
        return state

    original = DurableRun.record_model

    async def crashing(self: DurableRun, step: int, *args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(DurableRun, "record_model", original)
        raise Crash("record_model")

    monkeypatch.setattr(DurableRun, "record_model", crashing)
    url = str(tmp_path / "sdk-state.db")
    session = _session(url)
    try:
        with pytest.raises(Crash):
            await EventStoreRunner.run(shop.agent(model), await approved(), session=session)
        assert shop.runs["ship_order"] == 1
        done = await EventStoreRunner.run(shop.agent(model), await approved(), session=session)
    finally:
        session.close()
    assert done.final_output == FINAL
    assert shop.runs == {"lookup_price": 1, "charge_card": 1, "ship_order": 1}


async def test_a_hosted_mcp_approval_continues_from_the_given_state(tmp_path: Any) -> None:
    """A hosted MCP approval is no call of ours (the log records no stop for it): before, the
    state given back replayed the run from its input, stopping at the same request again."""
    from agents import HostedMCPTool
    from agents.testing.model import ScriptedModel, assistant_message
    from openai.types.responses.response_output_item import McpApprovalRequest
    from openai.types.responses.tool_param import Mcp

    model = ScriptedModel(steps=[
        [McpApprovalRequest(id="req-1", type="mcp_approval_request", arguments="{}",
                            name="lookup_account", server_label="crm")],
        [assistant_message("account found")]])
    crm = HostedMCPTool(tool_config=Mcp(type="mcp", server_label="crm",
                                        server_url="https://crm.example/mcp"))
    agent = Agent(name="desk", model=model, tools=[crm])
    session = _session(str(tmp_path / "mcp.db"))
    try:
        first = await EventStoreRunner.run(agent, "Find the account.", session=session)
        assert [i.raw_item.server_label for i in first.interruptions] == ["crm"]
        state = first.to_state()
        state.approve(first.interruptions[0])
        done = await EventStoreRunner.run(agent, state, session=session)
    finally:
        session.close()
    assert done.interruptions == []
    assert done.final_output == "account found"
