"""``ToolRegistry``: a named set of tools assembled from several places.

Koog's ``ToolRegistry``: lookup by name (what a model's call carries) and by type (what
application code holds), and merging of registries. Unlike Koog's silent de-duplication on
merge, a name defined twice is always the error request packing raises: one tool per name.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar, overload

from runtime._context import ReadonlyContext
from runtime._exceptions import ToolDefinitionError, ToolNotFoundError
from runtime.tools._base import Tool
from runtime.tools._request import duplicate_tool_error
from runtime.tools._safe import SafeTool

__all__ = ["ToolRegistry"]

T = TypeVar("T")
R = TypeVar("R")


class ToolRegistry:
    """An immutable, ordered set of tools with unique names; also a ``Toolset``.

    Guarantees: names are unique (``ToolDefinitionError`` naming both sources otherwise, the same
    error request packing raises); iteration keeps the order tools were added in; ``merge`` and
    ``+`` return a new registry and never change either operand.
    """

    def __init__(self, tools: Iterable[Tool] = (), *, source: str = "a tool registry") -> None:
        self._tools: dict[str, Tool] = {}
        self._sources: dict[str, str] = {}
        for tool in tools:
            self._add(tool, source)

    def _add(self, tool: Tool, source: str) -> None:
        first = self._sources.get(tool.name)
        if first is not None:
            raise duplicate_tool_error(tool.name, first, source)
        self._tools[tool.name] = tool
        self._sources[tool.name] = source

    # -- lookup --------------------------------------------------------------------------------

    def get(self, name: str) -> Tool:
        """Return the tool called ``name``; raises ``ToolNotFoundError`` listing the names."""
        tool = self._tools.get(name)
        if tool is None:
            raise ToolNotFoundError(name, available=list(self._tools))
        return tool

    def get_or_none(self, name: str) -> Tool | None:
        """Return the tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def of_type(self, kind: type[T]) -> list[T]:
        """Return every tool that is an instance of ``kind``, in registry order."""
        return [tool for tool in self._tools.values() if isinstance(tool, kind)]

    def get_by_type(self, kind: type[T]) -> T:
        """Return the one tool that is an instance of ``kind``.

        Raises ``ToolNotFoundError`` when there is none and ``ToolDefinitionError`` when several
        are (naming them): a lookup by type must not pick one at random.
        """
        found = self.of_type(kind)
        if not found:
            raise ToolNotFoundError(f"<a {kind.__name__}>", available=list(self._tools))
        if len(found) > 1:
            names = ", ".join(repr(getattr(t, "name", "?")) for t in found)
            raise ToolDefinitionError(
                f"The registry holds {len(found)} tools of type {kind.__name__} ({names}); "
                f"look them up by name instead."
            )
        return found[0]

    @overload
    def safe(self, name: str) -> SafeTool[dict[str, Any]]: ...

    @overload
    def safe(self, name: str, result_type: type[R]) -> SafeTool[R]: ...

    def safe(self, name: str, result_type: Any = dict[str, Any]) -> SafeTool[Any]:
        """Return a ``SafeTool`` over the tool called ``name`` (raises ``ToolNotFoundError``)."""
        return SafeTool(self.get(name), result_type)

    @property
    def names(self) -> list[str]:
        """The tool names, in registry order."""
        return list(self._tools)

    def source_of(self, name: str) -> str:
        """Where the tool called ``name`` came from (raises ``ToolNotFoundError``)."""
        self.get(name)
        return self._sources[name]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    # -- assembling ----------------------------------------------------------------------------

    def with_tools(self, *tools: Tool, source: str = "a tool registry") -> ToolRegistry:
        """Return a new registry with ``tools`` added (a duplicate name raises)."""
        return self.merge(ToolRegistry(tools, source=source))

    def merge(self, *others: ToolRegistry) -> ToolRegistry:
        """Return a new registry with this one's tools, then each other's, in order.

        Raises ``ToolDefinitionError`` naming both sources when a name is in two of them.
        """
        merged = ToolRegistry()
        for registry in (self, *others):
            for name, tool in registry._tools.items():
                merged._add(tool, registry._sources[name])
        return merged

    def __add__(self, other: ToolRegistry) -> ToolRegistry:
        if not isinstance(other, ToolRegistry):
            return NotImplemented
        return self.merge(other)

    async def tools(self, readonly_context: ReadonlyContext) -> Sequence[Tool]:
        """Return the tools (the ``Toolset`` protocol), in registry order."""
        return tuple(self._tools.values())

    def __repr__(self) -> str:
        return f"ToolRegistry([{', '.join(self._tools)}])"
