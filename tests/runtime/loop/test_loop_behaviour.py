"""The loop's stop conditions, callbacks, plugins, event streaming and conflict handling."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from eventstore import (
    Content,
    Event,
    EventStore,
    FunctionCall,
    FunctionResponse,
    Part,
    SessionNotFoundError,
)
from runtime import (
    Agent,
    AgentCallbacks,
    FunctionDeclaration,
    InvocationContext,
    ModelRequest,
    ModelResponse,
    Plugin,
    ResumePlan,
    Runner,
    RuntimeUsageError,
    ScriptedModel,
    ScriptExhaustedError,
    SessionConflictError,
    Tool,
    ToolContext,
    function_tool,
)

AGENT = "agent"


def call(call_id: str, name: str, **args: Any) -> FunctionCall:
    return FunctionCall(id=call_id, name=name, args=args)


@function_tool
def add(a: int, b: int, tool_context: ToolContext) -> int:
    """Add two numbers."""
    tool_context.state["total"] = a + b
    return a + b


@function_tool(is_long_running=True)
def start_job(job: str) -> None:
    """Start a job; its result arrives later."""


class Deferring:
    """A function tool whose None result means the answer comes later (not long-running)."""

    name = "ask_human"
    description = "Ask a human."
    is_long_running = False

    def declaration(self) -> FunctionDeclaration:
        return FunctionDeclaration(name=self.name, description=self.description)

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any] | None:
        return None

    def defers_response(self) -> bool:
        return True


class Receipt:
    """Skips summarization and shows its result to the user."""

    name = "print_receipt"
    description = "Print a receipt."
    is_long_running = False

    def declaration(self) -> FunctionDeclaration:
        return FunctionDeclaration(name=self.name, description=self.description)

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any] | None:
        ctx.actions.skip_summarization = True
        return {"receipt": "R-17"}

    def display_result(self, result: Mapping[str, Any]) -> str | None:
        return f"Your receipt: {result['receipt']}"


async def make(
    store: EventStore, steps: list[Any], *, tools: list[Any] | None = None, **agent_options: Any
) -> tuple[Runner, ScriptedModel]:
    model = ScriptedModel(steps)
    agent = Agent(name=AGENT, model=model, tools=tools or [add], **agent_options)
    runner = Runner(agent=agent, store=store, app_name="app")
    await runner.create_session(user_id="u", session_id="s")
    return runner, model


async def test_long_running_call_without_result_pauses_and_resumes_on_the_late_response(
    store: EventStore,
) -> None:
    runner, model = await make(
        store,
        [ModelResponse.calling(call("j1", "start_job", job="render")), "The render finished."],
        tools=[start_job],
    )
    first = await runner.run(session_id="s", user_id="u", new_message="render it")
    assert first.status == "paused_long_running"
    assert first.pending_call_ids == ("j1",)
    _user, model_turn, claim = first.events
    assert model_turn.long_running_tool_ids == ("j1",)
    assert claim.started_call_ids == ("j1",)

    late = Content(
        role="user",
        parts=(
            Part(function_response=FunctionResponse(id="j1", name="start_job", response={"ok": 1})),
        ),
    )
    second = await runner.run(session_id="s", user_id="u", new_message=late)
    assert second.status == "completed"
    assert second.final_text == "The render finished."
    assert second.events[0].author == "user"
    request = model.requests[1]
    assert [c.role for c in request.contents] == ["user", "model", "user"]
    assert request.contents[2].parts[0].function_response is not None


async def test_deferred_response_appends_nothing_for_that_call_and_pauses(
    store: EventStore,
) -> None:
    runner, _ = await make(
        store,
        [ModelResponse.calling(call("h1", "ask_human"), call("a1", "add", a=1, b=2))],
        tools=[Deferring(), add],
    )
    result = await runner.run(session_id="s", user_id="u", new_message="go")
    assert result.status == "paused_long_running"
    assert result.pending_call_ids == ("h1",)
    response = result.events[-1]
    assert [r.id for r in response.function_responses()] == ["a1"]
    assert response.actions.state_delta == {"total": 3}


async def test_skip_summarization_stops_without_calling_the_model_and_shows_the_result(
    store: EventStore,
) -> None:
    runner, model = await make(
        store, [ModelResponse.calling(call("r1", "print_receipt"))], tools=[Receipt()]
    )
    result = await runner.run(session_id="s", user_id="u", new_message="receipt please")
    assert result.status == "completed"
    assert result.final_text == "Your receipt: R-17"
    assert len(model.requests) == 1
    shown = result.events[-1]
    assert shown.author == AGENT
    assert shown.content == Content(role="model", parts=(Part(text="Your receipt: R-17"),))
    assert result.events[-2].actions.skip_summarization


async def test_max_steps_stops_with_step_limit(store: EventStore) -> None:
    looping = [ModelResponse.calling(("add", {"a": i, "b": 1})) for i in range(3)]
    runner, model = await make(store, looping, max_steps=3)
    result = await runner.run(session_id="s", user_id="u", new_message="loop")
    assert result.status == "step_limit"
    assert result.pause_reason is not None
    assert "max_steps=3" in result.pause_reason
    assert len(model.requests) == 3


async def test_scripted_model_says_when_it_runs_out(store: EventStore) -> None:
    runner, _ = await make(store, [ModelResponse.calling(("add", {"a": 1, "b": 1}))])
    with pytest.raises(ScriptExhaustedError, match="called 2 times but only 1"):
        await runner.run(session_id="s", user_id="u", new_message="x")


async def test_generated_call_ids_are_stored_and_answered(store: EventStore) -> None:
    runner, _ = await make(store, [ModelResponse.calling(("add", {"a": 2, "b": 3})), "5"])
    result = await runner.run(session_id="s", user_id="u", new_message="2+3")
    (issued,) = result.events[1].function_calls()
    assert issued.id.startswith("call-")
    assert len(issued.id) == len("call-") + 32
    assert [r.id for r in result.events[3].function_responses()] == [issued.id]


async def test_run_events_yields_each_event_right_after_it_is_stored(store: EventStore) -> None:
    runner, _ = await make(store, [ModelResponse.calling(("add", {"a": 1, "b": 1})), "2"])
    seen: list[tuple[Event, int]] = []
    async for event in runner.run_events(session_id="s", user_id="u", new_message="1+1"):
        seen.append((event, await store.version("s")))
    assert [(e.seq, v) for e, v in seen] == [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]
    assert [e for e, _ in seen] == (await store.get_session("s")).events


async def test_sequential_mode_runs_calls_in_order_and_later_calls_see_earlier_state(
    store: EventStore,
) -> None:
    seen: list[Any] = []

    @function_tool
    def note(text: str, tool_context: ToolContext) -> str:
        """Append a note."""
        seen.append(tool_context.state.get("notes"))
        tool_context.state["notes"] = [*tool_context.state.get("notes", []), text]
        return text

    runner, _ = await make(
        store,
        [ModelResponse.calling(("note", {"text": "a"}), ("note", {"text": "b"})), "ok"],
        tools=[note],
        parallel_tool_calls=False,
    )
    result = await runner.run(session_id="s", user_id="u", new_message="notes")
    assert seen == [None, ["a"]]
    assert result.events[3].actions.state_delta == {"notes": ["a", "b"]}


class Recorder(Plugin):
    def __init__(self, log: list[str], *, replace_model: bool = False) -> None:
        self.log = log
        self.replace_model = replace_model

    async def before_model(
        self, ctx: InvocationContext, request: ModelRequest
    ) -> ModelResponse | None:
        self.log.append("plugin.before_model")
        return ModelResponse(text="from plugin") if self.replace_model else None

    async def before_tool(
        self, tool: Tool, args: dict[str, Any], ctx: ToolContext
    ) -> dict[str, Any] | None:
        self.log.append("plugin.before_tool")
        args["b"] = 10
        return None

    async def after_tool(
        self, tool: Tool, args: dict[str, Any], ctx: ToolContext, result: dict[str, Any]
    ) -> dict[str, Any] | None:
        self.log.append("plugin.after_tool")
        return None


async def test_plugins_run_before_agent_callbacks_and_can_edit_args(store: EventStore) -> None:
    log: list[str] = []

    def agent_before_model(ctx: InvocationContext, request: ModelRequest) -> None:
        log.append("agent.before_model")

    def agent_before_tool(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> None:
        log.append(f"agent.before_tool b={args['b']}")

    def agent_after_model(ctx: InvocationContext, response: ModelResponse) -> ModelResponse | None:
        log.append("agent.after_model")
        return ModelResponse(text="edited") if not response.function_calls else None

    runner, _ = await make(
        store,
        [ModelResponse.calling(("add", {"a": 1, "b": 2})), "11"],
        plugins=[Recorder(log)],
        callbacks=AgentCallbacks(
            before_model=(agent_before_model,),
            after_model=(agent_after_model,),
            before_tool=(agent_before_tool,),
        ),
    )
    result = await runner.run(session_id="s", user_id="u", new_message="sum")
    assert log == [
        "plugin.before_model",
        "agent.before_model",
        "agent.after_model",
        "plugin.before_tool",
        "agent.before_tool b=10",
        "plugin.after_tool",
        "plugin.before_model",
        "agent.before_model",
        "agent.after_model",
    ]
    assert result.events[3].function_responses()[0].response == {"result": 11}
    assert result.final_text == "edited"
    assert result.events[-1].text() == "edited"


async def test_before_model_response_replaces_the_model_call(store: EventStore) -> None:
    log: list[str] = []
    runner, model = await make(store, [], plugins=[Recorder(log, replace_model=True)])
    result = await runner.run(session_id="s", user_id="u", new_message="hi")
    assert result.final_text == "from plugin"
    assert model.requests == []


async def test_agent_before_tool_result_replaces_the_run(store: EventStore) -> None:
    runner, _ = await make(
        store,
        [ModelResponse.calling(("add", {"a": 1, "b": 2})), "cached"],
        callbacks=AgentCallbacks(before_tool=(lambda tool, args, ctx: {"cached": True},)),
    )
    result = await runner.run(session_id="s", user_id="u", new_message="sum")
    response = result.events[3]
    assert response.function_responses()[0].response == {"cached": True}
    assert response.actions.state_delta == {}


async def test_unknown_tool_gets_a_structured_error_not_a_crash(store: EventStore) -> None:
    runner, _ = await make(store, [ModelResponse.calling(call("x1", "nope")), "sorry"])
    result = await runner.run(session_id="s", user_id="u", new_message="?")
    (response,) = result.events[3].function_responses()
    assert response.response["error"]["kind"] == "not_found"
    assert result.status == "completed"


async def test_another_writer_stops_the_invocation_without_overwriting(store: EventStore) -> None:
    async def intruder(ctx: InvocationContext, request: ModelRequest) -> None:
        await store.append(
            "s",
            Event(
                author="user",
                content=Content(role="user", parts=(Part(text="from another process"),)),
            ),
            expected_version=None,
        )

    runner, _ = await make(
        store, ["never stored"], callbacks=AgentCallbacks(before_model=(intruder,))
    )
    with pytest.raises(SessionConflictError) as caught:
        await runner.run(session_id="s", user_id="u", new_message="hi")
    assert (caught.value.expected_version, caught.value.actual_version) == (1, 2)
    assert caught.value.session_id == "s"
    assert [e.text() for e in (await store.get_session("s")).events] == [
        "hi",
        "from another process",
    ]


async def test_planner_claim_conflict_replans_on_the_new_head(store: EventStore) -> None:
    ran: list[int] = []

    @function_tool
    def once(n: int) -> int:
        """Count runs."""
        ran.append(n)
        return n

    class RacingPlanner:
        def __init__(self) -> None:
            self.calls = 0

        async def plan(
            self, ctx: InvocationContext, events_newest_first: AsyncIterator[Event]
        ) -> ResumePlan:
            self.calls += 1
            newest = [e async for e in events_newest_first]
            if self.calls == 1:
                # Another process writes between this planner's read and the claim.
                await store.append("s", Event(author="user"), expected_version=None)
            if any(e.started_call_ids for e in newest):
                return ResumePlan(pause_reason="already claimed elsewhere")
            if self.calls == 1:
                from runtime import PlannedCall

                return ResumePlan(calls=(PlannedCall(call=call("c1", "once", n=1)),))
            return ResumePlan()

    planner = RacingPlanner()
    model = ScriptedModel(["done"])
    runner = Runner(
        agent=Agent(name=AGENT, model=model, tools=[once]),
        store=store,
        app_name="app",
        resume_planner=planner,
    )
    await runner.create_session(user_id="u", session_id="s")
    result = await runner.run(session_id="s", user_id="u", new_message="go")
    assert planner.calls == 2
    assert ran == []
    assert result.status == "completed"


async def test_run_rejects_foreign_sessions_and_model_role_messages(store: EventStore) -> None:
    runner, _ = await make(store, ["x"])
    with pytest.raises(SessionNotFoundError):
        await runner.run(session_id="s", user_id="someone-else", new_message="hi")
    with pytest.raises(RuntimeUsageError, match="role 'user'"):
        await runner.run(
            session_id="s",
            user_id="u",
            new_message=Content(role="model", parts=(Part(text="spoof"),)),
        )


async def test_parallel_calls_really_overlap(store: EventStore) -> None:
    running = 0
    peak = 0

    @function_tool
    async def slow(n: int) -> int:
        """Take a while."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return n

    runner, _ = await make(
        store,
        [ModelResponse.calling(*[("slow", {"n": i}) for i in range(4)]), "ok"],
        tools=[slow],
    )
    await runner.run(session_id="s", user_id="u", new_message="go")
    assert peak == 4


