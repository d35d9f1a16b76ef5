"""The model request's tool side: declarations the model sees and the local execution table.

Packing a tool fills both at once, so the model is never shown a function the runtime cannot run,
and a name can be packed only once — a duplicate is a ``ToolDefinitionError`` naming both sources,
never "last one wins".
"""

from __future__ import annotations

from collections.abc import Iterable

from runtime._context import ReadonlyContext, ToolContext
from runtime._exceptions import ToolDefinitionError
from runtime.declarations import FunctionDeclaration
from runtime.tools._base import FunctionToolLike, Tool
from runtime.tools._model_request import ModelRequest, RequestProcessor
from runtime.tools._toolset import Toolset

__all__ = ["ModelRequest", "build_tool_request", "duplicate_tool_error", "pack_tool"]


def duplicate_tool_error(name: str, first: str, second: str) -> ToolDefinitionError:
    """Return the error for a tool name defined twice (packing a request, merging registries)."""
    return ToolDefinitionError(
        f"Tool name {name!r} is defined twice: by {first} and by {second}. Rename one "
        f"(FunctionTool(name=...)) or hide one with FilteredToolset.",
        tool_name=name,
    )


def pack_tool(request: ModelRequest, tool: Tool, *, source: str) -> FunctionDeclaration:
    """Add ``tool``'s declaration and execution-table entry to ``request``; return the declaration.

    ``source`` names where the tool came from (``"agent tools"``, ``"toolset MyTools"``).
    Raises ``ToolDefinitionError`` when the name is already packed (naming both sources), when the
    tool has no declaration, or when the declaration's name differs from the tool's.
    """
    if not isinstance(tool, FunctionToolLike):
        raise ToolDefinitionError(
            f"Tool {tool.name!r} from {source} cannot be packed: it has no declaration() and "
            f"run(); add provider-native tools to request.native_tools in process_request instead.",
            tool_name=tool.name,
        )
    declaration = tool.declaration()
    if declaration.name != tool.name:
        raise ToolDefinitionError(
            f"Tool {tool.name!r} from {source} declares itself as {declaration.name!r}; the "
            f"declaration name must equal the tool name.",
            tool_name=tool.name,
        )
    existing = request.tool_sources.get(tool.name)
    if existing is not None or tool.name in request.tools_by_name:
        raise duplicate_tool_error(tool.name, existing or "an earlier processor", source)
    request.declarations.append(declaration)
    request.tools_by_name[tool.name] = tool
    request.tool_sources[tool.name] = source
    return declaration


async def build_tool_request(
    tools_and_toolsets: Iterable[Tool | Toolset],
    readonly_context: ReadonlyContext,
    *,
    request: ModelRequest | None = None,
) -> ModelRequest:
    """Pack explicit tools, then each toolset's tools, then run request processors.

    Order: explicit tools in the given order, then the toolsets' tools toolset by toolset; each
    function tool is packed and, if it is a ``RequestProcessor``, its ``process_request`` runs;
    finally each toolset's own ``process_request`` runs. Processors get a ``ToolContext`` whose
    ``function_call_id`` is ``""``. Extends ``request`` when given, else starts a new one.
    Raises ``ToolDefinitionError`` on duplicate names.
    """
    request = request if request is not None else ModelRequest()
    ctx = ToolContext.for_preprocessing(readonly_context)
    items = list(tools_and_toolsets)
    toolsets = [item for item in items if isinstance(item, Toolset)]
    collected: list[tuple[Tool, str]] = [
        (item, "agent tools") for item in items if not isinstance(item, Toolset)
    ]
    for toolset in toolsets:
        for tool in await toolset.tools(readonly_context):
            collected.append((tool, f"toolset {toolset!r}"))
    for tool, source in collected:
        if isinstance(tool, FunctionToolLike):
            pack_tool(request, tool, source=source)
        if isinstance(tool, RequestProcessor):
            await tool.process_request(ctx, request)
    for toolset in toolsets:
        if isinstance(toolset, RequestProcessor):
            await toolset.process_request(ctx, request)
    return request
