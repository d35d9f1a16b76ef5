"""Observer hooks (started / completed / failed / validation-failed) on the Runner and plugins."""

from __future__ import annotations

from typing import Any

from eventstore import EventStore, FunctionCall
from runtime import (
    Agent,
    CallOutcome,
    ModelResponse,
    Plugin,
    Runner,
    ScriptedModel,
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
