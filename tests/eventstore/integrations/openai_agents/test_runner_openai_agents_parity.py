"""``EventStoreRunner`` gives back what the SDK's ``Runner`` gives back, though the SDK runs
durable clones of the caller's agents: results, streamed events, a tool's context and the
model name the caller's agents and tools; a tool added to the agent during the run runs (and
is recorded); a model request the SDK retries takes one step of the log; a ``RunState`` given
back is left where the run got to; ``run_streamed`` takes the SDK's positional parameters."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from _extras import require_extra

require_extra("agents", "openai-agents")

from agents import (  # noqa: E402
    Agent,
    ModelRetryAdvice,
    ModelRetrySettings,
    ModelSettings,
    RunContextWrapper,
    function_tool,
    retry_policies,
    set_tracing_disabled,
)
from agents.stream_events import AgentUpdatedStreamEvent, RunItemStreamEvent  # noqa: E402
from agents.testing.model import ScriptedModel, assistant_message, function_call  # noqa: E402
from agents.tool_context import ToolContext  # noqa: E402
from openai import APIConnectionError  # noqa: E402

from eventstore import open_store  # noqa: E402
from eventstore.integrations.openai_agents import (  # noqa: E402
    RUN_KEY,
    EventStoreRunner,
    EventStoreSession,
)

APP, USER, SID = "desk", "ada", "parity-1"


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)


def _session(url: str) -> EventStoreSession:
    return EventStoreSession(SID, url, app_name=APP, user_id=USER)


async def _log(url: str) -> list[dict[str, Any]]:
    """The run's meaning of each event (``RUN_KEY``), in order."""
    async with await open_store(url) as store:
        events = (await store.get_session(SID, app_name=APP, user_id=USER)).events
    return [dict(e.custom_metadata[RUN_KEY]) for e in events if RUN_KEY in e.custom_metadata]


def _handoff_team(model: ScriptedModel, seen: list[Any]) -> tuple[Agent[Any], Agent[Any]]:
    @function_tool(name_override="note")
    def note(context: ToolContext[Any]) -> str:
        seen.append(context.agent)
        return "noted"

    clerk = Agent(name="clerk", model=model, tools=[note])
    desk = Agent(name="desk", model=model, handoffs=[clerk])
    model.extend([
        [function_call("transfer_to_clerk", "{}", call_id="h1")],
        [function_call("note", "{}", call_id="n1")],
        [assistant_message("filed")],
    ])
    return desk, clerk


async def test_results_and_tools_see_the_callers_agents(sql_target: Any) -> None:
    model, seen = ScriptedModel(), []
    desk, clerk = _handoff_team(model, seen)
    session = _session(sql_target.url)
    try:
        result = await EventStoreRunner.run(desk, "File it.", session=session)
    finally:
        session.close()
    assert result.final_output == "filed"
    assert result.last_agent is clerk
    assert seen == [clerk]
    assert {id(item.agent) for item in result.new_items} <= {id(desk), id(clerk)}
    assert model.calls[1].tools == [clerk.tools[0]]  # the model got the caller's tool


async def test_streamed_events_name_the_callers_agents(sql_target: Any) -> None:
    model, seen = ScriptedModel(), []
    desk, clerk = _handoff_team(model, seen)
    session = _session(sql_target.url)
    agents: list[Any] = []
    try:
        result = EventStoreRunner.run_streamed(desk, "File it.", session=session)
        async for event in result.stream_events():
            if isinstance(event, AgentUpdatedStreamEvent):
                agents.append(event.new_agent)
            elif isinstance(event, RunItemStreamEvent):
                agents.append(event.item.agent)
    finally:
        session.close()
    assert result.final_output == "filed"
    assert result.current_agent is clerk
    assert agents
    assert all(agent is desk or agent is clerk for agent in agents)


async def test_a_tool_added_during_the_run_runs_and_is_recorded(sql_target: Any) -> None:
    ran: list[str] = []

    @function_tool(name_override="later")
    def later() -> str:
        ran.append("later")
        return "later done"

    model = ScriptedModel()
    agent = Agent(name="builder", model=model)

    @function_tool(name_override="add_later")
    def add_later() -> str:
        agent.tools.append(later)
        return "added"

    agent.tools.append(add_later)
    model.extend([
        [function_call("add_later", "{}", call_id="a1")],
        [function_call("later", "{}", call_id="l1")],
        [assistant_message("built")],
    ])
    session = _session(sql_target.url)
    try:
        result = await EventStoreRunner.run(agent, "Build.", session=session)
    finally:
        session.close()
    assert result.final_output == "built"
    assert ran == ["later"]
    log = await _log(sql_target.url)
    assert [m["claim"] for m in log if "claim" in m] == ["a1", "l1"]
    assert [m["output"] for m in log if "output" in m] == ["a1", "l1"]


