"""MCP servers that go away: the run goes on without them; the toolset reconnects when they return.

Each case runs over streamable HTTP (the test server as a subprocess on 127.0.0.1, stopped and
started again on the same port) and over stdio (a subprocess the toolset spawns; it exits at once
while its "up" file is missing, so the test decides when a respawn succeeds).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _extras import require_extra

sdk = require_extra("mcp", "mcp")

from _mcp_support import HttpServer, eventually, executions, server_args  # noqa: E402

from eventstore import Event, FunctionCall, open_store  # noqa: E402
from runtime import (  # noqa: E402
    Agent,
    ModelResponse,
    ReadonlyContext,
    Runner,
    RunResult,
    ScriptedModel,
    ToolContext,
)
from runtime.mcp import MCPConfigurationError, MCPConnectionError, MCPToolset  # noqa: E402
from runtime.tools import execute_function_call  # noqa: E402

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

READONLY = ReadonlyContext(invocation_id="inv-1", agent_name="agent", session_id="s-1")
RUN_TIMEOUT = 60.0
RETRY_DELAY = 0.05


class Outage:
    """One test server on one transport that the test can take down and bring back."""

    def __init__(self, transport: str, tmp_path: Path, counter: Path) -> None:
        self.transport = transport
        self.counter = counter
        self.up_file = tmp_path / "server-up"
        self.http = HttpServer(counter) if transport == "http" else None
        self.server_pid: int | None = None

    def toolset(self, **options: Any) -> MCPToolset:
        options.setdefault("connect_timeout", 20.0)
        options.setdefault("call_timeout", 30.0)
        options.setdefault("retry_delay", RETRY_DELAY)
        if self.http is not None:
            return MCPToolset.http(self.http.url, **options)
        args = [*server_args(self.counter), "--exit-unless", str(self.up_file)]
        return MCPToolset.stdio(sys.executable, args, **options)

    def describe(self) -> str:
        """What the toolset's messages name the server by (its URL or its command line)."""
        return self.http.url if self.http is not None else str(self.up_file)

    def bring_up(self) -> None:
        if self.http is not None:
            self.http.start()
        else:
            self.up_file.touch()

    def take_down(self) -> None:
        """Kill the server (SIGKILL); a stdio server is not respawned until ``bring_up``."""
        if self.http is not None:
            self.http.stop()
            return
        self.up_file.unlink()
        assert self.server_pid is not None, "the stdio server's pid is learnt from a call"
        os.kill(self.server_pid, signal.SIGKILL)

    def close(self) -> None:
        if self.http is not None:
            self.http.stop()


@pytest.fixture(params=["http", "stdio"])
def outage(request: pytest.FixtureRequest, tmp_path: Path, counter: Path) -> Iterator[Outage]:
    made = Outage(request.param, tmp_path, counter)
    try:
        yield made
    finally:
        made.close()


async def run(runner: Runner, session_id: str, message: str) -> RunResult:
    async with asyncio.timeout(RUN_TIMEOUT):
        return await runner.run(session_id=session_id, user_id="ada", new_message=message)


def responses(events: list[Event]) -> list[dict[str, Any]]:
    return [r.response for e in events for r in e.function_responses()]


def declared(model: ScriptedModel, index: int) -> list[str]:
    return sorted(d.name for d in model.requests[index].declarations)


def outage_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "runtime.mcp" and r.levelno == logging.WARNING]