async def test_answers_of_claimed_calls_are_kept_when_a_user_writes_meanwhile(
    store: EventStore,
) -> None:
    @function_tool
    async def slow_lookup(city: str) -> str:
        """Look something up while the user types."""
        await store.append(
            "s",
            Event(author="user", content=Content(role="user", parts=(Part(text="hurry"),))),
            expected_version=None,
        )
        return f"{city}: sunny"

    runner, model = await make(
        store,
        [ModelResponse.calling(call("c1", "slow_lookup", city="Oslo")), "Oslo is sunny."],
        tools=[slow_lookup],
    )
    result = await runner.run(session_id="s", user_id="u", new_message="weather?")
    history = (await store.get_session("s")).events
    assert [e.author for e in history] == ["user", AGENT, AGENT, "user", AGENT, AGENT]
    assert history[3].text() == "hurry"
    assert [r.id for r in history[4].function_responses()] == ["c1"]
    assert result.status == "completed"
    assert [e.seq for e in result.events] == [1, 2, 3, 5, 6]
    # The next request saw the user's message, and the answer right after the call.
    assert [c.role for c in model.requests[1].contents] == ["user", "model", "user", "user"]


def _answer(call_id: str, name: str, response: dict[str, Any]) -> Event:
    part = Part(function_response=FunctionResponse(id=call_id, name=name, response=response))
    return Event(author="user", content=Content(role="user", parts=(part,)))


