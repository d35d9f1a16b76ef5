"""Safe execution of one function call: callbacks, confirmation gate, run, structured errors.

Order for a known tool: plugin before-callbacks, agent before-callbacks (the first non-``None``
return becomes the result and the tool does not run; callbacks may edit ``args`` in place), the
confirmation gate, the run; on an exception plugin then agent on-error callbacks (the first
non-``None`` return recovers); then plugin and agent after-callbacks (the first non-``None`` return
replaces the result). An unknown tool only goes through the on-error callbacks.

Tool problems never raise out of ``execute_function_call``: they become an error response of a
stable ``ToolErrorKind``. ``asyncio.CancelledError`` (and other ``BaseException``) propagates.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from eventstore import (
    EventActions,
    FunctionCall,
    FunctionResponse,
    InvalidEventError,
    ToolConfirmation,
    check_json_value,
)
from runtime._context import ToolContext
from runtime._exceptions import (
    ConfirmationRequired,
    InvalidToolArgumentsError,
    ToolNotFoundError,
    ToolResultError,
    ToolValidationRefused,
)
from runtime.tools._base import (
    FunctionToolLike,
    ResponseDeferrer,
    StreamingTool,
    Tool,
    requires_confirmation,
)
from runtime.tools._errors import ToolErrorKind, error_response

__all__ = [
    "AfterToolCallback",
    "BeforeToolCallback",
    "CallOutcome",
    "NO_CALLBACKS",
    "OnToolErrorCallback",
    "ToolCallObserver",
    "ToolCallbacks",
    "execute_function_call",
]

_Result: TypeAlias = dict[str, Any] | None

BeforeToolCallback: TypeAlias = Callable[
    [Tool, dict[str, Any], ToolContext], _Result | Awaitable[_Result]
]
"""``(tool, args, ctx)``: return a mapping to replace the tool's result, ``None`` to go on."""
OnToolErrorCallback: TypeAlias = Callable[
    [Tool | None, dict[str, Any], ToolContext, Exception], _Result | Awaitable[_Result]
]
"""``(tool or None when unknown, args, ctx, error)``: return a mapping to recover, else ``None``."""
AfterToolCallback: TypeAlias = Callable[
    [Tool, dict[str, Any], ToolContext, dict[str, Any]], _Result | Awaitable[_Result]
]
"""``(tool, args, ctx, result)``: return a mapping to replace the result, ``None`` to keep it."""


@dataclass(frozen=True, kw_only=True)
class ToolCallbacks:
    """One layer of tool callbacks (plugin or agent); each list runs in order."""

    before: tuple[BeforeToolCallback, ...] = ()
    """Run before the tool; the first non-``None`` return replaces the result."""
    on_error: tuple[OnToolErrorCallback, ...] = ()
    """Run when the call failed; the first non-``None`` return recovers."""
    after: tuple[AfterToolCallback, ...] = ()
    """Run on a result (never on an unrecovered error); the first non-``None`` return replaces."""


NO_CALLBACKS = ToolCallbacks()
"""The empty callback layer."""


class ToolCallObserver(Protocol):
    """Tracing hooks around one call. Subclass it and override what you need; all default to no-op.

    Hooks run synchronously and must not raise.
    """

    def on_call_starting(self, call: FunctionCall, ctx: ToolContext) -> None:
        """The pipeline starts handling ``call``."""

    def on_call_completed(self, call: FunctionCall, outcome: CallOutcome) -> None:
        """The call ended without an error kind (a result, or a deferred response)."""

    def on_call_failed(
        self, call: FunctionCall, outcome: CallOutcome, error: BaseException | None
    ) -> None:
        """The call ended with an error kind (including confirmation required or rejected)."""

    def on_validation_failed(self, call: FunctionCall, error: InvalidToolArgumentsError) -> None:
        """The model's arguments did not validate (called before ``on_call_failed``)."""


@dataclass(frozen=True, kw_only=True)
class CallOutcome:
    """What the pipeline made of one function call; the loop appends and acts on it.

    Guarantees: ``error_kind`` is set exactly when ``response`` is an error response the pipeline
    produced; ``confirmation_required`` is set only with ``ToolErrorKind.CONFIRMATION_REQUIRED``;
    ``response`` is ``None`` only for a deferred (long-running) response.
    """

    call_id: str
    """Id of the function call."""
    tool_name: str
    """Name the model called."""
    args: dict[str, Any]
    """The arguments after before-callbacks edited them."""
    response: dict[str, Any] | None
    """The response mapping for the model; ``None`` means "append no response now"."""
    actions: EventActions
    """Snapshot of the call's actions (state delta, confirmations, flags)."""
    error_kind: ToolErrorKind | None = None
    """Why there is no regular result, if so."""
    confirmation_required: ToolConfirmation | None = None
    """The confirmation requested for this call, when the call waits for a human."""
    exception: BaseException | None = field(default=None, compare=False)
    """The exception behind an error, for tracing; never sent to the model."""

    def function_response(self) -> FunctionResponse | None:
        """Return the ``FunctionResponse`` to append, or ``None`` when the response is deferred."""
        if self.response is None:
            return None
        return FunctionResponse(id=self.call_id, name=self.tool_name, response=self.response)


