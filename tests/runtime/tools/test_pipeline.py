"""Safe execution of one function call: callbacks, confirmation, structured errors, observers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from eventstore import FunctionCall, FunctionResponse, ToolConfirmation
from runtime import (
    ConfirmationRequired,
    InvalidToolArgumentsError,
    ToolContext,
    ToolNotFoundError,
    ToolValidationRefused,
)
from runtime.tools import (
    CallOutcome,
    FunctionTool,
    Tool,
    ToolCallbacks,
    ToolCallObserver,
    ToolErrorKind,
    execute_function_call,
)


def _ctx(call_id: str = "c1", confirmation: ToolConfirmation | None = None) -> ToolContext:
    return ToolContext(
        function_call_id=call_id,
        invocation_id="inv",
        agent_name="agent",
        session_id="s1",
        state={"greeting": "hello"},
        tool_confirmation=confirmation,
    )


class Recorder:
    """A tool body that records its calls."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, city: str, days: int = 1) -> dict[str, Any]:
        self.calls.append({"city": city, "days": days})
        return {"city": city, "days": days}


def _weather(**options: Any) -> tuple[FunctionTool, Recorder]:
    body = Recorder()
    return FunctionTool(body, name="weather", **options), body


async def _run(
    tool: Tool, args: dict[str, Any], ctx: ToolContext | None = None, **kwargs: Any
) -> CallOutcome:
    call = FunctionCall(id="c1", name=tool.name, args=args)
    return await execute_function_call(call, tools={tool.name: tool}, ctx=ctx or _ctx(), **kwargs)


async def test_execute_function_call_success() -> None:
    tool, body = _weather()
    ctx = _ctx()
    outcome = await _run(tool, {"city": "Oslo"}, ctx)
    assert outcome.response == {"city": "Oslo", "days": 1}
    assert outcome.error_kind is None
    assert outcome.confirmation_required is None
    assert outcome.function_response() == FunctionResponse(
        id="c1", name="weather", response={"city": "Oslo", "days": 1}
    )
    assert body.calls == [{"city": "Oslo", "days": 1}]


async def test_execute_function_call_returns_actions_snapshot() -> None:
    async def note(ctx: ToolContext, text: str) -> str:
        ctx.state["note"] = text
        ctx.actions.escalate = True
        return str(ctx.state["greeting"])

    outcome = await _run(FunctionTool(note), {"text": "hi"})
    assert outcome.response == {"result": "hello"}
    assert outcome.actions.state_delta == {"note": "hi"}
    assert outcome.actions.escalate


