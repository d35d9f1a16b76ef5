"""``Plugin``: callbacks that apply to every agent a runner runs, before the agent's own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventstore import Event
from runtime._callbacks import AfterModelCallback, BeforeModelCallback
from runtime._context import ToolContext
from runtime._invocation import InvocationContext
from runtime._model import ModelResponse
from runtime._protocols import ToolPlugin
from runtime.tools import ModelRequest, Tool, ToolCallbacks, ToolCallObserver

__all__ = ["Plugin", "observing", "plugin_model_callbacks", "plugin_tool_callbacks"]


class Plugin(ToolCallObserver):
    """Base class of plugins: override the hooks you need; each default returns ``None``.

    Guarantees: for every hook, the plugins run in the order given, all before the agent's
    callbacks; the first non-``None`` return of a hook (plugin or agent) wins. Only overridden
    hooks are called. A plugin is also a ``ToolCallObserver``: its ``on_call_starting``,
    ``on_call_completed``, ``on_call_failed`` and ``on_validation_failed`` hooks (no-ops by
    default) see every call the runner executes, after the ``Runner``'s own observers.
    """

    name: str = "plugin"
    """A name for messages and tracing."""

    async def before_model(
        self, ctx: InvocationContext, request: ModelRequest
    ) -> ModelResponse | None:
        """Before each model call; return a response to use instead of calling the model."""
        return None

    async def after_model(
        self, ctx: InvocationContext, response: ModelResponse
    ) -> ModelResponse | None:
        """After each model call; return a response to replace it."""
        return None

    async def before_tool(
        self, tool: Tool, args: dict[str, Any], ctx: ToolContext
    ) -> dict[str, Any] | None:
        """Before a tool runs (args may be edited in place); a mapping replaces the result."""
        return None

    async def on_tool_error(
        self, tool: Tool | None, args: dict[str, Any], ctx: ToolContext, error: Exception
    ) -> dict[str, Any] | None:
        """When a call failed (``tool`` is ``None`` when unknown); a mapping recovers."""
        return None

    async def after_tool(
        self, tool: Tool, args: dict[str, Any], ctx: ToolContext, result: dict[str, Any]
    ) -> dict[str, Any] | None:
        """After a result; a mapping replaces it."""
        return None

    async def after_append(self, ctx: InvocationContext, events: Sequence[Event]) -> None:
        """After the invocation appended ``events`` (with their ``seq``), before it goes on:
        to observe the log as it grows (the events are stored; nothing can change them)."""

    async def after_invocation(self, ctx: InvocationContext) -> None:
        """When the invocation ends, however it ended: finished, paused, stopped early by its
        caller, or raised (``ctx.appended`` holds what it appended)."""


def _overrides(plugin: ToolPlugin | Plugin, hook: str) -> bool:
    return getattr(type(plugin), hook) is not getattr(Plugin, hook)


def observing(plugins: Sequence[Plugin], hook: str) -> tuple[Plugin, ...]:
    """Return the plugins that override the observer hook ``hook`` (``after_append`` or
    ``after_invocation``), in plugin order."""
    return tuple(p for p in plugins if _overrides(p, hook))


def plugin_tool_callbacks(plugins: Sequence[ToolPlugin]) -> ToolCallbacks:
    """Return the plugins' overridden tool hooks as one pipeline layer, in plugin order."""
    return ToolCallbacks(
        before=tuple(p.before_tool for p in plugins if _overrides(p, "before_tool")),
        on_error=tuple(p.on_tool_error for p in plugins if _overrides(p, "on_tool_error")),
        after=tuple(p.after_tool for p in plugins if _overrides(p, "after_tool")),
    )


def plugin_model_callbacks(
    plugins: Sequence[Plugin],
) -> tuple[tuple[BeforeModelCallback, ...], tuple[AfterModelCallback, ...]]:
    """Return the plugins' overridden (before_model, after_model) hooks, in plugin order."""
    return (
        tuple(p.before_model for p in plugins if _overrides(p, "before_model")),
        tuple(p.after_model for p in plugins if _overrides(p, "after_model")),
    )
