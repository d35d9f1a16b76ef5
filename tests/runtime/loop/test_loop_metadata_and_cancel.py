"""The ToolContext side channel and cancellation, wired through the loop.

Metadata a caller passes to ``Runner.run`` reaches every ToolContext and every callback, never a
model request nor the log; cancelling the task running an invocation sets each running call's
cancel event, so a tool that honours ``ctx.cancelled`` stops.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from eventstore import EventStore, FunctionCall
from runtime import (
    Agent,
    AgentCallbacks,
    InvocationContext,
    ModelRequest,
    ModelResponse,
    Runner,
    ScriptedModel,
    Tool,
    ToolContext,
    function_tool,
)

TRACE = "trace-7f3a9c"
NOTE = "note-from-the-tool-51b2"


def _calls(*names: str) -> ModelResponse:
    return ModelResponse.calling(
        *(FunctionCall(id=f"c-{i}", name=name, args={}) for i, name in enumerate(names))
    )


class _Seen:
    def __init__(self) -> None:
        self.tool: list[dict[str, Any]] = []
        self.before_tool: list[dict[str, Any]] = []
        self.after_tool: list[dict[str, Any]] = []
        self.before_model: list[dict[str, Any]] = []


def _metadata_runner(store: EventStore, model: ScriptedModel, seen: _Seen) -> Runner:
    @function_tool
    def probe(tool_context: ToolContext) -> dict[str, str]:
        """Record what the call's context carries."""
        seen.tool.append(dict(tool_context.metadata))
        tool_context.metadata["note"] = NOTE  # a tool may write to the side channel
        return {"status": "ok"}

    def before_tool(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> None:
        seen.before_tool.append(dict(ctx.metadata))

    def after_tool(
        tool: Tool, args: dict[str, Any], ctx: ToolContext, result: dict[str, Any]
    ) -> None:
        seen.after_tool.append(dict(ctx.metadata))

    def before_model(ctx: InvocationContext, request: ModelRequest) -> None:
        seen.before_model.append(dict(ctx.metadata))

    agent = Agent(
        name="tracer",
        model=model,
        tools=[probe],
        callbacks=AgentCallbacks(
            before_tool=(before_tool,), after_tool=(after_tool,), before_model=(before_model,)
        ),
    )
    return Runner(agent=agent, store=store, app_name="trace")


async def test_loop_metadata_reaches_every_tool_context_and_callback(store: EventStore) -> None:
    seen = _Seen()
    model = ScriptedModel([_calls("probe", "probe"), "done"])
    runner = _metadata_runner(store, model, seen)
    await runner.create_session(user_id="u", session_id="s")

    result = await runner.run(
        session_id="s", user_id="u", new_message="go", metadata={"trace_id": TRACE}
    )

    assert result.status == "completed"
    assert seen.tool == [{"trace_id": TRACE}, {"trace_id": TRACE}]
    assert seen.before_tool == [{"trace_id": TRACE}, {"trace_id": TRACE}]
    # The call's own context: its callbacks see what the tool wrote; other calls do not.
    assert seen.after_tool == [{"trace_id": TRACE, "note": NOTE}] * 2
    assert seen.before_model == [{"trace_id": TRACE}, {"trace_id": TRACE}]


async def test_loop_metadata_never_reaches_the_log_or_model_requests(store: EventStore) -> None:
    seen = _Seen()
    model = ScriptedModel([_calls("probe"), "done"])
    runner = _metadata_runner(store, model, seen)
    await runner.create_session(user_id="u", session_id="s")

    await runner.run(session_id="s", user_id="u", new_message="go", metadata={"trace_id": TRACE})
    assert seen.tool, "the tool did not run: the test would pass vacuously"

    stored = (await store.get_session("s")).events
    assert len(stored) == 5  # user, model call, claim, response, final answer
    for event in stored:  # the repr shows every field, custom_metadata included
        assert TRACE not in repr(event)
        assert NOTE not in repr(event)
    assert len(model.requests) == 2
    for request in model.requests:
        assert TRACE not in repr(request)
        assert NOTE not in repr(request)


async def test_loop_cancelling_the_run_sets_the_cancel_event_of_a_sync_tool(
    store: EventStore,
) -> None:
    started = threading.Event()
    stopped = threading.Event()

    @function_tool
    def crunch(tool_context: ToolContext) -> str:
        """Work until done or cancelled (runs in a worker thread: asyncio cannot interrupt it)."""
        started.set()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if tool_context.cancelled:
                stopped.set()
                return "stopped"
            time.sleep(0.005)
        return "finished"

    agent = Agent(name="worker", model=ScriptedModel([_calls("crunch"), "done"]), tools=[crunch])
    runner = Runner(agent=agent, store=store, app_name="work")
    await runner.create_session(user_id="u", session_id="s")

    task = asyncio.create_task(runner.run(session_id="s", user_id="u", new_message="go"))
    assert await asyncio.to_thread(started.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(stopped.wait, 2), "the tool never saw ctx.cancelled"


async def test_loop_cancelling_the_run_sets_every_running_calls_event_first(
    store: EventStore,
) -> None:
    running = asyncio.Event()
    cancelled_seen: list[bool] = []

    @function_tool
    async def wait_long(tool_context: ToolContext) -> str:
        """Wait; report whether the context said cancelled when the wait was interrupted."""
        running.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled_seen.append(tool_context.cancelled)
            raise
        return "late"

    model = ScriptedModel([_calls("wait_long", "wait_long"), "done"])
    agent = Agent(name="worker", model=model, tools=[wait_long])
    runner = Runner(agent=agent, store=store, app_name="work")
    await runner.create_session(user_id="u", session_id="s")

    task = asyncio.create_task(runner.run(session_id="s", user_id="u", new_message="go"))
    await asyncio.wait_for(running.wait(), 5)
    await asyncio.sleep(0.01)  # let the second call start too
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled_seen == [True, True]
