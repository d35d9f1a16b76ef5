"""Toolsets, exposure filtering, and packing tools into a model request."""

from __future__ import annotations

from typing import Any

import pytest

from eventstore import Content, Part
from runtime import ReadonlyContext, ToolContext, ToolDefinitionError
from runtime.tools import (
    FilteredToolset,
    FunctionTool,
    ListToolset,
    ModelRequest,
    Tool,
    Toolset,
    build_tool_request,
    pack_tool,
)

RO = ReadonlyContext(
    invocation_id="inv", agent_name="agent", session_id="s1", state={"tier": "gold"}
)


def _tool(name: str) -> FunctionTool:
    def impl() -> str:
        return name

    return FunctionTool(impl, name=name, description=f"The {name} tool.")


class NativeSearch:
    """A provider-native tool: no local handler, only request processing."""

    name = "google_search"
    description = "Search the web (runs at the provider)."
    is_long_running = False

    def __init__(self) -> None:
        self.seen_call_ids: list[str] = []

    async def process_request(self, ctx: ToolContext, request: ModelRequest) -> None:
        self.seen_call_ids.append(ctx.function_call_id)
        request.native_tools.append({"google_search": {}})


class InstructingToolset:
    def __init__(self, *tools: Tool) -> None:
        self._tools = tools
        self.state_seen: dict[str, Any] = {}

    async def tools(self, readonly_context: ReadonlyContext) -> list[Tool]:
        return list(self._tools)

    async def process_request(self, ctx: ToolContext, request: ModelRequest) -> None:
        self.state_seen = dict(ctx.state)
        request.instructions.append(f"{len(request.declarations)} tools are available.")
        request.contents.append(Content(role="user", parts=(Part(text="context"),)))


async def test_list_toolset_returns_tools_in_order() -> None:
    toolset = ListToolset([_tool("a"), _tool("b")])
    assert isinstance(toolset, Toolset)
    assert [t.name for t in await toolset.tools(RO)] == ["a", "b"]


async def test_filtered_toolset_by_names_and_predicate() -> None:
    inner = ListToolset([_tool("a"), _tool("b"), _tool("c")])
    by_names = FilteredToolset(inner, names=["c", "a", "zzz"])
    by_state = FilteredToolset(
        inner, predicate=lambda ctx, t: ctx.state["tier"] == "gold" or t.name == "a"
    )
    assert [t.name for t in await by_names.tools(RO)] == ["a", "c"]
    assert [t.name for t in await by_state.tools(RO)] == ["a", "b", "c"]


def test_filtered_toolset_needs_exactly_one_filter() -> None:
    with pytest.raises(ToolDefinitionError, match=r"exactly one .* not neither"):
        FilteredToolset(ListToolset([]))
    with pytest.raises(ToolDefinitionError, match=r"exactly one .* not both"):
        FilteredToolset(ListToolset([]), names=["a"], predicate=lambda c, t: True)


async def test_filtered_toolset_forwards_request_processing() -> None:
    inner = InstructingToolset(_tool("a"))
    request = await build_tool_request([FilteredToolset(inner, names=[])], RO)
    assert request.declarations == []
    assert request.instructions == ["0 tools are available."]


def test_pack_tool_fills_declarations_and_table() -> None:
    request = ModelRequest()
    tool = _tool("a")
    declaration = pack_tool(request, tool, source="agent tools")
    assert declaration is tool.declaration()
    assert (declaration.name, declaration.description) == ("a", "The a tool.")
    assert declaration.parameters.properties == {}
    assert request.declarations == [declaration]
    assert request.tools_by_name == {"a": tool}


def test_pack_tool_duplicate_names_both_sources() -> None:
    request = ModelRequest()
    pack_tool(request, _tool("a"), source="agent tools")
    with pytest.raises(ToolDefinitionError) as info:
        pack_tool(request, _tool("a"), source="toolset Extra")
    assert "'a'" in str(info.value)
    assert "agent tools" in str(info.value)
    assert "toolset Extra" in str(info.value)
    assert info.value.tool_name == "a"
    assert len(request.declarations) == 1


def test_pack_tool_refuses_tool_without_declaration() -> None:
    with pytest.raises(ToolDefinitionError, match="cannot be packed"):
        pack_tool(ModelRequest(), NativeSearch(), source="agent tools")


async def test_build_tool_request_order_and_processors() -> None:
    native = NativeSearch()
    toolset = InstructingToolset(_tool("t1"), _tool("t2"))
    request = await build_tool_request([toolset, _tool("explicit"), native], RO)
    assert [d.name for d in request.declarations] == ["explicit", "t1", "t2"]
    assert set(request.tools_by_name) == {"explicit", "t1", "t2"}
    assert request.native_tools == [{"google_search": {}}]
    assert native.seen_call_ids == [""]
    assert request.instructions == ["3 tools are available."]
    assert toolset.state_seen == {"tier": "gold"}
    assert len(request.contents) == 1


async def test_build_tool_request_duplicate_across_toolset_and_explicit() -> None:
    toolset = ListToolset([_tool("a")])
    with pytest.raises(ToolDefinitionError, match=r"agent tools.*toolset ListToolset\(\[a\]\)"):
        await build_tool_request([_tool("a"), toolset], RO)


async def test_build_tool_request_extends_given_request() -> None:
    base = ModelRequest(instructions=["Be brief."])
    request = await build_tool_request([_tool("a")], RO, request=base)
    assert request is base
    assert request.instructions == ["Be brief."]
    assert list(request.tools_by_name) == ["a"]
