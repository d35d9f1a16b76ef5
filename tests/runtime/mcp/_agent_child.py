"""A child agent process for the MCP resume test: the agent's MCP tool needs a confirmation.

Usage: python _agent_child.py DB COUNTER MODE   (MODE: start | resume)
``start`` creates the session and runs until the confirmation pauses the run; ``resume`` runs the
session from the log alone. Each process starts its own MCP server (stdio) and stops it when its
runner closes. Prints one JSON line: the run's status, pending ids and final text.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from _mcp_support import server_args

from eventstore import open_store
from runtime import Agent, ModelResponse, Runner, ScriptedModel
from runtime.mcp import MCPToolset

DB, COUNTER, MODE = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
SESSION = "s-mcp-resume"


async def main() -> None:
    script = (
        [ModelResponse.calling(("fs_delete_file", {"path": "/srv/old.log"}))]
        if MODE == "start"
        else ["Deleted /srv/old.log."]
    )
    toolset = MCPToolset.stdio(
        sys.executable, server_args(COUNTER), prefix="fs_", names={"delete_file", "lookup"},
        confirm_destructive=True, connect_timeout=20, call_timeout=30,
    )
    agent = Agent(name="janitor", model=ScriptedModel(script), toolsets=(toolset,))
    async with (
        await open_store(DB, auto_upgrade=True) as store,
        Runner(agent=agent, store=store, app_name="mcp") as runner,
    ):
        if MODE == "start":
            await runner.create_session(user_id="ada", session_id=SESSION)
            result = await runner.run(session_id=SESSION, user_id="ada",
                                      new_message="Delete the old log.")
        else:
            result = await runner.run(session_id=SESSION, user_id="ada", new_message=None)
    print(json.dumps({"status": result.status, "pending": list(result.pending_call_ids),
                      "final_text": result.final_text, "open": toolset.connection.is_open}))


asyncio.run(main())
