"""The agent as one invocation sees it: the protocols ``InvocationContext.agent`` is typed by.

An ``Agent`` holds callbacks and plugins whose model hooks take an ``InvocationContext``, and the
context holds the agent it runs. Typing ``InvocationContext.agent`` as the concrete ``Agent``
would make the two modules import each other; typed by these protocols, the context needs only
the tools layer, and ``_agent`` → ``_callbacks`` / ``_plugins`` → ``_invocation`` → here is a
line, not a circle. ``Agent`` satisfies ``InvocationAgent`` (mypy checks it wherever an
``Agent`` is handed to an ``InvocationContext``); the model hooks, which the runner reads from
its own ``Agent``, are not part of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from eventstore import Event
from runtime._compaction_config import CompactionConfig
from runtime._context import ReadonlyContext, ToolContext
from runtime._model import Model
from runtime.tools import Tool, ToolCallbacks, ToolCallObserver, ToolRegistry, Toolset

__all__ = ["AppendObserver", "InvocationAgent", "ToolCallbackSource", "ToolPlugin"]


class AppendObserver(Protocol):
    """What watches an invocation's log grow: called after each append with the stored events
    (``Plugin.after_append``; the context is the ``InvocationContext``, typed ``Any`` here so
    this module does not import it)."""

    async def after_append(self, ctx: Any, events: Sequence[Event]) -> None:
        """After the invocation appended ``events`` (with their ``seq``)."""
        ...


class ToolPlugin(ToolCallObserver, Protocol):
    """A plugin's tool side: the hooks around every call, and the observer hooks.

    The hooks are those of ``Plugin``, which satisfies this protocol.
    """

    async def before_tool(
        self, tool: Tool, args: dict[str, Any], ctx: ToolContext
    ) -> dict[str, Any] | None:
        """Before a tool runs (args may be edited in place); a mapping replaces the result."""
        ...

    async def on_tool_error(
        self, tool: Tool | None, args: dict[str, Any], ctx: ToolContext, error: Exception
    ) -> dict[str, Any] | None:
        """When a call failed (``tool`` is ``None`` when unknown); a mapping recovers."""
        ...

    async def after_tool(
        self, tool: Tool, args: dict[str, Any], ctx: ToolContext, result: dict[str, Any]
    ) -> dict[str, Any] | None:
        """After a result; a mapping replaces it."""
        ...


class ToolCallbackSource(Protocol):
    """An agent's callbacks as the tool pipeline reads them (``AgentCallbacks`` satisfies it)."""

    def tool_callbacks(self) -> ToolCallbacks:
        """Return the tool hooks as one pipeline layer."""
        ...


class InvocationAgent(Protocol):
    """What an invocation reads of the agent it runs; ``Agent`` is the implementation."""

    @property
    def name(self) -> str:
        """The agent's name; the ``author`` of every event it writes."""
        ...

    @property
    def model(self) -> Model:
        """The model it calls."""
        ...

    @property
    def tools(self) -> Sequence[Tool] | ToolRegistry:
        """The explicit tools, in packing order."""
        ...

    @property
    def toolsets(self) -> Sequence[Toolset]:
        """The toolsets asked for their tools on every request."""
        ...

    @property
    def registry(self) -> ToolRegistry:
        """The explicit tools as a registry (lookup by name and type)."""
        ...

    @property
    def callbacks(self) -> ToolCallbackSource:
        """The agent's callbacks; the tool pipeline runs their tool layer."""
        ...

    @property
    def plugins(self) -> Sequence[ToolPlugin]:
        """The plugins, in order; their tool hooks run before the agent's."""
        ...

    @property
    def compaction(self) -> CompactionConfig | None:
        """When the runner compacts the session by itself (``None``: never)."""
        ...

    @property
    def parallel_tool_calls(self) -> bool:
        """Run the calls of one model turn concurrently."""
        ...

    @property
    def max_steps(self) -> int:
        """Most model calls per invocation."""
        ...

    async def resolve_instruction(self, readonly: ReadonlyContext) -> str:
        """Return the instruction for this request."""
        ...
