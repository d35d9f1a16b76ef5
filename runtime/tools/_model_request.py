"""The model request under construction, and the capability of the tools that edit it.

``ModelRequest`` and ``RequestProcessor`` live here, below the tool protocols (``_base``), the
toolsets (``_toolset``) and request packing (``_request``), because all three use them: the
request names only the ``Tool`` protocol, so nothing here imports the modules above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from eventstore import Content
from runtime._context import ToolContext
from runtime.declarations import FunctionDeclaration
from runtime.tools._base import Tool

__all__ = ["ModelRequest", "RequestProcessor"]


@dataclass(kw_only=True)
class ModelRequest:
    """A model request under construction (mutable while processors run).

    Guarantees, when built through ``pack_tool``: every declaration has an entry of the same name
    in ``tools_by_name`` and names are unique.
    """

    instructions: list[str] = field(default_factory=list)
    """System instructions, in order."""
    contents: list[Content] = field(default_factory=list)
    """The conversation sent to the model."""
    declarations: list[FunctionDeclaration] = field(default_factory=list)
    """Function declarations the model sees."""
    tools_by_name: dict[str, Tool] = field(default_factory=dict)
    """The local execution table: tool name -> tool."""
    native_tools: list[dict[str, Any]] = field(default_factory=list)
    """Provider-native tools (search, code execution …) with no local handler."""
    tool_sources: dict[str, str] = field(default_factory=dict)
    """Tool name -> where it came from, for duplicate-name messages."""


@runtime_checkable
class RequestProcessor(Protocol):
    """A tool or toolset that edits the model request before it is sent.

    It may add instructions, contents, declarations (through ``pack_tool``) or provider-native tools
    that have no local handler.
    """

    async def process_request(self, ctx: ToolContext, request: ModelRequest) -> None:
        """Edit ``request`` in place; ``ctx.function_call_id`` is ``""`` here."""
        ...