async def test_mcp_server_down_at_the_first_run_leaves_its_tools_out_and_the_run_goes_on(
    outage: Outage, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    toolset = outage.toolset(names={"stats"})
    model = ScriptedModel([
        "I have no calculator today.",
        ModelResponse.calling(("stats", {"n": 5})),
        "25.",
    ])
    agent = Agent(name="calc", model=model, toolsets=(toolset,))
    async with await open_store(tmp_path / "down.db", auto_upgrade=True) as store:
        async with Runner(agent=agent, store=store, app_name="mcp") as runner:
            session = await runner.create_session(user_id="ada")
            with caplog.at_level(logging.WARNING, logger="runtime.mcp"):
                first = await run(runner, session.id, "square 5")
            assert first.status == "completed"
            assert first.final_text == "I have no calculator today."
            assert declared(model, 0) == []
            warnings = outage_warnings(caplog)
            # One warning per failed attempt to connect (the run looks its tools up before the
            # request as well as in it: two attempts once the short retry delay has passed).
            assert 1 <= len(warnings) <= toolset.connection.failed_attempts
            assert outage.describe() in warnings[0]
            assert "unreachable" in warnings[0]
            assert "no tools" in warnings[0]
            assert isinstance(toolset.connection.last_error, MCPConnectionError)

            outage.bring_up()
            await asyncio.sleep(RETRY_DELAY * 2)
            second = await run(runner, session.id, "square 5, now")
            assert second.status == "completed"
            assert second.final_text == "25."
            assert declared(model, 1) == ["stats"]
            assert toolset.connection.last_error is None
        events = await store.read(session.id)
    assert responses(events) == [{"n": 5, "square": 25}]


async def test_mcp_server_lost_after_listing_keeps_its_tools_and_calls_fail_until_it_is_back(
    outage: Outage, tmp_path: Path, counter: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outage.bring_up()
    toolset = outage.toolset(names={"stats", "pid"})
    model = ScriptedModel([
        ModelResponse.calling(("pid", {})), "Up.",
        ModelResponse.calling(("stats", {"n": 2})), "The calculator is down.",
        ModelResponse.calling(("stats", {"n": 3})), "9.",
    ])
    agent = Agent(name="calc", model=model, toolsets=(toolset,))
    async with (
        await open_store(tmp_path / "lost.db", auto_upgrade=True) as store,
        Runner(agent=agent, store=store, app_name="mcp") as runner,
    ):
        session = await runner.create_session(user_id="ada")
        first = await run(runner, session.id, "are you there?")
        assert first.final_text == "Up."
        outage.server_pid = responses(await store.read(session.id))[0]["pid"]

        outage.take_down()
        if outage.transport == "stdio":
            await eventually(lambda: not toolset.connection.is_open, within=10)
        with caplog.at_level(logging.WARNING, logger="runtime.mcp"):
            second = await run(runner, session.id, "square 2")
        warnings = outage_warnings(caplog)
        # At most one warning per attempt: two listings and one call in this run.
        assert 1 <= len(warnings) <= 3
        assert all(outage.describe() in w and "unreachable" in w for w in warnings)
        assert second.status == "completed"
        assert second.final_text == "The calculator is down."
        # Both model turns of the run (before and after the failed call) were told the
        # tools listed while the server was up.
        assert declared(model, 2) == declared(model, 3) == ["pid", "stats"]
        failed = responses(await store.read(session.id))[-1]["error"]
        assert failed["kind"] == "execution_failed"
        assert failed["tool"] == "stats"
        assert "MCPConnectionError" in failed["message"]
        assert outage.describe() in failed["message"]
        problem = "ConnectError" if outage.transport == "http" else "Connection closed"
        assert problem in failed["message"]

        outage.bring_up()
        await asyncio.sleep(RETRY_DELAY * 2)
        third = await run(runner, session.id, "square 3")
        assert third.status == "completed"
        assert third.final_text == "9."
        assert responses(await store.read(session.id))[-1] == {"n": 3, "square": 9}
        assert toolset.connection.opened == 2
    assert [line.split()[0] for line in executions(counter)] == ["pid", "stats"]


async def test_mcp_reconnect_attempts_back_off_while_the_server_stays_down(
    counter: Path,
) -> None:
    http_server = HttpServer(counter)  # not started yet: nobody listens on its port
    delay, cap = 1.0, 3.0
    toolset = MCPToolset.http(http_server.url, connect_timeout=10, retry_delay=delay,
                              max_retry_delay=cap)
    connection = toolset.connection
    try:
        assert list(await toolset.tools(READONLY)) == []
        assert connection.failed_attempts == 1
        assert 0 < connection.retry_in() <= delay

        # Within the delay nothing is attempted: listing and connecting give up at once.
        assert list(await toolset.tools(READONLY)) == []
        with pytest.raises(MCPConnectionError, match="next attempt in") as refused:
            await connection.client()
        assert refused.value.retry_in is not None
        assert "ConnectError" in str(refused.value)
        assert connection.failed_attempts == 1

        for attempt, longest in ((2, 2 * delay), (3, cap)):  # doubled, then capped
            await eventually(lambda: connection.retry_in() == 0, within=cap + 2)
            assert list(await toolset.tools(READONLY)) == []
            assert connection.failed_attempts == attempt
            assert longest - 1.0 < connection.retry_in() <= longest

        http_server.start()
        await eventually(lambda: connection.retry_in() == 0, within=cap + 2)
        listed = [tool.name for tool in await toolset.tools(READONLY)]
        assert listed[:2] == ["draw", "fail"]
        assert connection.failed_attempts == 0
        assert connection.last_error is None
        assert connection.retry_in() == 0
    finally:
        await toolset.aclose()
        http_server.stop()


async def test_mcp_a_listing_that_could_not_be_fetched_is_fetched_once_the_server_answers(
    counter: Path,
) -> None:
    http_server = HttpServer(counter)
    http_server.start()
    toolset = MCPToolset.http(http_server.url, connect_timeout=10, retry_delay=RETRY_DELAY)
    try:
        stats = {tool.name: tool for tool in await toolset.tools(READONLY)}["stats"]
        assert toolset.listings == 1
        http_server.stop()
        ctx = ToolContext(function_call_id="c-1", invocation_id="inv-1", agent_name="agent",
                          session_id="s-1")
        outcome = await execute_function_call(
            FunctionCall(id="c-1", name="stats", args={"n": 1}), tools={"stats": stats}, ctx=ctx
        )
        assert outcome.error_kind == "execution_failed"
        # The dropped session made the list stale; fetching it failed, so the old list serves.
        assert "stats" in [tool.name for tool in await toolset.tools(READONLY)]
        assert toolset.listings == 1

        http_server.start()
        await eventually(lambda: toolset.connection.retry_in() == 0, within=5)
        await toolset.tools(READONLY)
        assert toolset.listings == 2
    finally:
        await toolset.aclose()
        http_server.stop()


async def test_mcp_a_stdio_server_that_exited_is_respawned_by_the_next_listing(
    counter: Path,
) -> None:
    async with MCPToolset.stdio(sys.executable, server_args(counter), connect_timeout=20,
                                call_timeout=30) as toolset:
        tools = {tool.name: tool for tool in await toolset.tools(READONLY)}
        assert toolset.connection.opened == 1
        ctx = ToolContext(function_call_id="c-1", invocation_id="inv-1", agent_name="agent",
                          session_id="s-1")
        first = await execute_function_call(FunctionCall(id="c-1", name="pid", args={}),
                                            tools=tools, ctx=ctx)
        os.kill(first.response["pid"], signal.SIGKILL)
        await eventually(lambda: toolset.connection.dropped, within=10)
        # The listing notices the drop, spawns the server again and lists it anew.
        assert "pid" in [tool.name for tool in await toolset.tools(READONLY)]
        assert toolset.connection.opened == 2
        assert toolset.listings == 2
        assert toolset.connection.is_open


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_mcp_a_server_stuck_listing_its_tools_is_given_up_on_and_tried_again_later(
    transport: str, tmp_path: Path, counter: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stuck = tmp_path / "stuck"
    stuck.touch()
    hang = ("--hang-listing-while", str(stuck))
    http_server = HttpServer(counter, *hang) if transport == "http" else None
    options: dict[str, Any] = {"connect_timeout": 8.0, "retry_delay": 1.0}
    if http_server is None:
        toolset = MCPToolset.stdio(sys.executable, [*server_args(counter), *hang], **options)
    else:
        http_server.start()
        toolset = MCPToolset.http(http_server.url, **options)
    try:
        with caplog.at_level(logging.WARNING, logger="runtime.mcp"):
            async with asyncio.timeout(40):  # connect, list, close: each bounded by 8 s
                assert list(await toolset.tools(READONLY)) == []
        [warning] = outage_warnings(caplog)
        assert "did not list its tools within 8.0 s" in warning
        # Given up on like a failed connect: closed, and not tried again inside the delay.
        assert not toolset.connection.is_open
        assert toolset.connection.failed_attempts == 1
        assert toolset.connection.retry_in() > 0

        stuck.unlink()
        await eventually(lambda: toolset.connection.retry_in() == 0, within=5)
        async with asyncio.timeout(20):
            assert "stats" in [tool.name for tool in await toolset.tools(READONLY)]
        assert toolset.connection.failed_attempts == 0
    finally:
        await toolset.aclose()
        if http_server is not None:
            http_server.stop()


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        pytest.param({"retry_delay": -1.0}, "retry_delay", id="negative"),
        pytest.param({"retry_delay": 5.0, "max_retry_delay": 1.0}, "max_retry_delay",
                     id="cap-below-delay"),
    ],
)
def test_mcp_retry_options_are_checked(options: dict[str, Any], problem: str) -> None:
    with pytest.raises(MCPConfigurationError, match=problem):
        MCPToolset.http("http://127.0.0.1:9/mcp", **options)
