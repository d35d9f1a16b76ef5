"""Observer hooks (started / completed / failed / validation-failed) on the Runner and plugins."""

from __future__ import annotations

from typing import Any

import pytest

from eventstore import EventStore, FunctionCall
from runtime import (
    Agent,
    CallOutcome,
    ModelResponse,
    Plugin,
    Runner,
    ScriptedModel,
    ScriptExhaustedError,
    ToolContext,
    function_tool,
)
from runtime.tools import ToolCallObserver


class Recorder(ToolCallObserver):
    def __init__(self, label: str, log: list[str]) -> None:
        self.label, self.log = label, log

    def on_call_starting(self, call: FunctionCall, ctx: ToolContext) -> None:
        self.log.append(f"{self.label} start {call.id}")

    def on_call_completed(self, call: FunctionCall, outcome: CallOutcome) -> None:
        self.log.append(f"{self.label} done {call.id}")

    def on_call_failed(
        self, call: FunctionCall, outcome: CallOutcome, error: BaseException | None
    ) -> None:
        self.log.append(f"{self.label} failed {call.id} {outcome.error_kind}")

    def on_validation_failed(self, call: FunctionCall, error: Any) -> None:
        self.log.append(f"{self.label} invalid {call.id}")


class Tracing(Plugin):
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def on_call_completed(self, call: FunctionCall, outcome: CallOutcome) -> None:
        self.log.append(f"plugin done {call.id}")


async def test_observers_on_the_runner_and_on_plugins_see_every_call(store: EventStore) -> None:
    @function_tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    log: list[str] = []
    calls = (
        FunctionCall(id="ok", name="add", args={"a": 1, "b": 2}),
        FunctionCall(id="bad", name="add", args={"a": "x"}),
    )
    agent = Agent(name="agent", model=ScriptedModel([ModelResponse(function_calls=calls), "3"]),
                  tools=[add], plugins=[Tracing(log)], parallel_tool_calls=False)
    runner = Runner(agent=agent, store=store, app_name="app", observers=[Recorder("runner", log)])
    await runner.create_session(user_id="u", session_id="s")
    result = await runner.run(session_id="s", user_id="u", new_message="add")
    assert result.status == "completed"
    assert log == [
        "runner start ok",
        "runner done ok",
        "plugin done ok",
        "runner start bad",
        "runner invalid bad",
        "runner failed bad invalid_arguments",
    ]


class LogWatcher(Plugin):
    """Records the log-observer hooks: each append's seqs with the context's version then,
    and each invocation's end."""

    def __init__(self, log: list[tuple[Any, ...]]) -> None:
        self.log = log

    async def after_append(self, ctx: Any, events: Any) -> None:
        self.log.append(("appended", [e.seq for e in events], ctx.version))

    async def after_invocation(self, ctx: Any) -> None:
        self.log.append(("ended", ctx.invocation_id, len(ctx.appended)))


async def test_plugins_see_every_append_and_the_end_of_each_invocation(
    store: EventStore,
) -> None:
    @function_tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    log: list[tuple[Any, ...]] = []
    agent = Agent(name="agent", plugins=[LogWatcher(log)], tools=[add], model=ScriptedModel([
        ModelResponse(function_calls=(FunctionCall(id="c", name="add", args={"a": 1, "b": 2}),)),
        "3"]))
    runner = Runner(agent=agent, store=store, app_name="app")
    await runner.create_session(user_id="u", session_id="s")
    result = await runner.run(session_id="s", user_id="u", new_message="sum",
                              invocation_id="inv-1")
    seqs = [e.seq for e in result.events]
    appends = [entry for entry in log if entry[0] == "appended"]
    assert [seq for _, batch, _ in appends for seq in batch] == seqs
    assert seqs == [e.seq for e in await store.read("s")]
    assert all(version == batch[-1] for _, batch, version in appends)  # seen once stored
    assert log[-1] == ("ended", "inv-1", len(seqs))
    assert sum(entry[0] == "ended" for entry in log) == 1

    # An invocation that raises ends too: the model has no turn left.
    log.clear()
    with pytest.raises(ScriptExhaustedError):
        await runner.run(session_id="s", user_id="u", new_message="again", invocation_id="inv-2")
    assert log == [("appended", [len(seqs) + 1], len(seqs) + 1), ("ended", "inv-2", 1)]