async def test_execute_function_call_unknown_tool_only_on_error_callbacks() -> None:
    seen: list[str] = []

    def before(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> None:
        seen.append("before")

    def on_error(
        tool: Tool | None, args: dict[str, Any], ctx: ToolContext, error: Exception
    ) -> None:
        seen.append(f"on_error:{tool}:{type(error).__name__}")

    def after(
        tool: Tool, args: dict[str, Any], ctx: ToolContext, result: dict[str, Any]
    ) -> dict[str, Any]:
        seen.append("after")
        return {"replaced": True}

    tool, _ = _weather()
    outcome = await execute_function_call(
        FunctionCall(id="c1", name="wether", args={}),
        tools={"weather": tool},
        ctx=_ctx(),
        plugin_callbacks=ToolCallbacks(before=(before,), after=(after,)),
        agent_callbacks=ToolCallbacks(before=(before,), on_error=(on_error,), after=(after,)),
    )
    assert seen == ["on_error:None:ToolNotFoundError"]  # neither before nor after ran
    assert outcome.error_kind is ToolErrorKind.NOT_FOUND
    assert outcome.response == {
        "error": {
            "kind": "not_found",
            "tool": "wether",
            "message": "There is no tool named 'wether'; available tools: weather.",
        }
    }
    assert isinstance(outcome.exception, ToolNotFoundError)


async def test_execute_function_call_invalid_arguments() -> None:
    tool, body = _weather()
    outcome = await _run(tool, {"days": "soon"})
    assert outcome.error_kind is ToolErrorKind.INVALID_ARGUMENTS
    error = outcome.response["error"] if outcome.response else {}
    assert error["kind"] == "invalid_arguments"
    assert error["tool"] == "weather"
    assert "city: Field required" in error["message"]
    assert "days:" in error["message"]
    assert body.calls == []


async def test_execute_function_call_validation_refused() -> None:
    def book(seats: int) -> str:
        if seats > 4:
            raise ToolValidationRefused("At most 4 seats per booking.")
        return "ok"

    outcome = await _run(FunctionTool(book), {"seats": 9})
    assert outcome.error_kind is ToolErrorKind.VALIDATION_REFUSED
    assert outcome.response == {
        "error": {
            "kind": "validation_refused",
            "tool": "book",
            "message": "At most 4 seats per booking.",
        }
    }


async def test_execute_function_call_execution_failed_names_tool_and_error() -> None:
    def explode() -> None:
        raise LookupError("no such row")

    outcome = await _run(FunctionTool(explode), {})
    assert outcome.error_kind is ToolErrorKind.EXECUTION_FAILED
    assert outcome.response == {
        "error": {
            "kind": "execution_failed",
            "tool": "explode",
            "message": "Tool 'explode' failed: LookupError: no such row",
        }
    }


async def test_execute_function_call_callback_order_plugin_before_agent() -> None:
    order: list[str] = []

    def make(label: str) -> ToolCallbacks:
        def before(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> None:
            order.append(f"{label}.before")

        async def after(
            tool: Tool, args: dict[str, Any], ctx: ToolContext, result: dict[str, Any]
        ) -> None:
            order.append(f"{label}.after")

        return ToolCallbacks(before=(before,), after=(after,))

    tool, _ = _weather()
    outcome = await _run(
        tool, {"city": "x"}, plugin_callbacks=make("plugin"), agent_callbacks=make("agent")
    )
    assert order == ["plugin.before", "agent.before", "plugin.after", "agent.after"]
    assert outcome.error_kind is None


async def test_execute_function_call_before_callback_edits_args_in_place() -> None:
    def normalize(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> None:
        args["city"] = args["city"].title()

    tool, body = _weather()
    call = FunctionCall(id="c1", name="weather", args={"city": "oslo"})
    outcome = await execute_function_call(
        call,
        tools={"weather": tool},
        ctx=_ctx(),
        agent_callbacks=ToolCallbacks(before=(normalize,)),
    )
    assert body.calls == [{"city": "Oslo", "days": 1}]
    assert outcome.args == {"city": "Oslo"}
    assert call.args == {"city": "oslo"}


async def test_execute_function_call_before_callback_result_skips_tool_but_not_after() -> None:
    later: list[str] = []

    def cached(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {"cached": True}

    def never(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> None:
        later.append("second before ran")

    def after(tool: Tool, args: dict[str, Any], ctx: ToolContext, result: dict[str, Any]) -> None:
        later.append(f"after saw {result}")

    tool, body = _weather()
    outcome = await _run(
        tool,
        {"city": "x"},
        plugin_callbacks=ToolCallbacks(before=(cached,)),
        agent_callbacks=ToolCallbacks(before=(never,), after=(after,)),
    )
    assert body.calls == []
    assert outcome.response == {"cached": True}
    assert later == ["after saw {'cached': True}"]


async def test_execute_function_call_on_error_recovers_and_after_replaces() -> None:
    def flaky() -> None:
        raise TimeoutError("upstream")

    def recover(
        tool: Tool | None, args: dict[str, Any], ctx: ToolContext, error: Exception
    ) -> dict[str, Any]:
        return {"fallback": type(error).__name__}

    def replace(
        tool: Tool, args: dict[str, Any], ctx: ToolContext, result: dict[str, Any]
    ) -> dict[str, Any]:
        return {**result, "checked": True}

    outcome = await _run(
        FunctionTool(flaky),
        {},
        plugin_callbacks=ToolCallbacks(on_error=(recover,)),
        agent_callbacks=ToolCallbacks(after=(replace,)),
    )
    assert outcome.error_kind is None
    # As in ADK, the after-tool callback runs after the recovery and replaces its result.
    assert outcome.response == {"fallback": "TimeoutError", "checked": True}


async def test_execute_function_call_after_callback_sees_and_replaces_an_error_response() -> None:
    def broken() -> None:
        raise RuntimeError("down")

    seen: list[dict[str, Any]] = []

    def soften(
        tool: Tool, args: dict[str, Any], ctx: ToolContext, result: dict[str, Any]
    ) -> dict[str, Any]:
        seen.append(result)
        return {"result": "try again later"}

    outcome = await _run(FunctionTool(broken), {}, agent_callbacks=ToolCallbacks(after=(soften,)))
    assert seen[0]["error"]["kind"] == "execution_failed"
    assert outcome.error_kind is None
    assert outcome.response == {"result": "try again later"}


async def test_execute_function_call_after_callback_replaces_result() -> None:
    def redact(
        tool: Tool, args: dict[str, Any], ctx: ToolContext, result: dict[str, Any]
    ) -> dict[str, Any]:
        return {"city": "***"}

    tool, _ = _weather()
    outcome = await _run(tool, {"city": "x"}, agent_callbacks=ToolCallbacks(after=(redact,)))
    assert outcome.response == {"city": "***"}


async def test_execute_function_call_failing_callback_becomes_error_response() -> None:
    def broken(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        raise RuntimeError("callback bug")

    def not_a_dict(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> Any:
        return ["nope"]

    tool, body = _weather()
    first = await _run(tool, {"city": "x"}, agent_callbacks=ToolCallbacks(before=(broken,)))
    second = await _run(tool, {"city": "x"}, agent_callbacks=ToolCallbacks(before=(not_a_dict,)))
    assert first.error_kind is second.error_kind is ToolErrorKind.EXECUTION_FAILED
    assert "callback bug" in str(first.response)
    assert "not a dict" in str(second.response)
    assert body.calls == []


async def test_execute_function_call_propagates_cancellation() -> None:
    started = asyncio.Event()

    async def slow() -> None:
        started.set()
        await asyncio.sleep(60)

    task = asyncio.create_task(_run(FunctionTool(slow), {}))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_execute_function_call_requests_confirmation_without_running() -> None:
    tool, body = _weather(requires_confirmation=lambda args: args["days"] > 3)
    ctx = _ctx()
    quick = await _run(tool, {"city": "x"}, ctx)
    assert quick.error_kind is None
    assert body.calls == [{"city": "x", "days": 1}]

    ctx = _ctx()
    outcome = await _run(tool, {"city": "x", "days": 7}, ctx)
    assert body.calls == [{"city": "x", "days": 1}]
    assert outcome.error_kind is ToolErrorKind.CONFIRMATION_REQUIRED
    assert outcome.response is not None
    assert outcome.response["error"]["kind"] == "confirmation_required"
    assert outcome.confirmation_required is not None
    assert "weather" in outcome.confirmation_required.hint
    assert not outcome.confirmation_required.confirmed
    assert ctx.actions.requested_tool_confirmations == {"c1": outcome.confirmation_required}
    assert outcome.actions.requested_tool_confirmations == {"c1": outcome.confirmation_required}
    assert outcome.actions.skip_summarization


async def test_execute_function_call_confirmed_runs_and_rejected_does_not() -> None:
    tool, body = _weather(requires_confirmation=True)
    confirmed = await _run(tool, {"city": "a"}, _ctx(confirmation=ToolConfirmation(confirmed=True)))
    rejected = await _run(tool, {"city": "b"}, _ctx(confirmation=ToolConfirmation(confirmed=False)))
    assert confirmed.response == {"city": "a", "days": 1}
    assert confirmed.actions.requested_tool_confirmations == {}
    assert rejected.error_kind is ToolErrorKind.CONFIRMATION_REJECTED
    assert rejected.response is not None
    assert rejected.response["error"]["kind"] == "confirmation_rejected"
    assert body.calls == [{"city": "a", "days": 1}]


async def test_execute_function_call_invalid_args_never_ask_for_confirmation() -> None:
    tool, _ = _weather(requires_confirmation=True)
    outcome = await _run(tool, {"city": 5})
    assert outcome.error_kind is ToolErrorKind.INVALID_ARGUMENTS
    assert outcome.actions.requested_tool_confirmations == {}


async def test_execute_function_call_tool_raises_confirmation_required() -> None:
    def delete(path: str) -> str:
        if path.startswith("/"):
            raise ConfirmationRequired("Delete an absolute path?", payload={"path": path})
        return "deleted"

    outcome = await _run(FunctionTool(delete), {"path": "/etc"})
    assert outcome.confirmation_required == ToolConfirmation(
        hint="Delete an absolute path?", payload={"path": "/etc"}
    )
    assert outcome.error_kind is ToolErrorKind.CONFIRMATION_REQUIRED
    assert outcome.actions.skip_summarization


async def test_execute_function_call_tool_uses_ctx_request_confirmation() -> None:
    def pay(ctx: ToolContext, amount: int) -> str:
        ctx.request_confirmation(hint=f"Pay {amount}?", payload={"amount": amount})
        return "pending"

    outcome = await _run(FunctionTool(pay), {"amount": 30})
    assert outcome.error_kind is ToolErrorKind.CONFIRMATION_REQUIRED
    assert outcome.confirmation_required == ToolConfirmation(hint="Pay 30?", payload={"amount": 30})
    assert outcome.actions.requested_tool_confirmations["c1"].payload == {"amount": 30}


async def test_execute_function_call_long_running_none_has_no_response() -> None:
    def start(job: str) -> None:
        return None

    outcome = await _run(FunctionTool(start, is_long_running=True), {"job": "j"})
    assert outcome.response is None
    assert outcome.error_kind is None
    assert outcome.function_response() is None


class EchoStream:
    name = "echo"
    description = "Echo in chunks."
    is_long_running = False

    async def run_stream(self, ctx: ToolContext, args: dict[str, Any]) -> AsyncIterator[str]:
        for word in str(args["text"]).split():
            yield word + " "


async def test_execute_function_call_joins_streaming_tool_chunks() -> None:
    outcome = await _run(EchoStream(), {"text": "a b c"})
    assert outcome.response == {"result": "a b c "}


class RecordingObserver(ToolCallObserver):
    def __init__(self) -> None:
        self.events: list[str] = []

    def on_call_starting(self, call: FunctionCall, ctx: ToolContext) -> None:
        self.events.append(f"starting {call.id}")

    def on_call_completed(self, call: FunctionCall, outcome: CallOutcome) -> None:
        self.events.append("completed")

    def on_call_failed(
        self, call: FunctionCall, outcome: CallOutcome, error: BaseException | None
    ) -> None:
        self.events.append(f"failed {outcome.error_kind} {type(error).__name__}")

    def on_validation_failed(self, call: FunctionCall, error: InvalidToolArgumentsError) -> None:
        self.events.append("validation failed")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param({"city": "x"}, ["starting c1", "completed"], id="ok"),
        pytest.param(
            {},
            [
                "starting c1",
                "validation failed",
                "failed invalid_arguments InvalidToolArgumentsError",
            ],
            id="invalid",
        ),
    ],
)
async def test_execute_function_call_observer_hooks(
    args: Mapping[str, Any], expected: list[str]
) -> None:
    observer = RecordingObserver()
    tool, _ = _weather()
    await _run(tool, dict(args), observer=observer)
    assert observer.events == expected