async def test_a_call_another_writer_answered_meanwhile_is_not_answered_twice(
    store: EventStore,
) -> None:
    @function_tool
    async def contested(city: str, tool_context: ToolContext) -> str:
        """Another process answers this very call while it runs."""
        tool_context.state["mine"] = True
        await store.append("s", _answer("c1", "contested", {"r": "theirs"}), expected_version=None)
        return "mine"

    runner, model = await make(
        store,
        [ModelResponse.calling(call("c1", "contested", city="Oslo")), "done"],
        tools=[contested],
    )
    result = await runner.run(session_id="s", user_id="u", new_message="go")
    history = (await store.get_session("s")).events
    answers = [r.response for e in history for r in e.function_responses()]
    assert answers == [{"r": "theirs"}]
    # Nothing of the dropped outcome was recorded (not even its state delta), and the stale
    # invocation stopped with a typed result: it appends nothing more.
    assert [e.seq for e in result.events] == [1, 2, 3]
    assert "mine" not in (await store.get_session("s")).state
    assert result.status == "stale"
    assert "another writer answered call(s) c1 first" in (result.pause_reason or "")
    assert len(model.requests) == 1
    # The next run goes on from the log: the model sees the answer that was appended first.
    again = await runner.run(session_id="s", user_id="u")
    assert again.status == "completed"
    assert model.requests[1].contents[-1].parts[0].function_response is not None
    assert model.requests[1].contents[-1].parts[0].function_response.response == {"r": "theirs"}


