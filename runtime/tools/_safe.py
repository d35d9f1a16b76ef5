"""Typed safe calls: run a tool from application code and get a typed success or failure.

Koog's ``SafeTool``: calling ``tool.run`` directly skips the pipeline (argument validation,
callbacks, structured errors) and raises on tool errors. ``SafeTool.call`` goes through the same
``execute_function_call`` the loop uses and never raises for a tool problem: the answer is a
``ToolSuccess`` holding the response decoded to the requested type, or a ``ToolFailure`` with a
kind and a message. Only cancellation (and other ``BaseException``) propagates.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar

import pydantic

from eventstore import EventActions, FunctionCall
from runtime._context import ToolContext
from runtime.tools._base import Tool
from runtime.tools._pipeline import (
    NO_CALLBACKS,
    ToolCallbacks,
    ToolCallObserver,
    execute_function_call,
)

__all__ = [
    "NO_RESPONSE",
    "RESULT_NOT_DECODED",
    "SafeResult",
    "SafeTool",
    "ToolFailure",
    "ToolSuccess",
]

T = TypeVar("T")

NO_RESPONSE = "no_response"
"""Failure kind: the tool deferred its response (a long-running tool returned nothing)."""
RESULT_NOT_DECODED = "result_not_decoded"
"""Failure kind: the tool answered, but its response does not decode to the requested type."""


@dataclass(frozen=True, kw_only=True)
class ToolSuccess(Generic[T]):
    """The tool produced a result that decodes to the requested type."""

    value: T
    """The decoded result."""
    response: dict[str, Any]
    """The JSON response the model would have received."""
    actions: EventActions = field(default_factory=EventActions)
    """What the call recorded (state delta, artifacts, flags)."""

    @property
    def ok(self) -> bool:
        """Always ``True``."""
        return True


@dataclass(frozen=True, kw_only=True)
class ToolFailure:
    """The call produced no usable result.

    ``kind`` is a ``ToolErrorKind`` value (``not_found``, ``invalid_arguments``,
    ``validation_refused``, ``execution_failed``, ``confirmation_required``,
    ``confirmation_rejected``), ``NO_RESPONSE`` or ``RESULT_NOT_DECODED``.
    """

    kind: str
    """Why there is no result."""
    message: str
    """A full sentence naming the tool."""
    tool_name: str
    """The tool called."""
    response: dict[str, Any] | None = None
    """The response as the model would have seen it, when there was one."""
    exception: BaseException | None = field(default=None, compare=False)
    """The exception behind the failure, for tracing."""

    @property
    def ok(self) -> bool:
        """Always ``False``."""
        return False


SafeResult: TypeAlias = ToolSuccess[T] | ToolFailure
"""What ``SafeTool.call`` returns."""


class SafeTool(Generic[T]):
    """A tool wrapped for direct, typed calls from application code.

    Guarantees: ``call`` runs the tool through the loop's pipeline (validation, the given
    callbacks, confirmation gate, structured errors) and returns a ``ToolSuccess[T]`` or a
    ``ToolFailure``; it never raises for a tool problem. The response decodes to ``result_type``
    as a whole or, failing that, its ``"result"`` value (the wrapping of non-mapping results).
    """

    def __init__(
        self,
        tool: Tool,
        result_type: type[T] | Any = dict[str, Any],
        *,
        callbacks: ToolCallbacks = NO_CALLBACKS,
        observer: ToolCallObserver | None = None,
    ) -> None:
        self.tool = tool
        """The wrapped tool."""
        self._adapter: pydantic.TypeAdapter[T] = pydantic.TypeAdapter(result_type)
        self._type_name = getattr(result_type, "__name__", repr(result_type))
        self._callbacks = callbacks
        self._observer = observer

    async def call(
        self, args: Mapping[str, Any], *, ctx: ToolContext | None = None
    ) -> ToolSuccess[T] | ToolFailure:
        """Run the tool with ``args`` and return the typed outcome (never raises for tool errors).

        ``ctx`` is the call's context (default: a fresh one with a new call id, no session, no
        state, no artifacts).
        """
        context = ctx if ctx is not None else _standalone_context()
        call = FunctionCall(id=context.function_call_id, name=self.tool.name, args=dict(args))
        outcome = await execute_function_call(
            call,
            tools={self.tool.name: self.tool},
            ctx=context,
            agent_callbacks=self._callbacks,
            observer=self._observer,
        )
        if outcome.error_kind is not None:
            error = (outcome.response or {}).get("error", {})
            message = error.get("message") if isinstance(error, dict) else None
            return ToolFailure(
                kind=outcome.error_kind.value,
                message=str(message or f"Tool {self.tool.name!r} failed."),
                tool_name=self.tool.name,
                response=outcome.response,
                exception=outcome.exception,
            )
        if outcome.response is None:
            return ToolFailure(
                kind=NO_RESPONSE,
                message=f"Tool {self.tool.name!r} deferred its response; there is no result yet.",
                tool_name=self.tool.name,
            )
        return self._decoded(outcome.response, outcome.actions)

    def _decoded(
        self, response: dict[str, Any], actions: EventActions
    ) -> ToolSuccess[T] | ToolFailure:
        try:
            return ToolSuccess(
                value=self._adapter.validate_python(response), response=response, actions=actions
            )
        except pydantic.ValidationError as whole:
            first_error = whole
        if set(response) == {"result"}:
            try:
                value = self._adapter.validate_python(response["result"])
            except pydantic.ValidationError as inner:
                first_error = inner
            else:
                return ToolSuccess(value=value, response=response, actions=actions)
        return ToolFailure(
            kind=RESULT_NOT_DECODED,
            message=(
                f"Tool {self.tool.name!r} answered, but its response does not decode to "
                f"{self._type_name}: {first_error.error_count()} error(s), first: "
                f"{first_error.errors()[0]['msg']}."
            ),
            tool_name=self.tool.name,
            response=response,
            exception=first_error,
        )

    def __repr__(self) -> str:
        return f"SafeTool({self.tool.name!r})"


def _standalone_context() -> ToolContext:
    return ToolContext(
        function_call_id=f"safe-{uuid.uuid4().hex}",
        invocation_id="",
        agent_name="",
        session_id="",
    )
