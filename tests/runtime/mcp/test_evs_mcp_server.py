"""``evs mcp-server`` driven by the SDK's own client, over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _extras import require_extra

sdk = require_extra("mcp", "mcp")

from _mcp_support import eventually, free_port  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from eventstore import open_store  # noqa: E402
from runtime import (  # noqa: E402
    Agent,
    ModelResponse,
    Runner,
    ScriptedModel,
    ToolContext,
    function_tool,
)
from runtime.cli import app  # noqa: E402

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
SESSION = "s-inspect"
TOOLS = ["sessions", "show", "state", "pending", "verify"]


@function_tool
def get_weather(city: str, tool_context: ToolContext) -> dict[str, Any]:
    """Return the weather of a city."""
    tool_context.state["last_city"] = city
    return {"city": city, "temperature_c": 22}


@function_tool(requires_confirmation=True)
def paid_forecast(city: str) -> dict[str, Any]:
    """A paid forecast (confirmed first)."""
    return {"city": city, "summary": "dry"}


async def _populate(db: str) -> None:
    model = ScriptedModel([
        ModelResponse.calling(("get_weather", {"city": "Paris"})),
        ModelResponse.calling(("paid_forecast", {"city": "Paris"})),
    ])
    agent = Agent(name="weather_agent", model=model, tools=(get_weather, paid_forecast))
    async with await open_store(db, auto_upgrade=True) as store:
        runner = Runner(agent=agent, store=store, app_name="weather")
        await runner.create_session(user_id="ada", session_id=SESSION)
        result = await runner.run(session_id=SESSION, user_id="ada", new_message="Paris?")
        assert result.status == "paused_for_confirmation"


def _fingerprint(db: Path) -> tuple[str, ...]:
    files = sorted(p for p in db.parent.iterdir() if p.name.startswith(db.name))
    return tuple(
        f"{p.name}:{hashlib.sha256(p.read_bytes()).hexdigest()}"
        for p in files if not p.name.endswith("-shm")
    )


@pytest.fixture
def evs_db(tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """A database with one paused session, and what ``evs <tool> --json`` prints for it."""
    db = str(tmp_path / "inspect.db")
    # A private loop in a worker thread: sync fixtures must not touch pytest-asyncio's loop.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, _populate(db)).result()
    runner = CliRunner()
    expected: dict[str, Any] = {}
    for name, args in (("sessions", []), ("show", [SESSION]), ("state", [SESSION]),
                       ("pending", [SESSION]), ("verify", [])):
        done = runner.invoke(app, [name, *args, "--db", db, "--json"], catch_exceptions=False)
        assert done.exit_code == 0, done.output
        expected[name] = json.loads(done.stdout)
    return db, expected


async def _check_every_tool(client: Client, db: str, expected: dict[str, Any]) -> None:
    listed = await client.list_tools()
    assert [tool.name for tool in listed.tools] == TOOLS
    assert all(tool.annotations is not None and tool.annotations.read_only_hint
               for tool in listed.tools)
    arguments = {"sessions": {}, "show": {"session_id": SESSION},
                 "state": {"session_id": SESSION}, "pending": {"session_id": SESSION},
                 "verify": {}}
    for name in TOOLS:
        result = await client.call_tool(name, arguments[name])
        assert not result.is_error, result.content
        assert result.structured_content == expected[name], name
    state = expected["state"]["state"]
    assert state["last_city"] == "Paris"
    [pending] = expected["pending"]["pending"]
    assert pending["kind"] == "confirmation"
    assert "evs confirm" in pending["command"]
    assert expected["verify"]["ok"] is True
    assert expected["verify"]["sessions_checked"] == 1

    missing = await client.call_tool("show", {"session_id": "no-such-session"})
    assert missing.is_error
    assert "no-such-session" in missing.content[0].text
    bad = await client.call_tool("state", {"session_id": SESSION, "at": "head"})
    assert bad.is_error
    assert "Invalid arguments" in bad.content[0].text


async def test_evs_mcp_server_over_stdio_answers_every_tool_and_never_writes(
    evs_db: tuple[str, dict[str, Any]],
) -> None:
    db, expected = evs_db
    before = _fingerprint(Path(db))
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "runtime.cli", "mcp-server", "--db", db],
        env={"PYTHONPATH": str(REPO)}, cwd=str(REPO),
    )
    async with asyncio.timeout(90), Client(params) as client:
        await _check_every_tool(client, db, expected)
        for write in ("confirm", "respond", "rerun", "import", "delete"):
            refused = await client.call_tool(write, {"session_id": SESSION})
            assert refused.is_error
            assert "read-only" in refused.content[0].text
    assert _fingerprint(Path(db)) == before


async def test_evs_mcp_server_over_streamable_http(
    evs_db: tuple[str, dict[str, Any]],
) -> None:
    db, expected = evs_db
    before = _fingerprint(Path(db))
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(  # noqa: ASYNC220 - a server for the whole test, killed after
        [sys.executable, "-m", "runtime.cli", "mcp-server", "--db", db, "--port", str(port)],
        env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        def listening() -> bool:
            assert process.poll() is None, "evs mcp-server exited"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            except OSError:
                return False
            return True

        await eventually(listening, within=30)
        async with asyncio.timeout(90), Client(f"http://127.0.0.1:{port}/mcp") as client:
            await _check_every_tool(client, db, expected)
    finally:
        process.kill()
        process.wait(timeout=10)
    assert _fingerprint(Path(db)) == before


def test_evs_mcp_server_refuses_a_missing_database(tmp_path: Path) -> None:
    done = CliRunner().invoke(app, ["mcp-server", "--db", str(tmp_path / "none.db")])
    assert done.exit_code == 1
    assert "There is no database" in done.output


async def test_evs_mcp_server_answers_a_request_holding_a_lone_surrogate(
    evs_db: tuple[str, dict[str, Any]],
) -> None:
    # The SDK's client cannot even send such a request, so the wire is written by hand: before,
    # the server's transport dropped the line it could not parse and the client waited forever.
    db, _ = evs_db
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "runtime.cli", "mcp-server", "--db", db,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=str(REPO),
    )
    assert process.stdin is not None
    assert process.stdout is not None

    async def exchange(line: str) -> dict[str, Any]:
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(line.encode() + b"\n")
        await process.stdin.drain()
        reply = await asyncio.wait_for(process.stdout.readline(), timeout=30)
        assert reply, "the server closed stdout"
        decoded: dict[str, Any] = json.loads(reply)
        return decoded

    try:
        hello = await exchange(json.dumps({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "1"}},
        }))
        assert "result" in hello
        process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        # A notification holding one has no reply and is dropped; the request after it is
        # answered with a JSON-RPC error naming where the surrogate is.
        process.stdin.write(
            b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"x":"\\udfff"}}\n'
        )
        error = await exchange(
            '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"show",'
            '"arguments":{"session_id":"s\\ud800"}}}'
        )
        assert error["id"] == 2
        assert error["error"]["code"] == -32602
        assert "params.arguments.session_id" in error["error"]["message"]
        assert "lone surrogate" in error["error"]["message"]
        listed = await exchange('{"jsonrpc":"2.0","id":3,"method":"tools/list"}')
        assert [tool["name"] for tool in listed["result"]["tools"]] == TOOLS
        # A pair of escapes is one real character, not a lone surrogate: it goes through.
        shown = await exchange(
            '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"show",'
            '"arguments":{"session_id":"s\\ud83d\\ude00"}}}'
        )
        assert shown["result"]["isError"] is True
        assert "does not exist" in shown["result"]["content"][0]["text"]
    finally:
        process.kill()
        await process.wait()