async def test_only_the_calls_another_writer_answered_are_left_out_of_the_answer(
    store: EventStore,
) -> None:
    @function_tool
    async def first(n: int) -> int:
        """Answered by another writer while it runs."""
        await store.append("s", _answer("c1", "first", {"r": "theirs"}), expected_version=None)
        return n

    runner, _ = await make(
        store,
        [ModelResponse.calling(call("c1", "first", n=1), call("c2", "add", a=2, b=3)), "done"],
        tools=[first, add],
    )
    await runner.run(session_id="s", user_id="u", new_message="go")
    history = (await store.get_session("s")).events
    answers = [(r.id, r.response) for e in history for r in e.function_responses()]
    assert answers == [("c1", {"r": "theirs"}), ("c2", {"result": 5})]
    assert (await store.get_session("s")).state == {"total": 5}


async def test_answers_are_kept_when_another_writer_claims_the_same_call_meanwhile(
    store: EventStore,
) -> None:
    """Another process took the live claim for a crash and claimed the call again: the answer
    of the run that happened is still recorded (a call that ran is never left unanswered)."""

    @function_tool
    async def paid(amount: int) -> dict[str, int]:
        """Runs while another process re-claims the same call."""
        await store.append(
            "s", Event(author=AGENT, started_call_ids=("c1",)), expected_version=None
        )
        return {"charged": amount}

    runner, _ = await make(
        store, [ModelResponse.calling(call("c1", "paid", amount=300)), "done"], tools=[paid]
    )
    result = await runner.run(session_id="s", user_id="u", new_message="go")
    history = (await store.get_session("s")).events
    assert [e.started_call_ids for e in history if e.started_call_ids] == [("c1",), ("c1",)]
    assert [(e.seq, r.id) for e in history for r in e.function_responses()] == [(5, "c1")]
    assert result.status == "completed"


