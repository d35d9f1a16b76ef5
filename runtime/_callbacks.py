"""Agent callbacks around the model call and around each tool call.

Model callbacks receive the ``InvocationContext``; tool callbacks are the tools layer's
(``BeforeToolCallback`` …, run by its pipeline). Every callback may be sync or async.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from runtime._invocation import InvocationContext
from runtime._model import ModelResponse
from runtime.tools import (
    AfterToolCallback,
    BeforeToolCallback,
    ModelRequest,
    OnToolErrorCallback,
    ToolCallbacks,
)

__all__ = [
    "AfterModelCallback",
    "AgentCallbacks",
    "BeforeModelCallback",
    "run_model_callbacks",
]

_MaybeResponse: TypeAlias = ModelResponse | None

BeforeModelCallback: TypeAlias = Callable[
    [InvocationContext, ModelRequest], _MaybeResponse | Awaitable[_MaybeResponse]
]
"""``(ctx, request)``: may edit the request; a returned response replaces the model call."""
AfterModelCallback: TypeAlias = Callable[
    [InvocationContext, ModelResponse], _MaybeResponse | Awaitable[_MaybeResponse]
]
"""``(ctx, response)``: a returned response replaces the model's response."""


@dataclass(frozen=True, kw_only=True)
class AgentCallbacks:
    """The callbacks of one agent; each tuple runs in order, after the plugins' callbacks.

    For every hook the first callback that returns a value wins and the rest of that hook's
    callbacks do not run.
    """

    before_model: tuple[BeforeModelCallback, ...] = ()
    """Before each model call; a returned ``ModelResponse`` is used instead of calling the model."""
    after_model: tuple[AfterModelCallback, ...] = ()
    """After each model call (or replacement); a returned response replaces it."""
    before_tool: tuple[BeforeToolCallback, ...] = ()
    """Before each tool run; a returned mapping is the result and the tool does not run."""
    on_tool_error: tuple[OnToolErrorCallback, ...] = ()
    """When a call failed; a returned mapping recovers."""
    after_tool: tuple[AfterToolCallback, ...] = ()
    """After a result; a returned mapping replaces it."""

    def tool_callbacks(self) -> ToolCallbacks:
        """Return the tool hooks as the pipeline's ``ToolCallbacks`` layer."""
        return ToolCallbacks(
            before=self.before_tool, on_error=self.on_tool_error, after=self.after_tool
        )


async def run_model_callbacks(
    callbacks: Sequence[BeforeModelCallback] | Sequence[AfterModelCallback],
    ctx: InvocationContext,
    value: ModelRequest | ModelResponse,
) -> ModelResponse | None:
    """Run callbacks in order; return the first non-``None`` result (the rest do not run)."""
    for callback in callbacks:
        produced = callback(ctx, value)  # type: ignore[arg-type]
        if inspect.isawaitable(produced):
            produced = await produced
        if produced is not None:
            if not isinstance(produced, ModelResponse):
                raise TypeError(
                    f"Model callback {callback!r} returned {type(produced).__name__}; it must "
                    f"return a ModelResponse or None."
                )
            return produced
    return None
