"""Toolsets: groups of tools resolved per request, and a filter that controls their exposure.

Exposure is not authorization: a filtered-out tool is only hidden from the model's request; a
tool that must not run for a user has to check that itself (or be guarded by a callback).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from runtime._context import ReadonlyContext, ToolContext
from runtime._exceptions import ToolDefinitionError
from runtime.tools._base import Tool
from runtime.tools._model_request import ModelRequest, RequestProcessor

__all__ = ["FilteredToolset", "ListToolset", "ToolPredicate", "Toolset"]

ToolPredicate = Callable[[ReadonlyContext, Tool], bool]
"""Decides whether a tool is exposed in the request built for this context."""


@runtime_checkable
class Toolset(Protocol):
    """A source of tools, asked anew for every request."""

    async def tools(self, readonly_context: ReadonlyContext) -> Sequence[Tool]:
        """Return the tools to expose for this context, in a stable order."""
        ...


class ListToolset:
    """A toolset over a fixed list of tools."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools = tuple(tools)

    async def tools(self, readonly_context: ReadonlyContext) -> Sequence[Tool]:
        """Return the tools given at construction, in order."""
        return self._tools

    def __repr__(self) -> str:
        return f"ListToolset([{', '.join(t.name for t in self._tools)}])"


class FilteredToolset:
    """Exposes only the tools of ``inner`` that pass a predicate or are named in ``names``.

    Request processing of the inner toolset (if any) is forwarded unchanged.
    """

    def __init__(
        self,
        inner: Toolset,
        *,
        predicate: ToolPredicate | None = None,
        names: Iterable[str] | None = None,
    ) -> None:
        if (predicate is None) == (names is None):
            raise ToolDefinitionError(
                f"FilteredToolset over {inner!r} needs exactly one of predicate= or names=, "
                f"not {'both' if predicate is not None else 'neither'}."
            )
        self.inner = inner
        """The filtered toolset."""
        if names is not None:
            allowed = frozenset(names)
            self._predicate: ToolPredicate = lambda _ctx, tool: tool.name in allowed
        else:
            assert predicate is not None
            self._predicate = predicate

    async def tools(self, readonly_context: ReadonlyContext) -> Sequence[Tool]:
        """Return the inner tools that pass the filter, in the inner order."""
        inner = await self.inner.tools(readonly_context)
        return [tool for tool in inner if self._predicate(readonly_context, tool)]

    async def process_request(self, ctx: ToolContext, request: ModelRequest) -> None:
        """Forward to the inner toolset's ``process_request`` when it has one."""
        if isinstance(self.inner, RequestProcessor):
            await self.inner.process_request(ctx, request)

    def __repr__(self) -> str:
        return f"FilteredToolset({self.inner!r})"
