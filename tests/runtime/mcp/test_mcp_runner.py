"""MCP tools in the agent loop: the runner's lifecycle, and exactly-once resume across restarts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _extras import require_extra

sdk = require_extra("mcp", "mcp")

from _mcp_support import executions, server_args  # noqa: E402

from eventstore import open_store  # noqa: E402
from runtime import Agent, ModelResponse, Runner, ScriptedModel, ToolContext  # noqa: E402
from runtime.mcp import MCPToolset  # noqa: E402
from runtime.replay import answer_confirmation  # noqa: E402

# Whole-module: it is among the slowest of the suite (`pytest -m "not slow"` leaves it out).
pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
CHILD = HERE / "_agent_child.py"
CHILD_TIMEOUT = 90


def run_child(db: Path, counter: Path, mode: str) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(CHILD), str(db), str(counter), mode],
        capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=env, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def test_mcp_tools_run_in_the_loop_and_close_with_the_runner(
    tmp_path: Path, counter: Path
) -> None:
    toolset = MCPToolset.stdio(sys.executable, server_args(counter), names={"stats", "fail"},
                               call_timeout=30)
    model = ScriptedModel([
        ModelResponse.calling(("stats", {"n": 4}), ("fail", {}), ("stats", {"n": "four"})),
        "16, and the disk is full.",
    ])
    agent = Agent(name="calc", model=model, toolsets=(toolset,))
    async with await open_store(tmp_path / "loop.db", auto_upgrade=True) as store:
        async with Runner(agent=agent, store=store, app_name="mcp") as runner:
            session = await runner.create_session(user_id="ada")
            result = await runner.run(session_id=session.id, user_id="ada", new_message="go")
            assert toolset.connection.is_open
        assert not toolset.connection.is_open
        await runner.aclose()  # idempotent
        assert result.status == "completed"
        events = await store.read(session.id)
    responses = [r.response for e in events for r in e.function_responses()]
    assert responses[0] == {"n": 4, "square": 16}
    assert responses[1]["error"]["kind"] == "execution_failed"
    assert "disk full" in responses[1]["error"]["message"]
    assert responses[2]["error"]["kind"] == "invalid_arguments"
    assert [line.split()[0] for line in executions(counter)] == ["stats", "fail"]
    # A closed toolset opens a new session when it is used again.
    stats = {tool.name: tool for tool in await toolset.list_tools()}["stats"]
    ctx = ToolContext(function_call_id="c-9", invocation_id="i", agent_name="calc",
                      session_id="s")
    assert await stats.run(ctx, {"n": 3}) == {"n": 3, "square": 9}
    assert toolset.connection.opened == 2
    await toolset.aclose()


@pytest.mark.slow
async def test_mcp_confirmation_resumes_across_a_restart_of_agent_and_server_exactly_once(
    tmp_path: Path, counter: Path
) -> None:
    db = tmp_path / "resume.db"
    first = run_child(db, counter, "start")
    assert first["status"] == "paused_for_confirmation"
    assert not first["open"]  # the runner closed the session; the stdio server is gone
    assert executions(counter) == []
    [confirmation_id] = first["pending"]

    async with await open_store(db) as store:
        await answer_confirmation(store, session_id="s-mcp-resume",
                                  confirmation_id=confirmation_id, confirmed=True)

    second = run_child(db, counter, "resume")
    assert second["status"] == "completed"
    assert second["final_text"] == "Deleted /srv/old.log."
    assert executions(counter) == ['delete_file {"path": "/srv/old.log"}']

    third = run_child(db, counter, "resume")  # nothing is owed any more
    assert third["status"] == "completed"
    assert executions(counter) == ['delete_file {"path": "/srv/old.log"}']

    async with await open_store(db) as store:
        events = await store.read("s-mcp-resume")
    answered = [r for e in events for r in e.function_responses() if r.name == "fs_delete_file"]
    assert [r.response["error"]["kind"] if "error" in r.response else "ok"
            for r in answered] == ["confirmation_required", "ok"]
    assert answered[-1].response == {"result": 'delete_file done: {"path": "/srv/old.log"}'}