async def execute_function_call(
    call: FunctionCall,
    *,
    tools: Mapping[str, Tool],
    ctx: ToolContext,
    plugin_callbacks: ToolCallbacks = NO_CALLBACKS,
    agent_callbacks: ToolCallbacks = NO_CALLBACKS,
    observer: ToolCallObserver | None = None,
) -> CallOutcome:
    """Run one function call safely and return its ``CallOutcome``; never raises for tool problems.

    ``ctx`` must be the call's own context (``ctx.function_call_id == call.id``). When
    ``ctx.tool_confirmation`` is set, this is the re-run after a human answered: confirmed runs the
    tool, rejected answers ``confirmation_rejected`` without running it. Without an answer, a tool
    that requires confirmation for these arguments does not run; the request is recorded in
    ``ctx.actions.requested_tool_confirmations[call.id]`` with skip-summarization set.
    """
    return await _Execution(call, tools, ctx, plugin_callbacks, agent_callbacks, observer).run()


class _Execution:
    def __init__(
        self,
        call: FunctionCall,
        tools: Mapping[str, Tool],
        ctx: ToolContext,
        plugin: ToolCallbacks,
        agent: ToolCallbacks,
        observer: ToolCallObserver | None,
    ) -> None:
        self.call = call
        self.tools = tools
        self.ctx = ctx
        self.args: dict[str, Any] = dict(call.args)
        self.before = (*plugin.before, *agent.before)
        self.on_error = (*plugin.on_error, *agent.on_error)
        self.after = (*plugin.after, *agent.after)
        self.observer = observer

    async def run(self) -> CallOutcome:
        if self.observer is not None:
            self.observer.on_call_starting(self.call, self.ctx)
        tool = self.tools.get(self.call.name)
        if tool is None:
            missing = ToolNotFoundError(self.call.name, available=list(self.tools))
            return await self._failed(None, ToolErrorKind.NOT_FOUND, missing, str(missing))

        try:
            result = await self._first(self.before, tool, self.args, self.ctx)
            if result is None:
                gate = self._confirmation_gate(tool)
                if gate is not None:
                    return gate
                result = await self._invoke(tool)
                requested = self.ctx.actions.requested_tool_confirmations.get(self.call.id)
                if requested is not None:
                    return self._confirmation_requested(tool, requested, None)
        except ConfirmationRequired as signal:
            confirmation = ToolConfirmation(hint=signal.hint, payload=signal.payload)
            return self._confirmation_requested(tool, confirmation, signal)
        except InvalidToolArgumentsError as exc:
            if self.observer is not None:
                self.observer.on_validation_failed(self.call, exc)
            return await self._failed(tool, ToolErrorKind.INVALID_ARGUMENTS, exc, str(exc))
        except ToolValidationRefused as exc:
            return await self._failed(tool, ToolErrorKind.VALIDATION_REFUSED, exc, exc.message)
        except ToolResultError as exc:
            return await self._failed(tool, ToolErrorKind.EXECUTION_FAILED, exc, str(exc))
        except Exception as exc:
            message = f"Tool {tool.name!r} failed: {type(exc).__name__}: {exc}"
            return await self._failed(tool, ToolErrorKind.EXECUTION_FAILED, exc, message)

        if result is None:
            if isinstance(tool, ResponseDeferrer) and tool.defers_response():
                return self._completed(None)
            result = {"result": None}
        return await self._finish(tool, result)

    def _confirmation_gate(self, tool: Tool) -> CallOutcome | None:
        answer = self.ctx.tool_confirmation
        if answer is not None:
            if answer.confirmed:
                return None
            message = f"The user rejected the call of tool {tool.name!r}; it was not run."
            return self._outcome(
                error_response(
                    ToolErrorKind.CONFIRMATION_REJECTED, tool=tool.name, message=message
                ),
                ToolErrorKind.CONFIRMATION_REJECTED,
            )
        if requires_confirmation(tool, self.args):
            hint = (
                f"Please approve or reject the call of tool {tool.name!r} by answering with a "
                f"ToolConfirmation."
            )
            return self._confirmation_requested(tool, ToolConfirmation(hint=hint), None)
        return None

    def _confirmation_requested(
        self, tool: Tool, confirmation: ToolConfirmation, signal: ConfirmationRequired | None
    ) -> CallOutcome:
        self.ctx.actions.requested_tool_confirmations[self.call.id] = confirmation
        self.ctx.actions.skip_summarization = True
        message = (
            f"Tool {tool.name!r} requires a confirmation from the user; it was not run. "
            f"Wait for the user's answer."
        )
        return self._outcome(
            error_response(ToolErrorKind.CONFIRMATION_REQUIRED, tool=tool.name, message=message),
            ToolErrorKind.CONFIRMATION_REQUIRED,
            confirmation=confirmation,
            exception=signal,
        )

    async def _invoke(self, tool: Tool) -> dict[str, Any] | None:
        if isinstance(tool, FunctionToolLike):
            return _checked(tool.name, await tool.run(self.ctx, self.args), "the tool")
        if isinstance(tool, StreamingTool):
            chunks = [chunk async for chunk in tool.run_stream(self.ctx, self.args)]
            return {"result": "".join(chunks)}
        raise ToolNotFoundError(tool.name, available=[])

    async def _failed(
        self, tool: Tool | None, kind: ToolErrorKind, error: Exception, message: str
    ) -> CallOutcome:
        try:
            recovered = await self._first(self.on_error, tool, self.args, self.ctx, error)
        except Exception as callback_error:
            message = (
                f"{message} (an on-error callback then failed: "
                f"{type(callback_error).__name__}: {callback_error})"
            )
            kind, recovered = ToolErrorKind.EXECUTION_FAILED, None
        if recovered is not None:
            # As in ADK: after-tool callbacks see (and may replace) a recovered result too.
            return await self._finish(tool, recovered) if tool is not None else (
                self._completed(recovered)
            )
        name = tool.name if tool is not None else self.call.name
        response = error_response(kind, tool=name, message=message)
        if tool is not None and self.after:
            try:
                replaced = await self._first(self.after, tool, self.args, self.ctx, response)
            except Exception as callback_error:
                message = (
                    f"{message} (an after-tool callback then failed: "
                    f"{type(callback_error).__name__}: {callback_error})"
                )
                return self._outcome(
                    error_response(kind, tool=name, message=message), kind, exception=error
                )
            if replaced is not None:
                return self._completed(replaced)
        return self._outcome(response, kind, exception=error)

    async def _finish(self, tool: Tool, result: dict[str, Any]) -> CallOutcome:
        try:
            replaced = await self._first(self.after, tool, self.args, self.ctx, result)
        except Exception as exc:
            message = f"An after-tool callback of {tool.name!r} failed: {type(exc).__name__}: {exc}"
            kind = ToolErrorKind.EXECUTION_FAILED
            return self._outcome(
                error_response(kind, tool=tool.name, message=message), kind, exception=exc
            )
        return self._completed(replaced if replaced is not None else result)

    async def _first(self, callbacks: tuple[Any, ...], *arguments: Any) -> dict[str, Any] | None:
        for callback in callbacks:
            value = callback(*arguments)
            if inspect.isawaitable(value):
                value = await value
            if value is not None:
                return _checked(self.call.name, value, f"callback {callback!r}")
        return None

    def _completed(self, response: dict[str, Any] | None) -> CallOutcome:
        try:
            if response is not None:
                check_json_value(response, path="result")
            for key, value in self.ctx.actions.state_delta.items():
                check_json_value(value, path=f"state[{key!r}]")
        except InvalidEventError as exc:
            # The tool ran: record that it failed to produce something storable, so the call is
            # answered (not left in doubt) and the run goes on; its state changes are dropped.
            self.ctx.actions.state_delta.clear()
            self.ctx.actions.state_deletions = ()
            kind = ToolErrorKind.EXECUTION_FAILED
            message = f"Tool {self.call.name!r} produced a value the log cannot store: {exc}"
            error = ToolResultError(message, tool_name=self.call.name)
            return self._outcome(
                error_response(kind, tool=self.call.name, message=message), kind, exception=error
            )
        return self._outcome(response, None)

    def _outcome(
        self,
        response: dict[str, Any] | None,
        kind: ToolErrorKind | None,
        *,
        confirmation: ToolConfirmation | None = None,
        exception: BaseException | None = None,
    ) -> CallOutcome:
        outcome = CallOutcome(
            call_id=self.call.id,
            tool_name=self.call.name,
            args=self.args,
            response=response,
            actions=self.ctx.actions.to_event_actions(),
            error_kind=kind,
            confirmation_required=confirmation,
            exception=exception,
        )
        if self.observer is not None:
            if kind is None:
                self.observer.on_call_completed(self.call, outcome)
            else:
                self.observer.on_call_failed(self.call, outcome, exception)
        return outcome


def _checked(tool_name: str, value: object, producer: str) -> dict[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise ToolResultError(
            f"{producer} of tool {tool_name!r} returned {type(value).__name__}, not a dict.",
            tool_name=tool_name,
        )
    return value
