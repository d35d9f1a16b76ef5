"""MCP servers inside ``EventStoreAgent`` (pydantic-ai's ``MCPToolset``, over stdio and
streamable HTTP): their calls are claimed and recorded like any tool's, so a resumed run does
not call the server again for a recorded result."""

from __future__ import annotations

from _extras import require_extra

require_extra("pydantic_ai.mcp", "pydantic-ai")

import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "runtime" / "mcp"))

from _mcp_support import HttpServer, executions, server_args  # noqa: E402
from _pai import Crash, returns  # noqa: E402
from fastmcp.client.transports import StdioTransport  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.mcp import MCPToolset  # noqa: E402
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from eventstore import CallLedger, open_store  # noqa: E402
from eventstore.integrations.pydantic_ai import EventStoreAgent  # noqa: E402

pytestmark = pytest.mark.slow


def _agent(toolset: MCPToolset[Any], crashes: list[bool]) -> Agent[None, str]:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = returns(messages)
        if "lookup" not in done:
            return ModelResponse(parts=[ToolCallPart("lookup", {"key": "k"}, "m1")])
        if "note" not in done:
            return ModelResponse(parts=[ToolCallPart("note", {}, "m2")])
        return ModelResponse(parts=[TextPart(f"got {done['lookup']}")])

    agent: Agent[None, str] = Agent(FunctionModel(model), name="mcp_agent", toolsets=[toolset])

    @agent.tool_plain
    def note() -> str:
        if crashes:
            crashes.pop()
            raise Crash("after the MCP call was recorded")
        return "noted"

    return agent


async def _check_resume(toolset: MCPToolset[Any], counter: Path, db: str) -> None:
    wrapped = EventStoreAgent(_agent(toolset, crashes=[True]), store=db, idempotent_tools=["note"])
    with pytest.raises(Crash):
        await wrapped.run("Look it up", session_id="m")
    assert len(executions(counter)) == 1
    done = await wrapped.run(None, session_id="m")
    assert done.output.startswith("got ")
    assert len(executions(counter)) == 1  # the recorded result was not asked for again
    async with await open_store(db) as store:
        ledger = CallLedger.of((await store.get_session("m")).events)
    assert ledger.get("m1").decision() == "settled"
    assert ledger.get("m1").claims == 1
    await wrapped.aclose()


async def test_pydantic_ai_mcp_stdio_call_is_recorded_once(tmp_path: Path) -> None:
    counter = tmp_path / "calls.txt"
    toolset: MCPToolset[Any] = MCPToolset(
        StdioTransport(command=sys.executable, args=server_args(counter)), id="stdio")
    await _check_resume(toolset, counter, str(tmp_path / "mcp.db"))


async def test_pydantic_ai_mcp_streamable_http_call_is_recorded_once(tmp_path: Path) -> None:
    counter = tmp_path / "calls.txt"
    server = HttpServer(counter)
    server.start()
    try:
        toolset: MCPToolset[Any] = MCPToolset(server.url, id="http")
        await _check_resume(toolset, counter, str(tmp_path / "mcp.db"))
    finally:
        server.stop()
