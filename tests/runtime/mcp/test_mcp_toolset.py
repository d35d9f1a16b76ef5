"""MCPToolset against a real MCP server (tests/runtime/mcp/_mcp_server.py), over stdio and HTTP."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from _extras import require_extra

sdk = require_extra("mcp", "mcp")

from _mcp_server import AUDIO, BLOB, PNG  # noqa: E402
from _mcp_support import HttpServer, eventually, executions, server_args  # noqa: E402

from eventstore import FunctionCall  # noqa: E402
from runtime import (  # noqa: E402
    InMemoryArtifactService,
    ReadonlyContext,
    ToolContext,
    ToolDefinitionError,
)
from runtime.declarations import SchemaType, to_openai  # noqa: E402
from runtime.mcp import (  # noqa: E402
    MCPConfigurationError,
    MCPTool,
    MCPToolset,
)
from runtime.tools import (  # noqa: E402
    ToolCallbacks,
    build_tool_request,
    execute_function_call,
)

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

READONLY = ReadonlyContext(invocation_id="inv-1", agent_name="agent", session_id="s-1")
ALL_TOOLS = ["draw", "fail", "stats", "picture", "slow", "delete_file", "lookup", "upsert",
             "pid", "grow"]

Factory = Callable[..., MCPToolset]


@pytest.fixture(params=["stdio", "http"])
async def make_toolset(
    request: pytest.FixtureRequest, counter: Path
) -> AsyncIterator[Factory]:
    """Build toolsets over the test server on the parametrized transport; all closed after."""
    made: list[MCPToolset] = []
    server: HttpServer | None = None
    if request.param == "http":
        server = HttpServer(counter)
        server.start()

    def make(**options: Any) -> MCPToolset:
        options.setdefault("connect_timeout", 20.0)
        options.setdefault("call_timeout", 30.0)
        if server is None:
            toolset = MCPToolset.stdio(sys.executable, server_args(counter), **options)
        else:
            toolset = MCPToolset.http(server.url, headers={"X-Test": "1"}, **options)
        made.append(toolset)
        return toolset

    try:
        yield make
    finally:
        for toolset in made:
            await toolset.aclose()
        if server is not None:
            server.stop()


def context(call_id: str = "call-1", **kwargs: Any) -> ToolContext:
    return ToolContext(
        function_call_id=call_id,
        invocation_id="inv-1",
        agent_name="agent",
        session_id="s-1",
        artifacts=InMemoryArtifactService(),
        **kwargs,
    )


async def tools_by_name(toolset: MCPToolset) -> dict[str, MCPTool]:
    return {tool.name: tool for tool in await toolset.list_tools()}


async def call(
    toolset: MCPToolset, name: str, args: dict[str, Any], ctx: ToolContext | None = None,
    **pipeline: Any,
) -> Any:
    tools = await tools_by_name(toolset)
    ctx = ctx or context()
    return await execute_function_call(
        FunctionCall(id=ctx.function_call_id, name=name, args=args),
        tools=tools, ctx=ctx, **pipeline,
    )


async def test_mcp_listing_follows_every_page_and_leaves_out_an_untranslatable_tool(
    make_toolset: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    toolset = make_toolset()
    with caplog.at_level(logging.WARNING, logger="runtime.mcp"):
        tools = await toolset.tools(READONLY)
    assert [tool.name for tool in tools] == ALL_TOOLS
    assert list(toolset.skipped) == ["recursive"]
    assert "recursive" in toolset.skipped["recursive"]
    assert any("'recursive'" in r.getMessage() and "left out" in r.getMessage()
               for r in caplog.records)
    await toolset.tools(READONLY)
    assert toolset.listings == 1  # cached


async def test_mcp_nested_ref_schema_translates_to_the_ir(make_toolset: Factory) -> None:
    draw = (await tools_by_name(make_toolset()))["draw"]
    params = draw.declaration().parameters
    assert params.required == ("start", "shape")
    start = params.properties["start"]
    assert start.type is SchemaType.OBJECT
    assert start.required == ("x", "y")
    end = params.properties["shape"].properties["end"]
    assert end.description == "Where it ends."
    assert set(end.properties) == {"x", "y"}
    assert params.properties["shape"].properties["kind"].enum == ("line", "box")
    label = params.properties["label"]
    assert label.nullable
    assert label.type is SchemaType.STRING
    assert params.properties["unit"].enum == ("px",)
    assert "$ref" not in str(to_openai(draw.declaration()))


async def test_mcp_filters_prefix_and_duplicate_names(make_toolset: Factory) -> None:
    named = make_toolset(names={"stats", "fail", "recursive"})
    assert [t.name for t in await named.tools(READONLY)] == ["fail", "stats"]
    assert list(named.skipped) == ["recursive"]
    picked = make_toolset(predicate=lambda _ctx, tool: tool.idempotent)
    assert [t.name for t in await picked.tools(READONLY)] == ["lookup", "upsert", "pid"]
    prefixed = make_toolset(names={"stats"}, prefix="srv_")
    [tool] = await prefixed.tools(READONLY)
    assert tool.name == "srv_stats"
    assert tool.declaration().name == "srv_stats"
    assert tool.server_name == "stats"
    with pytest.raises(ToolDefinitionError, match="'stats' is defined twice"):
        await build_tool_request([named, make_toolset(names={"stats"})], READONLY)
    with pytest.raises(MCPConfigurationError, match="not both"):
        make_toolset(names={"stats"}, predicate=lambda _c, _t: True)


async def test_mcp_calls_map_text_structured_and_meta(
    make_toolset: Factory, counter: Path
) -> None:
    toolset = make_toolset()
    drawn = await call(toolset, "draw", {"start": {"x": 1, "y": 2},
                                         "shape": {"kind": "box", "end": {"x": 3, "y": 4}}})
    assert drawn.error_kind is None
    assert drawn.response == {"result": "drew a box\nfrom 1,2"}
    stats = await call(toolset, "stats", {"n": 3})
    assert stats.response == {"n": 3, "square": 9}
    assert "_meta" not in str(drawn.response) + str(stats.response)
    assert [line.split()[0] for line in executions(counter)] == ["draw", "stats"]


async def test_mcp_invalid_arguments_never_reach_the_server(
    make_toolset: Factory, counter: Path
) -> None:
    outcome = await call(make_toolset(), "draw", {"shape": {"kind": "circle"}})
    assert outcome.error_kind == "invalid_arguments"
    message = outcome.response["error"]["message"]
    assert "'start' is a required property" in message
    assert "circle" in message
    assert executions(counter) == []


async def test_mcp_is_error_becomes_execution_failed_with_the_server_text(
    make_toolset: Factory,
) -> None:
    outcome = await call(make_toolset(), "fail", {})
    assert outcome.error_kind == "execution_failed"
    assert outcome.response["error"]["tool"] == "fail"
    assert "disk full" in outcome.response["error"]["message"]


async def test_mcp_binary_content_is_saved_as_artifacts_and_referenced(
    make_toolset: Factory,
) -> None:
    ctx = context("call-pic")
    outcome = await call(make_toolset(), "picture", {}, ctx)
    assert outcome.error_kind is None
    response = outcome.response
    assert response["result"] == "here it is"
    assert response["resources"] == [
        {"uri": "file:///data/notes.txt", "mime_type": "text/plain", "text": "some notes"}
    ]
    kinds = {a["kind"]: a for a in response["artifacts"]}
    assert set(kinds) == {"image", "audio", "resource"}
    for kind, data in (("image", PNG), ("audio", AUDIO), ("resource", BLOB)):
        artifact = kinds[kind]
        assert await ctx.load_artifact(artifact["filename"]) == data
        assert outcome.actions.artifact_delta[artifact["filename"]] == artifact["version"] == 0
    assert kinds["image"]["filename"].endswith(".png")
    assert "call-pic" in kinds["image"]["filename"]


async def test_mcp_cancel_event_cancels_a_slow_call_on_the_server(
    make_toolset: Factory, counter: Path
) -> None:
    toolset = make_toolset()
    cancel = asyncio.Event()
    ctx = context("call-slow", cancel_event=cancel)
    running = asyncio.ensure_future(call(toolset, "slow", {"seconds": 60}, ctx))
    await eventually(lambda: "slow-started" in " ".join(executions(counter)), within=20)
    cancel.set()
    async with asyncio.timeout(20):
        outcome = await running
    assert outcome.error_kind == "execution_failed"
    assert "cancelled" in outcome.response["error"]["message"]
    await eventually(
        lambda: any(line.startswith("slow-cancelled") for line in executions(counter)),
        within=10,
    )
    # The session still works after a cancelled call.
    assert (await call(toolset, "stats", {"n": 2})).response == {"n": 2, "square": 4}


async def test_mcp_task_cancellation_propagates_and_cancels_on_the_server(
    make_toolset: Factory, counter: Path
) -> None:
    toolset = make_toolset()
    running = asyncio.ensure_future(call(toolset, "slow", {"seconds": 60}, context("c-2")))
    await eventually(lambda: "slow-started" in " ".join(executions(counter)), within=20)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    await eventually(
        lambda: any(line.startswith("slow-cancelled") for line in executions(counter)),
        within=10,
    )


async def test_mcp_before_callback_replaces_the_call(
    make_toolset: Factory, counter: Path
) -> None:
    seen: list[str] = []

    def before(tool: Any, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any] | None:
        seen.append(tool.name)
        return {"cached": True} if tool.name == "stats" else None

    outcome = await call(make_toolset(), "stats", {"n": 5},
                         agent_callbacks=ToolCallbacks(before=(before,)))
    assert outcome.response == {"cached": True}
    assert seen == ["stats"]
    assert executions(counter) == []


async def test_mcp_annotations_set_idempotent_and_destructive(make_toolset: Factory) -> None:
    tools = await tools_by_name(make_toolset())
    assert tools["lookup"].idempotent
    assert not tools["lookup"].destructive
    assert tools["upsert"].idempotent
    assert not tools["upsert"].destructive
    assert not tools["delete_file"].idempotent
    assert tools["delete_file"].destructive
    assert tools["draw"].destructive  # no annotations: the MCP default is destructive


@pytest.mark.parametrize(
    ("options", "needs"),
    [
        pytest.param({}, set(), id="none"),
        pytest.param({"requires_confirmation": True}, {"delete_file", "lookup", "stats"},
                     id="flag"),
        pytest.param({"requires_confirmation": {"stats"}}, {"stats"}, id="names"),
        pytest.param({"requires_confirmation": lambda name, args: args.get("n") == 7 or
                      str(args.get("path", "")).startswith("/etc")},
                     {"stats", "delete_file"}, id="predicate"),
        pytest.param({"confirm_destructive": True}, {"delete_file", "stats"},
                     id="destructive"),
    ],
)
async def test_mcp_confirmation_forms(
    make_toolset: Factory, counter: Path, options: dict[str, Any], needs: set[str]
) -> None:
    tools = await tools_by_name(make_toolset(**options))
    calls = {"delete_file": {"path": "/etc/passwd"}, "lookup": {"key": "k"}, "stats": {"n": 7}}
    asked = {name for name, args in calls.items()
             if tools[name].requires_confirmation_for(args)}
    assert asked == needs
    outcome = await call(make_toolset(**options), "delete_file", {"path": "/etc/passwd"})
    if "delete_file" in needs:
        assert outcome.error_kind == "confirmation_required"
        assert "call-1" in outcome.actions.requested_tool_confirmations
        assert executions(counter) == []
    else:
        assert outcome.error_kind is None


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_mcp_tool_list_is_refreshed_on_list_changed(
    make_toolset: Factory, protocol: str
) -> None:
    toolset = make_toolset(protocol=protocol)
    assert "extra" not in await tools_by_name(toolset)
    modern = protocol == "auto"  # the test server speaks both eras; auto picks the newest
    assert (toolset.connection.protocol_version == "2026-07-28") is modern
    outcome = await call(toolset, "grow", {})
    assert outcome.response == {"result": "grown"}
    async def grown() -> bool:
        return "extra" in await tools_by_name(toolset)

    await eventually(grown, within=10)
    assert toolset.listings == 2
    assert (await call(toolset, "extra", {})).error_kind is None


async def test_mcp_stdio_server_killed_between_calls_is_reconnected(counter: Path) -> None:
    async with MCPToolset.stdio(sys.executable, server_args(counter), call_timeout=30) as toolset:
        first = await call(toolset, "pid", {})
        os.kill(first.response["pid"], signal.SIGKILL)
        await eventually(lambda: not toolset.connection.is_open, within=10)
        outcome = await call(toolset, "delete_file", {"path": "/tmp/x"})
        assert outcome.error_kind is None, outcome.response
        assert toolset.connection.opened == 2
        second = await call(toolset, "pid", {})
        assert second.response["pid"] != first.response["pid"]
    assert [line.split()[0] for line in executions(counter)].count("delete_file") == 1


async def test_mcp_http_server_restarted_between_calls_is_reconnected(
    http_server: HttpServer, counter: Path
) -> None:
    async with MCPToolset.http(http_server.url, call_timeout=30) as toolset:
        assert (await call(toolset, "stats", {"n": 1})).error_kind is None
        http_server.stop()
        http_server.start()
        outcome = await call(toolset, "delete_file", {"path": "/tmp/y"})
        assert outcome.error_kind is None, outcome.response
        assert toolset.connection.opened == 2
    assert [line.split()[0] for line in executions(counter)].count("delete_file") == 1


async def test_mcp_http_server_gone_fails_with_a_structured_error(
    http_server: HttpServer, counter: Path
) -> None:
    async with MCPToolset.http(http_server.url, call_timeout=30, connect_timeout=5) as toolset:
        assert (await call(toolset, "stats", {"n": 1})).error_kind is None
        http_server.stop()
        outcome = await call(toolset, "delete_file", {"path": "/tmp/z"})
    assert outcome.error_kind == "execution_failed"
    assert "MCPConnectionError" in outcome.response["error"]["message"]
    assert http_server.url in outcome.response["error"]["message"]
    assert "delete_file" not in " ".join(executions(counter))


async def test_mcp_unreachable_server_is_a_clear_error() -> None:
    toolset = MCPToolset.stdio(sys.executable, ["-c", "import sys; sys.exit(3)"],
                               connect_timeout=10)
    from runtime.mcp import MCPConnectionError

    with pytest.raises(MCPConnectionError, match="Cannot connect to the MCP server"):
        await toolset.list_tools()  # the strict form; tools() leaves them out (test_mcp_outage)
    await toolset.aclose()