@function_tool(requires_confirmation=True)
def pay(amount: int) -> dict[str, int]:
    """Pay an amount (a human confirms first)."""
    return {"paid": amount}


async def test_run_without_a_message_on_a_completed_session_does_not_call_the_model(
    store: EventStore,
) -> None:
    runner, model = await make(store, [ModelResponse.calling(call("a1", "add", a=1, b=2)), "3."])
    await runner.run(session_id="s", user_id="u", new_message="add")
    version = await store.version("s")
    again = await runner.run(session_id="s", user_id="u", new_message=None)
    assert (again.status, again.final_text, again.events) == ("completed", "3.", ())
    assert len(model.requests) == 2
    assert await store.version("s") == version


async def test_run_without_a_message_while_a_long_running_call_waits_stays_paused(
    store: EventStore,
) -> None:
    runner, model = await make(
        store, [ModelResponse.calling(call("j1", "start_job", job="render"))], tools=[start_job]
    )
    await runner.run(session_id="s", user_id="u", new_message="render it")
    version = await store.version("s")
    again = await runner.run(session_id="s", user_id="u", new_message=None)
    assert (again.status, again.pending_call_ids, again.events) == (
        "paused_long_running", ("j1",), ()
    )
    assert len(model.requests) == 1
    assert await store.version("s") == version


async def test_run_without_a_message_while_a_confirmation_waits_stays_paused(
    store: EventStore,
) -> None:
    runner, model = await make(
        store, [ModelResponse.calling(call("p1", "pay", amount=5))], tools=[pay]
    )
    first = await runner.run(session_id="s", user_id="u", new_message="pay 5")
    assert first.status == "paused_for_confirmation"
    version = await store.version("s")
    again = await runner.run(session_id="s", user_id="u", new_message=None)
    assert (again.status, again.pending_call_ids, again.events) == (
        "paused_for_confirmation", first.pending_call_ids, ()
    )
    assert len(model.requests) == 1
    assert await store.version("s") == version
