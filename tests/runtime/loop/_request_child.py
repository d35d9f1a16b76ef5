"""A child process for the log-is-the-truth test: given only the SQLite path, build requests.

Usage: python _request_child.py DB VERSION...   (a VERSION of ``head`` means the session's head)
Prints one JSON array: the request the weather runner builds at each version, as ``request_json``.
"""

from __future__ import annotations

import asyncio
import sys

from test_loop_log_is_the_truth import request_json, runner_on

from eventstore import open_store
from runtime import InvocationContext, ScriptedModel


async def main(db: str, versions: list[str]) -> None:
    async with await open_store(db) as store:
        runner = runner_on(store, ScriptedModel([]))
        built: list[str] = []
        for version in versions:
            if version == "head":
                ctx = await runner.new_context(session_id="s", user_id="u")
            else:
                ctx = InvocationContext(
                    store=store,
                    session_id="s",
                    app_name="weather",
                    user_id="u",
                    agent=runner.agent,
                    version=int(version),
                )
            built.append(request_json(await runner.build_request(ctx)))
    print("[" + ",".join(built) + "]")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