async def test_a_retried_model_request_takes_one_step(sql_target: Any) -> None:
    request = httpx.Request("POST", "https://model.invalid/v1/responses")
    model = ScriptedModel(steps=[APIConnectionError(message="dropped", request=request),
                                 [assistant_message("after the retry")]])
    agent = Agent(name="patient", model=model, model_settings=ModelSettings(
        retry=ModelRetrySettings(max_retries=1, policy=retry_policies.network_error())))
    session = _session(sql_target.url)
    try:
        result = await EventStoreRunner.run(agent, "Try.", session=session)
        again = await EventStoreRunner.run(agent, "", session=session)  # replayed
    finally:
        session.close()
    assert result.final_output == again.final_output == "after the retry"
    assert len(model.calls) == 2  # the failed request and its retry; the replay asked nothing
    assert [m["model"] for m in await _log(sql_target.url) if "model" in m] == [0]


async def test_a_given_run_state_is_left_where_the_run_got_to(sql_target: Any) -> None:
    @function_tool(name_override="stamp", needs_approval=True)
    def stamp() -> str:
        return "stamped"

    @function_tool(name_override="seal", needs_approval=True)
    def seal() -> str:
        return "sealed"

    model = ScriptedModel()
    vault = Agent(name="vault", model=model, tools=[seal])
    desk = Agent(name="desk", model=model, tools=[stamp], handoffs=[vault])
    model.extend([
        [function_call("stamp", "{}", call_id="s1")],
        [function_call("transfer_to_vault", "{}", call_id="h1")],
        [function_call("seal", "{}", call_id="v1")],
    ])
    session = _session(sql_target.url)
    try:
        first = await EventStoreRunner.run(desk, "Stamp and seal.", session=session)
        state = first.to_state()
        state.approve(first.interruptions[0])
        second = await EventStoreRunner.run(desk, state, session=session)
    finally:
        session.close()
    assert [i.tool_name for i in second.interruptions] == ["seal"]
    # As with the SDK's Runner, the state given back now stands where the run stopped:
    assert [i.tool_name for i in state.get_interruptions()] == ["seal"]
    assert all(i.agent is vault for i in state.get_interruptions())


async def test_run_streamed_takes_the_sdks_positional_parameters(sql_target: Any) -> None:
    seen: list[Any] = []

    @function_tool(name_override="peek")
    def peek(context: RunContextWrapper[Any]) -> str:
        seen.append(context.context)
        return "peeked"

    model = ScriptedModel(steps=[[function_call("peek", "{}", call_id="p1")],
                                 [assistant_message("seen")]])
    agent = Agent(name="looker", model=model, tools=[peek])
    session = _session(sql_target.url)
    try:
        # (agent, input, context, max_turns, hooks, run_config, ...), as Runner.run_streamed
        result = EventStoreRunner.run_streamed(agent, "Look.", {"who": "ada"}, 5,
                                               session=session)
        async for _ in result.stream_events():
            pass
    finally:
        session.close()
    assert result.final_output == "seen"
    assert seen == [{"who": "ada"}]


class _AdvisingModel(ScriptedModel):
    """Fails its first request with an error only its own retry advice calls retryable, and
    counts the SDK's end-of-run cleanups."""

    def __init__(self) -> None:
        super().__init__(steps=[RuntimeError("overloaded"), [assistant_message("advised")]])
        self.cleanups = 0

    def get_retry_advice(self, request: Any) -> ModelRetryAdvice | None:
        return ModelRetryAdvice(suggested=True, replay_safety="safe", reason="overloaded")

    async def _cleanup_on_run_end(self, owner: object) -> None:
        self.cleanups += 1


async def test_the_wrapped_model_advises_retries_and_is_cleaned_up(sql_target: Any) -> None:
    model = _AdvisingModel()
    agent = Agent(name="advised", model=model, model_settings=ModelSettings(
        retry=ModelRetrySettings(max_retries=1, policy=retry_policies.provider_suggested())))
    session = _session(sql_target.url)
    try:
        result = await EventStoreRunner.run(agent, "Go.", session=session)
    finally:
        session.close()
    assert result.final_output == "advised"  # retried on the wrapped model's advice
    assert model.cleanups == 1


async def test_a_given_run_state_keeps_what_ran_before_the_run_failed(sql_target: Any) -> None:
    ran: list[str] = []

    @function_tool(name_override="stamp", needs_approval=True)
    def stamp() -> str:
        ran.append("stamp")
        return "stamped"

    def failing_behavior(context: Any, results: Any) -> Any:
        raise RuntimeError("behaviour failed")

    model = ScriptedModel(steps=[[function_call("stamp", "{}", call_id="s1")],
                                 [assistant_message("stamped it")]])
    agent = Agent(name="desk", model=model, tools=[stamp], tool_use_behavior=failing_behavior)
    session = _session(sql_target.url)
    try:
        first = await EventStoreRunner.run(agent, "Stamp.", session=session)
        state = first.to_state()
        state.approve(first.interruptions[0])
        with pytest.raises(RuntimeError, match="behaviour failed"):
            await EventStoreRunner.run(agent, state, session=session)
        outputs = [item.output for item in state._generated_items
                   if getattr(item, "type", "") == "tool_call_output_item"]
        assert outputs == ["stamped"]  # the state given back holds what ran
        agent.tool_use_behavior = "run_llm_again"
        done = await EventStoreRunner.run(agent, state, session=session)
    finally:
        session.close()
    assert done.final_output == "stamped it"
    assert ran == ["stamp"]  # continuing the state did not run the tool again
